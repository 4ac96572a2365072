// The pre-tokenizer steps, each written once over either kind of text
// (text_edits.h): a plain word for the encode path, an aligned word for the
// offsets path, where each step changes the alignment as Hugging Face's
// pre-tokenizer changes its NormalizedString (splits keep their bytes'
// alignment; Metaspace replaces and prepends; ByteLevel maps every byte of a
// character to a character aligned to the whole character).
#include "text/pre_tokenizers.h"

#include "core/utf8.h"
#include "text/byte_level.h"
#include "text/qwen2_split.h"
#include "text/text_edits.h"
#include "text/unicode_props.h"

namespace stoke {

namespace {

// Word: PreToken (plain) or AlignedWord; both hold `text` and `at_input_start`.
template <class Word>
void whitespace_split(const Word& in, std::vector<Word>& out) {
  const std::string_view t = bytes_of(in.text);
  size_t i = 0, word = std::string_view::npos;
  while (i < t.size()) {
    size_t next = i;
    const bool space = unicode::is_white_space(utf8_decode(t, next));
    if (space && word != std::string_view::npos) {
      out.push_back({slice(in.text, word, i), in.at_input_start && word == 0});
      word = std::string_view::npos;
    } else if (!space && word == std::string_view::npos) {
      word = i;
    }
    i = next;
  }
  if (word != std::string_view::npos) out.push_back({slice(in.text, word, t.size()), in.at_input_start && word == 0});
}

template <class Word>
void metaspace(const PreTokenizerStep& s, const Word& in, std::vector<Word>& out) {
  if (bytes_of(in.text).empty()) return;
  const std::string& r = s.replacement;
  auto t = in.text;
  replace_all(t, " ", r);
  if (!bytes_of(t).starts_with(r) &&
      (s.prepend == PrependScheme::always || (s.prepend == PrependScheme::first && in.at_input_start)))
    prepend(t, r);
  if (!s.split) {
    out.push_back({std::move(t), in.at_input_start});
    return;
  }
  // Split before every replacement character (it starts the next word).
  const std::string_view b = bytes_of(t);
  size_t begin = 0;
  while (begin < b.size()) {
    size_t hit = b.find(r, begin + (b.compare(begin, r.size(), r) == 0 ? r.size() : 0));
    if (hit == std::string_view::npos) hit = b.size();
    out.push_back({slice(t, begin, hit), in.at_input_start && begin == 0});
    begin = hit;
  }
}

// Bytes [begin, end) of t, every byte as its GPT-2 character.
std::string byte_level_slice(const std::string& t, size_t begin, size_t end) {
  return byte_level_encode(std::string_view(t).substr(begin, end - begin));
}
// Aligned: the first byte of each character replaces the character, the
// others are inserted after it.
AlignedText byte_level_slice(const AlignedText& t, size_t begin, size_t end) {
  std::vector<CharChange> dest;
  dest.reserve(end - begin);
  for (size_t k = begin; k < end; ++k) {
    const auto b = static_cast<unsigned char>(t.text[k]);
    const std::string& ch = byte_level_char(b);
    size_t at = 0;
    dest.push_back({utf8_decode(ch, at), (b & 0xC0) == 0x80 ? 1 : 0});
  }
  AlignedText out = t.slice(begin, end);
  out.transform(dest);
  return out;
}

template <class Word>
void byte_level(const PreTokenizerStep& s, const Word& in, std::vector<Word>& out) {
  // An empty text stays empty, add_prefix_space or not (HF's prepend adds
  // nothing to an empty NormalizedString).
  if (bytes_of(in.text).empty()) return;
  auto t = in.text;
  if (s.add_prefix_space && bytes_of(t)[0] != ' ') prepend(t, " ");
  const std::string_view b = bytes_of(t);
  if (!s.use_regex) {
    out.push_back({byte_level_slice(t, 0, b.size()), in.at_input_start});
    return;
  }
  std::vector<std::string_view> pieces;
  gpt2_split(b, pieces);
  bool first = true;
  for (std::string_view p : pieces) {
    const auto begin = static_cast<size_t>(p.data() - b.data());
    out.push_back({byte_level_slice(t, begin, begin + p.size()), in.at_input_start && first});
    first = false;
  }
}

// Split(Qwen2's regex, "Isolated"): every match its own word, bytes unchanged
// (the ByteLevel step after it maps them).
template <class Word>
void split_qwen2(const Word& in, std::vector<Word>& out) {
  const std::string_view b = bytes_of(in.text);
  std::vector<std::string_view> pieces;
  qwen2_split(b, pieces);
  bool first = true;
  for (std::string_view p : pieces) {
    const auto begin = static_cast<size_t>(p.data() - b.data());
    out.push_back({slice(in.text, begin, begin + p.size()), in.at_input_start && first});
    first = false;
  }
}

// Every step over every word of the one before; the non-empty words to `out`.
template <class Word>
void run_steps(const std::vector<PreTokenizerStep>& steps, Word whole, std::vector<Word>& out) {
  std::vector<Word> current, next;
  current.push_back(std::move(whole));
  for (const PreTokenizerStep& s : steps) {
    next.clear();
    for (const Word& p : current) {
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
    if (!bytes_of(p.text).empty()) out.push_back(std::move(p));
}

}  // namespace

void PreTokenizer::for_each_word(std::string_view text, bool at_input_start,
                                 const std::function<void(std::string_view)>& f) const {
  if (steps_.size() == 1 && steps_[0].kind == PreTokenizerStep::Kind::byte_level && steps_[0].use_regex) {
    // byte_level() above, without a string per word.
    if (text.empty()) return;
    std::string prefixed;
    if (steps_[0].add_prefix_space && text[0] != ' ') {
      prefixed.reserve(text.size() + 1);
      prefixed.push_back(' ');
      prefixed.append(text);
      text = prefixed;
    }
    std::vector<std::string_view> pieces;
    gpt2_split(text, pieces);
    std::string word;
    for (std::string_view p : pieces) {
      word.clear();
      for (char c : p) word += byte_level_char(static_cast<unsigned char>(c));
      f(word);
    }
    return;
  }
  std::vector<PreToken> words;
  split(text, at_input_start, words);
  for (const PreToken& w : words) f(w.text);
}

void PreTokenizer::split(std::string_view text, bool at_input_start, std::vector<PreToken>& out) const {
  run_steps(steps_, PreToken{std::string(text), at_input_start}, out);
}

void PreTokenizer::split_aligned(const AlignedText& text, bool at_input_start, std::vector<AlignedWord>& out) const {
  run_steps(steps_, AlignedWord{text, at_input_start}, out);
}

}  // namespace stoke
