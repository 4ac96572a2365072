// embedding_loss on the CPU, fast (contract: backend/op_list.h; the
// reference and the backward's derivation: cpu/ref/ref_embedding_loss.cc).
//
// The mnrl kinds are O(B M d): three GEMMs through the linear kernels
// (oneDNN, f32), on the centred rows of backend/embedding_loss_checks.h:
//   sim[B, M] = v_A · v_C^T            (linear)
//   dv_A      = G · v_C,  dv_C = G^T · v_A   (linear_backward's da and dw)
// with G = dL/ds written over sim. Everything that is O(B M) or less — the
// similarities' offsets c . v_i, the softmax statistics, the rank-1 part of
// each row's gradient (sum_j G(i, j)) c, the normalization's backward — is
// in double, so nearly parallel rows (trained models' embeddings) keep their
// digits. The exponentials are f32 (exp_approx, ~1e-7 relative) of
// arguments formed in double, summed in double.
//
// The pair kinds (cosent, cosine_mse) are O(B d) plus cosent's O(B^2) pairs:
// plain double loops, threaded over rows.
//
// Determinism: every sum runs in a fixed order (rows in order per column
// block, columns in order per row, the metrics in anchor order), so the
// result does not depend on the thread count.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "backend/embedding_loss_checks.h"
#include "cpu/fast/fast_common.h"
#include "cpu/fast/fast_math.h"
#include "cpu/fast/fast_ops.h"

