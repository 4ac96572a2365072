// Attention with a relative-position bias (MPNet): forward, training forward
// and backward in f32, threads over heads (the forward over sequence x head).
// Plain loops rather than the tiled kernels of fast_attention.cc: MPNet is the
// one architecture with this bias, and these loops are what its models need
// today; the tiled kernels can take the bias when its speed matters. The
// arithmetic is ref_attention.cc's in f32, but for the forward's two
// sums over the keys: the softmax denominator is carried in double and P V
// in f32 over blocks of kKeyBlock keys, each block's sum added into a double
// row. A text with a run of one token gives a query hundreds of near-equal
// weights and values, and the roundings of a serial f32 sum over them line
// up instead of cancelling (1,500 keys: 200 u; tests/ops "activations of
// trained models"); blocked, the error is that of kKeyBlock keys. The
// forward's per-head work is cloned per ISA, its q·k sums vectorised.
#include <algorithm>
#include <cmath>
#include <vector>

#include "core/philox.h"
#include "cpu/fast/fast_backward_common.h"
#include "cpu/fast/fast_common.h"
#include "cpu/fast/fast_ops.h"
#include "backend/relpos_checks.h"

namespace stoke::cpu::fast {

namespace {

constexpr int64_t kKeyBlock = 16;  // keys summed in f32 before their block joins the double sum

float mask_at(const Ops::AttentionDropout& dropout, int64_t t, int64_t h, int64_t heads, int64_t j) {
  if (dropout.p == 0.0f) return 1.0f;
  const float scale = dropout.p < 1.0f ? 1.0f / (1.0f - dropout.p) : 0.0f;
  const uint64_t index = dropout.row_index(t, h, heads) + static_cast<uint64_t>(j);
  const float u = philox::element_uniform(dropout.seed, dropout.step.host_value(), dropout.tensor_id, index);
  return u >= dropout.p ? scale : 0.0f;
}

// One (sequence, head) of the forward: query rows [first, first + len) of
// the packed x, their outputs into o and log-sum-exps into l (may be null).
// p: len floats, acc: d floats, total: d doubles of scratch. Cloned per ISA
// (the loops over the head dim and the q·k sums vectorise); the OpenMP loop
// stays outside.
STOKE_CPU_CLONES void attend_head(const float* x, float* o, float* l, const float* r, int64_t first, int64_t len,
                                  int64_t h, int64_t nh, int64_t d, int64_t M, float scale,
                                  const Ops::AttentionDropout& dropout, float* p, float* acc, double* total) {
  const int64_t C = 3 * nh * d;
  const int64_t qc = h * d, kc = nh * d + h * d, vc = 2 * nh * d + h * d;
  for (int64_t i = 0; i < len; ++i) {
    const float* q = x + (first + i) * C + qc;
    float mx = -INFINITY;
    for (int64_t j = 0; j < len; ++j) {
      const float* k = x + (first + j) * C + kc;
      float s = 0.0f;
#pragma omp simd reduction(+ : s)
      for (int64_t c = 0; c < d; ++c) s += q[c] * k[c];
      p[j] = s * scale + r[(j - i + M - 1) * nh + h];
      mx = std::max(mx, p[j]);
    }
    double sum = 0.0;
    for (int64_t j = 0; j < len; ++j) {
      p[j] = std::exp(p[j] - mx);
      sum += p[j];
    }
    for (int64_t c = 0; c < d; ++c) total[c] = 0.0;
    for (int64_t j0 = 0; j0 < len; j0 += kKeyBlock) {
      for (int64_t c = 0; c < d; ++c) acc[c] = 0.0f;
      for (int64_t j = j0; j < std::min(len, j0 + kKeyBlock); ++j) {
        const float w = p[j] * mask_at(dropout, first + i, h, nh, j);
        const float* v = x + (first + j) * C + vc;
#pragma omp simd
        for (int64_t c = 0; c < d; ++c) acc[c] += w * v[c];
      }
#pragma omp simd
      for (int64_t c = 0; c < d; ++c) total[c] += acc[c];
    }
    float* oi = o + (first + i) * nh * d + h * d;
    for (int64_t c = 0; c < d; ++c) oi[c] = static_cast<float>(total[c] / sum);
    if (l) l[(first + i) * nh + h] = mx + static_cast<float>(std::log(sum));
  }
}

void forward(const TensorView& out, const TensorView& lse, const TensorView& qkv, const TensorView& cu, int64_t T,
             int64_t B, int64_t nh, int64_t d, int max_seqlen, const TensorView& rel,
             const Ops::AttentionDropout& dropout) {
  (void)T;
  thread_local std::vector<float> x_buf, o_buf;
  const float* x = f32_input(qkv, x_buf);
  float* o = f32_output(out, o_buf);
  const float* r = rel.as<const float>();
  const int32_t* cs = cu.as<const int32_t>();
  const int64_t M = max_seqlen;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  float* l = lse.empty() ? nullptr : lse.as<float>();
#pragma omp parallel for collapse(2) schedule(dynamic)
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < nh; ++h) {
      const int64_t first = cs[b], len = cs[b + 1] - first;
      std::vector<float> p(static_cast<size_t>(len)), acc(static_cast<size_t>(d));
      std::vector<double> total(static_cast<size_t>(d));
      attend_head(x, o, l, r, first, len, h, nh, d, M, scale, dropout, p.data(), acc.data(), total.data());
    }
  finish_output(out, o);
}

}  // namespace

