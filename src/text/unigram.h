// Hugging Face tokenizers' Unigram model (XLM-R, CamemBERT, multilingual-e5,
// bge-m3 as transformers 5 saves them): the best segmentation of a word by
// the sum of piece scores (Viterbi), exactly as tokenizers' Unigram does it:
// every vocabulary piece is a candidate (found by a byte trie), a character
// no piece starts with becomes <unk> with score min_score - 10, runs of <unk>
// are fused into one, ties go to the path found first, and byte_fallback
// turns an unknown piece into its <0xXX> byte tokens when they all exist.
#pragma once

#include <optional>
#include <unordered_map>
#include <utility>

#include "text/vocab_trie.h"
#include "text/word_model.h"

namespace stoke {

class UnigramModel final : public WordModel {
 public:
  // vocab: (piece, score) by id. Throws Error(format) naming `label` on a bad table.
  UnigramModel(std::vector<std::pair<std::string, double>> vocab, int32_t unk_id, bool byte_fallback,
               const std::string& label);

  void encode_word(std::string_view word, std::vector<int32_t>& out, EncodeStats& stats) const override {
    encode_impl(word, out, nullptr, stats);
  }
  void encode_word_with_offsets(std::string_view word, std::vector<int32_t>& out, std::vector<TokenOffset>& offsets,
                                EncodeStats& stats) const override {
    encode_impl(word, out, &offsets, stats);
  }
  std::string id_to_token(int32_t id) const override;
  int32_t token_to_id(std::string_view token) const override;
  int64_t vocab_size() const override { return static_cast<int64_t>(vocab_.size()); }
  std::string describe() const override;
  int32_t unk_id() const { return unk_id_; }

 private:
  // offsets: when set, each id's piece range in the word (byte-fallback ids
  // share their piece's range, as in tokenizers).
  void encode_impl(std::string_view word, std::vector<int32_t>& out, std::vector<TokenOffset>* offsets,
                   EncodeStats& stats) const;

  std::vector<std::pair<std::string, double>> vocab_;
  std::unordered_map<std::string, int32_t> ids_;
  VocabTrie trie_;
  int32_t unk_id_;
  bool byte_fallback_;
  double unk_score_ = 0;  // min score - 10 (tokenizers' K_UNK_PENALTY)
};

}  // namespace stoke
