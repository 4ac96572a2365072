// What the embedding routes do to a pooled row after the batcher: keep the
// first `dimensions` values (Matryoshka), then L2-normalize when asked —
// TEI's order, and OpenAI's meaning of `dimensions` for normalized models.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace stoke::serve {

// The request's `dimensions`, checked against the model's width (422 naming
// the field); the width itself when absent.
int64_t checked_dimensions(std::optional<int64_t> dimensions, int64_t width, const std::string& field);

// row[0 .. dims), normalized to unit L2 length when `normalize` (a zero row stays zero).
void shape_row(const float* row, int64_t dims, bool normalize, std::vector<float>& out);

}  // namespace stoke::serve
