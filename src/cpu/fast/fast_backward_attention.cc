// attention_backward: one work item per (sequence, head), spread over the
// threads dynamically (lengths differ); an item owns its sequence's rows of
// its head's q, k and v columns of dqkv, so items never write the same
// element and no reduction crosses threads (deterministic for any thread
// count). Within an item, with K^T, V^T [d, len] widened once:
//   for each query i:  s = (q_i / sqrt d) K^T,  dp = dout_i V^T   (over keys j)
//                      p = exp(s - lse_i),      ds = p (dp - dout_i · out_i)
//                      dq_i = ds K / sqrt d,  dK^T += (q_i / sqrt d) ds,  dV^T += dout_i p
// Every inner loop runs over the keys, contiguous in the transposed layouts,
// so it vectorises whatever the head dim — except dq_i, a sum over the keys
// for each of d outputs: it adds ds_j K_j along the head dim over K's rows
// [len, d] (a copy in the row layout), because a sum over the keys per output
// ends in an in-order horizontal reduction per head-dim element (measured:
// 13% of the op on MiniLM shapes, one thread). P is recomputed from q, k and
// the saved lse (no [len, len] matrix is kept).
// With attention dropout (a separate instantiation) the row's mask factors
// m_j (0 or f32(1 / (1 - p)), the forward's, redrawn from Philox at flat index
// (t * heads + h) * max_seqlen + j) enter as
//                      pd = p m,  ds = p (dp m - dout_i · out_i),  dV^T += dout_i pd
#include <algorithm>
#include <cmath>
#include <vector>

#include "cpu/fast/fast_backward.h"
#include "cpu/fast/fast_backward_common.h"
#include "cpu/fast/fast_math.h"
#include "cpu/fast/fast_philox.h"
#include "cpu/ref/op_checks_backward.h"

