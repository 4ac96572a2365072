// BERT tokenization of plain text: the BertNormalizer (clean text, CJK
// spacing, lowercase, accent stripping), the BertPreTokenizer (split on
// whitespace and punctuation) and WordPiece (greedy longest match with "##"
// continuations), fused into one pass over the code points.
//
// The rules follow Hugging Face's slow BertTokenizer (BasicTokenizer +
// WordpieceTokenizer), which the golden token ids come from; the Rust
// `tokenizers` BertNormalizer gives the same ids on the golden texts.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "text/subword_model.h"
#include "text/vocab_trie.h"

namespace stoke {

struct BertNormalizerOptions {
  bool clean_text = true;            // drop control chars, NUL, U+FFFD; whitespace -> space
  bool handle_chinese_chars = true;  // every CJK ideograph is its own word
  bool lowercase = true;
  std::optional<bool> strip_accents;  // unset: strip when lowercasing (BERT's rule)
  bool strips_accents() const { return strip_accents.value_or(lowercase); }
};

struct WordPieceOptions {
  std::string unk_token = "[UNK]";
  std::string continuing_prefix = "##";
  size_t max_input_chars_per_word = 100;
};

class WordPieceModel final : public SubwordModel {
 public:
  // vocab: id -> token (position = id). Throws Error(format) when unk_token is not in it.
  WordPieceModel(std::vector<std::string> vocab, BertNormalizerOptions norm, WordPieceOptions wp);

  void encode(std::string_view text, std::vector<int32_t>& out, EncodeStats& stats) const override;
  bool encode_with_offsets(std::string_view text, std::vector<int32_t>& out, std::vector<TokenOffset>& offsets,
                           EncodeStats& stats) const override;
  std::string id_to_token(int32_t id) const override;
  int64_t vocab_size() const override { return static_cast<int64_t>(vocab_.size()); }
  int32_t token_to_id(std::string_view token) const override;
  std::string describe() const override;
  // BertNormalizer alone (for added tokens with normalized: true); encode()
  // normalizes again, which changes nothing: the normalizer is idempotent.
  bool has_normalizer() const override { return true; }
  std::string normalize(std::string_view text) const override;

  const BertNormalizerOptions& normalizer() const { return norm_; }
  const WordPieceOptions& options() const { return wp_; }
  int32_t unk_id() const { return unk_id_; }

 private:
  // Appends the WordPiece ids of one pre-tokenized word (chars = code points).
  void encode_word(std::string_view word, size_t chars, std::vector<int32_t>& out, EncodeStats& stats) const;
  template <bool kOffsets>
  void encode_impl(std::string_view text, std::vector<int32_t>& out, std::vector<TokenOffset>* offsets,
                   EncodeStats& stats) const;

  std::vector<std::string> vocab_;
  std::unordered_map<std::string, int32_t> token_ids_;
  VocabTrie trie_;
  int32_t continuation_node_ = VocabTrie::kNone;  // trie node after "##"
  int32_t unk_id_ = -1;
  BertNormalizerOptions norm_;
  WordPieceOptions wp_;
};

// Reads vocab.txt (one token per line, id = line number; "\n" stripped as
// transformers does). Throws Error naming the file and line on a bad file.
std::vector<std::string> read_vocab_txt(const std::string& path);
// The same from the file's bytes; `label` names it in errors.
std::vector<std::string> parse_vocab_txt(std::string_view content, const std::string& label);

}  // namespace stoke
