#include "text/tokenizer.h"

#include <algorithm>
#include <mutex>

#include <utf8proc.h>

#include "core/error.h"
#include "core/thread_pool.h"
#include "core/utf8.h"
#include "text/unicode_props.h"

namespace stoke {

size_t PostProcessor::added_tokens(bool is_pair) const {
  size_t n = 0;
  for (const auto& p : is_pair ? pair : single)
    if (!p.is_sequence) n += p.ids.size();
  return n;
}

Tokenizer::Tokenizer(TokenizerKind kind, std::unique_ptr<SubwordModel> model, AddedTokenMatcher added,
                     PostProcessor post, int32_t pad_id, int32_t unk_id)
    : kind_(kind), model_(std::move(model)), all_added_(std::move(added)), post_(std::move(post)),
      pad_id_(pad_id), unk_id_(unk_id) {
  // tokenizers matches a normalized token by its normalized content ("Quixotic"
  // in an uncased model is "quixotic", which "QUIXOTIC" also becomes).
  std::vector<AddedToken> raw, normalized;
  for (const AddedToken& t : all_added_.tokens()) {
    if (t.normalized && model_->has_normalizer()) {
      AddedToken n = t;
      n.content = model_->normalize(t.content);
      normalized.push_back(std::move(n));
    } else {
      raw.push_back(t);
    }
  }
  added_ = AddedTokenMatcher(std::move(raw));
  normalized_added_ = AddedTokenMatcher(std::move(normalized));
  vocab_size_ = model_->vocab_size();
  for (const auto& t : all_added_.tokens()) {
    vocab_size_ = std::max<int64_t>(vocab_size_, int64_t{t.id} + 1);
    added_by_id_.emplace(t.id, t.content);  // the first token registered for an id names it
  }
  for (const auto* tmpl : {&post_.single, &post_.pair})
    for (const auto& p : *tmpl)
      for (int32_t id : p.ids) vocab_size_ = std::max<int64_t>(vocab_size_, int64_t{id} + 1);
}

std::string Tokenizer::id_to_token(int32_t id) const {
  if (auto it = added_by_id_.find(id); it != added_by_id_.end()) return it->second;
  return model_->id_to_token(id);
}

int32_t Tokenizer::token_to_id(std::string_view token) const {
  for (const auto& t : all_added_.tokens())
    if (t.content == token) return t.id;
  return model_->token_to_id(token);
}

void Tokenizer::tokenize_into(std::string_view text, std::vector<int32_t>& out, EncodeStats& stats) const {
  std::string lowered;
  if (lowercase_input_) {
    lowered = python_lower(text);
    text = lowered;
  }
  for (const TextSpan& span : added_.split(text)) {
    if (span.token_id >= 0) {
      out.push_back(span.token_id);
      continue;
    }
    stats.encoded_bytes += span.text.size();
    const bool at_start = span.text.data() == text.data();
    if (normalized_added_.empty()) {
      model_->encode_segment(span.text, at_start, out, stats);
      continue;
    }
    const std::string normalized = model_->normalize(span.text);
    for (const TextSpan& piece : normalized_added_.split(normalized)) {
      if (piece.token_id >= 0)
        out.push_back(piece.token_id);
      else
        model_->encode_normalized(piece.text, at_start && piece.text.data() == normalized.data(), out, stats);
    }
  }
}

namespace {

// Invalid subparts replaced by U+FFFD, each covering the bytes it replaces.
AlignedText sanitized_aligned(std::string_view text) {
  AlignedText a;
  a.text.reserve(text.size());
  a.align.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const size_t at = i;
    const char32_t c = utf8_decode(text, i);
    const size_t before = a.text.size();
    utf8_append(a.text, c);
    a.align.insert(a.align.end(), a.text.size() - before, TokenOffset{static_cast<uint32_t>(at), static_cast<uint32_t>(i)});
  }
  return a;
}

// python_lower(text.text), each lowered character aligned to the one it came
// from. False if the lengths disagree (they cannot: checked, not assumed).
bool lowered_aligned(AlignedText& t) {
  const std::string lowered = python_lower(t.text);
  AlignedText out;
  out.text = lowered;
  out.align.reserve(lowered.size());
  size_t at = 0;
  for (size_t i = 0; i < t.text.size();) {
    const size_t start = i;
    char32_t buf[3];
    const int n = unicode::to_lower_full(utf8_decode(t.text, i), buf);
    for (int k = 0; k < n; ++k) {
      if (at >= lowered.size()) return false;
      size_t next = at;
      utf8_decode(lowered, next);
      out.align.insert(out.align.end(), next - at, t.original(start, i));
      at = next;
    }
  }
  if (at != lowered.size()) return false;
  t = std::move(out);
  return true;
}

bool is_space_token_char(char32_t c) { return c == 0x120 || unicode::is_white_space(c); }  // 0x120: "Ġ"

// RobertaProcessing's process_offsets (HF tokenizers' byte-level trim). HF
// moves the offsets by characters (the Python binding converts them to
// characters before post-processing; its offsets are the goldens): the
// start past `leading` characters, the end back over `trailing` ones.
void trim_offsets(std::string_view text, std::vector<TokenOffset>& offsets, const std::vector<std::string>& values,
                  bool add_prefix_space) {
  for (size_t i = 0; i < offsets.size() && i < values.size(); ++i) {
    const std::string& token = values[i];
    std::vector<char32_t> chars;
    for (size_t k = 0; k < token.size();) chars.push_back(utf8_decode(token, k));
    size_t leading = 0, trailing = 0;
    while (leading < chars.size() && is_space_token_char(chars[leading])) ++leading;
    while (trailing < chars.size() && is_space_token_char(chars[chars.size() - 1 - trailing])) ++trailing;
    TokenOffset& o = offsets[i];
    if (leading > 0 && !((i == 0 || o.start == 0) && add_prefix_space && leading == 1)) {
      size_t at = o.start;
      for (size_t k = 0; k < leading && at < o.end; ++k) utf8_decode(text, at);
      o.start = static_cast<uint32_t>(std::min<size_t>(at, o.end));
    }
    if (trailing > 0) {
      size_t at = o.end, k = 0;
      for (; k < trailing && at > 0; ++k) {
        --at;
        while (at > 0 && (static_cast<unsigned char>(text[at]) & 0xC0) == 0x80) --at;
      }
      if (k == trailing) o.end = static_cast<uint32_t>(std::max<size_t>(at, o.start));
    }
  }
}

// An added token's range in `text` widened over the whitespace it strips
// (lstrip: back to `floor`, where the previous span ended; rstrip: forward).
TokenOffset with_stripped(std::string_view text, TokenOffset o, size_t floor, const AddedTokenMatcher& matcher,
                          int32_t id) {
  for (const AddedToken& t : matcher.tokens()) {
    if (t.id != id || t.content.size() != o.end - o.start) continue;
    if (!t.strip_in_offsets) break;
    while (t.lstrip && o.start > floor) {
      size_t prev = o.start - 1;
      while (prev > floor && (static_cast<unsigned char>(text[prev]) & 0xC0) == 0x80) --prev;
      size_t i = prev;
      if (!unicode::is_white_space(utf8_decode(text, i))) break;
      o.start = static_cast<uint32_t>(prev);
    }
    while (t.rstrip && o.end < text.size()) {
      size_t i = o.end;
      if (!unicode::is_white_space(utf8_decode(text, i))) break;
      o.end = static_cast<uint32_t>(i);
    }
    break;
  }
  return o;
}

}  // namespace

