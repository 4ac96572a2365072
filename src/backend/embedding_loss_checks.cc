#include "backend/embedding_loss_checks.h"

#include <fmt/format.h>

#include <cmath>
#include <cstdint>

#include "backend/check_helpers.h"
#include "core/error.h"

namespace stoke {

namespace {

using namespace checks;  // the helpers every check is made of
using Kind = Ops::EmbeddingLoss::Kind;

constexpr const char* kOp = "embedding_loss";

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::mnrl: return "mnrl";
    case Kind::mnrl_symmetric: return "mnrl_symmetric";
    case Kind::cosent: return "cosent";
    case Kind::cosine_mse: return "cosine_mse";
  }
  return nullptr;
}

void need_finite(const char* name, float v) {
  if (!std::isfinite(v)) fail(kOp, fmt::format("{} = {} must be finite", name, v));
}

}  // namespace

EmbeddingLossLayout embedding_loss_layout(int64_t B, int64_t groups, int64_t dims) {
  if (B < 0 || groups < 2 || dims < 1)
    throw Error(Errc::invalid_argument,
                fmt::format("embedding_loss workspace: B = {}, groups = {}, dims = {}: expected B >= 0, groups >= 2 "
                            "and dims >= 1 (the columns the loss reads: D when EmbeddingLoss::dims is 0)",
                            B, groups, dims));
  const int64_t R = groups * B, M = (groups - 1) * B;
  const int64_t chunks = (R + EmbeddingLossLayout::kCenterChunkRows - 1) / EmbeddingLossLayout::kCenterChunkRows;
  EmbeddingLossLayout l;
  int64_t at = 0;
  auto f64 = [&](int64_t n) {  // two floats per double: offsets stay even
    const int64_t here = at;
    at += 2 * n;
    return here;
  };
  l.center = f64(dims);
  l.center_partial = f64(chunks * dims);
  l.norm = f64(R);
  l.offset = f64(R);
  l.rank1 = f64(R);
  l.anchor_loss = f64(B);
  l.anchor_hit = f64(B);
  l.column_lse = f64(B);
  l.pair_sim = f64(B);
  l.pair_grad = f64(B);
  l.pair_max = f64(B);
  l.pair_sum = f64(B);
  l.scalars = f64(EmbeddingLossLayout::kScalars);
  // The GEMMs' matrices start on 16 bytes (GEMM kernels load 4 floats at a time).
  auto f32 = [&](int64_t n) {
    at = (at + 3) / 4 * 4;
    const int64_t here = at;
    at += n;
    return here;
  };
  l.v = f32(R * dims);
  l.dv = f32(R * dims);
  l.sim = f32(B * M);
  l.total = at;
  return l;
}

int64_t embedding_loss_workspace_floats(int64_t B, int64_t groups, int64_t dims) {
  return embedding_loss_layout(B, groups, dims).total;
}

EmbeddingLossShape check_embedding_loss(const TensorView& d_emb, const TensorView& metrics, const TensorView& emb,
                                        const TensorView& scores, const TensorView& workspace,
                                        const Ops::EmbeddingLoss& loss) {
  const char* kind = kind_name(loss.kind);
  if (kind == nullptr) fail(kOp, fmt::format("loss kind {} is not one of mnrl, mnrl_symmetric, cosent, cosine_mse",
                                             static_cast<int>(loss.kind)));
  const bool pairs = loss.kind == Kind::cosent || loss.kind == Kind::cosine_mse;
  need(kOp, "emb", emb, 2);
  need_dtype(kOp, "emb", emb, DType::f32);
  EmbeddingLossShape s;
  s.R = emb.dim(0);
  s.D = emb.dim(1);
  if (s.D < 1) fail(kOp, fmt::format("emb is {}: expected at least one column", describe(emb)));
  if (loss.groups < 2) fail(kOp, fmt::format("groups = {}: expected at least 2 (anchors and positives)", loss.groups));
  if (pairs && loss.groups != 2)
    fail(kOp, fmt::format("{} compares pairs: groups = {}, expected 2 (anchors and positives, no negatives)", kind,
                          loss.groups));
  if (s.R % loss.groups != 0)
    fail(kOp, fmt::format("emb has {} rows, not a multiple of groups = {} (B rows per group)", s.R, loss.groups));
  s.groups = loss.groups;
  s.B = s.R / loss.groups;
  if (s.B < 1) fail(kOp, fmt::format("emb is {}: expected at least one anchor", describe(emb)));
  s.M = (s.groups - 1) * s.B;
  if (loss.dims < 0 || loss.dims > s.D)
    fail(kOp, fmt::format("dims = {} must be in [0, {}] (0: all columns of emb)", loss.dims, s.D));
  s.d = loss.dims == 0 ? s.D : loss.dims;
  if (loss.kind == Kind::cosine_mse && !loss.normalize)
    fail(kOp, "cosine_mse compares cosines with the scores: normalize must be true");
  need_finite("scale", loss.scale);
  need_finite("weight", loss.weight);
  need_finite("grad_scale", loss.grad_scale);

  if (pairs) {
    if (scores.empty()) fail(kOp, fmt::format("{} needs scores [{}] (the pairs' labels); none given", kind, s.B));
    need(kOp, "scores", scores, 1);
    need_dtype(kOp, "scores", scores, DType::f32);
    need_dim(kOp, "scores", scores, 0, s.B);
  } else if (!scores.empty()) {
    fail(kOp, fmt::format("{} takes no scores (its labels are the rows' order); got {}", kind, describe(scores)));
  }

  need_any_rank(kOp, "workspace", workspace);
  need_dtype(kOp, "workspace", workspace, DType::f32);
  const int64_t want = embedding_loss_workspace_floats(s.B, s.groups, s.d);
  if (workspace.numel() < want)
    fail(kOp, fmt::format("workspace is {}: expected at least {} floats (embedding_loss_workspace_floats({}, {}, {}))",
                          describe(workspace), want, s.B, s.groups, s.d));
  if (reinterpret_cast<uintptr_t>(workspace.data) % 8 != 0)
    fail(kOp, "workspace must be 8-byte aligned (it holds f64 arrays)");
  need_no_overlap(kOp, "workspace", workspace, "emb", emb);
  need_no_overlap(kOp, "workspace", workspace, "scores", scores);

  if (!d_emb.empty()) {
    need(kOp, "d_emb", d_emb, 2);
    need_dtype(kOp, "d_emb", d_emb, DType::f32);
    need_dim(kOp, "d_emb", d_emb, 0, s.R);
    need_dim(kOp, "d_emb", d_emb, 1, s.D);
    need_no_overlap(kOp, "d_emb", d_emb, "emb", emb);
    need_no_overlap(kOp, "d_emb", d_emb, "scores", scores);
    need_no_overlap(kOp, "d_emb", d_emb, "workspace", workspace);
  }
  if (!metrics.empty()) {
    need(kOp, "metrics", metrics, 1);
    need_dtype(kOp, "metrics", metrics, DType::f64);
    need_dim(kOp, "metrics", metrics, 0, 3);
    need_no_overlap(kOp, "metrics", metrics, "emb", emb);
    need_no_overlap(kOp, "metrics", metrics, "scores", scores);
    need_no_overlap(kOp, "metrics", metrics, "workspace", workspace);
    need_no_overlap(kOp, "metrics", metrics, "d_emb", d_emb);
  }
  return s;
}

}  // namespace stoke
