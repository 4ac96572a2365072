// residual_rmsnorm and head_rmsnorm (the decoders' RMSNorm): threads over
// tokens; a row is added into h first, read back as stored (the rounding the
// model's residual stream has), normalised in a float scratch row and
// narrowed into out.
#include <cmath>
#include <vector>

#include "cpu/fast/fast_common.h"
#include "cpu/fast/fast_ops.h"
#include "backend/decoder_checks.h"

namespace stoke::cpu::fast {

namespace {

// x[0:n) (float) normalised and scaled into out.
template <class T>
STOKE_CPU_CLONES void rms_row(const float* x, T* out, int64_t n, const float* gamma, float eps) {
  float ss = 0.0f;
#pragma omp simd reduction(+ : ss)
  for (int64_t i = 0; i < n; ++i) ss += x[i] * x[i];
  const float r = 1.0f / std::sqrt(ss / static_cast<float>(n) + eps);
  for (int64_t i = 0; i < n; ++i) out[i] = narrow_one<T>(x[i] * r * gamma[i]);
}

// A row of any activation dtype (the switch once per row).
void widen_row(const TensorView& t, int64_t offset, int64_t n, float* dst) {
  switch (t.dtype) {
    case DType::f32: widen(t.as<const float>() + offset, dst, n); return;
    case DType::bf16: widen(t.as<const bf16>() + offset, dst, n); return;
    case DType::f16: widen(t.as<const f16>() + offset, dst, n); return;
    default: throw Error(Errc::internal, "fast kernels: not a float tensor");
  }
}
void narrow_row(const float* src, const TensorView& t, int64_t offset, int64_t n) {
  switch (t.dtype) {
    case DType::f32: narrow(src, t.as<float>() + offset, n); return;
    case DType::bf16: narrow(src, t.as<bf16>() + offset, n); return;
    case DType::f16: narrow(src, t.as<f16>() + offset, n); return;
    default: throw Error(Errc::internal, "fast kernels: not a float tensor");
  }
}

}  // namespace

void residual_rmsnorm(const TensorView& h, const TensorView& out, const TensorView& x, const TensorView& gamma,
                      float eps) {
  const RowsShape shape = check_residual_rmsnorm(h, out, x, gamma, eps);
  const int64_t T = shape.T, H = shape.H;  // (no structured bindings: the lambda and OpenMP capture them)
  if (T == 0 || H == 0) return;
  const std::vector<float> g = widen_vector(gamma);
  with_act_type(out.dtype, [&](auto tag) {
    using O = decltype(tag);
    O* op = out.as<O>();
#pragma omp parallel if (T * H >= kParallelMinElements)
    {
      std::vector<float> row(static_cast<size_t>(H)), add(static_cast<size_t>(H));
#pragma omp for schedule(static)
      for (int64_t t = 0; t < T; ++t) {
        widen_row(h, t * H, H, row.data());
        if (!x.empty()) {
          widen_row(x, t * H, H, add.data());
          for (int64_t i = 0; i < H; ++i) row[static_cast<size_t>(i)] += add[static_cast<size_t>(i)];
          narrow_row(row.data(), h, t * H, H);
          widen_row(h, t * H, H, row.data());  // as stored: h's dtype may round
        }
        rms_row(row.data(), op + t * H, H, g.data(), eps);
      }
    }
  });
}

void head_rmsnorm(const TensorView& qkv, const TensorView& q_gamma, const TensorView& k_gamma, int heads,
                  int kv_heads, float eps) {
  const GqaShape s = check_head_rmsnorm(qkv, q_gamma, k_gamma, heads, kv_heads, eps);
  if (s.T == 0 || s.d == 0) return;
  const std::vector<float> qg = widen_vector(q_gamma), kg = widen_vector(k_gamma);
  const int64_t C = qkv.dim(1), normed = s.heads + s.kv_heads;  // q heads, then k heads: contiguous
  with_act_type(qkv.dtype, [&](auto tag) {
    using T = decltype(tag);
    T* p = qkv.as<T>();
#pragma omp parallel if (s.T * normed * s.d >= kParallelMinElements)
    {
      std::vector<float> row(static_cast<size_t>(s.d));
#pragma omp for schedule(static)
      for (int64_t t = 0; t < s.T; ++t)
        for (int64_t h = 0; h < normed; ++h) {
          T* head = p + t * C + h * s.d;
          widen(head, row.data(), s.d);
          rms_row(row.data(), head, s.d, h < s.heads ? qg.data() : kg.data(), eps);
        }
    }
  });
}

}  // namespace stoke::cpu::fast
