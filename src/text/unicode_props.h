// The character classes the BERT normalizer and pre-tokenizer need, defined as
// Hugging Face's BasicTokenizer defines them (transformers tokenization_bert.py),
// answered from utf8proc's Unicode tables with an ASCII fast path.
#pragma once

#include <cstdint>

namespace stoke::unicode {

// Dropped by clean_text: NUL, U+FFFD and "control" (categories C*, except \t \n \r).
bool is_bert_removed(char32_t c);
// Whitespace for splitting: \t \n \r, space, category Zs, and U+2028/U+2029 (which
// Python's str.split() also splits on).
bool is_bert_whitespace(char32_t c);
// Punctuation: ASCII 33-47, 58-64, 91-96, 123-126, and every category P*.
bool is_bert_punctuation(char32_t c);
// The CJK Unified Ideograph blocks BERT puts spaces around.
bool is_cjk_ideograph(char32_t c);
// Python's str.isspace() (used when stripping around special tokens).
bool is_python_space(char32_t c);
// Non-spacing mark (category Mn): removed by accent stripping.
bool is_nonspacing_mark(char32_t c);
// Any mark (Mn, Mc, Me): what tokenizer.json's StripAccents removes (HF's
// is_combining_mark), Devanagari's spacing vowel signs included.
bool is_mark(char32_t c);

// Unicode's White_Space property (Rust's char::is_whitespace, regex \s).
bool is_white_space(char32_t c);
// General category L* (regex \p{L}) and N* (regex \p{N}).
bool is_letter(char32_t c);
bool is_number(char32_t c);
// Regex \w as Rust's regex crate defines it (letters, marks, digits,
// connector punctuation, join controls): used by added tokens' single_word.
bool is_regex_word(char32_t c);

// Appends the lowercase of c (Unicode full mapping: U+0130 gives two code points).
// Returns the number of code points written to out (1 or 2).
int to_lower_full(char32_t c, char32_t out[3]);
// Canonical decomposition (NFD) of c into out; returns the count (max 4... 18).
int decompose_nfd(char32_t c, char32_t* out, int capacity);

}  // namespace stoke::unicode
