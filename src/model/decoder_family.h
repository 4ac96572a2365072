// The decoder family (LayerFamily::decoder: Qwen2, Qwen3): its layer
// sequence, written once, inference only (TrainableEncoder refuses
// decoders): the token embeddings gathered into the f32 residual stream h,
// then per layer
//   x = RMSNorm(h) * g_attn                      (residual_rmsnorm)
//   qkv = x W_qkv (+ b)                          grouped-query rows
//   q, k per-head RMSNorm (Qwen3), rotary on q and k by position in the sequence
//   h += attention_gqa(qkv) W_o                  causal unless the config says not
//   x = RMSNorm(h) * g_ffn
//   h += (silu(x W_gate) * (x W_up)) W_down      SwiGLU
// and h = RMSNorm(h) * g_final at the end: the last hidden state. Each
// residual add is fused into the next RMSNorm. GEMMs and attention run in the
// compute dtype; h, the norms' statistics and the projections into h are f32.
#pragma once

#include <memory>
#include <vector>

#include "backend/backend.h"
#include "model/encoder_params.h"

namespace stoke {

// One batch's device inputs. T = tokens, B = sequences.
struct DecoderInputs {
  TensorView ids;       // (T) i32
  TensorView cu;        // (B + 1) i32
  TensorView inv_freq;  // (head_dim / 2) f32 rotary frequencies (model/rotary_frequencies.h)
  int max_seqlen = 0;
  int heads = 0, kv_heads = 0, head_dim = 0;
  float eps = 0;
  bool causal = true;
};

// The batch's buffers (all (T, ·)).
struct DecoderViews {
  TensorView h;    // (T, H) f32 residual stream; the last hidden state at the end
  TensorView x;    // (T, H) the normalised GEMM input, compute dtype
  TensorView qkv;  // (T, (heads + 2 kv_heads) d)
  TensorView ctx;  // (T, heads d)
  TensorView tmp;  // (T, H) f32 projections into the residual stream
  TensorView gate_up;  // (T, 2I) the fused gate | up GEMM's output
  TensorView act;      // (T, I) silu(gate) * up, compute dtype
};

void decoder_forward(const Ops& ops, const EncoderParams& p, const DecoderInputs& in, const DecoderViews& v);

// Inference (EncoderRunner, model/encoder.h): the workspace, sized once for T
// tokens (all (T, ·), q/k/v and attention output at grouped-query widths),
// and the rotary frequencies (f32, head_dim / 2) copied once. Default-constructed: holds nothing.
class DecoderBuffers {
 public:
  DecoderBuffers() = default;
  DecoderBuffers(Backend& backend, const HfConfig& c, DType dt, size_t T);
  // A batch of T tokens' views for decoder_forward around the residual stream h (T, H) f32.
  DecoderViews views(const TensorView& h, int64_t T) const;
  TensorView inv_freq() const;  // DecoderInputs::inv_freq
  DecoderBuffers(const DecoderBuffers&) = delete;  // inv_freq_host_ is read by a queued copy:
  DecoderBuffers& operator=(const DecoderBuffers&) = delete;  // built in place, never moved
  DecoderBuffers(DecoderBuffers&&) = delete;
  DecoderBuffers& operator=(DecoderBuffers&&) = delete;

 private:
  DType dt_ = DType::f32;
  int64_t H_ = 0, I_ = 0, qkv_cols_ = 0, ctx_cols_ = 0;
  std::unique_ptr<Buffer> qkv_;       // (T, (heads + 2 kv_heads) d) compute dtype
  std::unique_ptr<Buffer> ctx_;       // (T, heads d) compute dtype: attention output
  std::unique_ptr<Buffer> tmp_;       // (T, H) f32: projections into the residual stream
  std::unique_ptr<Buffer> gate_up_;   // (T, 2I) compute dtype: gate | up
  std::unique_ptr<Buffer> norm_;      // (T, H) compute dtype: RMSNorm output, the GEMM input
  std::unique_ptr<Buffer> glu_;       // (T, I) compute dtype: silu(gate) * up
  std::unique_ptr<Buffer> inv_freq_;  // (head_dim / 2) f32 rotary frequencies
  std::vector<float> inv_freq_host_;  // their host copy (read by the copy, on the stream)
};

// Loading (model/family_params.h): --precision int8 is refused (the sequence
// has no int8 form). Its parameters need no fixed tensors.
void decoder_check_load(const HfConfig& c, const EncoderLoadOptions& options);

}  // namespace stoke
