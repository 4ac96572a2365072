// Validation of a serialized SentencePiece model before libsentencepiece sees
// it. The library trusts its input in places: an empty piece makes its trie
// builder throw through a noexcept frame (terminate), and a corrupt
// normalization table is walked without bounds checks. Model files come from
// the internet, so stoke checks the protobuf structure, every piece, and the
// double-array trie of the normalization rules first, and refuses with a
// clear error what the library would crash on.
#pragma once

#include <string>
#include <string_view>

namespace stoke {

// Throws Error(format) naming `label` and the problem.
void check_sentencepiece_model(std::string_view serialized, const std::string& label);
// The normalizer's precompiled_charsmap of a checked model ("" when none).
std::string sentencepiece_charsmap(std::string_view serialized, const std::string& label);

}  // namespace stoke