std::optional<Tokenizer::IdsWithOffsets> Tokenizer::tokenize_with_offsets(std::string_view text) const {
  if (text.size() > kMinPrefixBytes) return std::nullopt;
  const bool valid = utf8_is_valid(text);
  IdsWithOffsets r;
  if (valid && !lowercase_input_) {
    if (!offsets_of(text, r)) return std::nullopt;
    return r;
  }
  // The model sees another text: offsets into it, then mapped back.
  AlignedText seen = valid ? AlignedText::identity(text) : sanitized_aligned(text);
  if (lowercase_input_ && !lowered_aligned(seen)) return std::nullopt;
  if (!offsets_of(seen.text, r)) return std::nullopt;
  for (TokenOffset& o : r.offsets) {
    if (o.start < o.end) {
      o = seen.original(o.start, o.end);
    } else {
      const uint32_t at = o.start < seen.align.size() ? seen.align[o.start].start : static_cast<uint32_t>(text.size());
      o = {at, at};
    }
  }
  return r;
}

bool Tokenizer::offsets_of(std::string_view text, IdsWithOffsets& r) const {
  EncodeStats stats;
  // Each token's string as HF's encoding holds it (what trim_offsets reads):
  // an added token's is the text it matched, whitespace it strips included.
  std::vector<std::string> values;
  const bool keep_values = post_.trim_offsets;
  auto shift = [&](size_t first, uint32_t base) {
    for (size_t k = first; k < r.offsets.size(); ++k) {
      r.offsets[k].start += base;
      r.offsets[k].end += base;
    }
  };
  auto model_values = [&] {
    while (keep_values && values.size() < r.ids.size()) values.push_back(id_to_token(r.ids[values.size()]));
  };
  size_t plain_end = 0;  // where the previous span ended
  for (const TextSpan& span : added_.split(text)) {
    const auto base = static_cast<uint32_t>(span.text.data() - text.data());
    if (span.token_id >= 0) {
      // As HF: an added token that strips whitespace covers it.
      const TokenOffset o = with_stripped(text, {base, base + static_cast<uint32_t>(span.text.size())}, plain_end,
                                          added_, span.token_id);
      r.ids.push_back(span.token_id);
      r.offsets.push_back(o);
      if (keep_values) values.emplace_back(text.substr(o.start, o.end - o.start));
      plain_end = o.end;
      continue;
    }
    plain_end = base + span.text.size();
    const bool at_start = base == 0;
    const size_t first = r.offsets.size();
    if (normalized_added_.empty()) {
      if (!model_->encode_segment_with_offsets(span.text, at_start, r.ids, r.offsets, stats)) return false;
      shift(first, base);
      model_values();
      continue;
    }
    AlignedText normalized;
    if (!model_->normalize_aligned(span.text, normalized)) return false;
    size_t piece_end = 0;
    for (const TextSpan& piece : normalized_added_.split(normalized.text)) {
      const auto at = static_cast<size_t>(piece.text.data() - normalized.text.data());
      if (piece.token_id >= 0) {
        const TokenOffset o = with_stripped(normalized.text, {static_cast<uint32_t>(at), static_cast<uint32_t>(at + piece.text.size())},
                                            piece_end, normalized_added_, piece.token_id);
        piece_end = o.end;
        r.ids.push_back(piece.token_id);
        r.offsets.push_back(normalized.original(o.start, o.end));
        if (keep_values) values.emplace_back(normalized.text.substr(o.start, o.end - o.start));
      } else {
        piece_end = at + piece.text.size();
        if (!model_->encode_aligned(normalized.slice(at, piece_end), at_start && at == 0, r.ids, r.offsets, stats))
          return false;
      }
      model_values();
    }
    shift(first, base);
  }
  if (post_.trim_offsets) trim_offsets(text, r.offsets, values, post_.trim_add_prefix_space);
  return true;
}

