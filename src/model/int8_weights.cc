#include "model/int8_weights.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.h"

namespace stoke {

QuantizedWeight quantize_per_channel(const float* w, int64_t N, int64_t K) {
  QuantizedWeight out;
  out.q.assign(static_cast<size_t>(N * K), 0);
  out.meta.assign(static_cast<size_t>(2 * N), 0.0f);
  for (int64_t n = 0; n < N; ++n) {
    const float* row = w + n * K;
    float amax = 0.0f;
    for (int64_t k = 0; k < K; ++k) amax = std::max(amax, std::fabs(row[k]));
    if (!(amax > 0.0f)) continue;  // all zero: scale 0, codes 0
    const double inv = 127.0 / amax;
    int64_t sum = 0;
    for (int64_t k = 0; k < K; ++k) {
      const double v = std::clamp(std::nearbyint(static_cast<double>(row[k]) * inv), -127.0, 127.0);
      out.q[static_cast<size_t>(n * K + k)] = static_cast<int8_t>(v);
      sum += static_cast<int64_t>(v);
    }
    out.meta[static_cast<size_t>(n)] = amax / 127.0f;
    out.meta[static_cast<size_t>(N + n)] = static_cast<float>(sum);  // |sum| <= 127 K: exact below K = 132000
  }
  return out;
}

void quantize_layer_weights(LoadedEncoder& encoder, Backend& backend) {
  if (!backend.device_is_host())
    throw Error(Errc::unsupported, "--precision int8 runs on the CPU only; use --device cpu (or --precision f32|bf16)");
  std::vector<QuantizedWeight> pending;  // read by the enqueued copies until the synchronize below
  pending.reserve(encoder.params.layers.size() * 4);
  auto place = [&](TensorView& w, TensorView& meta) {
    if (w.dtype != DType::f32) throw Error(Errc::internal, "int8 quantization needs the f32 weights");
    const int64_t N = w.dim(0), K = w.dim(1);
    pending.push_back(quantize_per_channel(w.as<const float>(), N, K));
    const QuantizedWeight& qw = pending.back();
    auto qbuf = backend.allocate(qw.q.size());
    auto mbuf = backend.allocate(qw.meta.size() * sizeof(float));
    backend.copy_to_device(qbuf->data(), qw.q.data(), qw.q.size());
    backend.copy_to_device(mbuf->data(), qw.meta.data(), qw.meta.size() * sizeof(float));
    w = TensorView(qbuf->data(), DType::i8, {N, K});
    meta = TensorView(mbuf->data(), DType::f32, {2, N});
    encoder.buffers.push_back(std::move(qbuf));
    encoder.buffers.push_back(std::move(mbuf));
  };
  for (EncoderLayerParams& l : encoder.params.layers) {
    place(l.qkv_w, l.qkv_meta);
    place(l.attn_out_w, l.attn_out_meta);
    place(l.ffn_in_w, l.ffn_in_meta);
    place(l.ffn_out_w, l.ffn_out_meta);
  }
  backend.synchronize();
  encoder.int8_linears = true;
}

}  // namespace stoke
