// Unicode normalization as a list of new characters with their changes
// (aligned_text.h), for AlignedText::transform on the offsets path of the
// NFC/NFD/NFKC/NFKD normalizers (normalizers.cc).
#pragma once

#include <string_view>
#include <vector>

#include "text/aligned_text.h"

namespace stoke {

// NFD/NFKD (compose false) or NFC/NFKC as the unicode-normalization-alignments
// crate HF uses yields it: a character's decomposition is its first character
// (change 0) and the rest inserted (1); canonical reordering carries the
// changes; a composition adds the absorbed character's change, minus one.
std::vector<CharChange> unicode_changes(std::string_view text, bool compose, bool compat);

}  // namespace stoke
