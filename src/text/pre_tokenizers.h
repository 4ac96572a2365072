// tokenizer.json's "pre_tokenizer" for the Unigram and BPE pipelines: the
// steps that cut normalized text into words before the model sees them, as
// Hugging Face tokenizers defines them. Only the steps the supported model
// families write exist; the loader refuses any other by name.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "text/aligned_text.h"

namespace stoke {

enum class PrependScheme { always, first, never };

struct PreTokenizerStep {
  enum class Kind { whitespace_split, metaspace, byte_level, split_qwen2 };  // split_qwen2: text/qwen2_split.h
  Kind kind = Kind::whitespace_split;
  // metaspace
  std::string replacement = "\xE2\x96\x81";  // U+2581
  PrependScheme prepend = PrependScheme::always;
  bool split = true;
  // byte_level
  bool add_prefix_space = false;
  bool use_regex = true;
};

// A word and whether it starts at the very beginning of the input (Metaspace's
// prepend_scheme "first" adds the replacement only there).
struct PreToken {
  std::string text;
  bool at_input_start = false;
};

// A word with each byte's range in the original text (offsets only).
struct AlignedWord {
  AlignedText text;
  bool at_input_start = false;
};

class PreTokenizer {
 public:
  PreTokenizer() = default;
  explicit PreTokenizer(std::vector<PreTokenizerStep> steps) : steps_(std::move(steps)) {}
  // Appends the words of `text` to `out`. ByteLevel words come out in the
  // byte-level alphabet (byte_level.h), ready for the BPE vocabulary.
  void split(std::string_view text, bool at_input_start, std::vector<PreToken>& out) const;
  // The same words handed to `f` one at a time (the view lives until f returns).
  // A lone ByteLevel step — RoBERTa's whole pre-tokenizer — runs without a
  // string per word: the hot path of byte-level BPE.
  void for_each_word(std::string_view text, bool at_input_start,
                     const std::function<void(std::string_view)>& f) const;
  // split(), carrying the alignment as HF's PreTokenizedString does: the
  // same steps (one implementation over both kinds of text, text_edits.h),
  // the same words, each byte aligned.
  void split_aligned(const AlignedText& text, bool at_input_start, std::vector<AlignedWord>& out) const;
  const std::vector<PreTokenizerStep>& steps() const { return steps_; }

 private:
  std::vector<PreTokenizerStep> steps_;
};

}  // namespace stoke
