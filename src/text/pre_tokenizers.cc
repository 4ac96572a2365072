#include "text/pre_tokenizers.h"

#include "core/utf8.h"
#include "text/byte_level.h"
#include "text/qwen2_split.h"
#include "text/unicode_props.h"

namespace stoke {

namespace {

void whitespace_split(const PreToken& in, std::vector<PreToken>& out) {
  const std::string_view t = in.text;
  size_t i = 0, word = std::string_view::npos;
  while (i < t.size()) {
    size_t next = i;
    const bool space = unicode::is_white_space(utf8_decode(t, next));
    if (space && word != std::string_view::npos) {
      out.push_back({std::string(t.substr(word, i - word)), in.at_input_start && word == 0});
      word = std::string_view::npos;
    } else if (!space && word == std::string_view::npos) {
      word = i;
    }
    i = next;
  }
  if (word != std::string_view::npos) out.push_back({std::string(t.substr(word)), in.at_input_start && word == 0});
}

void metaspace(const PreTokenizerStep& s, const PreToken& in, std::vector<PreToken>& out) {
  if (in.text.empty()) return;
  std::string t;
  t.reserve(in.text.size() + s.replacement.size());
  for (char c : in.text) {
    if (c == ' ')
      t += s.replacement;
    else
      t.push_back(c);
  }
  const bool starts = t.compare(0, s.replacement.size(), s.replacement) == 0;
  if (!starts && (s.prepend == PrependScheme::always || (s.prepend == PrependScheme::first && in.at_input_start)))
    t.insert(0, s.replacement);
  if (!s.split) {
    if (!t.empty()) out.push_back({std::move(t), in.at_input_start});
    return;
  }
  // Split before every replacement character (it starts the next word).
  size_t begin = 0;
  while (begin < t.size()) {
    size_t hit = t.find(s.replacement, begin + (t.compare(begin, s.replacement.size(), s.replacement) == 0
                                                    ? s.replacement.size()
                                                    : 0));
    if (hit == std::string::npos) hit = t.size();
    out.push_back({t.substr(begin, hit - begin), in.at_input_start && begin == 0});
    begin = hit;
  }
}

void byte_level(const PreTokenizerStep& s, const PreToken& in, std::vector<PreToken>& out) {
  std::string t = in.text;
  if (s.add_prefix_space && (t.empty() || t[0] != ' ')) t.insert(0, " ");
  if (t.empty()) return;
  if (!s.use_regex) {
    out.push_back({byte_level_encode(t), in.at_input_start});
    return;
  }
  std::vector<std::string_view> pieces;
  gpt2_split(t, pieces);
  bool first = true;
  for (std::string_view p : pieces) {
    out.push_back({byte_level_encode(p), in.at_input_start && first});
    first = false;
  }
}

// Split(Qwen2's regex, "Isolated"): every match its own word, bytes unchanged
// (the ByteLevel step after it maps them).
void split_qwen2(const PreToken& in, std::vector<PreToken>& out) {
  std::vector<std::string_view> pieces;
  qwen2_split(in.text, pieces);
  bool first = true;
  for (std::string_view p : pieces) {
    out.push_back({std::string(p), in.at_input_start && first});
    first = false;
  }
}

}  // namespace

void PreTokenizer::for_each_word(std::string_view text, bool at_input_start,
                                 const std::function<void(std::string_view)>& f) const {
  if (steps_.size() == 1 && steps_[0].kind == PreTokenizerStep::Kind::byte_level && steps_[0].use_regex) {
    std::string prefixed;
    if (steps_[0].add_prefix_space && (text.empty() || text[0] != ' ')) {
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
  std::vector<PreToken> current{{std::string(text), at_input_start}}, next;
  for (const PreTokenizerStep& s : steps_) {
    next.clear();
    for (const PreToken& p : current) {
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
    if (!p.text.empty()) out.push_back(std::move(p));
}

}  // namespace stoke