namespace stoke::cpu::fast {

namespace {

struct Item {
  int64_t first, len, head;
};

struct Geometry {
  int64_t C, D, heads, d;  // qkv columns, out columns, heads, head dim
  float scale;
};

// The attention-probability dropout of the forward being differentiated.
struct Dropout {
  MaskKey key;
  int64_t max_seqlen;  // the row stride of the mask's flat index
};

struct Scratch {
  std::vector<float> kt, kr, vt, dkt, dvt, qs, dq, s, dp, f;  // kr: K in rows [len, d]
  Scratch(int64_t longest, int64_t d, bool dropout) {
    const size_t n = static_cast<size_t>(std::max<int64_t>(longest, 1) * d);
    for (auto* v : {&kt, &kr, &vt, &dkt, &dvt, &qs}) v->resize(n);
    dq.resize(static_cast<size_t>(d));
    s.resize(static_cast<size_t>(std::max<int64_t>(longest, 1)));
    dp.resize(s.size());
    if (dropout) f.resize(s.size() + 6);  // (mask_factors' whole blocks)
  }
};

// One query row: scores and dout·v over the keys, then the softmax gradient,
// in place: s becomes p (p m with dropout: what dV takes), dp becomes ds.
// kDropout: first draws the row's mask factors, flat indices [first, first +
// len), using fbuf.
template <bool kDropout>
STOKE_CPU_CLONES void row_scores(const float* q, const float* dout, const float* kt, const float* vt, int64_t d,
                                 int64_t len, float l, float D, const MaskKey* key, uint64_t first, float* fbuf,
                                 float* s, float* dp) {
  const float* f = kDropout ? mask_factors(*key, first, len, fbuf) : nullptr;
  std::fill(s, s + len, 0.0f);
  std::fill(dp, dp + len, 0.0f);
  for (int64_t c = 0; c < d; ++c) {
    const float qc = q[c], gc = dout[c];
    const float* k = kt + c * len;
    const float* v = vt + c * len;
#pragma omp simd
    for (int64_t j = 0; j < len; ++j) {
      s[j] += qc * k[j];
      dp[j] += gc * v[j];
    }
  }
#pragma omp simd
  for (int64_t j = 0; j < len; ++j) {
    const float z = s[j] - l;  // <= 0 up to rounding
    const float p = z < -69.0f ? 0.0f : exp_approx(z);  // (as the forward: no subnormal products)
    if constexpr (kDropout) {
      s[j] = p * f[j];
      dp[j] = p * (dp[j] * f[j] - D);
    } else {
      s[j] = p;
      dp[j] = p * (dp[j] - D);
    }
  }
}

// dq = ds K (times scale), dK^T += q ds, dV^T += dout p, for one query row;
// acc: d floats of scratch.
STOKE_CPU_CLONES void row_grads(const float* q, const float* dout, const float* p, const float* ds, const float* kr,
                                float* dkt, float* dvt, int64_t d, int64_t len, float scale, float* acc, float* dq) {
  for (int64_t c = 0; c < d; ++c) {
    float* dk = dkt + c * len;
    float* dv = dvt + c * len;
    const float qc = q[c], gc = dout[c];
#pragma omp simd
    for (int64_t j = 0; j < len; ++j) {
      dk[j] += qc * ds[j];
      dv[j] += gc * p[j];
    }
  }
  std::fill(acc, acc + d, 0.0f);
  for (int64_t j = 0; j < len; ++j) {
    const float w = ds[j];
    const float* k = kr + j * d;
#pragma omp simd
    for (int64_t c = 0; c < d; ++c) acc[c] += w * k[c];
  }
  for (int64_t c = 0; c < d; ++c) dq[c] = acc[c] * scale;
}

template <bool kDropout>
void backward_item(const float* qkv, const float* out, const float* dout, const float* lse, float* dqkv,
                   const Dropout* drop, const Item& it, const Geometry& g, Scratch& w) {
  const int64_t len = it.len, d = g.d, C = g.C, D = g.D;
  const int64_t qc = it.head * d, kc = (g.heads + it.head) * d, vc = (2 * g.heads + it.head) * d;
  float* kt = w.kt.data();
  float* kr = w.kr.data();
  float* vt = w.vt.data();
  float* dkt = w.dkt.data();
  float* dvt = w.dvt.data();
  float* qs = w.qs.data();
  for (int64_t j = 0; j < len; ++j) {
    const float* row = qkv + (it.first + j) * C;
    for (int64_t c = 0; c < d; ++c) {
      kt[c * len + j] = row[kc + c];
      kr[j * d + c] = row[kc + c];
      vt[c * len + j] = row[vc + c];
      qs[j * d + c] = row[qc + c] * g.scale;  // the forward's scaled q
    }
  }
  std::fill(dkt, dkt + d * len, 0.0f);
  std::fill(dvt, dvt + d * len, 0.0f);
  for (int64_t i = 0; i < len; ++i) {
    const int64_t t = it.first + i;
    const float* go = dout + t * D + it.head * d;
    const float* o = out + t * D + it.head * d;
    float Di = 0.0f;
    for (int64_t c = 0; c < d; ++c) Di += go[c] * o[c];
    const uint64_t mask_first = kDropout ? static_cast<uint64_t>((t * g.heads + it.head) * drop->max_seqlen) : 0;
    row_scores<kDropout>(qs + i * d, go, kt, vt, d, len, lse[t * g.heads + it.head], Di,
                         kDropout ? &drop->key : nullptr, mask_first, w.f.data(), w.s.data(), w.dp.data());
    row_grads(qs + i * d, go, w.s.data(), w.dp.data(), kr, dkt, dvt, d, len, g.scale, w.dq.data(),
              dqkv + t * C + qc);
  }
  for (int64_t j = 0; j < len; ++j) {
    float* row = dqkv + (it.first + j) * C;
    for (int64_t c = 0; c < d; ++c) {
      row[kc + c] = dkt[c * len + j];
      row[vc + c] = dvt[c * len + j];
    }
  }
}

}  // namespace

void attention_backward(const TensorView& dqkv, const TensorView& dout, const TensorView& qkv, const TensorView& out,
                        const TensorView& lse, const TensorView& cu_seqlens, int heads, int max_seqlen,
                        const Ops::AttentionDropout& dropout) {
  const AttentionShape shape =
      check_attention_backward(dqkv, dout, qkv, out, lse, cu_seqlens, heads, max_seqlen, dropout);
  if (shape.T == 0) return;
  const int32_t* cu = cu_seqlens.as<const int32_t>();
  std::vector<Item> items;
  int64_t longest = 0;
  double work = 0.0;
  for (int64_t b = 0; b < shape.B; ++b) {
    const int64_t first = cu[b], len = cu[b + 1] - cu[b];
    if (len == 0) continue;
    longest = std::max(longest, len);
    work += 5.0 * static_cast<double>(len) * static_cast<double>(len) * static_cast<double>(shape.d * shape.heads);
    for (int64_t h = 0; h < shape.heads; ++h) items.push_back({first, len, h});
  }
  const Geometry g{3 * shape.heads * shape.d, shape.heads * shape.d, shape.heads, shape.d,
                   static_cast<float>(1.0 / std::sqrt(static_cast<double>(shape.d)))};
  thread_local std::vector<float> qkv_buf, out_buf, dout_buf, dqkv_buf;
  const float* x = f32_input(qkv, qkv_buf);
  const float* o = f32_input(out, out_buf);
  const float* go = f32_input(dout, dout_buf);
  float* dx = f32_output(dqkv, dqkv_buf);
  const float* l = lse.as<const float>();
  const int64_t n_items = static_cast<int64_t>(items.size());
  const bool parallel = n_items > 1 && work >= static_cast<double>(kParallelMinElements) * 16;
  const Dropout drop{mask_key(dropout.p, dropout.seed, dropout.step, dropout.tensor_id), max_seqlen};
  const bool dropping = dropout.p > 0.0f;  // p = 0: the code without dropout, bit for bit
#pragma omp parallel if (parallel)
  {
    Scratch scratch(longest, g.d, dropping);
    if (dropping) {
#pragma omp for schedule(dynamic)
      for (int64_t n = 0; n < n_items; ++n)
        backward_item<true>(x, o, go, l, dx, &drop, items[static_cast<size_t>(n)], g, scratch);
    } else {
#pragma omp for schedule(dynamic)
      for (int64_t n = 0; n < n_items; ++n)
        backward_item<false>(x, o, go, l, dx, nullptr, items[static_cast<size_t>(n)], g, scratch);
    }
  }
  finish_output(dqkv, dx);
}

}  // namespace stoke::cpu::fast