namespace {

// The first `bytes` bytes of text, backed off to a character start (a cut
// inside a character would add a U+FFFD at the end; harmless, but needless).
std::string_view text_prefix(std::string_view text, size_t bytes) {
  if (bytes >= text.size()) return text;
  size_t n = bytes;
  for (int back = 0; back < 3 && n > 0 && (static_cast<unsigned char>(text[n]) & 0xC0) == 0x80; ++back) --n;
  return text.substr(0, n);
}

// The last `bytes` bytes of a text, starting on a UTF-8 boundary.
std::string_view text_suffix(std::string_view text, size_t bytes) {
  if (bytes >= text.size()) return text;
  size_t at = text.size() - bytes;
  for (int ahead = 0; ahead < 3 && at < text.size() && (static_cast<unsigned char>(text[at]) & 0xC0) == 0x80; ++ahead)
    ++at;
  return text.substr(at);
}

}  // namespace

std::vector<int32_t> Tokenizer::tokenize_bounded(std::string_view text, const EncodeOptions& o, EncodeStats& stats,
                                                 bool* cut, size_t min_tokens) const {
  *cut = false;
  // WordPiece needs a few bytes per byte of text (a word over
  // max_input_chars_per_word is one [UNK] however long): it is not bounded.
  // SentencePiece and Unigram build a lattice per byte, and BPE holds its
  // words, their byte-level forms and a heap (a few dozen bytes per byte):
  // those are encoded from a prefix.
  if (kind_ == TokenizerKind::wordpiece) return tokenize(text, &stats);
  if (!o.truncate || o.max_length == 0) {
    if (text.size() <= kUntruncatedTextBytes) return tokenize(text, &stats);
    *cut = true;
    ++stats.capped;
    return tokenize(text_prefix(text, kUntruncatedTextBytes), &stats);
  }
  const size_t need = std::max(o.max_length + kPrefixMarginTokens, min_tokens);
  size_t bytes = std::max(kMinPrefixBytes, need * kTextBytesPerToken);
  while (bytes < text.size()) {
    EncodeStats attempt;
    // Left truncation keeps the last tokens: those come from a suffix (the
    // tokens at its start, the only ones the cut can change, are cut off).
    std::vector<int32_t> ids =
        tokenize(o.truncate_left ? text_suffix(text, bytes) : text_prefix(text, bytes), &attempt);
    if (ids.size() >= need) {  // truncated anyway, far before the cut
      stats.add(attempt);
      *cut = true;
      return ids;
    }
    bytes *= 2;  // few tokens per byte here (spaces, unknown runs): a longer prefix
  }
  return tokenize(text, &stats);
}