namespace stoke::cpu::fast {

namespace {

using Kind = Ops::EmbeddingLoss::Kind;
constexpr double kNormEps = 1e-12;
constexpr int64_t kColumnBlock = 64;  // columns per thread's share of a column pass

// The workspace's pieces (EmbeddingLossLayout).
struct Work {
  double *center, *norm, *offset, *rank1, *anchor_loss, *anchor_hit, *column_lse, *pair_sim, *pair_grad;
  float *v, *dv, *sim;
};

Work work_of(const TensorView& workspace, const EmbeddingLossLayout& l) {
  float* w = workspace.as<float>();
  auto f64 = [&](int64_t at) { return reinterpret_cast<double*>(w + at); };  // aligned: the check
  return {f64(l.center),    f64(l.norm),       f64(l.offset),   f64(l.rank1),     f64(l.anchor_loss),
          f64(l.anchor_hit), f64(l.column_lse), f64(l.pair_sim), f64(l.pair_grad), w + l.v,
          w + l.dv,          w + l.sim};
}

// What row i is divided by: max(||x_i||, 1e-12), or 1 without normalize.
inline double divisor(bool normalize, double norm) { return normalize ? std::max(norm, kNormEps) : 1.0; }

STOKE_CPU_CLONES double sum_squares_row(const float* x, int64_t d) {
  double sq = 0.0;
#pragma omp simd reduction(+ : sq)
  for (int64_t k = 0; k < d; ++k) sq += static_cast<double>(x[k]) * x[k];
  return sq;
}

STOKE_CPU_CLONES double dot_row(const float* a, const float* b, int64_t d) {
  double dot = 0.0;
#pragma omp simd reduction(+ : dot)
  for (int64_t k = 0; k < d; ++k) dot += static_cast<double>(a[k]) * b[k];
  return dot;
}

void row_norms(const float* x, int64_t R, int64_t D, int64_t d, double* norm) {
#pragma omp parallel for schedule(static) if (R * d >= kParallelMinElements)
  for (int64_t i = 0; i < R; ++i) norm[i] = std::sqrt(sum_squares_row(x + i * D, d));
}

// ---- the mnrl kinds ---------------------------------------------------------------

// c = the mean of the rows u_i (rows in order per column); v_i = u_i - c in
// f32; offset_i = c . v_i. Returns c . c.
double center_rows(const float* x, int64_t R, int64_t D, int64_t d, bool normalize, const Work& w) {
  const int64_t blocks = (d + kColumnBlock - 1) / kColumnBlock;
#pragma omp parallel for schedule(static) if (R * d >= kParallelMinElements && blocks > 1)
  for (int64_t cb = 0; cb < blocks; ++cb) {
    const int64_t k0 = cb * kColumnBlock, k1 = std::min(d, k0 + kColumnBlock);
    double* c = w.center;
    for (int64_t k = k0; k < k1; ++k) c[k] = 0.0;
    for (int64_t i = 0; i < R; ++i) {
      const double inv = 1.0 / divisor(normalize, w.norm[i]);
      const float* xi = x + i * D;
#pragma omp simd
      for (int64_t k = k0; k < k1; ++k) c[k] += xi[k] * inv;
    }
    for (int64_t k = k0; k < k1; ++k) c[k] /= static_cast<double>(R);
  }
#pragma omp parallel for schedule(static) if (R * d >= kParallelMinElements)
  for (int64_t i = 0; i < R; ++i) {
    const double inv = 1.0 / divisor(normalize, w.norm[i]);
    const float* xi = x + i * D;
    float* vi = w.v + i * d;
    double off = 0.0;
#pragma omp simd reduction(+ : off)
    for (int64_t k = 0; k < d; ++k) {
      vi[k] = static_cast<float>(xi[k] * inv - w.center[k]);
      off += w.center[k] * vi[k];
    }
    w.offset[i] = off;
  }
  double cc = 0.0;
  for (int64_t k = 0; k < d; ++k) cc += w.center[k] * w.center[k];
  return cc;
}

// mnrl_symmetric's d2q statistics: for each positive j < B, lse over the
// anchors b of z_bj (column j of the positive block of sim).
void column_lse(const float* sim, int64_t B, int64_t M, double scale, double cc, const Work& w) {
  const int64_t blocks = (B + kColumnBlock - 1) / kColumnBlock;
#pragma omp parallel for schedule(static) if (B * B >= kParallelMinElements && blocks > 1)
  for (int64_t cb = 0; cb < blocks; ++cb) {
    const int64_t j0 = cb * kColumnBlock, n = std::min(B, j0 + kColumnBlock) - j0;
    double mx[kColumnBlock], sum[kColumnBlock];
    for (int64_t t = 0; t < n; ++t) {
      mx[t] = -std::numeric_limits<double>::infinity();
      sum[t] = 0.0;
    }
    const double* offc = w.offset + B + j0;  // positive j is row B + j
    for (int64_t b = 0; b < B; ++b) {
      const float* s = sim + b * M + j0;
      const double base = w.offset[b] + cc;
      for (int64_t t = 0; t < n; ++t) mx[t] = std::max(mx[t], scale * (s[t] + base + offc[t]));
    }
    for (int64_t b = 0; b < B; ++b) {
      const float* s = sim + b * M + j0;
      const double base = w.offset[b] + cc;
#pragma omp simd
      for (int64_t t = 0; t < n; ++t)
        sum[t] += exp_approx(static_cast<float>(scale * (s[t] + base + offc[t]) - mx[t]));
    }
    for (int64_t t = 0; t < n; ++t) w.column_lse[j0 + t] = mx[t] + std::log(sum[t]);
  }
}

struct RowResult {
  double loss;  // the anchor's term of L * B
  bool hit;     // its first maximum is its positive
  double rank1; // sum_j G(b, j): the c part of its gradient
};

// Anchor b's row: z_j = scale * s(a_b, cand_j) into zbuf (double), its
// log-sum-exp, its loss and hit; with `grad`, G(b, j) = dL/ds written over
// sim_row. col_lse: mnrl_symmetric's column statistics (null for mnrl).
STOKE_CPU_CLONES RowResult mnrl_row(float* sim_row, double* zbuf, float* ebuf, int64_t M, int64_t b, double base,
                                    const double* off_c, double scale, double coef, const double* col_lse,
                                    int64_t B, bool grad) {
#pragma omp simd
  for (int64_t j = 0; j < M; ++j) zbuf[j] = scale * (sim_row[j] + base + off_c[j]);
  int64_t best = 0;
  for (int64_t j = 1; j < M; ++j)
    if (zbuf[j] > zbuf[best]) best = j;  // the first maximum, as torch.argmax
  const double mx = zbuf[best];
  double sum = 0.0;
#pragma omp simd reduction(+ : sum)
  for (int64_t j = 0; j < M; ++j) {
    ebuf[j] = exp_approx(static_cast<float>(zbuf[j] - mx));
    sum += ebuf[j];
  }
  const double lse = mx + std::log(sum), zbb = zbuf[b];
  RowResult r{col_lse ? 0.5 * (lse + col_lse[b]) - zbb : lse - zbb, best == b, 0.0};
  if (!grad) return r;
  const double inv = 1.0 / sum, f = scale * coef;
  double rank1 = 0.0;
#pragma omp simd reduction(+ : rank1)
  for (int64_t j = 0; j < M; ++j) {
    const double hit = j == b ? 1.0 : 0.0;
    double g = ebuf[j] * inv - hit;
    // d2q row j (a positive) holds z_bj as its anchor-b entry.
    if (col_lse && j < B) g += exp_approx(static_cast<float>(zbuf[j] - col_lse[j])) - hit;
    sim_row[j] = static_cast<float>(f * g);
    rank1 += sim_row[j];
  }
  r.rank1 = rank1;
  return r;
}

// rank1[B + j] = sum_b G(b, j), rows in order per column.
void column_sums(const float* g, int64_t B, int64_t M, double* out) {
  const int64_t blocks = (M + kColumnBlock - 1) / kColumnBlock;
#pragma omp parallel for schedule(static) if (B * M >= kParallelMinElements && blocks > 1)
  for (int64_t cb = 0; cb < blocks; ++cb) {
    const int64_t j0 = cb * kColumnBlock, n = std::min(M, j0 + kColumnBlock) - j0;
    double sum[kColumnBlock] = {};
    for (int64_t b = 0; b < B; ++b) {
      const float* gb = g + b * M + j0;
#pragma omp simd
      for (int64_t t = 0; t < n; ++t) sum[t] += gb[t];
    }
    for (int64_t t = 0; t < n; ++t) out[j0 + t] = sum[t];
  }
}

// ---- the backward's last step, shared -------------------------------------------

// Row i's gradient with respect to u_i is g_k = alpha * src[k] + beta * c[k]
// (c may be null); d_emb row += factor * (g - u (u . g)) / n, the
// normalization's backward (dx = g / n below the clamp, dx = g without it).
STOKE_CPU_CLONES void finish_row(float* out, const float* x, int64_t d, double norm, bool normalize, const float* src,
                                 double alpha, const double* c, double beta, double factor) {
  const double inv = 1.0 / divisor(normalize, norm);
  const bool project = normalize && norm > kNormEps;
  double along = 0.0;
  if (project) {
    if (c) {
#pragma omp simd reduction(+ : along)
      for (int64_t k = 0; k < d; ++k) along += x[k] * inv * (alpha * src[k] + beta * c[k]);
    } else {
#pragma omp simd reduction(+ : along)
      for (int64_t k = 0; k < d; ++k) along += x[k] * inv * (alpha * src[k]);
    }
  }
  const double f = factor * inv;
  if (c) {
#pragma omp simd
    for (int64_t k = 0; k < d; ++k)
      out[k] = static_cast<float>(out[k] + f * ((alpha * src[k] + beta * c[k]) - x[k] * inv * along));
  } else {
#pragma omp simd
    for (int64_t k = 0; k < d; ++k) out[k] = static_cast<float>(out[k] + f * (alpha * src[k] - x[k] * inv * along));
  }
}

// ---- the kinds ----------------------------------------------------------------------

struct Sums {
  double loss = 0.0, hits = 0.0;
};

Sums mnrl(const TensorView& d_emb, const float* x, const EmbeddingLossShape& s, const Ops::EmbeddingLoss& loss,
          const Work& w) {
  const int64_t B = s.B, R = s.R, D = s.D, d = s.d, M = s.M;
  const bool sym = loss.kind == Kind::mnrl_symmetric, grad = !d_emb.empty();
  const double scale = loss.scale;
  const double cc = center_rows(x, R, D, d, loss.normalize, w);
  const TensorView v_a(w.v, DType::f32, {B, d}), v_c(w.v + B * d, DType::f32, {M, d});
  const TensorView sim(w.sim, DType::f32, {B, M});
  linear(sim, v_a, v_c, TensorView{}, Activation::none, Accumulate::no);
  if (sym) column_lse(w.sim, B, M, scale, cc, w);
  const double coef = (sym ? 0.5 : 1.0) / static_cast<double>(B);
#pragma omp parallel if (B * M >= kParallelMinElements)
  {
    std::vector<double> zbuf(static_cast<size_t>(M));
    std::vector<float> ebuf(static_cast<size_t>(M));
#pragma omp for schedule(static)
    for (int64_t b = 0; b < B; ++b) {
      const RowResult r = mnrl_row(w.sim + b * M, zbuf.data(), ebuf.data(), M, b, w.offset[b] + cc, w.offset + B,
                                   scale, coef, sym ? w.column_lse : nullptr, B, grad);
      w.anchor_loss[b] = r.loss;
      w.anchor_hit[b] = r.hit ? 1.0 : 0.0;
      w.rank1[b] = r.rank1;
    }
  }
  Sums out;
  for (int64_t b = 0; b < B; ++b) {  // anchor order: the metrics do not depend on the threads
    out.loss += w.anchor_loss[b];
    out.hits += w.anchor_hit[b];
  }
  if (!grad) return out;
  column_sums(w.sim, B, M, w.rank1 + B);
  std::fill(w.dv + B * d, w.dv + R * d, 0.0f);  // linear_backward's dw accumulates
  const TensorView dv_a(w.dv, DType::f32, {B, d}), dv_c(w.dv + B * d, DType::f32, {M, d});
  linear_backward(dv_a, dv_c, TensorView{}, sim, v_a, v_c, Accumulate::no);
  const double factor = static_cast<double>(loss.grad_scale) * loss.weight;
  float* dx = d_emb.as<float>();
#pragma omp parallel for schedule(static) if (R * d >= kParallelMinElements)
  for (int64_t i = 0; i < R; ++i)
    finish_row(dx + i * D, x + i * D, d, w.norm[i], loss.normalize, w.dv + i * d, 1.0, w.center, w.rank1[i], factor);
  return out;
}

Sums pairs(const TensorView& d_emb, const float* x, const float* y, const EmbeddingLossShape& s,
           const Ops::EmbeddingLoss& loss, const Work& w) {
  const int64_t B = s.B, D = s.D, d = s.d;
  const double scale = loss.scale;
#pragma omp parallel for schedule(static) if (B * d >= kParallelMinElements)
  for (int64_t b = 0; b < B; ++b)
    w.pair_sim[b] = dot_row(x + b * D, x + (B + b) * D, d) / (divisor(loss.normalize, w.norm[b]) *
                                                             divisor(loss.normalize, w.norm[B + b]));
  Sums out;
  if (loss.kind == Kind::cosine_mse) {
    for (int64_t b = 0; b < B; ++b) {
      const double diff = w.pair_sim[b] - y[b];
      out.loss += diff * diff;
      w.pair_grad[b] = 2.0 * diff / static_cast<double>(B);
    }
  } else {
    // CoSENT over the pairs y_i < y_j: m = max(0, max z_i - z_j), then
    // L = m + log(e^-m + sum e^(z_i - z_j - m)) (the reference's formula).
    // Each row i's max and sum are its own; rows are combined in order.
    double* rowv = w.pair_grad;  // row maxima, then row sums: the gradient is written last
    const bool threads = B * B >= kParallelMinElements;
#pragma omp parallel for schedule(static) if (threads)
    for (int64_t i = 0; i < B; ++i) {
      double m = 0.0;
      for (int64_t j = 0; j < B; ++j)
        if (y[i] < y[j]) m = std::max(m, scale * (w.pair_sim[i] - w.pair_sim[j]));
      rowv[i] = m;
    }
    double m = 0.0;
    for (int64_t i = 0; i < B; ++i) m = std::max(m, rowv[i]);
#pragma omp parallel for schedule(static) if (threads)
    for (int64_t i = 0; i < B; ++i) {
      double sum = 0.0;
      for (int64_t j = 0; j < B; ++j)
        if (y[i] < y[j]) sum += std::exp(scale * (w.pair_sim[i] - w.pair_sim[j]) - m);
      rowv[i] = sum;
    }
    double sum = std::exp(-m);
    for (int64_t i = 0; i < B; ++i) sum += rowv[i];
    const double L = m + std::log(sum);
    out.loss = L * static_cast<double>(B);
    // dL/ds_i = scale * (sum_{j: y_i < y_j} w_ij - sum_{j: y_j < y_i} w_ji), w_ij = e^(z_i - z_j - L).
#pragma omp parallel for schedule(static) if (threads)
    for (int64_t i = 0; i < B; ++i) {
      double g = 0.0;
      for (int64_t j = 0; j < B; ++j) {
        const double zij = scale * (w.pair_sim[i] - w.pair_sim[j]);
        if (y[i] < y[j]) g += std::exp(zij - L);
        if (y[j] < y[i]) g -= std::exp(-zij - L);
      }
      rowv[i] = scale * g;
    }
  }
  if (d_emb.empty()) return out;
  const double factor = static_cast<double>(loss.grad_scale) * loss.weight;
  float* dx = d_emb.as<float>();
  // Row i's partner (its positive or anchor) p: g = dL/ds * u_p = (dL/ds / n_p) x_p.
#pragma omp parallel for schedule(static) if (2 * B * d >= kParallelMinElements)
  for (int64_t i = 0; i < 2 * B; ++i) {
    const int64_t b = i < B ? i : i - B, p = i < B ? i + B : i - B;
    finish_row(dx + i * D, x + i * D, d, w.norm[i], loss.normalize, x + p * D,
               w.pair_grad[b] / divisor(loss.normalize, w.norm[p]), nullptr, 0.0, factor);
  }
  return out;
}

}  // namespace

void embedding_loss(const TensorView& d_emb, const TensorView& metrics, const TensorView& emb,
                    const TensorView& scores, const TensorView& workspace, const Ops::EmbeddingLoss& loss) {
  const EmbeddingLossShape s = check_embedding_loss(d_emb, metrics, emb, scores, workspace, loss);
  if (d_emb.empty() && metrics.empty()) return;  // nothing asked for
  const Work w = work_of(workspace, embedding_loss_layout(s.B, s.groups, s.d));
  const float* x = emb.as<const float>();
  row_norms(x, s.R, s.D, s.d, w.norm);
  const bool pair_kind = loss.kind == Kind::cosent || loss.kind == Kind::cosine_mse;
  const Sums sums = pair_kind ? pairs(d_emb, x, scores.as<const float>(), s, loss, w) : mnrl(d_emb, x, s, loss, w);
  if (metrics.empty()) return;
  double* m = metrics.as<double>();
  m[0] += static_cast<double>(loss.weight) * sums.loss;
  if (loss.count) {
    m[1] += sums.hits;
    m[2] += static_cast<double>(s.B);
  }
}

}  // namespace stoke::cpu::fast
