// The op table on CUDA: every op checks its call with the shared op checks
// (index values are on the device: the host validated them before copying,
// see check_packed_batch), then enqueues on the compute stream. GEMMs go to
// cuBLASLt with the bias in its epilogue where offered; everything else is
// our own kernels (kernels.h).
//
// Training: the element-wise, LayerNorm, GEMM-backward, attention (flash
// kernels for bf16/f16, exact ones otherwise; MPNet's relative-position
// forms included), embedding LayerNorm
// (scatter-add in token order), pooling/row-gather backward, loss, clipping
// and AdamW ops are here (kernels.h, gemm_general.h), and the
// embedding losses (kernels.h: kernels_embedding_loss.cu around cuBLASLt's GEMMs); an op not yet on
// the GPU would throw from UnsupportedOps with one clear line.
#include "cuda/cuda_ops.h"

#include <string>

#include "backend/unsupported_ops.h"
#include "core/error.h"
#include "backend/decoder_checks.h"
#include "backend/embedding_loss_checks.h"
#include "backend/op_checks.h"
#include "backend/colbert_checks.h"
#include "backend/glu_checks.h"
#include "backend/op_checks_backward.h"
#include "backend/relpos_checks.h"
#include "backend/rotary_checks.h"
#include "backend/splade_pool_checks.h"
#include "backend/train_checks.h"
#include "cuda/cuda_internal.h"
#include "cuda/gemm.h"
#include "cuda/gemm_general.h"
#include "cuda/kernels.h"
#include "cuda/kernels_attention_flash_train.h"
#include "cuda/linear_backward_gemms.h"

namespace stoke::cuda {

namespace {

using Launch = CudaBackend::Impl::Launch;  // an op's launches, timed when tracing

// The ops not here throw from UnsupportedOps, generated from the op list:
// "<op>: not supported on the cuda backend; this training op is not on the
// GPU yet; train with --device cpu".
class CudaOps final : public UnsupportedOps {
 public:
  explicit CudaOps(CudaBackend& b)
      : UnsupportedOps("cuda", "this training op is not on the GPU yet; train with --device cpu"),
        s_(b.impl()),
        gemm_(b.impl().lt, b.impl().gemm_workspace, b.impl().gemm_workspace_bytes, *b.impl().gemm_fallbacks),
        gemm_general_(b.impl().lt, b.impl().gemm_workspace, b.impl().gemm_workspace_bytes, *b.impl().gemm_fallbacks) {}

