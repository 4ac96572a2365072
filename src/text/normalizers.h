// tokenizer.json's "normalizer" for the Unigram and BPE pipelines: a list of
// steps applied in order (a `Sequence` flattened), each as Hugging Face
// tokenizers defines it. Only the steps the supported model families write
// exist; the loader refuses any other by name.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "text/aligned_text.h"
#include "text/precompiled_charsmap.h"
#include "text/wordpiece.h"

namespace stoke {

struct NormalizerStep {
  enum class Kind { precompiled, nfc, nfd, nfkc, nfkd, lowercase, replace, strip, prepend, strip_accents, bert };
  Kind kind = Kind::nfkc;
  std::shared_ptr<const PrecompiledCharsmap> charsmap;  // precompiled
  std::string pattern, content;                         // replace (a plain string pattern), prepend (content)
  bool strip_left = false, strip_right = false;         // strip
  BertNormalizerOptions bert;                           // bert
};

class TextNormalizer {
 public:
  TextNormalizer() = default;
  explicit TextNormalizer(std::vector<NormalizerStep> steps) : steps_(std::move(steps)) {}
  std::string normalize(std::string_view text) const;
  // normalize(), carrying each byte's original range as Hugging Face's
  // NormalizedString does: the same steps (one implementation over both
  // kinds of text, text_edits.h). False when a step's alignment is not
  // followed (BertNormalizer here; WordPiece has its own).
  bool normalize_aligned(std::string_view text, AlignedText& out) const;
  bool empty() const { return steps_.empty(); }
  const std::vector<NormalizerStep>& steps() const { return steps_; }

 private:
  std::vector<NormalizerStep> steps_;
};

// BertNormalizer as a string transform (clean text, CJK spacing, accents,
// lowercase), for matching added tokens with normalized: true on WordPiece text.
std::string bert_normalize(std::string_view text, const BertNormalizerOptions& options);

}  // namespace stoke
