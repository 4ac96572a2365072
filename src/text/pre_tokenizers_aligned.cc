// PreTokenizer::split_aligned: the pre-tokenizer steps on aligned text, each
// as Hugging Face's pre-tokenizer changes its NormalizedString (splits keep
// their bytes' alignment; Metaspace replaces and prepends, ByteLevel maps
// every byte of a character to a character aligned to the whole character).
#include "core/utf8.h"
#include "text/byte_level.h"
#include "text/pre_tokenizers.h"
#include "text/qwen2_split.h"
#include "text/unicode_props.h"

namespace stoke {

namespace {

void whitespace_split(const AlignedWord& in, std::vector<AlignedWord>& out) {
  const std::string_view t = in.text.text;
  size_t i = 0, word = std::string_view::npos;
  while (i < t.size()) {
    size_t next = i;
    const bool space = unicode::is_white_space(utf8_decode(t, next));
    if (space && word != std::string_view::npos) {
      out.push_back({in.text.slice(word, i), in.at_input_start && word == 0});
      word = std::string_view::npos;
    } else if (!space && word == std::string_view::npos) {
      word = i;
    }
    i = next;
  }
  if (word != std::string_view::npos) out.push_back({in.text.slice(word, t.size()), in.at_input_start && word == 0});
}

void metaspace(const PreTokenizerStep& s, const AlignedWord& in, std::vector<AlignedWord>& out) {
  if (in.text.text.empty()) return;
  AlignedText t = in.text;
  t.replace_all(" ", s.replacement);
  const bool starts = t.text.compare(0, s.replacement.size(), s.replacement) == 0;
  if (!starts && (s.prepend == PrependScheme::always || (s.prepend == PrependScheme::first && in.at_input_start)))
    t.prepend(s.replacement);
  if (!s.split) {
    out.push_back({std::move(t), in.at_input_start});
    return;
  }
  size_t begin = 0;
  const std::string& r = s.replacement;
  while (begin < t.text.size()) {
    size_t hit = t.text.find(r, begin + (t.text.compare(begin, r.size(), r) == 0 ? r.size() : 0));
    if (hit == std::string::npos) hit = t.text.size();
    out.push_back({t.slice(begin, hit), in.at_input_start && begin == 0});
    begin = hit;
  }
}

// Every byte of each character becomes its GPT-2 character: the first
// replaces the character, the others are inserted after it.
AlignedText byte_level_mapped(const AlignedText& piece) {
  std::vector<CharChange> dest;
  dest.reserve(piece.text.size());
  for (size_t k = 0; k < piece.text.size(); ++k) {
    const auto b = static_cast<unsigned char>(piece.text[k]);
    const std::string& ch = byte_level_char(b);
    size_t at = 0;
    dest.push_back({utf8_decode(ch, at), (b & 0xC0) == 0x80 ? 1 : 0});
  }
  AlignedText out = piece;
  out.transform(dest);
  return out;
}

void byte_level(const PreTokenizerStep& s, const AlignedWord& in, std::vector<AlignedWord>& out) {
  AlignedText t = in.text;
  if (t.text.empty()) return;
  if (s.add_prefix_space && t.text[0] != ' ') t.prepend(" ");
  if (!s.use_regex) {
    out.push_back({byte_level_mapped(t), in.at_input_start});
    return;
  }
  std::vector<std::string_view> pieces;
  gpt2_split(t.text, pieces);
  bool first = true;
  for (std::string_view p : pieces) {
    const auto begin = static_cast<size_t>(p.data() - t.text.data());
    out.push_back({byte_level_mapped(t.slice(begin, begin + p.size())), in.at_input_start && first});
    first = false;
  }
}

void split_qwen2(const AlignedWord& in, std::vector<AlignedWord>& out) {
  std::vector<std::string_view> pieces;
  qwen2_split(in.text.text, pieces);
  bool first = true;
  for (std::string_view p : pieces) {
    const auto begin = static_cast<size_t>(p.data() - in.text.text.data());
    out.push_back({in.text.slice(begin, begin + p.size()), in.at_input_start && first});
    first = false;
  }
}

}  // namespace

void PreTokenizer::split_aligned(const AlignedText& text, bool at_input_start, std::vector<AlignedWord>& out) const {
  std::vector<AlignedWord> current{{text, at_input_start}}, next;
  for (const PreTokenizerStep& s : steps_) {
    next.clear();
    for (const AlignedWord& p : current) {
      switch (s.kind) {
        case PreTokenizerStep::Kind::whitespace_split:
          whitespace_split(p, next);
          break;
        case PreTokenizerStep::Kind::metaspace:
          metaspace(s, p, next);
          break;
        case PreTokenizerStep::Kind::byte_level:
          byte_level(s, p, next);
          break;
        case PreTokenizerStep::Kind::split_qwen2:
          split_qwen2(p, next);
          break;
      }
    }
    current.swap(next);
  }
  for (auto& p : current)
    if (!p.text.text.empty()) out.push_back(std::move(p));
}

}  // namespace stoke