  void linear(const TensorView& out, const TensorView& a, const TensorView& w, const TensorView& bias,
              Activation act, Accumulate acc) const override {
    check_linear(out, a, w, bias, act, acc);
    if (w.dtype != a.dtype)
      throw Error(Errc::unsupported, "linear: on CUDA the weight must be in the activation dtype (" +
                                         std::string(dtype_name(a.dtype)) + "), not " +
                                         std::string(dtype_name(w.dtype)));
    Launch op(s_, "linear");
    // Accumulating: cuBLASLt's beta = 1 with C = D = out (D = a·w^T + out
    // [+ bias]); an unfused bias is then added in place, and there is no
    // activation (the check).
    const bool bias_done = gemm_.run(op.stream, out, a, w, bias, acc == Accumulate::yes);
    const TensorView left = bias_done ? TensorView{} : bias;
    if (!left.empty() || act != Activation::none) launch_bias_act(op.stream, out, left, act);
  }
  void embed_layernorm(const TensorView& out, const TensorView& ids, const TensorView& positions,
                       const TensorView& type_ids, const TensorView& word, const TensorView& pos,
                       const TensorView& type, const TensorView& gamma, const TensorView& beta, float eps,
                       const TensorView& out_low) const override {
    check_embed_layernorm(out, ids, positions, type_ids, word, pos, type, gamma, beta, eps, IndexData::device);
    check_layernorm_copy("embed_layernorm", out, out_low, {&word, &pos, &type, &gamma, &beta});
    Launch op(s_, "embed_layernorm");
    launch_embed_layernorm(op.stream, out, ids, positions, type_ids, word, pos, type, gamma, beta, eps, out_low);
  }
  void residual_layernorm(const TensorView& out, const TensorView& x, const TensorView& residual,
                          const TensorView& gamma, const TensorView& beta, float eps,
                          const TensorView& out_low) const override {
    check_residual_layernorm(out, x, residual, gamma, beta, eps);
    check_layernorm_copy("residual_layernorm", out, out_low, {&x, &residual, &gamma, &beta});
    Launch op(s_, "residual_layernorm");
    launch_residual_layernorm(op.stream, out, x, residual, gamma, beta, eps, out_low);
  }
  void bias_gelu(const TensorView& x, const TensorView& bias) const override {
    check_bias_gelu(x, bias);
    Launch op(s_, "bias_gelu");
    launch_bias_act(op.stream, x, bias, Activation::gelu_erf);
  }
  void attention(const TensorView& out, const TensorView& qkv, const TensorView& cu_seqlens, int heads,
                 int max_seqlen, int window) const override {
    check_attention(out, qkv, cu_seqlens, heads, max_seqlen, window, IndexData::device);
    Launch op(s_, "attention");
    launch_attention(op.stream, out, qkv, cu_seqlens, heads, max_seqlen, window);
  }
  void attention_keys(const TensorView& out, const TensorView& qkv, const TensorView& cu_seqlens,
                      const TensorView& key_lens, int heads, int max_seqlen, int window) const override {
    check_attention_keys(out, qkv, cu_seqlens, key_lens, heads, max_seqlen, window, IndexData::device);
    Launch op(s_, "attention_keys");
    launch_attention_keys(op.stream, out, qkv, cu_seqlens, key_lens, heads, max_seqlen, window);
  }
  void maxsim(const TensorView& scores, const TensorView& q, const TensorView& docs,
              const TensorView& offsets) const override {
    check_maxsim(scores, q, docs, offsets, IndexData::device);
    Launch op(s_, "maxsim");
    launch_maxsim(op.stream, scores, q, docs, offsets);
  }
  void rotary(const TensorView& x, const TensorView& cu_seqlens, const TensorView& inv_freq,
              const Ops::Rotary& rope) const override {
    check_rotary("rotary", x, cu_seqlens, inv_freq, rope, IndexData::device);
    Launch op(s_, "rotary");
    launch_rotary(op.stream, x, cu_seqlens, inv_freq, rope, false);
  }
  void rotary_backward(const TensorView& dx, const TensorView& cu_seqlens, const TensorView& inv_freq,
                       const Ops::Rotary& rope) const override {
    check_rotary("rotary_backward", dx, cu_seqlens, inv_freq, rope, IndexData::device);
    Launch op(s_, "rotary_backward");
    launch_rotary(op.stream, dx, cu_seqlens, inv_freq, rope, true);
  }
  void glu(const TensorView& out, const TensorView& x, const Ops::Glu& glu) const override {
    check_glu(out, x, glu);
    Launch op(s_, "glu");
    launch_glu(op.stream, out, x, glu);
  }
  void glu_backward(const TensorView& dx, const TensorView& dout, const TensorView& x,
                    const Ops::Glu& glu) const override {
    check_glu_backward(dx, dout, x, glu);
    Launch op(s_, "glu_backward");
    launch_glu_backward(op.stream, dx, dout, x, glu);
  }
  void attention_relpos(const TensorView& out, const TensorView& qkv, const TensorView& cu_seqlens, int heads,
                        int max_seqlen, const TensorView& rel) const override {
    check_attention_relpos(out, qkv, cu_seqlens, heads, max_seqlen, rel, IndexData::device);
    Launch op(s_, "attention_relpos");
    launch_attention_relpos(op.stream, out, qkv, cu_seqlens, heads, max_seqlen, rel);
  }
  // The decoder ops (Qwen2, Qwen3): inference only.
  void residual_rmsnorm(const TensorView& h, const TensorView& out, const TensorView& x, const TensorView& gamma,
                        float eps) const override {
    check_residual_rmsnorm(h, out, x, gamma, eps);
    Launch op(s_, "residual_rmsnorm");
    launch_residual_rmsnorm(op.stream, h, out, x, gamma, eps);
  }
  void head_rmsnorm(const TensorView& qkv, const TensorView& q_gamma, const TensorView& k_gamma, int heads,
                    int kv_heads, float eps) const override {
    check_head_rmsnorm(qkv, q_gamma, k_gamma, heads, kv_heads, eps);
    Launch op(s_, "head_rmsnorm");
    launch_head_rmsnorm(op.stream, qkv, q_gamma, k_gamma, heads, kv_heads, eps);
  }
  void attention_gqa(const TensorView& out, const TensorView& qkv, const TensorView& cu_seqlens, int heads,
                     int kv_heads, bool causal, int max_seqlen) const override {
    check_attention_gqa(out, qkv, cu_seqlens, heads, kv_heads, max_seqlen, IndexData::device);
    Launch op(s_, "attention_gqa");
    launch_attention_gqa(op.stream, out, qkv, cu_seqlens, heads, kv_heads, causal);
  }
  void pool(const TensorView& out, const TensorView& h, const TensorView& cu_seqlens,
            Pooling mode) const override {
    check_pool(out, h, cu_seqlens, IndexData::device);
    Launch op(s_, "pool");
    launch_pool(op.stream, out, h, cu_seqlens, mode);
  }
  void splade_pool(const TensorView& out, const TensorView& logits, const TensorView& cu_seqlens,
                   const Ops::SpladePool& p) const override {
    check_splade_pool(out, logits, cu_seqlens, p, IndexData::device);
    Launch op(s_, "splade_pool");
    launch_splade_pool(op.stream, out, logits, cu_seqlens, p);
  }
  void l2_normalize(const TensorView& x) const override {
    check_l2_normalize(x);
    Launch op(s_, "l2_normalize");
    launch_l2_normalize(op.stream, x);
  }
  void gather_rows(const TensorView& out, const TensorView& h, const TensorView& rows) const override {
    check_gather_rows(out, h, rows, IndexData::device);
    Launch op(s_, "gather_rows");
    launch_gather_rows(op.stream, out, h, rows);
  }
  void slice_columns(const TensorView& out, const TensorView& in) const override {
    check_slice_columns(out, in);
    Launch op(s_, "slice_columns");
    launch_slice_columns(op.stream, out, in);
  }
  void convert(const TensorView& out, const TensorView& in) const override {
    check_convert(out, in);
    Launch op(s_, "convert");
    launch_convert(op.stream, out, in);
  }

