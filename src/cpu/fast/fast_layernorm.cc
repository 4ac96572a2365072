// The fast LayerNorm family: embed_layernorm and residual_layernorm, their
// training forms (mean and rstd kept) and their backwards, side by side.
// Threads over tokens.
//
// Forward: one token per iteration. The row's inputs are summed into a double
// scratch row (so out may alias x or residual), normalised there with
// two-pass statistics, and narrowed into out. The training forwards run the
// same row (layernorm_row below), so their out is the inference forward's
// out, bit for bit; mean and rstd are its statistics rounded to f32.
//
// Why the row is in double: it arrives as its input summed in double (x +
// residual, or word + position + type): f32 values add exactly there, or
// nearly (their sum needs 24 bits plus the difference of their exponents,
// double has 53). The statistics stay in double, two-pass (the mean, then the
// centred sum of squares), and so does (s - mean) rstd gamma + beta until its
// one rounding to the output type. Why not f32: a trained encoder's rows can
// have means in the hundreds and spreads of hundredths (tests/ops,
// "activations of trained models"). In f32 the rounded sum and the rounded
// mean are each off by up to half an ulp of the mean, a shift of every
// centred value that the normalisation then divides by the spread: 2e-3
// relative at mean 300 and spread 0.01, where the double row is within a
// rounding of exact. The cost is twice the vector work of an f32 row on an op
// that waits on memory (docs/performance.md measures the forward before and
// after). Every row helper is inlined (always) into the per-ISA clones of the
// row functions, so the inference and training forwards run the same
// operations in the same order on every CPU.
//
// Backward, per row, with s_hat = (s - mean) rstd and g = dy * gamma:
//   ds = rstd (g - mean(g) - s_hat mean(g s_hat)).
// dgamma/dbeta sum over tokens in fixed blocks of kReduceRows rows
// (fast_backward_common.h), so they do not depend on the thread count.
// The embedding backward scatter-adds ds into the table rows: tokens are
// grouped by row with a stable sort (a row's tokens stay in token order),
// each group is summed by one thread in token order and added to its row.
// Groups own distinct rows, so there are no races and no atomics, and the
// result is bitwise the same for any thread count.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "cpu/fast/fast_backward_common.h"
#include "cpu/fast/fast_common.h"
#include "cpu/fast/fast_ops.h"
#include "backend/op_checks.h"
#include "backend/op_checks_backward.h"

