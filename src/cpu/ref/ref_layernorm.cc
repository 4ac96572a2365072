// The reference LayerNorm family: embed_layernorm and residual_layernorm,
// their training forms (the same row, its mean and rstd kept) and their
// backwards, side by side. The forwards sum the inputs of a row in double,
// normalise it, store it; rows are read whole before anything is written, so
// out may alias x or residual. With s the row's input, s_hat = (s - mean)
// rstd and g = dy * gamma, the row's input gradient is
//   ds = rstd (g - mean(g) - s_hat mean(g s_hat))
// (the two means remove the directions the normalisation takes out). The
// embedding backward then scatter-adds ds into the table rows the token read,
// tokens summed in token order in double, each touched row stored once.
#include <cmath>
#include <map>
#include <vector>

#include "backend/op_checks.h"
#include "backend/op_checks_backward.h"
#include "cpu/ref/ref_ops.h"

namespace stoke::cpu::ref {

namespace {

// Normalises row x[0:H] in place and returns its mean and rstd (the forwards'
// layernorm_row is this without them).
void layernorm_row_stats(double* x, int64_t H, const TensorView& gamma, const TensorView& beta, float eps,
                         double& mean, double& rstd) {
  mean = 0.0;
  for (int64_t i = 0; i < H; ++i) mean += x[i];
  mean /= static_cast<double>(H);
  double var = 0.0;
  for (int64_t i = 0; i < H; ++i) var += (x[i] - mean) * (x[i] - mean);
  var /= static_cast<double>(H);  // biased, as torch.nn.LayerNorm
  rstd = 1.0 / std::sqrt(var + static_cast<double>(eps));
  for (int64_t i = 0; i < H; ++i) x[i] = (x[i] - mean) * rstd * load(gamma, i) + load(beta, i);
}

// ds[0:H] from the row's input s[0:H] and output gradient dy row t; adds the
// row's dgamma / dbeta terms into pg / pb.
void layernorm_row_backward(const double* s, const TensorView& dy, int64_t t, int64_t H, double mean, double rstd,
                            const TensorView& gamma, double* ds, double* pg, double* pb) {
  double sum_g = 0.0, sum_gx = 0.0;
  for (int64_t i = 0; i < H; ++i) {
    const double d = load(dy, t * H + i), xhat = (s[i] - mean) * rstd, g = d * load(gamma, i);
    sum_g += g;
    sum_gx += g * xhat;
    pg[i] += d * xhat;
    pb[i] += d;
  }
  const double mg = sum_g / static_cast<double>(H), mgx = sum_gx / static_cast<double>(H);
  for (int64_t i = 0; i < H; ++i) {
    const double xhat = (s[i] - mean) * rstd;
    ds[i] = rstd * (load(dy, t * H + i) * load(gamma, i) - mg - xhat * mgx);
  }
}

void add_into(const TensorView& grad, const std::vector<double>& sums) {
  if (grad.empty()) return;
  for (int64_t i = 0; i < grad.numel(); ++i) store(grad, i, load(grad, i) + sums[static_cast<size_t>(i)]);
}

// Embedding row of token t: word[ids[t]] + pos[positions[t]] + type[type_ids[t] or 0].
void embedding_row(double* s, int64_t t, int64_t H, const TensorView& ids, const TensorView& positions,
                   const TensorView& type_ids, const TensorView& word, const TensorView& pos,
                   const TensorView& type) {
  const int64_t wi = index_at(ids, t), pi = index_at(positions, t);
  const int64_t ti = type_ids.empty() ? 0 : index_at(type_ids, t);
  for (int64_t i = 0; i < H; ++i) {
    double v = load(word, wi * H + i) + load(pos, pi * H + i);
    if (!type.empty()) v += load(type, ti * H + i);
    s[i] = v;
  }
}

// Row t of out, and of out_low (when given) converted from out's stored
// values: exactly what convert(out_low, out) would write.
void store_row(const TensorView& out, const TensorView& out_low, int64_t t, int64_t H,
               const std::vector<double>& row) {
  for (int64_t i = 0; i < H; ++i) store(out, t * H + i, row[static_cast<size_t>(i)]);
  if (!out_low.empty())
    for (int64_t i = 0; i < H; ++i) store(out_low, t * H + i, load(out, t * H + i));
}

}  // namespace

void layernorm_row(double* x, int64_t H, const TensorView& gamma, const TensorView& beta, float eps) {
  if (H == 0) return;
  double mean = 0.0, rstd = 0.0;
  layernorm_row_stats(x, H, gamma, beta, eps, mean, rstd);
}

// ---- embed_layernorm: forward, training forward, backward

void embed_layernorm(const TensorView& out, const TensorView& ids, const TensorView& positions,
                     const TensorView& type_ids, const TensorView& word, const TensorView& pos, const TensorView& type,
                     const TensorView& gamma, const TensorView& beta, float eps, const TensorView& out_low) {
  const auto [T, H] = check_embed_layernorm(out, ids, positions, type_ids, word, pos, type, gamma, beta, eps);
  check_layernorm_copy("embed_layernorm", out, out_low, {&word, &pos, &type, &gamma, &beta});
  std::vector<double> row(static_cast<size_t>(H));
  for (int64_t t = 0; t < T; ++t) {
    embedding_row(row.data(), t, H, ids, positions, type_ids, word, pos, type);
    layernorm_row(row.data(), H, gamma, beta, eps);
    store_row(out, out_low, t, H, row);
  }
}

void embed_layernorm_train(const TensorView& out, const TensorView& mean, const TensorView& rstd,
                           const TensorView& ids, const TensorView& positions, const TensorView& type_ids,
                           const TensorView& word, const TensorView& pos, const TensorView& type,
                           const TensorView& gamma, const TensorView& beta, float eps) {
  const auto [T, H] =
      check_embed_layernorm_train(out, mean, rstd, ids, positions, type_ids, word, pos, type, gamma, beta, eps);
  std::vector<double> row(static_cast<size_t>(H));
  for (int64_t t = 0; t < T; ++t) {
    embedding_row(row.data(), t, H, ids, positions, type_ids, word, pos, type);
    double m = 0.0, r = 0.0;
    if (H > 0) layernorm_row_stats(row.data(), H, gamma, beta, eps, m, r);
    for (int64_t i = 0; i < H; ++i) store(out, t * H + i, row[static_cast<size_t>(i)]);
    store(mean, t, m);
    store(rstd, t, r);
  }
}

void embed_layernorm_backward(const TensorView& dword, const TensorView& dpos, const TensorView& dtype,
                              const TensorView& dgamma, const TensorView& dbeta, const TensorView& dy,
                              const TensorView& ids, const TensorView& positions, const TensorView& type_ids,
                              const TensorView& word, const TensorView& pos, const TensorView& type,
                              const TensorView& mean, const TensorView& rstd, const TensorView& gamma) {
  const RowsShape shape = check_embed_layernorm_backward(dword, dpos, dtype, dgamma, dbeta, dy, ids, positions,
                                                         type_ids, word, pos, type, mean, rstd, gamma);
  const int64_t T = shape.T, H = shape.H;  // (plain locals: the lambdas below use them)
  std::vector<double> s(static_cast<size_t>(H)), ds(static_cast<size_t>(H));
  std::vector<double> pg(static_cast<size_t>(H), 0.0), pb(static_cast<size_t>(H), 0.0);
  // Per table, the sums of the touched rows (row -> H values), in token order.
  std::map<int64_t, std::vector<double>> gw, gp, gt;
  auto scatter = [&](std::map<int64_t, std::vector<double>>& sums, int64_t row) {
    auto& acc = sums[row];
    if (acc.empty()) acc.assign(static_cast<size_t>(H), 0.0);
    for (int64_t i = 0; i < H; ++i) acc[static_cast<size_t>(i)] += ds[static_cast<size_t>(i)];
  };
  for (int64_t t = 0; t < T; ++t) {
    embedding_row(s.data(), t, H, ids, positions, type_ids, word, pos, type);
    layernorm_row_backward(s.data(), dy, t, H, load(mean, t), load(rstd, t), gamma, ds.data(), pg.data(), pb.data());
    scatter(gw, index_at(ids, t));
    scatter(gp, index_at(positions, t));
    if (!type.empty()) scatter(gt, type_ids.empty() ? 0 : index_at(type_ids, t));
  }
  auto add_rows = [&](const TensorView& grad, const std::map<int64_t, std::vector<double>>& sums) {
    if (grad.empty()) return;
    for (const auto& [row, acc] : sums)
      for (int64_t i = 0; i < H; ++i) store(grad, row * H + i, load(grad, row * H + i) + acc[static_cast<size_t>(i)]);
  };
  add_rows(dword, gw);
  add_rows(dpos, gp);
  add_rows(dtype, gt);
  add_into(dgamma, pg);
  add_into(dbeta, pb);
}

// ---- residual_layernorm: forward, training forward; layernorm_backward

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

void residual_layernorm_train(const TensorView& out, const TensorView& mean, const TensorView& rstd,
                              const TensorView& x, const TensorView& residual, const TensorView& gamma,
                              const TensorView& beta, float eps) {
  const auto [T, H] = check_residual_layernorm_train(out, mean, rstd, x, residual, gamma, beta, eps);
  std::vector<double> row(static_cast<size_t>(H));
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t i = 0; i < H; ++i) row[static_cast<size_t>(i)] = load(x, t * H + i) + load(residual, t * H + i);
    double m = 0.0, r = 0.0;
    if (H > 0) layernorm_row_stats(row.data(), H, gamma, beta, eps, m, r);
    for (int64_t i = 0; i < H; ++i) store(out, t * H + i, row[static_cast<size_t>(i)]);
    store(mean, t, m);
    store(rstd, t, r);
  }
}