  // ---- training

  void linear_backward(const TensorView& da, const TensorView& dw, const TensorView& db, const TensorView& dy,
                       const TensorView& a, const TensorView& w, Accumulate da_acc) const override {
    check_linear_backward(da, dw, db, dy, a, w, da_acc);
    Launch op(s_, "linear_backward");
    // da (+)= dy · w, dw += dy^T · a: on cuBLASLt, an f32 dy rounded to the
    // weights' 16 bits first (linear_backward_gemms.h)
    linear_backward_gemms(gemm_general_, op.stream, {s_.convert_workspace, s_.convert_workspace_bytes}, da, dw, dy, a,
                          w, da_acc == Accumulate::yes);
    if (!db.empty()) launch_column_sums(op.stream, scratch(), db, dy);  // from the f32 dy, as the CPU
  }
  void residual_layernorm_train(const TensorView& out, const TensorView& mean, const TensorView& rstd,
                                const TensorView& x, const TensorView& residual, const TensorView& gamma,
                                const TensorView& beta, float eps) const override {
    check_residual_layernorm_train(out, mean, rstd, x, residual, gamma, beta, eps);
    Launch op(s_, "residual_layernorm_train");
    launch_residual_layernorm_train(op.stream, out, mean, rstd, x, residual, gamma, beta, eps);
  }
  void layernorm_backward(const TensorView& dx, const TensorView& dgamma, const TensorView& dbeta,
                          const TensorView& dy, const TensorView& x, const TensorView& residual,
                          const TensorView& mean, const TensorView& rstd, const TensorView& gamma,
                          Accumulate dx_acc) const override {
    check_layernorm_backward(dx, dgamma, dbeta, dy, x, residual, mean, rstd, gamma, dx_acc);
    Launch op(s_, "layernorm_backward");
    launch_layernorm_backward(op.stream, scratch(), dx, dgamma, dbeta, dy, x, residual, mean, rstd, gamma, dx_acc);
  }
  void embed_layernorm_train(const TensorView& out, const TensorView& mean, const TensorView& rstd,
                             const TensorView& ids, const TensorView& positions, const TensorView& type_ids,
                             const TensorView& word, const TensorView& pos, const TensorView& type,
                             const TensorView& gamma, const TensorView& beta, float eps) const override {
    check_embed_layernorm_train(out, mean, rstd, ids, positions, type_ids, word, pos, type, gamma, beta, eps,
                                     IndexData::device);
    Launch op(s_, "embed_layernorm_train");
    launch_embed_layernorm_train(op.stream, out, mean, rstd, ids, positions, type_ids, word, pos, type, gamma, beta,
                                 eps);
  }
  void embed_layernorm_backward(const TensorView& dword, const TensorView& dpos, const TensorView& dtype,
                                const TensorView& dgamma, const TensorView& dbeta, const TensorView& dy,
                                const TensorView& ids, const TensorView& positions, const TensorView& type_ids,
                                const TensorView& word, const TensorView& pos, const TensorView& type,
                                const TensorView& mean, const TensorView& rstd,
                                const TensorView& gamma) const override {
    check_embed_layernorm_backward(dword, dpos, dtype, dgamma, dbeta, dy, ids, positions, type_ids, word, pos,
                                        type, mean, rstd, gamma, IndexData::device);
    Launch op(s_, "embed_layernorm_backward");
    launch_embed_layernorm_backward(op.stream, scratch(), dword, dpos, dtype, dgamma, dbeta, dy, ids, positions,
                                    type_ids, word, pos, type, mean, rstd, gamma);
  }
  void bias_gelu_train(const TensorView& x, const TensorView& pre, const TensorView& bias) const override {
    check_bias_gelu_train(x, pre, bias);
    Launch op(s_, "bias_gelu_train");
    launch_bias_gelu_train(op.stream, x, pre, bias);
  }
  void bias_gelu_backward(const TensorView& dx, const TensorView& dbias, const TensorView& dy,
                          const TensorView& pre) const override {
    check_bias_gelu_backward(dx, dbias, dy, pre);
    Launch op(s_, "bias_gelu_backward");
    launch_bias_gelu_backward(op.stream, scratch(), dx, dbias, dy, pre);
  }
  void tanh_backward(const TensorView& dx, const TensorView& dy, const TensorView& y) const override {
    check_tanh_backward(dx, dy, y);
    Launch op(s_, "tanh_backward");
    launch_tanh_backward(op.stream, dx, dy, y);
  }
  void relu_backward(const TensorView& dx, const TensorView& dy, const TensorView& y) const override {
    check_relu_backward(dx, dy, y);
    Launch op(s_, "relu_backward");
    launch_relu_backward(op.stream, dx, dy, y);
  }
  void add(const TensorView& y, const TensorView& x) const override {
    check_add(y, x);
    Launch op(s_, "add");
    launch_add(op.stream, y, x);
  }
  void dropout(const TensorView& out, const TensorView& x, float p, uint64_t seed, const Ops::DropoutStep& step,
               uint32_t tensor_id, uint64_t row_offset) const override {
    const DropoutRange r = check_dropout("dropout", out, x, p, step, row_offset);
    Launch op(s_, "dropout");
    launch_dropout(op.stream, out, x, p, seed, step, tensor_id, r.first);
  }
  void dropout_backward(const TensorView& dx, const TensorView& dy, float p, uint64_t seed,
                        const Ops::DropoutStep& step, uint32_t tensor_id, uint64_t row_offset) const override {
    // The mask is a function of (seed, step, tensor_id, index): the forward applied to dy.
    const DropoutRange r = check_dropout("dropout_backward", dx, dy, p, step, row_offset);
    Launch op(s_, "dropout_backward");
    launch_dropout(op.stream, dx, dy, p, seed, step, tensor_id, r.first);
  }
  void attention_train(const TensorView& out, const TensorView& lse, const TensorView& qkv,
                       const TensorView& cu_seqlens, int heads, int max_seqlen, int window,
                       const Ops::AttentionDropout& dropout) const override {
    check_attention_train(out, lse, qkv, cu_seqlens, heads, max_seqlen, window, dropout, IndexData::device);
    Launch op(s_, "attention_train");
    launch_attention_train(op.stream, out, lse, qkv, cu_seqlens, heads, max_seqlen, window, dropout);
  }
  void attention_backward(const TensorView& dqkv, const TensorView& dout, const TensorView& qkv,
                          const TensorView& out, const TensorView& lse, const TensorView& cu_seqlens, int heads,
                          int max_seqlen, int window, const Ops::AttentionDropout& dropout) const override {
    check_attention_backward(dqkv, dout, qkv, out, lse, cu_seqlens, heads, max_seqlen, window, dropout,
                                  IndexData::device);
    Launch op(s_, "attention_backward");
    launch_attention_backward(op.stream, scratch(), dqkv, dout, qkv, out, lse, cu_seqlens, heads, max_seqlen, window,
                              dropout);
  }
  void attention_relpos_train(const TensorView& out, const TensorView& lse, const TensorView& qkv,
                              const TensorView& cu_seqlens, int heads, int max_seqlen, const TensorView& rel,
                              const Ops::AttentionDropout& dropout) const override {
    check_attention_relpos_train(out, lse, qkv, cu_seqlens, heads, max_seqlen, rel, dropout, IndexData::device);
    Launch op(s_, "attention_relpos_train");
    launch_attention_relpos_train(op.stream, out, lse, qkv, cu_seqlens, heads, max_seqlen, rel, dropout);
  }
  void attention_relpos_backward(const TensorView& dqkv, const TensorView& drel, const TensorView& dout,
                                 const TensorView& qkv, const TensorView& out, const TensorView& lse,
                                 const TensorView& cu_seqlens, int heads, int max_seqlen, const TensorView& rel,
                                 const Ops::AttentionDropout& dropout) const override {
    check_attention_relpos_backward(dqkv, drel, dout, qkv, out, lse, cu_seqlens, heads, max_seqlen, rel, dropout,
                                         IndexData::device);
    Launch op(s_, "attention_relpos_backward");
    launch_attention_relpos_backward(op.stream, scratch(), dqkv, drel, dout, qkv, out, lse, cu_seqlens, heads,
                                     max_seqlen, rel, dropout);
  }
  void gather_rows_backward(const TensorView& dh, const TensorView& dout, const TensorView& rows) const override {
    check_gather_rows_backward(dh, dout, rows, IndexData::device);
    Launch op(s_, "gather_rows_backward");
    launch_gather_rows_backward(op.stream, dh, dout, rows);
  }
  void pool_backward(const TensorView& dh, const TensorView& dout, const TensorView& h, const TensorView& cu_seqlens,
                     Pooling mode) const override {
    check_pool_backward(dh, dout, h, cu_seqlens, mode, IndexData::device);
    Launch op(s_, "pool_backward");
    launch_pool_backward(op.stream, dh, dout, h, cu_seqlens, mode);
  }
  void cross_entropy(const TensorView& dlogits, const TensorView& metrics, const TensorView& logits,
                     const TensorView& labels, float label_smoothing, float scale) const override {
    check_cross_entropy(dlogits, metrics, logits, labels, label_smoothing, scale, IndexData::device);
    Launch op(s_, "cross_entropy");
    launch_cross_entropy(op.stream, dlogits, metrics, logits, labels, label_smoothing, scale);
  }
  void mse_loss(const TensorView& dpred, const TensorView& metrics, const TensorView& pred, const TensorView& target,
                float scale) const override {
    check_mse_loss(dpred, metrics, pred, target, scale);
    Launch op(s_, "mse_loss");
    launch_mse_loss(op.stream, dpred, metrics, pred, target, scale);
  }
  // The similarities and the gradient's GEMMs are cuBLASLt's (f32, on the
  // centred rows: backend/embedding_loss_checks.h); the rest is
  // kernels_embedding_loss.cu, in double.
  void embedding_loss(const TensorView& d_emb, const TensorView& metrics, const TensorView& emb,
                      const TensorView& scores, const TensorView& workspace,
                      const Ops::EmbeddingLoss& loss) const override {
    const EmbeddingLossShape sh = check_embedding_loss(d_emb, metrics, emb, scores, workspace, loss);
    if (d_emb.empty() && metrics.empty()) return;  // nothing asked for
    Launch op(s_, "embedding_loss");
    const bool grad = !d_emb.empty();
    launch_embedding_loss_rows(op.stream, emb, workspace, sh, loss);
    if (loss.kind == Ops::EmbeddingLoss::Kind::cosent || loss.kind == Ops::EmbeddingLoss::Kind::cosine_mse) {
      launch_embedding_loss_pairs(op.stream, emb, scores, workspace, sh, loss);
    } else {
      const EmbeddingLossLayout l = embedding_loss_layout(sh.B, sh.groups, sh.d);
      float* w = workspace.as<float>();
      const TensorView v_a(w + l.v, DType::f32, {sh.B, sh.d}), v_c(w + l.v + sh.B * sh.d, DType::f32, {sh.M, sh.d});
      const TensorView sim(w + l.sim, DType::f32, {sh.B, sh.M});
      gemm_general_.run(op.stream, "embedding_loss similarities", sim, v_a, false, v_c, true, false);
      launch_embedding_loss_softmax(op.stream, workspace, sh, loss, grad);
      if (grad) {  // sim holds G = dL/ds now
        const TensorView dv_a(w + l.dv, DType::f32, {sh.B, sh.d});
        const TensorView dv_c(w + l.dv + sh.B * sh.d, DType::f32, {sh.M, sh.d});
        gemm_general_.run(op.stream, "embedding_loss anchor gradient", dv_a, sim, false, v_c, false, false);
        gemm_general_.run(op.stream, "embedding_loss candidate gradient", dv_c, sim, true, v_a, false, false);
      }
    }
    if (grad) launch_embedding_loss_backward(op.stream, d_emb, emb, workspace, sh, loss);
    if (!metrics.empty()) launch_embedding_loss_metrics(op.stream, metrics, workspace, sh, loss);
  }
  void sum_squares(const TensorView& out, const TensorView& x) const override {
    check_sum_squares(out, x);
    Launch op(s_, "sum_squares");
    launch_sum_squares(op.stream, scratch(), out, x);
  }
  void clip_scale(const TensorView& scale, const TensorView& sumsq, float max_norm) const override {
    check_clip_scale(scale, sumsq, max_norm);
    Launch op(s_, "clip_scale");
    launch_clip_scale(op.stream, scale, sumsq, max_norm);
  }
  void loss_scale_multiply(const TensorView& x, const TensorView& scaler) const override {
    check_loss_scale_multiply(x, scaler);  // shapes only: the scaler's values stay on the device
    Launch op(s_, "loss_scale_multiply");
    launch_loss_scale_multiply(op.stream, x, scaler);
  }
  void loss_scale_unscale(const TensorView& g, const TensorView& scaler) const override {
    check_loss_scale_unscale(g, scaler);
    Launch op(s_, "loss_scale_unscale");
    launch_loss_scale_unscale(op.stream, g, scaler);
  }
  void loss_scale_update(const TensorView& scaler, float growth_factor, float backoff_factor,
                         int growth_interval) const override {
    check_loss_scale_update(scaler, growth_factor, backoff_factor, growth_interval);
    Launch op(s_, "loss_scale_update");
    launch_loss_scale_update(op.stream, scaler, growth_factor, backoff_factor, growth_interval);
  }
  void adamw(const TensorView& p, const TensorView& g, const TensorView& m, const TensorView& v,
             const TensorView& decay_ranges, const TensorView& grad_scale, const TensorView& scaler,
             const Ops::AdamWStep& hp) const override {
    // The shared check reads the ranges' values, which live on the device
    // here: it checks everything else, the ranges' shape is checked below;
    // their order was checked on the host before they were uploaded (the
    // trainer builds them from the parameter layout once). The scaler's
    // shape is checked; its values are read by the kernel.
    check_adamw(p, g, m, v, TensorView{}, grad_scale, scaler, hp);
    if (decay_ranges.rank != 0 &&
        (decay_ranges.rank != 2 || decay_ranges.dtype != DType::i64 || decay_ranges.dim(1) != 2))
      throw Error(Errc::invalid_argument, "adamw: decay_ranges must be an [R, 2] i64 tensor of [begin, end) ranges");
    Launch op(s_, "adamw");
    launch_adamw(op.stream, p, g, m, v, decay_ranges, grad_scale, scaler, hp);
  }

 private:
  Scratch scratch() const { return {s_.reduce_workspace, s_.reduce_workspace_bytes}; }

  CudaBackend::Impl& s_;
  mutable Gemm gemm_;
  mutable GemmGeneral gemm_general_;
};

}  // namespace

std::unique_ptr<Ops> make_cuda_ops(CudaBackend& backend) {
  attention_setup();
  attention_train_setup();
  return std::make_unique<CudaOps>(backend);
}

}  // namespace stoke::cuda