namespace stoke::cpu::fast {

namespace {

// ---- the row every forward normalises

// Normalises the summed row s[0:H] into out; mean and rstd (f32, may be null)
// receive the row's statistics rounded once.
template <class T>
[[gnu::always_inline]] inline void layernorm_row(const double* s, T* out, int64_t H, const float* gamma,
                                                 const float* beta, float eps, float* mean_out, float* rstd_out) {
  double sum = 0.0;
#pragma omp simd reduction(+ : sum)
  for (int64_t i = 0; i < H; ++i) sum += s[i];
  const double mean = sum / static_cast<double>(H);
  double ss = 0.0;
#pragma omp simd reduction(+ : ss)
  for (int64_t i = 0; i < H; ++i) ss += (s[i] - mean) * (s[i] - mean);
  const double rstd = 1.0 / std::sqrt(ss / static_cast<double>(H) + static_cast<double>(eps));
#pragma omp simd
  for (int64_t i = 0; i < H; ++i) out[i] = narrow_one<T>(static_cast<float>((s[i] - mean) * rstd * gamma[i] + beta[i]));
  if (mean_out) *mean_out = static_cast<float>(mean);
  if (rstd_out) *rstd_out = static_cast<float>(rstd);
}

// dst[0:n] = (or +=, when add) src[0:n] widened to double.
template <class T>
[[gnu::always_inline]] inline void widen_into_wide(const T* src, double* dst, int64_t n, bool add) {
  if (add)
    for (int64_t i = 0; i < n; ++i) dst[i] += static_cast<double>(to_float(src[i]));
  else
    for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<double>(to_float(src[i]));
}

// Row `row` of a 2-D float tensor of any float dtype into a double row.
[[gnu::always_inline]] inline void row_into_wide(const TensorView& t, int64_t row, double* dst, bool add) {
  const int64_t n = t.dim(1);
  switch (t.dtype) {
    case DType::f32:
      widen_into_wide(t.as<const float>() + row * n, dst, n, add);
      return;
    case DType::bf16:
      widen_into_wide(t.as<const bf16>() + row * n, dst, n, add);
      return;
    case DType::f16:
      widen_into_wide(t.as<const f16>() + row * n, dst, n, add);
      return;
    default:
      throw Error(Errc::internal, "fast kernels: not a float tensor");
  }
}

// The embedding LayerNorm's input row of token t in double: word[ids[t]] +
// pos[positions[t]] + type[type_ids[t] or 0] (no type table: no term).
[[gnu::always_inline]] inline void embedding_row_wide(double* row, int64_t t, int64_t H, const int32_t* id,
                                                      const int32_t* ps, const int32_t* ty, const TensorView& word,
                                                      const TensorView& pos, const TensorView& type) {
  (void)H;  // every table is H wide (the op's checks)
  row_into_wide(word, id[t], row, false);
  row_into_wide(pos, ps[t], row, true);
  if (!type.empty()) row_into_wide(type, ty ? ty[t] : 0, row, true);
}

// The residual LayerNorm's input row in double: x + residual (no residual: x).
template <class T>
[[gnu::always_inline]] inline void residual_row_wide(double* row, const T* x, const T* res, int64_t H) {
  if (res)
    for (int64_t i = 0; i < H; ++i)
      row[i] = static_cast<double>(to_float(x[i])) + static_cast<double>(to_float(res[i]));
  else
    for (int64_t i = 0; i < H; ++i) row[i] = static_cast<double>(to_float(x[i]));
}

// ---- the inference forwards' rows

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

// ---- the training forwards' rows and the backward

// The training forwards' rows: fast_layernorm.cc's, keeping the statistics.
template <class T>
STOKE_CPU_CLONES void residual_row_stats(const T* x, const T* res, T* out, double* row, int64_t H, const float* gamma,
                                         const float* beta, float eps, float* mean_out, float* rstd_out) {
  residual_row_wide(row, x, res, H);
  layernorm_row(row, out, H, gamma, beta, eps, mean_out, rstd_out);
}

template <class T>
STOKE_CPU_CLONES void embedding_row_stats(T* out, double* row, int64_t t, int64_t H, const int32_t* id,
                                          const int32_t* ps, const int32_t* ty, const TensorView& word,
                                          const TensorView& pos, const TensorView& type, const float* gamma,
                                          const float* beta, float eps, float* mean_out, float* rstd_out) {
  embedding_row_wide(row, t, H, id, ps, ty, word, pos, type);
  layernorm_row(row, out, H, gamma, beta, eps, mean_out, rstd_out);
}

// One row's backward: s[0:H] the LayerNorm input, dy its output gradient;
// writes ds (may be dy: dy is read whole first), or adds it into ds when
// accumulate (ds then apart from dy), and adds into pg / pb (when not null).
// xhat and g are scratch rows.
STOKE_CPU_CLONES void row_backward(const float* s, const float* dy, float mean, float rstd, const float* gamma,
                                   int64_t H, float* xhat, float* g, float* ds, bool accumulate, float* pg,
                                   float* pb) {
  float sum_g = 0.0f, sum_gx = 0.0f;
#pragma omp simd reduction(+ : sum_g, sum_gx)
  for (int64_t i = 0; i < H; ++i) {
    const float xh = (s[i] - mean) * rstd, gi = dy[i] * gamma[i];
    xhat[i] = xh;
    g[i] = gi;
    sum_g += gi;
    sum_gx += gi * xh;
  }
  if (pg)
    for (int64_t i = 0; i < H; ++i) {
      pg[i] += dy[i] * xhat[i];
      pb[i] += dy[i];
    }
  const float mg = sum_g / static_cast<float>(H), mgx = sum_gx / static_cast<float>(H);
  // The row's ds in g (done with), then written or added in a loop of its
  // own: the accumulating form is bit for bit this op then add. One loop
  // would let the compiler contract the rstd product and the add into an FMA
  // (GCC's C++ default), rounding once where the unfolded order rounds twice.
  for (int64_t i = 0; i < H; ++i) g[i] = rstd * (g[i] - mg - xhat[i] * mgx);
  if (accumulate)
    for (int64_t i = 0; i < H; ++i) ds[i] += g[i];
  else
    std::copy(g, g + H, ds);
}

// The embedding input row of token t in f32, for the backward's s_hat (which
// the reference computes from the f32 mean and rstd the forward stored).
inline void embedding_input_row(float* row, int64_t t, int64_t H, const int32_t* id, const int32_t* ps, const int32_t* ty,
                          const TensorView& word, const TensorView& pos, const TensorView& type) {
  std::fill(row, row + H, 0.0f);
  add_row_any(word, id[t], row);
  add_row_any(pos, ps[t], row);
  if (!type.empty()) add_row_any(type, ty ? ty[t] : 0, row);
}

// LayerNorm backward over all T rows in blocks of kReduceRows; input_row(t,
// buf) returns row t's LayerNorm input (buf is H floats of scratch it may use).
// ds is written, or added into when accumulate.
template <class InputRow>
void backward_rows(int64_t T, int64_t H, const float* dy, const float* mean, const float* rstd, const float* gamma,
                   float* ds, bool accumulate, const TensorView& dgamma, const TensorView& dbeta,
                   InputRow input_row) {
  const int64_t nb = (T + kReduceRows - 1) / kReduceRows;
  const bool params = !dgamma.empty() || !dbeta.empty();
  std::vector<float> pg(params ? static_cast<size_t>(nb * H) : 0, 0.0f), pb(pg.size(), 0.0f);
#pragma omp parallel if (T * H >= kParallelMinElements && nb > 1)
  {
    std::vector<float> buf(static_cast<size_t>(H)), xhat(buf.size()), g(buf.size());
#pragma omp for schedule(static)
    for (int64_t b = 0; b < nb; ++b) {
      const int64_t t1 = std::min(T, (b + 1) * kReduceRows);
      for (int64_t t = b * kReduceRows; t < t1; ++t)
        row_backward(input_row(t, buf.data()), dy + t * H, mean[t], rstd[t], gamma, H, xhat.data(), g.data(),
                     ds + t * H, accumulate, params ? pg.data() + b * H : nullptr,
                     params ? pb.data() + b * H : nullptr);
    }
  }
  if (!dgamma.empty()) add_partials(pg.data(), nb, H, dgamma.as<float>());
  if (!dbeta.empty()) add_partials(pb.data(), nb, H, dbeta.as<float>());
}

// grad[keys[t]] += ds[t] for all t (keys null: every token reads row 0).
void scatter_rows_add(const float* ds, int64_t T, int64_t H, const int32_t* keys, float* grad) {
  std::vector<int64_t> order(static_cast<size_t>(T));
  std::iota(order.begin(), order.end(), int64_t{0});
  auto key = [&](int64_t t) { return keys ? keys[t] : 0; };
  std::stable_sort(order.begin(), order.end(), [&](int64_t x, int64_t y) { return key(x) < key(y); });
  std::vector<int64_t> starts;  // group g is order[starts[g], starts[g + 1])
  for (int64_t i = 0; i < T; ++i)
    if (i == 0 || key(order[static_cast<size_t>(i)]) != key(order[static_cast<size_t>(i - 1)])) starts.push_back(i);
  starts.push_back(T);
  const int64_t groups = static_cast<int64_t>(starts.size()) - 1;
#pragma omp parallel if (T * H >= kParallelMinElements && groups > 1)
  {
    std::vector<float> acc(static_cast<size_t>(H));
#pragma omp for schedule(dynamic, 16)
    for (int64_t gi = 0; gi < groups; ++gi) {
      std::fill(acc.begin(), acc.end(), 0.0f);
      const int64_t i0 = starts[static_cast<size_t>(gi)], i1 = starts[static_cast<size_t>(gi + 1)];
      for (int64_t i = i0; i < i1; ++i) {
        const float* r = ds + order[static_cast<size_t>(i)] * H;
#pragma omp simd
        for (int64_t c = 0; c < H; ++c) acc[static_cast<size_t>(c)] += r[c];
      }
      float* dst = grad + int64_t{key(order[static_cast<size_t>(i0)])} * H;
#pragma omp simd
      for (int64_t c = 0; c < H; ++c) dst[c] += acc[static_cast<size_t>(c)];
    }
  }
}

}  // namespace

// ---- embed_layernorm: forward, training forward, backward

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

void embed_layernorm_train(const TensorView& out, const TensorView& mean, const TensorView& rstd,
                           const TensorView& ids, const TensorView& positions, const TensorView& type_ids,
                           const TensorView& word, const TensorView& pos, const TensorView& type,
                           const TensorView& gamma, const TensorView& beta, float eps) {
  const RowsShape shape =
      check_embed_layernorm_train(out, mean, rstd, ids, positions, type_ids, word, pos, type, gamma, beta, eps);
  const int64_t T = shape.T, H = shape.H;
  if (T == 0) return;
  float* mp = mean.as<float>();
  float* rp = rstd.as<float>();
  if (H == 0) {
    std::fill(mp, mp + T, 0.0f);
    std::fill(rp, rp + T, 0.0f);
    return;
  }
  const std::vector<float> g = widen_vector(gamma), b = widen_vector(beta);
  const int32_t* id = ids.as<const int32_t>();
  const int32_t* ps = positions.as<const int32_t>();
  const int32_t* ty = type_ids.empty() ? nullptr : type_ids.as<const int32_t>();
  with_act_type(out.dtype, [&](auto tag) {
    using A = decltype(tag);
    A* op = out.as<A>();
#pragma omp parallel if (T * H >= kParallelMinElements)
    {
      std::vector<double> row(static_cast<size_t>(H));
#pragma omp for schedule(static)
      for (int64_t t = 0; t < T; ++t)
        embedding_row_stats(op + t * H, row.data(), t, H, id, ps, ty, word, pos, type, g.data(), b.data(), eps, mp + t,
                            rp + t);
    }
  });
}

void embed_layernorm_backward(const TensorView& dword, const TensorView& dpos, const TensorView& dtype,
                              const TensorView& dgamma, const TensorView& dbeta, const TensorView& dy,
                              const TensorView& ids, const TensorView& positions, const TensorView& type_ids,
                              const TensorView& word, const TensorView& pos, const TensorView& type,
                              const TensorView& mean, const TensorView& rstd, const TensorView& gamma) {
  const RowsShape shape = check_embed_layernorm_backward(dword, dpos, dtype, dgamma, dbeta, dy, ids, positions,
                                                         type_ids, word, pos, type, mean, rstd, gamma);
  const int64_t T = shape.T, H = shape.H;
  if (T == 0 || H == 0) return;
  thread_local std::vector<float> dy_buf, ds_buf;
  const float* g = f32_input(dy, dy_buf);
  ds_buf.resize(static_cast<size_t>(T * H));
  float* ds = ds_buf.data();
  const std::vector<float> gam = widen_vector(gamma);
  const int32_t* id = ids.as<const int32_t>();
  const int32_t* ps = positions.as<const int32_t>();
  const int32_t* ty = type_ids.empty() ? nullptr : type_ids.as<const int32_t>();
  backward_rows(T, H, g, mean.as<const float>(), rstd.as<const float>(), gam.data(), ds, false, dgamma, dbeta,
                [&](int64_t t, float* buf) -> const float* {
                  embedding_input_row(buf, t, H, id, ps, ty, word, pos, type);
                  return buf;
                });
  if (!dword.empty()) scatter_rows_add(ds, T, H, id, dword.as<float>());
  if (!dpos.empty()) scatter_rows_add(ds, T, H, ps, dpos.as<float>());
  if (!dtype.empty()) scatter_rows_add(ds, T, H, ty, dtype.as<float>());
}

// ---- residual_layernorm: forward, training forward; layernorm_backward

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

void residual_layernorm_train(const TensorView& out, const TensorView& mean, const TensorView& rstd,
                              const TensorView& x, const TensorView& residual, const TensorView& gamma,
                              const TensorView& beta, float eps) {
  const RowsShape shape = check_residual_layernorm_train(out, mean, rstd, x, residual, gamma, beta, eps);
  const int64_t T = shape.T, H = shape.H;
  if (T == 0) return;
  float* mp = mean.as<float>();
  float* rp = rstd.as<float>();
  if (H == 0) {  // as the reference: statistics of an empty row are 0
    std::fill(mp, mp + T, 0.0f);
    std::fill(rp, rp + T, 0.0f);
    return;
  }
  const std::vector<float> g = widen_vector(gamma), b = widen_vector(beta);
  with_act_type(out.dtype, [&](auto tag) {
    using A = decltype(tag);
    const A* xp = x.as<const A>();
    const A* sp = residual.as<const A>();
    A* op = out.as<A>();
#pragma omp parallel if (T * H >= kParallelMinElements)
    {
      std::vector<double> row(static_cast<size_t>(H));
#pragma omp for schedule(static)
      for (int64_t t = 0; t < T; ++t)
        residual_row_stats(xp + t * H, sp + t * H, op + t * H, row.data(), H, g.data(), b.data(), eps, mp + t, rp + t);
    }
  });
}

void layernorm_backward(const TensorView& dx, const TensorView& dgamma, const TensorView& dbeta, const TensorView& dy,
                        const TensorView& x, const TensorView& residual, const TensorView& mean,
                        const TensorView& rstd, const TensorView& gamma, Accumulate dx_acc) {
  const RowsShape shape = check_layernorm_backward(dx, dgamma, dbeta, dy, x, residual, mean, rstd, gamma, dx_acc);
  const int64_t T = shape.T, H = shape.H;
  if (T == 0 || H == 0) return;
  thread_local std::vector<float> dy_buf, x_buf, r_buf, dx_buf;
  const float* g = f32_input(dy, dy_buf);
  const float* xf = f32_input(x, x_buf);
  const float* rf = f32_input(residual, r_buf);
  float* out = f32_output(dx, dx_buf);  // dx itself when accumulating (the check keeps that to f32)
  const std::vector<float> gam = widen_vector(gamma);
  backward_rows(T, H, g, mean.as<const float>(), rstd.as<const float>(), gam.data(), out,
                dx_acc == Accumulate::yes, dgamma, dbeta,
                [&](int64_t t, float* buf) -> const float* {
                  if (!rf) return xf + t * H;
                  for (int64_t i = 0; i < H; ++i) buf[i] = xf[t * H + i] + rf[t * H + i];
                  return buf;
                });
  finish_output(dx, out);
}

}  // namespace stoke::cpu::fast