void attention_relpos(const TensorView& out, const TensorView& qkv, const TensorView& cu_seqlens, int heads,
                      int max_seqlen, const TensorView& rel) {
  const auto [T, B, nh, d] = check_attention_relpos(out, qkv, cu_seqlens, heads, max_seqlen, rel);
  forward(out, TensorView{}, qkv, cu_seqlens, T, B, nh, d, max_seqlen, rel, Ops::AttentionDropout{});
}

void attention_relpos_train(const TensorView& out, const TensorView& lse, const TensorView& qkv,
                            const TensorView& cu_seqlens, int heads, int max_seqlen, const TensorView& rel,
                            const Ops::AttentionDropout& dropout) {
  const auto [T, B, nh, d] =
      check_attention_relpos_train(out, lse, qkv, cu_seqlens, heads, max_seqlen, rel, dropout);
  forward(out, lse, qkv, cu_seqlens, T, B, nh, d, max_seqlen, rel, dropout);
}

void attention_relpos_backward(const TensorView& dqkv, const TensorView& drel, const TensorView& dout,
                               const TensorView& qkv, const TensorView& out, const TensorView& lse,
                               const TensorView& cu_seqlens, int heads, int max_seqlen, const TensorView& rel,
                               const Ops::AttentionDropout& dropout) {
  const AttentionShape shape = check_attention_relpos_backward(dqkv, drel, dout, qkv, out, lse, cu_seqlens, heads,
                                                               max_seqlen, rel, dropout);
  // Plain variables, not a structured binding: the OpenMP region below uses
  // them, and clang (the fuzz build) cannot capture bindings there.
  const int64_t T = shape.T, B = shape.B, nh = shape.heads, d = shape.d;
  thread_local std::vector<float> x_buf, do_buf, o_buf, g_buf;
  const float* x = f32_input(qkv, x_buf);
  const float* go = f32_input(dout, do_buf);
  const float* ov = f32_input(out, o_buf);
  float* g = f32_output(dqkv, g_buf);
  const float* r = rel.as<const float>();
  const float* l = lse.as<const float>();
  float* gr = drel.as<float>();
  const int32_t* cs = cu_seqlens.as<const int32_t>();
  const int64_t C = 3 * nh * d, D = nh * d, M = max_seqlen;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  std::fill(g, g + T * C, 0.0f);
  std::fill(gr, gr + (2 * M - 1) * nh, 0.0f);
  // Each head owns its columns of dqkv and drel: threads over heads, every
  // sum in a fixed order (bitwise reproducible at any thread count).
#pragma omp parallel for schedule(dynamic)
  for (int64_t h = 0; h < nh; ++h) {
    const int64_t qc = h * d, kc = nh * d + h * d, vc = 2 * nh * d + h * d;
    std::vector<float> p, dp;
    for (int64_t b = 0; b < B; ++b) {
      const int64_t first = cs[b], len = cs[b + 1] - first;
      p.assign(static_cast<size_t>(len), 0.0f);
      dp.assign(static_cast<size_t>(len), 0.0f);
      for (int64_t i = 0; i < len; ++i) {
        const int64_t ti = first + i;
        const float* q = x + ti * C + qc;
        const float* gi = go + ti * D + h * d;
        float Di = 0.0f;
        for (int64_t c = 0; c < d; ++c) Di += gi[c] * ov[ti * D + h * d + c];
        for (int64_t j = 0; j < len; ++j) {
          const float* k = x + (first + j) * C + kc;
          const float* v = x + (first + j) * C + vc;
          float s = 0.0f, dpj = 0.0f;
          for (int64_t c = 0; c < d; ++c) {
            s += q[c] * k[c];
            dpj += gi[c] * v[c];
          }
          p[static_cast<size_t>(j)] = std::exp(s * scale + r[(j - i + M - 1) * nh + h] - l[ti * nh + h]);
          dp[static_cast<size_t>(j)] = dpj * mask_at(dropout, ti, h, nh, j);
        }
        for (int64_t j = 0; j < len; ++j) {
          const float pj = p[static_cast<size_t>(j)], pdj = pj * mask_at(dropout, ti, h, nh, j);
          const float ds = pj * (dp[static_cast<size_t>(j)] - Di);
          gr[(j - i + M - 1) * nh + h] += ds;
          const float* k = x + (first + j) * C + kc;
          for (int64_t c = 0; c < d; ++c) {
            g[ti * C + qc + c] += ds * k[c] * scale;
            g[(first + j) * C + kc + c] += ds * q[c] * scale;
            g[(first + j) * C + vc + c] += pdj * gi[c];
          }
        }
      }
    }
  }
  finish_output(dqkv, g);
}

}  // namespace stoke::cpu::fast
