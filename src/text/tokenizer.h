// A Hugging Face-compatible tokenizer: special tokens inside the text, a
// subword model (WordPiece or SentencePiece), the post-processing template
// that adds [CLS]/[SEP] (or <s>/</s>), pairs with token_type_ids, and
// truncation (longest_first for pairs), exactly as transformers does it.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "text/added_tokens.h"
#include "text/encode_stats.h"
#include "text/subword_model.h"

namespace stoke {

class ThreadPool;

// The post-processor template: what goes around sequence A (and B for pairs).
struct TemplatePiece {
  bool is_sequence = false;   // true: the ids of sequence `sequence` (0 = A, 1 = B)
  int sequence = 0;
  std::vector<int32_t> ids;   // special ids when !is_sequence
  int32_t type_id = 0;
};

struct PostProcessor {
  std::vector<TemplatePiece> single;  // e.g. [CLS] $A [SEP]
  std::vector<TemplatePiece> pair;    // e.g. [CLS] $A [SEP] $B:1 [SEP]:1
  // RobertaProcessing's trim_offsets: a token's leading and trailing spaces
  // ("Ġ") are taken out of its offsets (add_prefix_space: but not the one
  // space added before the first token).
  bool trim_offsets = false;
  bool trim_add_prefix_space = false;
  size_t added_tokens(bool is_pair) const;
};

struct Encoding {
  std::vector<int32_t> ids;
  std::vector<int32_t> type_ids;
  bool truncated = false;
};

// Memory stays bounded on long unbroken texts (RELIABILITY 3, 16): the
// SentencePiece lattice takes ~260 bytes per byte of text (one 10 MB line
// without spaces: 2.6 GB), yet a truncated text keeps only max_length tokens.
// So on SentencePiece, Unigram and BPE (WordPiece needs a few bytes per byte)
// a text longer than kTextBytesPerToken bytes per kept token is encoded
// from a prefix of that many bytes; the prefix is doubled until it yields
// max_length + kPrefixMarginTokens tokens (a text of mostly spaces or unknown
// runs needs more bytes per token), so the ids kept equal those of the whole
// text: the tokens near the cut, the only ones it can change, are cut off by
// truncation anyway. Normal texts (< 64 KiB) are never touched.
inline constexpr size_t kTextBytesPerToken = 64;
inline constexpr size_t kMinPrefixBytes = size_t{64} << 10;
inline constexpr size_t kPrefixMarginTokens = 64;
// Without truncation nothing bounds the ids but the text: on those models a
// text over this is encoded from its first kUntruncatedTextBytes bytes
// (~300 MB of lattice), counted as capped (and as truncated), and the CLI
// says so.
inline constexpr size_t kUntruncatedTextBytes = size_t{1} << 20;

struct EncodeOptions {
  size_t max_length = 0;   // 0: no limit
  bool truncate = true;    // when false, longer texts are returned whole
  // Which end truncation cuts: false keeps the first tokens (transformers'
  // default), true keeps the last (truncation_side="left", TEI's
  // truncation_direction Left). Special tokens stay where the template puts them.
  bool truncate_left = false;
};

// One record to encode: a text and an optional second text (pairs).
struct TextInput {
  std::string_view text;
  std::optional<std::string_view> pair;
};

enum class TokenizerKind { wordpiece, sentencepiece, unigram, bpe };

class Tokenizer {
 public:
  Tokenizer(TokenizerKind kind, std::unique_ptr<SubwordModel> model, AddedTokenMatcher added,
            PostProcessor post, int32_t pad_id, int32_t unk_id);

