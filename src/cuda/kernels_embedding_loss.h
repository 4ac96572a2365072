// Launchers of embedding_loss's kernels (kernels_embedding_loss.cu), in the
// order CudaOps::embedding_loss enqueues them around its GEMMs (cuda_ops.cc):
//
//   rows          row norms; mnrl kinds: the centre c, v_i = u_i - c, c . v_i
//   [GEMM]        sim[B, M] = v_A · v_C^T                       (mnrl kinds)
//   softmax       the anchors' statistics and losses; G over sim, its row
//                 and column sums                               (mnrl kinds)
//   [GEMMs]       dv_A = G · v_C, dv_C = G^T · v_A             (mnrl kinds, training)
//   pairs         s(a_b, p_b), the loss and dL/ds               (cosent, cosine_mse)
//   backward      d_emb += factor * the normalization's backward of each row's gradient
//   metrics       metrics += the anchors' sums, in a fixed order
//
// Every piece lives in the op's workspace (backend/embedding_loss_checks.h,
// EmbeddingLossLayout, which also says why the rows are centred). No
// atomics: each sum has a fixed shape and order, so the result is the same
// on every run. Shapes were checked by the caller (check_embedding_loss).
#pragma once

#include <cuda_runtime.h>

#include "backend/embedding_loss_checks.h"
#include "backend/ops.h"
#include "core/tensor.h"

namespace stoke::cuda {

void launch_embedding_loss_rows(cudaStream_t s, const TensorView& emb, const TensorView& workspace,
                                const EmbeddingLossShape& shape, const Ops::EmbeddingLoss& loss);
void launch_embedding_loss_softmax(cudaStream_t s, const TensorView& workspace, const EmbeddingLossShape& shape,
                                   const Ops::EmbeddingLoss& loss, bool grad);
void launch_embedding_loss_pairs(cudaStream_t s, const TensorView& emb, const TensorView& scores,
                                 const TensorView& workspace, const EmbeddingLossShape& shape,
                                 const Ops::EmbeddingLoss& loss);
void launch_embedding_loss_backward(cudaStream_t s, const TensorView& d_emb, const TensorView& emb,
                                    const TensorView& workspace, const EmbeddingLossShape& shape,
                                    const Ops::EmbeddingLoss& loss);
void launch_embedding_loss_metrics(cudaStream_t s, const TensorView& metrics, const TensorView& workspace,
                                   const EmbeddingLossShape& shape, const Ops::EmbeddingLoss& loss);

}  // namespace stoke::cuda