std::vector<int32_t> Tokenizer::tokenize(std::string_view text, EncodeStats* stats) const {
  EncodeStats local;
  std::vector<int32_t> ids;
  size_t replaced = 0;
  if (!utf8_is_valid(text)) {
    std::string clean = utf8_sanitize(text, &replaced);
    tokenize_into(clean, ids, local);
  } else {
    tokenize_into(text, ids, local);
  }
  local.replaced_utf8 += replaced;
  if (stats) stats->add(local);
  return ids;
}

Encoding Tokenizer::encode(const TextInput& input, const EncodeOptions& options, EncodeStats* stats) const {
  EncodeStats local;
  std::vector<int32_t> seq[2];
  bool cut[2] = {false, false};
  seq[0] = tokenize_bounded(input.text, options, local, &cut[0]);
  const bool is_pair = input.pair.has_value();
  if (is_pair) {
    seq[1] = tokenize_bounded(*input.pair, options, local, &cut[1]);
    // Pair truncation needs to know which side is longer: a cut side no
    // longer than the whole other one is encoded from a longer prefix (or
    // whole). Both cut (two texts over 64 KiB, each far over max_length): the
    // prefixes decide, the one case the tie-break may differ from HF's.
    for (int s = 0; s < 2; ++s) {
      const int other = 1 - s;
      if (cut[s] && !cut[other] && seq[s].size() <= seq[other].size()) {
        EncodeStats again;
        seq[s] = tokenize_bounded(s == 0 ? input.text : *input.pair, options, again, &cut[s],
                                  seq[other].size() + 1);
      }
    }
  }

  Encoding enc;
  const size_t specials = post_.added_tokens(is_pair);
  const size_t total = seq[0].size() + seq[1].size() + specials;
  if (options.truncate && options.max_length > 0 && total > options.max_length) {
    if (options.max_length < specials) {
      throw Error(Errc::invalid_argument, "max length " + std::to_string(options.max_length) +
                                              ": expected at least " + std::to_string(specials) +
                                              (is_pair ? ", the special tokens of a pair" : ", the special tokens"));
    }
    size_t to_remove = total - options.max_length;
    // Keeps n ids of a sequence: the first ones, or the last ones (left truncation).
    auto keep = [&](std::vector<int32_t>& ids, size_t n) {
      if (options.truncate_left)
        ids.erase(ids.begin(), ids.end() - static_cast<std::ptrdiff_t>(n));
      else
        ids.resize(n);
    };
    if (!is_pair) {
      keep(seq[0], seq[0].size() - to_remove);
    } else {
      // longest_first as Hugging Face's Rust tokenizers do it (what TEI and
      // sentence-transformers' CrossEncoder run): the longer side is cut to
      // what the shorter leaves, down to the shorter's length; if both must
      // still lose tokens each keeps half the budget and an odd token goes to
      // the longer side, to the second on a tie. (transformers' slow
      // tokenizers, token by token, give it to the first.)
      const size_t budget = options.max_length - specials;
      const bool swap = seq[0].size() > seq[1].size();
      size_t n1 = std::min(seq[0].size(), seq[1].size());  // the shorter
      size_t n2 = n1 > budget ? n1 : std::max(n1, budget - n1);
      if (n1 + n2 > budget) {
        n1 = budget / 2;
        n2 = n1 + budget % 2;
      }
      keep(seq[0], std::min(seq[0].size(), swap ? n2 : n1));
      keep(seq[1], std::min(seq[1].size(), swap ? n1 : n2));
    }
    enc.truncated = true;
    ++local.truncated;
  }
  if ((cut[0] || cut[1]) && !enc.truncated) {  // capped without truncation: still fewer ids than the text's
    enc.truncated = true;
    ++local.truncated;
  }
  const auto& tmpl = is_pair ? post_.pair : post_.single;
  enc.ids.reserve(seq[0].size() + seq[1].size() + specials);
  for (const TemplatePiece& p : tmpl) {
    const std::vector<int32_t>& ids = p.is_sequence ? seq[p.sequence] : p.ids;
    enc.ids.insert(enc.ids.end(), ids.begin(), ids.end());
    enc.type_ids.insert(enc.type_ids.end(), ids.size(), p.type_id);
  }
  if (stats) stats->add(local);
  return enc;
}

