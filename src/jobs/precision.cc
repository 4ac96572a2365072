#include "jobs/precision.h"

#include "jobs/option_table.h"

namespace stoke {

const std::vector<std::pair<std::string, Precision>>& precision_words() {
  static const std::vector<std::pair<std::string, Precision>> words = {
      {"f32", Precision::f32}, {"bf16", Precision::bf16}, {"f16", Precision::f16}, {"int8", Precision::int8}};
  return words;
}

const std::string& precision_name(Precision p) {
  for (const auto& [word, value] : precision_words())
    if (value == p) return word;
  throw Error(Errc::internal, "precision_name: a Precision without a word");
}

Precision parse_precision(const std::string& flag, const std::string& text) {
  static const std::vector<std::string> choices = [] {
    std::vector<std::string> c;
    for (const auto& [word, value] : precision_words()) c.push_back(word);
    return c;
  }();
  const std::string& word = parse_word_option(flag, text, choices);  // the one refusal line of every word option
  for (const auto& [w, value] : precision_words())
    if (w == word) return value;
  return Precision::f32;  // not reached: parse_word_option returned one of the words
}

DType precision_dtype(Precision p) {
  switch (p) {
    case Precision::bf16: return DType::bf16;
    case Precision::f16: return DType::f16;
    case Precision::f32:
    case Precision::int8: return DType::f32;
  }
  return DType::f32;
}

}  // namespace stoke
