// Hugging Face tokenizers' BPE model (RoBERTa's byte-level BPE; later
// ModernBERT and Qwen): a word starts as its characters and the adjacent pair
// with the lowest merge rank is merged (the leftmost on a tie) until no pair
// has a rank. A heap keeps that O(n log n) in the word length (a 1 MB word
// without spaces is one word), and a per-thread cache of short words makes
// the common case one hash lookup.
#pragma once

#include <atomic>
#include <optional>
#include <unordered_map>

#include "text/word_model.h"

namespace stoke {

struct BpeOptions {
  std::optional<std::string> unk_token;     // null in byte-level models: every byte has a token
  std::string continuing_subword_prefix;    // "" for RoBERTa
  std::string end_of_word_suffix;           // "" for RoBERTa
  bool fuse_unk = false;
  bool byte_fallback = false;
  bool ignore_merges = false;               // a word that is a token is taken whole
};

class BpeModel final : public WordModel {
 public:
  // vocab: token -> id; merges: pairs of tokens, by rank. Throws Error(format)
  // naming `label` when a merge names a token (or its result) not in vocab.
  BpeModel(std::unordered_map<std::string, int32_t> vocab,
           const std::vector<std::pair<std::string, std::string>>& merges, BpeOptions options,
           const std::string& label);

  void encode_word(std::string_view word, std::vector<int32_t>& out, EncodeStats& stats) const override;
  void encode_word_with_offsets(std::string_view word, std::vector<int32_t>& out, std::vector<TokenOffset>& offsets,
                                EncodeStats& stats) const override;
  std::string id_to_token(int32_t id) const override;
  int32_t token_to_id(std::string_view token) const override;
  int64_t vocab_size() const override { return vocab_size_; }
  std::string describe() const override;

  static constexpr size_t kCachedWordBytes = 256;  // longer words are not cached
  // Per thread. When full, new words are no longer cached (the words seen
  // first are the frequent ones); clearing it would throw those away.
  static constexpr size_t kCacheEntries = 1 << 16;

 private:
  // offsets: when set, each id's range in the word as tokenizers' Word gives
  // it (the running sum of the symbols' byte lengths; a dropped unknown
  // character shifts the ranges after it there too).
  void merge_word(std::string_view word, std::vector<int32_t>& out, std::vector<TokenOffset>* offsets,
                  EncodeStats& stats) const;
  static uint64_t pair_key(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }

  // Looked up by string_view: no allocation per character.
  struct ViewHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::unordered_map<std::string, int32_t, ViewHash, std::equal_to<>> vocab_;
  std::vector<std::string> tokens_;  // by id ("" for gaps)
  struct Merge {
    int32_t rank;
    int32_t result;
  };
  std::unordered_map<uint64_t, Merge> merges_;
  BpeOptions options_;
  int32_t unk_id_ = -1;
  int64_t vocab_size_ = 0;
  uint64_t cache_owner_;  // tells this model's per-thread cache from another's
  size_t merge_count_ = 0;
};

}  // namespace stoke
