// XLM-R's tokenizer: a SentencePiece model run by libsentencepiece, with the
// fairseq id mapping transformers' XLMRobertaTokenizer uses:
//   <s>=0 <pad>=1 </s>=2 <unk>=3, SentencePiece piece k -> k + 1, <mask> = last.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <vector>
#include <string>

#include "text/subword_model.h"

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace stoke {

class SentencePieceModel final : public SubwordModel {
 public:
  // Throws Error(format) naming the file when the model does not load.
  explicit SentencePieceModel(const std::string& model_path);
  // From the serialized model bytes (used by the fuzz target).
  static std::unique_ptr<SentencePieceModel> from_bytes(const std::string& serialized, const std::string& label);
  ~SentencePieceModel() override;

  void encode(std::string_view text, std::vector<int32_t>& out, EncodeStats& stats) const override;
  // Hugging Face's offsets: the pipeline transformers converts this model to
  // (Precompiled + WhitespaceSplit + Metaspace + Unigram), built on first
  // use, when its ids are these; else libsentencepiece's own byte ranges
  // moved to HF's convention (close, not always equal).
  bool encode_with_offsets(std::string_view text, std::vector<int32_t>& out, std::vector<TokenOffset>& offsets,
                           EncodeStats& stats) const override;
  std::string id_to_token(int32_t id) const override;
  int64_t vocab_size() const override;  // pieces + fairseq offset + <mask>
  int32_t token_to_id(std::string_view token) const override;
  std::string describe() const override;

  static constexpr int32_t kBos = 0, kPad = 1, kEos = 2, kUnk = 3;
  static constexpr int32_t kFairseqOffset = 1;
  int32_t mask_id() const;
  int piece_count() const;

 private:
  SentencePieceModel() = default;
  void index_piece_characters();
  // Returns text with every run of unknown characters cut to a bounded length
  // when that cannot change the ids (see the .cc), or an empty string when the
  // text needs no change.
  std::string shorten_unknown_runs(std::string_view text) const;

  // libsentencepiece's alignment, moved to HF's convention.
  void check_piece_id(int id) const;  // throws Error(format) for an id outside the model's pieces
  bool spm_offsets(std::string_view text, std::vector<int32_t>& out, std::vector<TokenOffset>& offsets,
                   EncodeStats& stats) const;
  const SubwordModel& hf_pipeline() const;

  std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_;
  std::string charsmap_;  // the normalizer's table, for hf_pipeline()
  mutable std::once_flag hf_once_;
  mutable std::unique_ptr<SubwordModel> hf_;
  // Whether a code point may be dropped from inside a long run of unknown
  // characters: decided lazily by probing the model, cached per code point
  // (0 = not probed yet, 1 = yes, 2 = no). Races only repeat a probe.
  bool run_transparent(char32_t cp) const;
  std::vector<bool> in_some_piece_;  // by code point: appears in at least one piece
  mutable std::unique_ptr<std::atomic<uint8_t>[]> transparent_;
  std::string label_;
};

}  // namespace stoke
