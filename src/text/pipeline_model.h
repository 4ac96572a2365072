// A tokenizer.json pipeline for the Unigram and BPE models: normalizer ->
// pre-tokenizer -> word model, each stage as Hugging Face tokenizers runs it.
// (WordPiece keeps its fused one-pass implementation in wordpiece.h.)
#pragma once

#include <memory>

#include "text/normalizers.h"
#include "text/pre_tokenizers.h"
#include "text/subword_model.h"
#include "text/word_model.h"

namespace stoke {

class PipelineModel final : public SubwordModel {
 public:
  PipelineModel(TextNormalizer normalizer, PreTokenizer pre_tokenizer, std::unique_ptr<WordModel> model)
      : normalizer_(std::move(normalizer)), pre_(std::move(pre_tokenizer)), model_(std::move(model)) {}

  void encode(std::string_view text, std::vector<int32_t>& out, EncodeStats& stats) const override {
    encode_segment(text, true, out, stats);
  }
  std::string id_to_token(int32_t id) const override { return model_->id_to_token(id); }
  int64_t vocab_size() const override { return model_->vocab_size(); }
  int32_t token_to_id(std::string_view token) const override { return model_->token_to_id(token); }
  std::string describe() const override { return model_->describe(); }

  bool has_normalizer() const override { return !normalizer_.empty(); }
  std::string normalize(std::string_view text) const override { return normalizer_.normalize(text); }
  void encode_segment(std::string_view text, bool at_input_start, std::vector<int32_t>& out,
                      EncodeStats& stats) const override {
    if (normalizer_.empty()) {
      encode_normalized(text, at_input_start, out, stats);
    } else {
      const std::string normalized = normalizer_.normalize(text);
      encode_normalized(normalized, at_input_start, out, stats);
    }
  }
  void encode_normalized(std::string_view normalized, bool at_input_start, std::vector<int32_t>& out,
                         EncodeStats& stats) const override {
    pre_.for_each_word(normalized, at_input_start,
                       [&](std::string_view word) { model_->encode_word(word, out, stats); });
  }

  // Offsets: the normalizer and pre-tokenizer carry each byte's original
  // range (aligned_text.h), the word model gives each id's range in its word.
  bool normalize_aligned(std::string_view text, AlignedText& normalized) const override {
    if (normalizer_.empty()) {
      normalized = AlignedText::identity(text);
      return true;
    }
    // The aligned text must be the one the ids come from; else unknown.
    return normalizer_.normalize_aligned(text, normalized) && normalized.text == normalizer_.normalize(text);
  }
  bool encode_segment_with_offsets(std::string_view text, bool at_input_start, std::vector<int32_t>& out,
                                   std::vector<TokenOffset>& offsets, EncodeStats& stats) const override {
    AlignedText normalized;
    return normalize_aligned(text, normalized) && encode_aligned(normalized, at_input_start, out, offsets, stats);
  }
  bool encode_aligned(const AlignedText& normalized, bool at_input_start, std::vector<int32_t>& out,
                      std::vector<TokenOffset>& offsets, EncodeStats& stats) const override {
    std::vector<AlignedWord> words;
    pre_.split_aligned(normalized, at_input_start, words);
    for (const AlignedWord& w : words) {
      const size_t first = offsets.size();
      model_->encode_word_with_offsets(w.text.text, out, offsets, stats);
      for (size_t k = first; k < offsets.size(); ++k)
        offsets[k] = offsets[k].start < offsets[k].end ? w.text.original(offsets[k].start, offsets[k].end)
                                                       : TokenOffset{w.text.align.empty() ? 0u : w.text.align.front().start,
                                                                     w.text.align.empty() ? 0u : w.text.align.front().start};
    }
    return true;
  }

  const WordModel& word_model() const { return *model_; }

 private:
  TextNormalizer normalizer_;
  PreTokenizer pre_;
  std::unique_ptr<WordModel> model_;
};

}  // namespace stoke
