#include "text/sentencepiece_model.h"

#include <sentencepiece_processor.h>

#include <utf8proc.h>

#include <algorithm>
#include <unordered_set>

#include "core/error.h"
#include "core/file_util.h"
#include "text/pipeline_model.h"
#include "text/sentencepiece_check.h"
#include "text/unigram.h"
#include "text/unicode_props.h"
#include "core/utf8.h"

namespace stoke {

namespace {
constexpr const char* kFairseqSpecials[] = {"<s>", "<pad>", "</s>", "<unk>"};
}

namespace {

// The fairseq ids transformers gives an XLM-R model (above) put <s>, <pad>,
// </s>, <unk> at 0-3 over the model's own <unk>, <s>, </s> (pieces 0-2): a
// model with fewer pieces has no such vocabulary (the fuzzer found one with a
// single piece, whose <unk> id 3 lay past its vocabulary of 3).
void check_piece_count(int pieces, const std::string& label) {
  if (pieces <= 0) throw Error(Errc::format, label + ": SentencePiece model has no pieces");
  if (pieces < 3)
    throw Error(Errc::format, label + ": SentencePiece model has " + std::to_string(pieces) +
                                  " pieces; an XLM-R style model has at least <unk>, <s> and </s>");
}

}  // namespace

SentencePieceModel::SentencePieceModel(const std::string& model_path)
    : sp_(std::make_unique<sentencepiece::SentencePieceProcessor>()), label_(model_path) {
  const std::string bytes = read_file(model_path);
  check_sentencepiece_model(bytes, model_path);
  charsmap_ = sentencepiece_charsmap(bytes, model_path);
  auto status = sp_->LoadFromSerializedProto(bytes);
  if (!status.ok()) {
    throw Error(Errc::format, model_path + ": not a loadable SentencePiece model (" + status.ToString() + ")");
  }
  check_piece_count(sp_->GetPieceSize(), model_path);
  index_piece_characters();
}

std::unique_ptr<SentencePieceModel> SentencePieceModel::from_bytes(const std::string& serialized,
                                                                   const std::string& label) {
  std::unique_ptr<SentencePieceModel> m(new SentencePieceModel());
  m->sp_ = std::make_unique<sentencepiece::SentencePieceProcessor>();
  m->label_ = label;
  check_sentencepiece_model(serialized, label);
  m->charsmap_ = sentencepiece_charsmap(serialized, label);
  auto status = m->sp_->LoadFromSerializedProto(serialized);
  if (!status.ok()) {
    throw Error(Errc::format, label + ": not a loadable SentencePiece model (" + status.ToString() + ")");
  }
  check_piece_count(m->sp_->GetPieceSize(), label);
  m->index_piece_characters();
  return m;
}

SentencePieceModel::~SentencePieceModel() = default;

int SentencePieceModel::piece_count() const { return sp_->GetPieceSize(); }

int32_t SentencePieceModel::mask_id() const { return piece_count() + kFairseqOffset; }

int64_t SentencePieceModel::vocab_size() const { return static_cast<int64_t>(piece_count()) + kFairseqOffset + 1; }

std::string SentencePieceModel::describe() const {
  return "SentencePiece (" + std::to_string(piece_count()) + " pieces, fairseq ids)";
}

void SentencePieceModel::index_piece_characters() {
  transparent_ = std::make_unique<std::atomic<uint8_t>[]>(0x110000);
  in_some_piece_.assign(0x110000, false);
  for (int id = 0; id < sp_->GetPieceSize(); ++id) {
    const std::string piece = sp_->IdToPiece(id);
    for (size_t i = 0; i < piece.size();) {
      const char32_t cp = utf8_decode(piece, i);
      if (cp < in_some_piece_.size()) in_some_piece_[cp] = true;
    }
  }
}

namespace {

int combining_class(char32_t cp) {
  return cp < 0x300 ? 0 : utf8proc_get_property(static_cast<utf8proc_int32_t>(cp))->combining_class;
}

// Whether a character may be cut from a long unknown run at all, before the
// model is asked: unchanged by NFKC on its own, and not one whose neighbours
// normalization rewrites (conjoining jamo, spaces, controls, spacing marks).
// Combining marks (class != 0) are allowed, under the mark rules of the .h.
bool may_be_transparent(char32_t cp) {
  if (cp < 0x80) return false;
  if ((cp >= 0x1100 && cp <= 0x11FF) || (cp >= 0x3130 && cp <= 0x318F) || (cp >= 0xA960 && cp <= 0xA97F) ||
      (cp >= 0xD7B0 && cp <= 0xD7FF) || (cp >= 0xAC00 && cp <= 0xD7A3))
    return false;
  const utf8proc_property_t* prop = utf8proc_get_property(static_cast<utf8proc_int32_t>(cp));
  switch (prop->category) {
    case UTF8PROC_CATEGORY_MC: case UTF8PROC_CATEGORY_ZS: case UTF8PROC_CATEGORY_ZL:
    case UTF8PROC_CATEGORY_ZP: case UTF8PROC_CATEGORY_CC: case UTF8PROC_CATEGORY_CS:
    case UTF8PROC_CATEGORY_CN:
      return false;
    default:
      break;
  }
  utf8proc_int32_t buf[8];
  int last_boundclass = 0;
  const auto n = utf8proc_decompose_char(static_cast<utf8proc_int32_t>(cp), buf, 8, UTF8PROC_COMPAT,
                                         &last_boundclass);
  return n == 1 && static_cast<char32_t>(buf[0]) == cp;
}

// A run longer than this is cut to this length: the run still yields exactly
// one merged <unk>, and nothing on either side of it changes.
constexpr size_t kMaxUnknownRun = 64;

}  // namespace

bool SentencePieceModel::run_transparent(char32_t cp) const {
  if (cp >= 0x110000 || in_some_piece_[cp]) return false;
  const uint8_t cached = transparent_[cp].load(std::memory_order_relaxed);
  if (cached != 0) return cached == 1;
  bool yes = may_be_transparent(cp);
  if (yes) {
    // The model itself says what its normalizer does with the character: it
    // must come out as an unknown piece between two neighbours (not removed,
    // not turned into a space or a known character). A combining mark is
    // probed after "-", which nothing composes with.
    std::string probe = combining_class(cp) != 0 ? "-" : "a";
    utf8_append(probe, cp);
    probe += probe[0];
    std::vector<int> ids;
    yes = sp_->Encode(probe, &ids).ok() && std::find(ids.begin(), ids.end(), sp_->unk_id()) != ids.end();
  }
  transparent_[cp].store(yes ? 1 : 2, std::memory_order_relaxed);
  return yes;
}

std::string SentencePieceModel::shorten_unknown_runs(std::string_view text) const {
  // SentencePiece 0.1.97 merges a run of unknown characters into one <unk>
  // in time quadratic in the run's length (1 MB of emoji: 18 s; 1 MB of
  // combining marks: 28 s). The ids depend only on the run being there, so
  // bounded runs give the same ids:
  // - starters (class 0): past kMaxUnknownRun in a row, further unknown ones
  //   are dropped, except one followed by a combining mark (marks compose
  //   with the character before them);
  // - combining marks after a starter: the first kMaxUnknownRun are kept, and
  //   every first occurrence of a mark, so NFKC's reordering and composition
  //   see the same marks; later repeats are dropped while every mark so far is
  //   unknown (composition needs few marks; the rest stay one <unk>).
  std::string out;
  bool changed = false;
  size_t starters = 0, marks = 0;
  bool marks_unknown = true;
  std::unordered_set<char32_t> seen_marks;
  for (size_t i = 0; i < text.size();) {
    const size_t start = i;
    const char32_t cp = utf8_decode(text, i);
    const bool unknown = cp >= 0x80 && run_transparent(cp);
    bool drop = false;
    if (combining_class(cp) != 0) {
      if (marks++ == 0) {
        seen_marks.clear();
        marks_unknown = true;
      }
      marks_unknown = marks_unknown && unknown;
      const bool repeat = !seen_marks.insert(cp).second;
      drop = marks_unknown && repeat && marks > kMaxUnknownRun;
      if (!unknown) starters = 0;
    } else {
      marks = 0;
      starters = unknown ? starters + 1 : 0;
      if (starters > kMaxUnknownRun) {
        size_t j = i;
        drop = j >= text.size() || combining_class(utf8_decode(text, j)) == 0;
      }
    }
    if (drop) {
      if (!changed) {
        out.assign(text.data(), start);
        changed = true;
      }
      continue;
    }
    if (changed) out.append(text.data() + start, i - start);
  }
  return changed ? out : std::string();
}

// The library returns ids of its pieces; a malformed model (the fuzzer found
// one) can make it return an id past them, which no vocabulary holds.
void SentencePieceModel::check_piece_id(int id) const {
  if (id < 0 || id >= piece_count())
    throw Error(Errc::format, label_ + ": the SentencePiece model gives piece id " + std::to_string(id) +
                                  ", outside its " + std::to_string(piece_count()) + " pieces: the model is malformed");
}

void SentencePieceModel::encode(std::string_view text, std::vector<int32_t>& out, EncodeStats& stats) const {
  const std::string shortened = shorten_unknown_runs(text);
  if (!shortened.empty()) text = shortened;
  std::vector<int> ids;
  auto status = sp_->Encode(absl::string_view(text.data(), text.size()), &ids);
  if (!status.ok()) throw Error(Errc::internal, label_ + ": SentencePiece encode failed: " + status.ToString());
  const int unk = sp_->unk_id();
  for (int id : ids) {
    check_piece_id(id);
    // transformers: PieceToId(piece) + offset, except SentencePiece's unknown (0) -> <unk>.
    out.push_back(id == unk || id == 0 ? kUnk : id + kFairseqOffset);
  }
  stats.lookups += ids.size();
}

const SubwordModel& SentencePieceModel::hf_pipeline() const {
  std::call_once(hf_once_, [this] {
    // transformers' XLM-R conversion: the fairseq specials, then pieces 3..
    // with their scores (piece k -> id k + 1), <mask> last; unknown = 3.
    std::vector<std::pair<std::string, double>> vocab;
    vocab.reserve(static_cast<size_t>(piece_count()) + 2);
    for (const char* special : kFairseqSpecials) vocab.emplace_back(special, 0.0);
    for (int k = 3; k < piece_count(); ++k) vocab.emplace_back(sp_->IdToPiece(k), sp_->GetScore(k));
    vocab.emplace_back("<mask>", 0.0);
    std::vector<NormalizerStep> norm;
    if (!charsmap_.empty()) {
      NormalizerStep step;
      step.kind = NormalizerStep::Kind::precompiled;
      step.charsmap = std::make_shared<PrecompiledCharsmap>(charsmap_, label_);
      norm.push_back(std::move(step));
    }
    PreTokenizerStep split, meta;
    split.kind = PreTokenizerStep::Kind::whitespace_split;
    meta.kind = PreTokenizerStep::Kind::metaspace;
    hf_ = std::make_unique<PipelineModel>(TextNormalizer(std::move(norm)), PreTokenizer({split, meta}),
                                          std::make_unique<UnigramModel>(std::move(vocab), kUnk, false, label_));
  });
  return *hf_;
}

bool SentencePieceModel::encode_with_offsets(std::string_view text, std::vector<int32_t>& out,
                                             std::vector<TokenOffset>& offsets, EncodeStats& stats) const {
  std::vector<int32_t> ids, hf_ids;
  std::vector<TokenOffset> hf_offsets;
  encode(text, ids, stats);
  EncodeStats scratch;
  if (hf_pipeline().encode_segment_with_offsets(text, true, hf_ids, hf_offsets, scratch) && hf_ids == ids) {
    out.insert(out.end(), ids.begin(), ids.end());
    offsets.insert(offsets.end(), hf_offsets.begin(), hf_offsets.end());
    return true;
  }
  return spm_offsets(text, out, offsets, stats);
}

bool SentencePieceModel::spm_offsets(std::string_view text, std::vector<int32_t>& out,
                                     std::vector<TokenOffset>& offsets, EncodeStats& stats) const {
  // A text whose unknown runs encode() shortens has offsets into the shortened
  // text, not this one: unknown here.
  if (!shorten_unknown_runs(text).empty()) return false;
  sentencepiece::ImmutableSentencePieceText spt;
  auto status = sp_->Encode(absl::string_view(text.data(), text.size()), spt.mutable_proto());
  if (!status.ok()) throw Error(Errc::internal, label_ + ": SentencePiece encode failed: " + status.ToString());
  const int unk = sp_->unk_id();
  const size_t first = offsets.size();
  std::vector<bool> lone_space;  // the piece is "▁" alone
  for (const auto& piece : spt.pieces()) {
    const int id = static_cast<int>(piece.id());
    check_piece_id(id);
    out.push_back(id == unk || id == 0 ? kUnk : id + kFairseqOffset);
    TokenOffset o{piece.begin(), piece.end()};
    // Hugging Face's convention (its Metaspace gives the "▁" of a word the
    // position of the word's first character): a piece's whitespace is not
    // part of its range...
    const bool starts_with_space = piece.piece().rfind("\xE2\x96\x81", 0) == 0;
    while (starts_with_space && o.start < o.end) {
      size_t at = o.start;
      if (!unicode::is_bert_whitespace(utf8_decode(text, at))) break;
      o.start = static_cast<uint32_t>(at);
    }
    offsets.push_back(o);
    lone_space.push_back(piece.piece() == "\xE2\x96\x81");
  }
  // ...and a "▁" alone covers the character after it (the next piece's first).
  for (size_t k = 0; k < lone_space.size(); ++k) {
    if (!lone_space[k] || first + k + 1 >= offsets.size()) continue;
    size_t at = offsets[first + k + 1].start;
    if (at >= text.size()) continue;
    offsets[first + k].start = static_cast<uint32_t>(at);
    utf8_decode(text, at);
    offsets[first + k].end = static_cast<uint32_t>(at);
  }
  stats.lookups += spt.pieces_size();
  return true;
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
