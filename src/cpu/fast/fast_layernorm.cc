// embed_layernorm and residual_layernorm: one token per iteration, threads
// over tokens. The row's inputs are summed into a double scratch row (so out
// may alias x or residual), normalised there with two-pass statistics, and
// narrowed into out: fast_layernorm_row.h says why in double.
#include <cmath>
#include <vector>

#include "cpu/fast/fast_common.h"
#include "cpu/fast/fast_layernorm_row.h"
#include "cpu/fast/fast_ops.h"
#include "backend/op_checks.h"

namespace stoke::cpu::fast {

namespace {

template <class T>
STOKE_CPU_CLONES void residual_row(const T* x, const T* res, T* out, double* row, int64_t H, const float* gamma,
                                   const float* beta, float eps) {
  residual_row_wide(row, x, res, H);  // no residual: x already holds the sum
  layernorm_row(row, out, H, gamma, beta, eps, nullptr, nullptr);
}

template <class T>
STOKE_CPU_CLONES void embedding_row(T* out, double* row, int64_t t, int64_t H, const int32_t* id, const int32_t* ps,
                                    const int32_t* ty, const TensorView& word, const TensorView& pos,
                                    const TensorView& type, const float* gamma, const float* beta, float eps) {
  embedding_row_wide(row, t, H, id, ps, ty, word, pos, type);
  layernorm_row(row, out, H, gamma, beta, eps, nullptr, nullptr);
}

template <class T>
void residual_layernorm_t(const TensorView& out, const TensorView& x, const TensorView& residual,
                          const std::vector<float>& gamma, const std::vector<float>& beta, float eps, int64_t rows,
                          int64_t H) {
  const T* xp = x.as<const T>();
  const T* rp = residual.empty() ? nullptr : residual.as<const T>();
  T* op = out.as<T>();
#pragma omp parallel if (rows * H >= kParallelMinElements)
  {
    std::vector<double> row(static_cast<size_t>(H));
#pragma omp for schedule(static)
    for (int64_t t = 0; t < rows; ++t)
      residual_row(xp + t * H, rp ? rp + t * H : nullptr, op + t * H, row.data(), H, gamma.data(), beta.data(), eps);
  }
}

template <class T>
void embed_layernorm_t(const TensorView& out, const TensorView& ids, const TensorView& positions,
                       const TensorView& type_ids, const TensorView& word, const TensorView& pos,
                       const TensorView& type, const std::vector<float>& gamma, const std::vector<float>& beta,
                       float eps, int64_t rows, int64_t H) {
  const int32_t* id = ids.as<const int32_t>();
  const int32_t* ps = positions.as<const int32_t>();
  const int32_t* ty = type_ids.empty() ? nullptr : type_ids.as<const int32_t>();
  T* op = out.as<T>();
#pragma omp parallel if (rows * H >= kParallelMinElements)
  {
    std::vector<double> row(static_cast<size_t>(H));
#pragma omp for schedule(static)
    for (int64_t t = 0; t < rows; ++t)
      embedding_row(op + t * H, row.data(), t, H, id, ps, ty, word, pos, type, gamma.data(), beta.data(), eps);
  }
}

}  // namespace

void embed_layernorm(const TensorView& out, const TensorView& ids, const TensorView& positions,
                     const TensorView& type_ids, const TensorView& word, const TensorView& pos, const TensorView& type,
                     const TensorView& gamma, const TensorView& beta, float eps, const TensorView& out_low) {
  const auto shape = check_embed_layernorm(out, ids, positions, type_ids, word, pos, type, gamma, beta, eps);
  check_layernorm_copy("embed_layernorm", out, out_low, {&word, &pos, &type, &gamma, &beta});
  if (shape.T == 0 || shape.H == 0) return;
  const std::vector<float> g = widen_vector(gamma), b = widen_vector(beta);
  with_act_type(out.dtype, [&](auto tag) {
    embed_layernorm_t<decltype(tag)>(out, ids, positions, type_ids, word, pos, type, g, b, eps, shape.T, shape.H);
  });
  // The second copy: a separate pass here (the CPU gains nothing from fusing
  // it; a GPU does), exactly the convert the caller would have run.
  if (!out_low.empty()) convert_n(out.data, out.dtype, out_low.data, out_low.dtype, shape.T * shape.H);
}

void residual_layernorm(const TensorView& out, const TensorView& x, const TensorView& residual, const TensorView& gamma,
                        const TensorView& beta, float eps, const TensorView& out_low) {
  const auto shape = check_residual_layernorm(out, x, residual, gamma, beta, eps);
  check_layernorm_copy("residual_layernorm", out, out_low, {&x, &residual, &gamma, &beta});
  if (shape.T == 0 || shape.H == 0) return;
  const std::vector<float> g = widen_vector(gamma), b = widen_vector(beta);
  with_act_type(out.dtype,
                [&](auto tag) { residual_layernorm_t<decltype(tag)>(out, x, residual, g, b, eps, shape.T, shape.H); });
  if (!out_low.empty()) convert_n(out.data, out.dtype, out_low.data, out_low.dtype, shape.T * shape.H);
}

}  // namespace stoke::cpu::fast