void layernorm_backward(const TensorView& dx, const TensorView& dgamma, const TensorView& dbeta, const TensorView& dy,
                        const TensorView& x, const TensorView& residual, const TensorView& mean,
                        const TensorView& rstd, const TensorView& gamma, Accumulate dx_acc) {
  const auto [T, H] = check_layernorm_backward(dx, dgamma, dbeta, dy, x, residual, mean, rstd, gamma, dx_acc);
  std::vector<double> s(static_cast<size_t>(H)), ds(static_cast<size_t>(H));
  std::vector<double> pg(static_cast<size_t>(H), 0.0), pb(static_cast<size_t>(H), 0.0);
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t i = 0; i < H; ++i)
      s[static_cast<size_t>(i)] = load(x, t * H + i) + (residual.empty() ? 0.0 : load(residual, t * H + i));
    layernorm_row_backward(s.data(), dy, t, H, load(mean, t), load(rstd, t), gamma, ds.data(), pg.data(), pb.data());
    for (int64_t i = 0; i < H; ++i) {
      const double d = ds[static_cast<size_t>(i)];
      if (dx_acc == Accumulate::yes)  // f32 dx: ds rounded as stored, then the add op's f32 add
        store(dx, t * H + i, static_cast<double>(static_cast<float>(load(dx, t * H + i)) + static_cast<float>(d)));
      else
        store(dx, t * H + i, d);  // dx may be dy: row read first
    }
  }
  add_into(dgamma, pg);
  add_into(dbeta, pb);
}

}  // namespace stoke::cpu::ref
