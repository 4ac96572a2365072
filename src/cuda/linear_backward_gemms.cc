#include "cuda/linear_backward_gemms.h"

#include <algorithm>

#include "cuda/gemm_routes.h"
#include "cuda/kernels.h"

namespace stoke::cuda {

void linear_backward_gemms(GemmGeneral& gemm, cudaStream_t stream, DeviceWorkspace dy_copy, const TensorView& da,
                           const TensorView& dw, const TensorView& dy, const TensorView& a, const TensorView& w,
                           bool da_accumulate) {
  const bool da_copy = !da.empty() && general_gemm_route(dy.dtype, w.dtype, da.dtype) == GemmRoute::cublaslt_16bit_copy;
  const bool dw_copy = !dw.empty() && general_gemm_route(dy.dtype, a.dtype, dw.dtype) == GemmRoute::cublaslt_16bit_copy;
  auto da_product = [&](const TensorView& da_rows, const TensorView& dy_rows) {  // da (+)= dy · w
    gemm.run(stream, "linear_backward da", da_rows, dy_rows, false, w, false, da_accumulate);
  };
  auto dw_product = [&](const TensorView& dy_rows, const TensorView& a_rows) {  // dw += dy^T · a
    gemm.run(stream, "linear_backward dw", dw, dy_rows, true, a_rows, false, true);
  };
  if (!da.empty() && !da_copy) da_product(da, dy);
  if (!dw.empty() && !dw_copy) dw_product(dy, a);

  // The products that want dy in `low`, chunk by chunk.
  auto through_copy = [&](DType low, bool for_da, bool for_dw) {
    const int64_t M = dy.dim(0), N = dy.dim(1);
    const int64_t rows = dy_chunk_rows(dy_copy.bytes, N, dtype_size(low));
    if (rows == 0) {  // not one row fits: GemmGeneral takes the plain kernel and counts it
      if (for_da) da_product(da, dy);
      if (for_dw) dw_product(dy, a);
      return;
    }
    for (int64_t first = 0; first < M; first += rows) {
      const int64_t n = std::min(rows, M - first);
      const TensorView dy_low(dy_copy.data, low, {n, N});
      launch_convert(stream, dy_low, dy.rows(first, n));
      if (for_da) da_product(da.rows(first, n), dy_low);
      if (for_dw) dw_product(dy_low, a.rows(first, n));
    }
  };
  if (da_copy && dw_copy && w.dtype == a.dtype) {
    through_copy(w.dtype, true, true);  // training: one rounding of dy for both
  } else {
    if (da_copy) through_copy(w.dtype, true, false);
    if (dw_copy) through_copy(a.dtype, false, true);
  }
}

}  // namespace stoke::cuda