  // A single text or a pair; invalid UTF-8 is replaced with U+FFFD (counted in stats).
  Encoding encode(const TextInput& input, const EncodeOptions& options, EncodeStats* stats = nullptr) const;
  Encoding encode(std::string_view text, const EncodeOptions& options = {}, EncodeStats* stats = nullptr) const {
    return encode(TextInput{text, std::nullopt}, options, stats);
  }
  // A single sequence of ids (a chunk of a text's tokens) inside the
  // post-processor's template, as encode() puts a text's ids; no truncation.
  Encoding with_special_tokens(std::span<const int32_t> ids) const;
  // The ids of a text without special tokens or truncation (HF's tokenize + convert).
  std::vector<int32_t> tokenize(std::string_view text, EncodeStats* stats = nullptr) const;
  // tokenize(), with each id's byte range in `text` (TEI's /tokenize start
  // and stop), as Hugging Face tokenizers' offsets (in bytes): followed
  // through every normalizer, pre-tokenizer and model (aligned_text.h), and
  // through sentence-transformers' lowercasing and invalid UTF-8 (a U+FFFD
  // covers the bytes it replaced). Added tokens cover their bytes and the
  // whitespace they strip (as HF; trim_offsets may take it out again). Empty when unknown: a text over kMinPrefixBytes
  // (encode() cuts those), a BertNormalizer inside a Unigram/BPE pipeline,
  // a libsentencepiece text whose unknown runs encode() shortens.
  struct IdsWithOffsets {
    std::vector<int32_t> ids;
    std::vector<TokenOffset> offsets;  // one per id
  };
  std::optional<IdsWithOffsets> tokenize_with_offsets(std::string_view text) const;
  // Encodes many records on a pool (nullptr: the calling thread); results in input order.
  std::vector<Encoding> encode_batch(std::span<const TextInput> inputs, const EncodeOptions& options,
                                     ThreadPool* pool, EncodeStats* stats = nullptr) const;

  std::string id_to_token(int32_t id) const;
  int32_t token_to_id(std::string_view token) const;
  // Every id this tokenizer can produce is < vocab_size() (added tokens included).
  int64_t vocab_size() const { return vocab_size_; }
  int32_t pad_id() const { return pad_id_; }
  int32_t unk_id() const { return unk_id_; }
  TokenizerKind kind() const { return kind_; }
  const SubwordModel& model() const { return *model_; }
  // Every added token, as given (normalized ones with their original content).
  const AddedTokenMatcher& added_tokens() const { return all_added_; }
  const PostProcessor& post_processor() const { return post_; }
  size_t special_tokens_added(bool is_pair) const { return post_.added_tokens(is_pair); }

  // sentence-transformers' do_lower_case: lowercase the whole text first.
  void set_lowercase_input(bool on) { lowercase_input_ = on; }
  bool lowercase_input() const { return lowercase_input_; }
  // Where it was loaded from, for inspect and manifests ("tokenizer.json", ...).
  std::string source;
  std::optional<int64_t> model_max_length;  // tokenizer_config.json's, when set and sane

 private:
  void tokenize_into(std::string_view text, std::vector<int32_t>& out, EncodeStats& stats) const;
  // tokenize_with_offsets() of text as the model sees it (lowercased, valid UTF-8).
  bool offsets_of(std::string_view text, IdsWithOffsets& r) const;
  // tokenize(), in memory bounded by what the options keep (see kTextBytesPerToken).
  // *cut: the ids come from a prefix of the text.
  // min_tokens: a cut prefix yields at least this many ids (pairs: enough to
  // tell which side is longer).
  std::vector<int32_t> tokenize_bounded(std::string_view text, const EncodeOptions& options, EncodeStats& stats,
                                        bool* cut, size_t min_tokens = 0) const;

  TokenizerKind kind_;
  std::unique_ptr<SubwordModel> model_;
  AddedTokenMatcher all_added_;
  AddedTokenMatcher added_;             // normalized: false, matched on the raw text
  AddedTokenMatcher normalized_added_;  // normalized: true, content normalized, matched on normalized text
  PostProcessor post_;
  int32_t pad_id_;
  int32_t unk_id_;
  std::unordered_map<int32_t, std::string> added_by_id_;  // id -> content, for id_to_token
  int64_t vocab_size_ = 0;
  bool lowercase_input_ = false;
};

// Python's str.lower() of a whole string (full case mapping, final sigma).
std::string python_lower(std::string_view text);

}  // namespace stoke