Encoding Tokenizer::with_special_tokens(std::span<const int32_t> ids) const {
  Encoding enc;
  enc.ids.reserve(ids.size() + post_.added_tokens(false));
  for (const TemplatePiece& p : post_.single) {
    const std::span<const int32_t> part = p.is_sequence ? ids : std::span<const int32_t>(p.ids);
    enc.ids.insert(enc.ids.end(), part.begin(), part.end());
    enc.type_ids.insert(enc.type_ids.end(), part.size(), p.type_id);
  }
  return enc;
}

std::vector<Encoding> Tokenizer::encode_batch(std::span<const TextInput> inputs, const EncodeOptions& options,
                                              ThreadPool* pool, EncodeStats* stats) const {
  std::vector<Encoding> out(inputs.size());
  std::mutex mu;
  auto work = [&](size_t begin, size_t end) {
    EncodeStats local;
    for (size_t i = begin; i < end; ++i) out[i] = encode(inputs[i], options, &local);
    std::lock_guard<std::mutex> lock(mu);
    if (stats) stats->add(local);
  };
  if (pool)
    pool->parallel_for(inputs.size(), work);
  else
    work(0, inputs.size());
  return out;
}

namespace {

bool is_cased(char32_t c) {
  const auto cat = utf8proc_category(static_cast<utf8proc_int32_t>(c));
  return cat == UTF8PROC_CATEGORY_LU || cat == UTF8PROC_CATEGORY_LL || cat == UTF8PROC_CATEGORY_LT;
}

bool is_case_ignorable(char32_t c) {
  if (c == '\'' || c == '.' || c == ':' || c == '^' || c == '`' || c == 0xB7 || c == 0x2019) return true;
  const auto cat = utf8proc_category(static_cast<utf8proc_int32_t>(c));
  return cat == UTF8PROC_CATEGORY_MN || cat == UTF8PROC_CATEGORY_ME || cat == UTF8PROC_CATEGORY_CF ||
         cat == UTF8PROC_CATEGORY_LM || cat == UTF8PROC_CATEGORY_SK;
}

}  // namespace

std::string python_lower(std::string_view text) {
  std::vector<char32_t> cps;
  cps.reserve(text.size());
  for (size_t i = 0; i < text.size();) cps.push_back(utf8_decode(text, i));
  std::string out;
  out.reserve(text.size());
  for (size_t k = 0; k < cps.size(); ++k) {
    const char32_t c = cps[k];
    if (c == 0x3A3) {
      // Final_Sigma: preceded by a cased letter and not followed by one
      // (case-ignorable characters in between are skipped both ways).
      size_t b = k;
      bool before = false, after = false;
      while (b > 0) {
        --b;
        if (is_case_ignorable(cps[b])) continue;
        before = is_cased(cps[b]);
        break;
      }
      for (size_t a = k + 1; a < cps.size(); ++a) {
        if (is_case_ignorable(cps[a])) continue;
        after = is_cased(cps[a]);
        break;
      }
      utf8_append(out, before && !after ? 0x3C2 : 0x3C3);
      continue;
    }
    char32_t lowered[3];
    const int n = unicode::to_lower_full(c, lowered);
    for (int j = 0; j < n; ++j) utf8_append(out, lowered[j]);
  }
  return out;
}

}  // namespace stoke
