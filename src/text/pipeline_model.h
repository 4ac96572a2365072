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

  const WordModel& word_model() const { return *model_; }

 private:
  TextNormalizer normalizer_;
  PreTokenizer pre_;
  std::unique_ptr<WordModel> model_;
};

}  // namespace stoke
