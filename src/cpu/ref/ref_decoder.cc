// The decoder ops (Qwen2, Qwen3): residual_rmsnorm, head_rmsnorm and
// grouped-query attention_gqa, one row / (sequence, head, query) at a time in
// double. The residual sum is stored into h first and normalised from h's
// stored values, as the model computes (the norm reads the rounded residual).
#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/decoder_checks.h"
#include "cpu/ref/ref_ops.h"

namespace stoke::cpu::ref {

namespace {

// x[0:n) *= 1 / sqrt(mean(x^2) + eps) * gamma.
void rmsnorm_row(double* x, int64_t n, const TensorView& gamma, float eps) {
  double ss = 0.0;
  for (int64_t i = 0; i < n; ++i) ss += x[i] * x[i];
  const double r = 1.0 / std::sqrt(ss / static_cast<double>(n) + static_cast<double>(eps));
  for (int64_t i = 0; i < n; ++i) x[i] = x[i] * r * load(gamma, i);
}

}  // namespace

void residual_rmsnorm(const TensorView& h, const TensorView& out, const TensorView& x, const TensorView& gamma,
                      float eps) {
  const auto [T, H] = check_residual_rmsnorm(h, out, x, gamma, eps);
  std::vector<double> row(static_cast<size_t>(H));
  for (int64_t t = 0; t < T; ++t) {
    if (!x.empty())
      for (int64_t i = 0; i < H; ++i) store(h, t * H + i, load(h, t * H + i) + load(x, t * H + i));
    for (int64_t i = 0; i < H; ++i) row[static_cast<size_t>(i)] = load(h, t * H + i);
    rmsnorm_row(row.data(), H, gamma, eps);
    for (int64_t i = 0; i < H; ++i) store(out, t * H + i, row[static_cast<size_t>(i)]);
  }
}

void head_rmsnorm(const TensorView& qkv, const TensorView& q_gamma, const TensorView& k_gamma, int heads,
                  int kv_heads, float eps) {
  const GqaShape s = check_head_rmsnorm(qkv, q_gamma, k_gamma, heads, kv_heads, eps);
  const int64_t C = qkv.dim(1);
  std::vector<double> v(static_cast<size_t>(s.d));
  for (int64_t t = 0; t < s.T; ++t)
    for (int64_t h = 0; h < s.heads + s.kv_heads; ++h) {  // q heads, then k heads: contiguous
      const int64_t at = t * C + h * s.d;
      for (int64_t c = 0; c < s.d; ++c) v[static_cast<size_t>(c)] = load(qkv, at + c);
      rmsnorm_row(v.data(), s.d, h < s.heads ? q_gamma : k_gamma, eps);
      for (int64_t c = 0; c < s.d; ++c) store(qkv, at + c, v[static_cast<size_t>(c)]);
    }
}

void attention_gqa(const TensorView& out, const TensorView& qkv, const TensorView& cu_seqlens, int heads,
                   int kv_heads, bool causal, int max_seqlen) {
  const GqaShape s = check_attention_gqa(out, qkv, cu_seqlens, heads, kv_heads, max_seqlen);
  const int64_t C = qkv.dim(1), d = s.d, group = s.heads / s.kv_heads;
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  std::vector<double> p;
  for (int64_t b = 0; b < s.B; ++b) {
    const int64_t first = index_at(cu_seqlens, b), len = index_at(cu_seqlens, b + 1) - first;
    for (int64_t h = 0; h < s.heads; ++h) {
      const int64_t g = h / group;
      const int64_t qc = h * d, kc = (s.heads + g) * d, vc = (s.heads + s.kv_heads + g) * d;
      for (int64_t i = 0; i < len; ++i) {
        const int64_t keys = causal ? i + 1 : len;
        p.assign(static_cast<size_t>(keys), 0.0);
        double mx = -INFINITY;
        for (int64_t j = 0; j < keys; ++j) {
          double dot = 0.0;
          for (int64_t c = 0; c < d; ++c) dot += load(qkv, (first + i) * C + qc + c) * load(qkv, (first + j) * C + kc + c);
          p[static_cast<size_t>(j)] = dot * scale;
          mx = std::max(mx, dot * scale);
        }
        double sum = 0.0;
        for (double& e : p) sum += (e = std::exp(e - mx));
        for (int64_t c = 0; c < d; ++c) {
          double o = 0.0;
          for (int64_t j = 0; j < keys; ++j) o += p[static_cast<size_t>(j)] * load(qkv, (first + j) * C + vc + c);
          store(out, (first + i) * s.heads * d + h * d + c, o / sum);
        }
      }
    }
  }
}

}  // namespace stoke::cpu::ref
