#include "text/unigram.h"

#include <algorithm>
#include <cstdio>
#include <limits>

#include "core/error.h"

namespace stoke {

namespace {
constexpr double kUnkPenalty = 10.0;
}

UnigramModel::UnigramModel(std::vector<std::pair<std::string, double>> vocab, int32_t unk_id, bool byte_fallback,
                           const std::string& label)
    : vocab_(std::move(vocab)), unk_id_(unk_id), byte_fallback_(byte_fallback) {
  if (vocab_.empty()) throw Error(Errc::format, label + ": field \"model.vocab\": expected a non-empty list");
  if (unk_id_ < 0 || static_cast<size_t>(unk_id_) >= vocab_.size()) {
    throw Error(Errc::format, label + ": field \"model.unk_id\": " + std::to_string(unk_id_) +
                                  " is not an id of the " + std::to_string(vocab_.size()) + "-piece vocabulary");
  }
  double min_score = std::numeric_limits<double>::infinity();
  ids_.reserve(vocab_.size());
  for (size_t id = 0; id < vocab_.size(); ++id) {
    const auto& [piece, score] = vocab_[id];
    ids_[piece] = static_cast<int32_t>(id);  // a later duplicate wins, as in tokenizers
    min_score = std::min(min_score, score);
  }
  for (const auto& [piece, id] : ids_)
    if (!piece.empty()) trie_.insert(piece, id);
  unk_score_ = min_score - kUnkPenalty;
}

std::string UnigramModel::describe() const {
  return "Unigram (" + std::to_string(vocab_.size()) + " pieces" + (byte_fallback_ ? ", byte fallback" : "") + ")";
}

std::string UnigramModel::id_to_token(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= vocab_.size()) return vocab_[static_cast<size_t>(unk_id_)].first;
  return vocab_[static_cast<size_t>(id)].first;
}

int32_t UnigramModel::token_to_id(std::string_view token) const {
  auto it = ids_.find(std::string(token));
  return it == ids_.end() ? -1 : it->second;
}

void UnigramModel::encode_impl(std::string_view word, std::vector<int32_t>& out, std::vector<TokenOffset>* offsets,
                               EncodeStats& stats) const {
  if (word.empty()) return;
  // best[e]: the best path over word[0, e) — its score, where its last piece
  // starts (npos: no path yet) and that piece's id.
  struct Best {
    double score = 0;
    size_t start = std::string_view::npos;
    int32_t id = -1;
  };
  const size_t n = word.size();
  std::vector<Best> best(n + 1);
  best[0].start = 0;
  size_t pos = 0;
  while (pos < n) {
    const size_t char_len = [&] {
      const auto b = static_cast<unsigned char>(word[pos]);
      const size_t l = b < 0x80 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
      return std::min(l, n - pos);
    }();
    const double here = best[pos].score;
    bool has_single = false;
    int32_t node = VocabTrie::root();
    for (size_t i = pos; i < n; ++i) {
      node = trie_.child(node, static_cast<uint8_t>(word[i]));
      ++stats.lookups;
      if (node == VocabTrie::kNone) break;
      const int32_t id = trie_.id_at(node);
      if (id == VocabTrie::kNone) continue;
      const size_t end = i + 1;
      const double score = here + vocab_[static_cast<size_t>(id)].second;
      Best& b = best[end];
      if (b.start == std::string_view::npos || score > b.score) b = {score, pos, id};
      if (end - pos == char_len) has_single = true;
    }
    if (!has_single) {
      Best& b = best[pos + char_len];
      const double score = here + unk_score_;
      if (b.start == std::string_view::npos || score > b.score) b = {score, pos, unk_id_};
    }
    pos += char_len;
  }
  // Walk back; consecutive <unk> pieces are fused into one string.
  std::vector<std::pair<size_t, size_t>> pieces;  // [start, end) in reverse order
  std::vector<int32_t> ids;
  size_t end = n;
  while (end > 0) {
    const Best& b = best[end];
    if (b.id == unk_id_ && !ids.empty() && ids.back() == unk_id_) {
      pieces.back().first = b.start;
    } else {
      pieces.push_back({b.start, end});
      ids.push_back(b.id);
    }
    end = b.start;
  }
  for (size_t k = pieces.size(); k-- > 0;) {
    const std::string_view piece = word.substr(pieces[k].first, pieces[k].second - pieces[k].first);
    const size_t mark = out.size();
    const auto note = [&] {
      if (offsets)
        offsets->insert(offsets->end(), out.size() - mark,
                        TokenOffset{static_cast<uint32_t>(pieces[k].first), static_cast<uint32_t>(pieces[k].second)});
    };
    if (ids[k] != unk_id_) {
      out.push_back(ids[k]);
      note();
      continue;
    }
    // The piece string may still be a vocabulary entry (a fused run can be).
    if (const int32_t id = token_to_id(piece); id >= 0) {
      out.push_back(id);
      note();
      continue;
    }
    if (byte_fallback_) {
      std::vector<int32_t> bytes;
      for (char c : piece) {
        char name[8];
        std::snprintf(name, sizeof name, "<0x%02X>", static_cast<unsigned char>(c));
        const int32_t id = token_to_id(name);
        if (id < 0) break;
        bytes.push_back(id);
      }
      if (bytes.size() == piece.size()) {
        out.insert(out.end(), bytes.begin(), bytes.end());
        note();
        continue;
      }
    }
    out.push_back(unk_id_);
    note();
  }
}

}  // namespace stoke
