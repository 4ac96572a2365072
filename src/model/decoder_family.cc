#include "model/decoder_family.h"

#include <string>

#include "core/error.h"
#include "model/rotary_frequencies.h"

namespace stoke {

void decoder_forward(const Ops& ops, const EncoderParams& p, const DecoderInputs& in, const DecoderViews& v) {
  ops.gather_rows(v.h, p.word_embeddings, in.ids);
  const Ops::Rotary rope{in.heads + in.kv_heads, in.head_dim, false, 1.0f};  // q and k heads, NeoX rotate-half
  for (size_t l = 0; l < p.layers.size(); ++l) {
    const EncoderLayerParams& w = p.layers[l];
    // h += the previous layer's FFN output (none before the first), x = RMSNorm(h).
    ops.residual_rmsnorm(v.h, v.x, l == 0 ? TensorView{} : v.tmp, w.attn_ln_gamma, in.eps);
    ops.linear(v.qkv, v.x, w.qkv_w, w.qkv_b, Activation::none, Accumulate::no);
    if (!w.q_norm.empty()) ops.head_rmsnorm(v.qkv, w.q_norm, w.k_norm, in.heads, in.kv_heads, in.eps);
    ops.rotary(v.qkv, in.cu, in.inv_freq, rope);
    ops.attention_gqa(v.ctx, v.qkv, in.cu, in.heads, in.kv_heads, in.causal, in.max_seqlen);
    ops.linear(v.tmp, v.ctx, w.attn_out_w, w.attn_out_b, Activation::none, Accumulate::no);
    ops.residual_rmsnorm(v.h, v.x, v.tmp, w.ffn_ln_gamma, in.eps);
    ops.linear(v.gate_up, v.x, w.ffn_in_w, w.ffn_in_b, Activation::none, Accumulate::no);  // [gate | up]
    ops.glu(v.act, v.gate_up, Ops::Glu{Ops::Glu::Act::silu, false});  // SwiGLU: silu(gate) * up
    ops.linear(v.tmp, v.act, w.ffn_out_w, w.ffn_out_b, Activation::none, Accumulate::no);
  }
  // h += the last FFN output, then the final RMSNorm in place: the last hidden state.
  ops.residual_rmsnorm(v.h, v.h, p.layers.empty() ? TensorView{} : v.tmp, p.final_norm, in.eps);
}

DecoderBuffers::DecoderBuffers(Backend& backend, const HfConfig& c, DType dt, size_t T)
    : dt_(dt),
      H_(c.hidden_size),
      I_(c.intermediate_size),
      qkv_cols_((c.num_attention_heads + 2 * c.num_key_value_heads) * c.head_dim()),
      ctx_cols_(c.num_attention_heads * c.head_dim()) {
  const size_t H = static_cast<size_t>(H_), I = static_cast<size_t>(I_), act = dtype_size(dt);
  qkv_ = backend.allocate(T * static_cast<size_t>(qkv_cols_) * act);  // (T, (heads + 2 kv) d)
  ctx_ = backend.allocate(T * static_cast<size_t>(ctx_cols_) * act);  // (T, heads d)
  tmp_ = backend.allocate(T * H * 4);                                 // (T, H) f32 projections into the residual stream
  gate_up_ = backend.allocate(T * 2 * I * act);                       // (T, 2I) gate | up
  norm_ = backend.allocate(T * H * act);                              // (T, H) RMSNorm output: the GEMM input
  glu_ = backend.allocate(T * I * act);                               // (T, I) silu(gate) * up
  inv_freq_host_ = default_rope_inv_freq(c.head_dim(), c.rope_theta);
  inv_freq_ = backend.allocate(inv_freq_host_.size() * 4);
  backend.copy_to_device(inv_freq_->data(), inv_freq_host_.data(), inv_freq_host_.size() * 4);  // reads the member later
}

DecoderViews DecoderBuffers::views(const TensorView& h, int64_t T) const {
  DecoderViews v;
  v.h = h;
  v.x = TensorView(norm_->data(), dt_, {T, H_});
  v.qkv = TensorView(qkv_->data(), dt_, {T, qkv_cols_});
  v.ctx = TensorView(ctx_->data(), dt_, {T, ctx_cols_});
  v.tmp = TensorView(tmp_->data(), DType::f32, {T, H_});
  v.gate_up = TensorView(gate_up_->data(), dt_, {T, 2 * I_});
  v.act = TensorView(glu_->data(), dt_, {T, I_});
  return v;
}

TensorView DecoderBuffers::inv_freq() const {
  return TensorView(inv_freq_->data(), DType::f32, {static_cast<int64_t>(inv_freq_host_.size())});
}

void decoder_check_load(const HfConfig& c, const EncoderLoadOptions& options) {
  if (options.int8_linears)
    throw Error(Errc::unsupported, "--precision int8 does not run " + std::string(c.arch->display_name) +
                                       " (a decoder); use --precision f32 or bf16");
}

}  // namespace stoke
