// linear_int8: the quantized GEMM, one exact integer dot product at a time,
// dequantized in double.
#include <vector>

#include "cpu/int8_rows.h"
#include "backend/op_checks.h"
#include "cpu/ref/ref_ops.h"

namespace stoke::cpu::ref {

void linear_int8(const TensorView& out, const TensorView& a, const TensorView& wq, const TensorView& wq_meta,
                 const TensorView& bias, Activation act) {
  const auto [M, N, K] = check_linear_int8(out, a, wq, wq_meta, bias);
  const Int8ActivationCode code = cpu_int8_activation_code();
  const auto* w = wq.as<const int8_t>();
  const auto* meta = wq_meta.as<const float>();
  std::vector<uint8_t> q(static_cast<size_t>(K));
  for (int64_t m = 0; m < M; ++m) {
    const RowCode c = quantize_row(a.as<const float>() + m * K, K, code, q.data());
    for (int64_t n = 0; n < N; ++n) {
      int64_t acc = 0;
      for (int64_t k = 0; k < K; ++k) acc += static_cast<int64_t>(q[static_cast<size_t>(k)]) * w[n * K + k];
      const double centered = static_cast<double>(acc) - c.zero * static_cast<double>(meta[N + n]);
      const double v = double{c.scale} * meta[n] * centered + (bias.empty() ? 0.0 : load(bias, n));
      store(out, m * N + n, activate(v, act));
    }
  }
}

}  // namespace stoke::cpu::ref
