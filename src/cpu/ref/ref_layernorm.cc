// embed_layernorm and residual_layernorm: sum the inputs of a row in double,
// normalise it, store it. Rows are read whole before anything is written, so
// out may alias x or residual.
#include <vector>

#include "backend/op_checks.h"
#include "cpu/ref/ref_ops.h"

namespace stoke::cpu::ref {

void layernorm_row(double* x, int64_t H, const TensorView& gamma, const TensorView& beta, float eps) {
  if (H == 0) return;
  double mean = 0.0;
  for (int64_t i = 0; i < H; ++i) mean += x[i];
  mean /= static_cast<double>(H);
  double var = 0.0;
  for (int64_t i = 0; i < H; ++i) var += (x[i] - mean) * (x[i] - mean);
  var /= static_cast<double>(H);  // biased, as torch.nn.LayerNorm
  const double rstd = 1.0 / std::sqrt(var + static_cast<double>(eps));
  for (int64_t i = 0; i < H; ++i) x[i] = (x[i] - mean) * rstd * load(gamma, i) + load(beta, i);
}

// Row t of out, and of out_low (when given) converted from out's stored
// values: exactly what convert(out_low, out) would write.
static void store_row(const TensorView& out, const TensorView& out_low, int64_t t, int64_t H,
                      const std::vector<double>& row) {
  for (int64_t i = 0; i < H; ++i) store(out, t * H + i, row[static_cast<size_t>(i)]);
  if (!out_low.empty())
    for (int64_t i = 0; i < H; ++i) store(out_low, t * H + i, load(out, t * H + i));
}

void embed_layernorm(const TensorView& out, const TensorView& ids, const TensorView& positions,
                     const TensorView& type_ids, const TensorView& word, const TensorView& pos, const TensorView& type,
                     const TensorView& gamma, const TensorView& beta, float eps, const TensorView& out_low) {
  const auto [T, H] = check_embed_layernorm(out, ids, positions, type_ids, word, pos, type, gamma, beta, eps);
  check_layernorm_copy("embed_layernorm", out, out_low, {&word, &pos, &type, &gamma, &beta});
  std::vector<double> row(static_cast<size_t>(H));
  for (int64_t t = 0; t < T; ++t) {
    const int64_t wi = index_at(ids, t), pi = index_at(positions, t);
    const int64_t ti = type_ids.empty() ? 0 : index_at(type_ids, t);
    for (int64_t i = 0; i < H; ++i) {
      double v = load(word, wi * H + i) + load(pos, pi * H + i);
      if (!type.empty()) v += load(type, ti * H + i);
      row[static_cast<size_t>(i)] = v;
    }
    layernorm_row(row.data(), H, gamma, beta, eps);
    store_row(out, out_low, t, H, row);
  }
}

void residual_layernorm(const TensorView& out, const TensorView& x, const TensorView& residual, const TensorView& gamma,
                        const TensorView& beta, float eps, const TensorView& out_low) {
  const auto [T, H] = check_residual_layernorm(out, x, residual, gamma, beta, eps);
  check_layernorm_copy("residual_layernorm", out, out_low, {&x, &residual, &gamma, &beta});
  std::vector<double> row(static_cast<size_t>(H));
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t i = 0; i < H; ++i)
      row[static_cast<size_t>(i)] = load(x, t * H + i) + (residual.empty() ? 0.0 : load(residual, t * H + i));
    layernorm_row(row.data(), H, gamma, beta, eps);
    store_row(out, out_low, t, H, row);
  }
}

}  // namespace stoke::cpu::ref
