#include "text/sentencepiece_model.h"

#include <sentencepiece_processor.h>

#include "core/error.h"

namespace stoke {

namespace {
constexpr const char* kFairseqSpecials[] = {"<s>", "<pad>", "</s>", "<unk>"};
}

SentencePieceModel::SentencePieceModel(const std::string& model_path)
    : sp_(std::make_unique<sentencepiece::SentencePieceProcessor>()), label_(model_path) {
  auto status = sp_->Load(model_path);
  if (!status.ok()) {
    throw Error(Errc::format, model_path + ": not a loadable SentencePiece model (" + status.ToString() + ")");
  }
}

std::unique_ptr<SentencePieceModel> SentencePieceModel::from_bytes(const std::string& serialized,
                                                                   const std::string& label) {
  std::unique_ptr<SentencePieceModel> m(new SentencePieceModel());
  m->sp_ = std::make_unique<sentencepiece::SentencePieceProcessor>();
  m->label_ = label;
  auto status = m->sp_->LoadFromSerializedProto(serialized);
  if (!status.ok()) {
    throw Error(Errc::format, label + ": not a loadable SentencePiece model (" + status.ToString() + ")");
  }
  if (m->sp_->GetPieceSize() <= 0) throw Error(Errc::format, label + ": SentencePiece model has no pieces");
  return m;
}

SentencePieceModel::~SentencePieceModel() = default;

int SentencePieceModel::piece_count() const { return sp_->GetPieceSize(); }

int32_t SentencePieceModel::mask_id() const { return piece_count() + kFairseqOffset; }

int64_t SentencePieceModel::vocab_size() const { return static_cast<int64_t>(piece_count()) + kFairseqOffset + 1; }

std::string SentencePieceModel::describe() const {
  return "SentencePiece (" + std::to_string(piece_count()) + " pieces, fairseq ids)";
}

void SentencePieceModel::encode(std::string_view text, std::vector<int32_t>& out, EncodeStats& stats) const {
  std::vector<int> ids;
  auto status = sp_->Encode(absl::string_view(text.data(), text.size()), &ids);
  if (!status.ok()) throw Error(Errc::internal, label_ + ": SentencePiece encode failed: " + status.ToString());
  const int unk = sp_->unk_id();
  for (int id : ids) {
    // transformers: PieceToId(piece) + offset, except SentencePiece's unknown (0) -> <unk>.
    out.push_back(id == unk || id == 0 ? kUnk : id + kFairseqOffset);
  }
  stats.lookups += ids.size();
}

std::string SentencePieceModel::id_to_token(int32_t id) const {
  if (id >= 0 && id < 4) return kFairseqSpecials[id];
  if (id == mask_id()) return "<mask>";
  const int piece = id - kFairseqOffset;
  if (piece < 0 || piece >= piece_count()) return "<unk>";
  return sp_->IdToPiece(piece);
}

int32_t SentencePieceModel::token_to_id(std::string_view token) const {
  for (int i = 0; i < 4; ++i)
    if (token == kFairseqSpecials[i]) return i;
  if (token == "<mask>") return mask_id();
  const int piece = sp_->PieceToId(absl::string_view(token.data(), token.size()));
  if (piece == sp_->unk_id() && token != sp_->IdToPiece(sp_->unk_id())) return -1;
  return piece + kFairseqOffset;
}

}  // namespace stoke
