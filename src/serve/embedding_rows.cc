#include "serve/embedding_rows.h"

#include <cmath>

#include "serve/api_error.h"

namespace stoke::serve {

int64_t checked_dimensions(std::optional<int64_t> dimensions, int64_t width, const std::string& field) {
  if (!dimensions) return width;
  if (*dimensions < 1 || *dimensions > width)
    throw validation_error(field + " " + std::to_string(*dimensions) + ": expected 1 to the model's " +
                               std::to_string(width) + " dimensions",
                           field);
  return *dimensions;
}

void shape_row(const float* row, int64_t dims, bool normalize, std::vector<float>& out) {
  out.assign(row, row + dims);
  if (!normalize) return;
  double sum = 0;
  for (float v : out) sum += static_cast<double>(v) * v;
  if (sum <= 0) return;
  const double inv = 1.0 / std::sqrt(sum);
  for (float& v : out) v = static_cast<float>(v * inv);
}

}  // namespace stoke::serve
