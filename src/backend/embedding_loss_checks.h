// The shape, dtype and value checks of embedding_loss (backend/op_list.h),
// shared by every backend, and the layout of its workspace, shared by the
// kernels that use it (the fast CPU set and CUDA; the reference keeps its
// own double arrays and only checks the size).
#pragma once

#include <cstdint>

#include "backend/ops.h"

namespace stoke {

struct EmbeddingLossShape {
  int64_t B = 0;       // anchors (rows per group)
  int64_t groups = 0;  // row groups: anchors, positives, negatives...
  int64_t R = 0;       // rows of emb: groups * B
  int64_t D = 0;       // columns of emb
  int64_t d = 0;       // columns the loss reads (loss.dims, or D)
  int64_t M = 0;       // candidates of an anchor: (groups - 1) * B
};

// Every check throws Error(invalid_argument) naming the op, the tensor or
// knob, what it got and what was expected. scores' values are not read
// (on CUDA they are on the device).
EmbeddingLossShape check_embedding_loss(const TensorView& d_emb, const TensorView& metrics, const TensorView& emb,
                                        const TensorView& scores, const TensorView& workspace,
                                        const Ops::EmbeddingLoss& loss);

// Where the workspace's pieces start, in floats from its first element. The
// f64 arrays come first, each at an even offset, so an 8-byte aligned
// workspace aligns them; then the f32 matrices, each at a multiple of 4.
//
// The mnrl kinds compute their similarities on CENTRED rows: c = the mean of
// the R rows u_i (in double) and v_i = u_i - c rounded to f32, so that
//   s(i, j) = v_i . v_j + c . v_i + c . v_j + c . c
// with the f32 GEMM on v and the rest in double. A trained model's
// embeddings are nearly parallel (cosines of 0.9 between unrelated texts):
// the gradient lives in their small differences, which an f32 u_i would keep
// to only a few digits (u * |u| / |u_i - u_j| relative), and v keeps in full.
struct EmbeddingLossLayout {
  static constexpr int64_t kCenterChunkRows = 128;  // rows per partial sum of the centre (CUDA's fixed chunks)
  int64_t center = 0;          // f64 [d]: c
  int64_t center_partial = 0;  // f64 [ceil(R / kCenterChunkRows), d]: the chunks' sums of u
  int64_t norm = 0;            // f64 [R]: n_i = max(||x_i||, 1e-12) (1 without normalize)
  int64_t offset = 0;          // f64 [R]: c . v_i
  int64_t rank1 = 0;           // f64 [R]: sum of dL/ds over row i's similarities (the c part of its gradient)
  int64_t anchor_loss = 0;     // f64 [B]: anchor b's term of L * B
  int64_t anchor_hit = 0;      // f64 [B]: 1 when anchor b's q2d argmax is its positive
  int64_t column_lse = 0;      // f64 [B]: mnrl_symmetric's lse_c d2q_bc, per positive b
  int64_t pair_sim = 0;        // f64 [B]: s(a_b, p_b) (cosent, cosine_mse)
  int64_t pair_grad = 0;       // f64 [B]: dL/ds(a_b, p_b)
  int64_t pair_max = 0;        // f64 [B]: cosent's max over j of s_b - s_j (pairs with scores[b] < scores[j])
  int64_t pair_sum = 0;        // f64 [B]: cosent's sum over j of exp(s_b - s_j - max)
  static constexpr int kScalars = 4;
  int64_t scalars = 0;         // f64 [kScalars]: c . c, cosent's max and L
  static constexpr int kCC = 0, kPairMax = 1, kPairLoss = 2;
  int64_t v = 0;               // f32 [R, d]: the centred rows v_i
  int64_t dv = 0;              // f32 [R, d]: sum_j dL/ds(i, j) v_j (the GEMM part of row i's gradient)
  int64_t sim = 0;             // f32 [B, M]: v_a . v_cand, then dL/ds in its place
  int64_t total = 0;           // floats in all
};
// dims: the columns read (>= 1).
EmbeddingLossLayout embedding_loss_layout(int64_t B, int64_t groups, int64_t dims);

}  // namespace stoke
