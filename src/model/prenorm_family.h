// The pre-norm encoder family (LayerFamily::prenorm_encoder: ModernBERT),
// as transformers' ModernBertModel computes it: its layer sequence written
// once, in its inference and its training form, the training backward beside
// it, its classification head in both forms, and its training workspace.
//
//   h = LN_emb(tok_embeddings[ids])
//   per layer l:  x = l == 0 ? h : LN_attn(h)            (layer 0 has no attn_norm)
//                 q, k, v = x Wqkv^T; q, k rotated (the layer's rope theta)
//                 h = h + attention(q, k, v; global, or local |i - j| <= w) Wo^T
//                 h = h + GeGLU(LN_mlp(h) Wi^T) Wo_mlp^T   (Wi = [input | gate], GELU on input)
//   out = LN_final(h)
// every LayerNorm without a bias, no linear biases.
//
// The two forms differ only in what they keep, as model/post_ln_family.h's
// do. Inference (no PrenormTraining) keeps the f32 residual stream h in one
// buffer: each block's output projection adds into it in the GEMM
// (Accumulate::yes: no residual-add pass), then the LayerNorm reads the sum
// and also writes its compute-dtype copy for the next GEMM. Training keeps
// every layer's activations: each block's output projection goes to its own
// buffer, the LayerNorm normalises (projection + h) keeping its statistics,
// then h is added into the projection's buffer (ao becomes h + attention,
// h[l + 1] the layer's output sum), so each LayerNorm's backward reads its
// input sum as one tensor.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "backend/backend.h"
#include "io/hf_config.h"
#include "model/encoder_params.h"
#include "model/family_params.h"
#include "model/family_trainer.h"
#include "model/layer_sequence.h"
#include "model/trainable_encoder.h"

namespace stoke {

// Inference: one batch's buffers (all (T, ·)), reused by every layer.
struct PrenormViews {
  TensorView h;       // (T, H) f32 residual stream (the output projections add into it); LN_final's output at the end
  TensorView h_low;   // (T, H) the embeddings' output in the compute dtype (layer 0's GEMM input); empty in f32
  TensorView xn;      // (T, H) f32 a block's normalised input
  TensorView xn_low;  // (T, H) the same in the compute dtype; empty in f32
  TensorView qkv;     // (T, 3H) compute dtype
  TensorView ctx;     // (T, H) compute dtype
  TensorView gate;    // (T, 2I) compute dtype: Wi's output
  TensorView ffa;     // (T, I) compute dtype: the GeGLU's output
};

// Training: what the backward reads, per layer (all (T, ·)).
struct PrenormLayerKeep {
  TensorView h;               // (T, H) f32 h[l], the layer's input
  TensorView x_low;           // (T, H) layer 0: h in the compute dtype; empty in f32
  TensorView qkv, ctx;        // (T, 3H), (T, H) compute dtype
  TensorView lse;             // (T, heads) f32 attention's log-sum-exp
  TensorView ao;              // (T, H) f32 attention's projection, then h + attention
  TensorView xa, xa_low;      // (T, H) attn_norm's output (layers > 0), f32 and compute dtype (empty in f32)
  TensorView ma, ra;          // (T) f32 its statistics
  TensorView xm, xm_low;      // (T, H) mlp_norm's output
  TensorView mm, rm;          // (T) f32
  TensorView gate;            // (T, 2I) compute dtype: Wi's output
  TensorView ffa;             // (T, I) compute dtype: the GeGLU's output
  TensorView next;            // (T, H) f32 h[l + 1]: the FFN projection, then the layer's output sum
};
struct PrenormTraining {
  SequenceTraining drop;               // attention dropout keys (ModernBERT trains its layers without dropout), low
  TensorView em, er;                   // (T) f32 the embedding LayerNorm's statistics
  std::vector<PrenormLayerKeep> layers;
  TensorView h_out, mf, rf;            // (T, H) f32 LN_final's output, (T) its statistics
};

// in.positions must be all 0 (the one-row zero position table, see
// EncoderParams). Inference (train null): leaves LN_final(h) in v.h.
// Training: leaves it in train->h_out (v unused).
void prenorm_encoder_forward(const Ops& ops, const EncoderParams& p, const HfConfig& c, const SequenceInputs& in,
                             const PrenormViews& v, const PrenormTraining* train);

// The training gradients' buffers (f32, all (T, ·)).
struct PrenormGrads {
  TensorView dh;     // (T, H) d h[l] as the backward walks down; d h[0] at the end
  TensorView dx;     // (T, H) d h_out on entry (the head's or the pooling's backward writes it), then scratch
  TensorView di;     // (T, I)
  TensorView dqkv;   // (T, 3H)
  TensorView dgate;  // (T, 2I)
};

// The backward of prenorm_encoder_forward's training form, from d h_out (in
// d.dx): the final norm, the layers from the last down (after_layer(l) after
// each, when set), the embeddings. Parameter gradients ADD to g.
void prenorm_encoder_backward(const Ops& ops, const EncoderParams& p, const EncoderParams& g, const HfConfig& c,
                              const SequenceInputs& in, const PrenormTraining& keep, const PrenormGrads& d,
                              const std::function<void(int64_t)>& after_layer);

// The classification head's hidden state (inference): hidden =
// LN_head(GELU(pooled W_dense^T)), pooled the first token's row or the mean
// of the sequence's rows (classifier_pooling). pooled, hidden: (B, H) f32
// scratch / result; zero_rows (B, H) f32 zeros (the LayerNorm op normalises a
// sum; here + 0).
void prenorm_head_forward(const Ops& ops, const EncoderParams& p, const HfConfig& c, const TensorView& h,
                          const TensorView& cu, const TensorView& pooled, const TensorView& hidden,
                          const TensorView& zero_rows);

// Inference (EncoderRunner, model/encoder.h): the workspace, sized once for T
// tokens and B pooled rows: (T, H) f32 + compute-dtype normalised block inputs
// (the GEMMs add into h: no f32 scratch), q/k/v, attention output, (T, 2I)
// Wi's output, (T, I) the GeGLU's, and two constants zeroed once: (T) i32
// zero positions (the input to the one-row position table) and (B, H) f32
// zero rows (the head LayerNorm's "residual"). Default-constructed: holds nothing.
class PrenormBuffers {
 public:
  PrenormBuffers() = default;
  PrenormBuffers(Backend& backend, const HfConfig& c, DType dt, size_t T, size_t B);
  // A batch of T tokens' views for prenorm_encoder_forward: the residual
  // stream h (T, H) f32, h_low its compute-dtype copy (empty in f32).
  PrenormViews views(const TensorView& h, const TensorView& h_low, int64_t T) const;
  TensorView zero_positions(int64_t T) const;  // (T) i32: SequenceInputs::positions
  TensorView zero_rows(int64_t B) const;       // (B, H) f32: prenorm_head_forward's
  PrenormBuffers(const PrenormBuffers&) = delete;  // zero_host_ is read by queued copies:
  PrenormBuffers& operator=(const PrenormBuffers&) = delete;  // built in place, never moved
  PrenormBuffers(PrenormBuffers&&) = delete;
  PrenormBuffers& operator=(PrenormBuffers&&) = delete;

 private:
  DType dt_ = DType::f32;
  int64_t H_ = 0, I_ = 0;
  std::unique_ptr<Buffer> qkv_;             // (T, 3H) compute dtype
  std::unique_ptr<Buffer> ctx_;             // (T, H) compute dtype
  std::unique_ptr<Buffer> ffn_;             // (T, I) compute dtype: the GeGLU's output
  std::unique_ptr<Buffer> xn_;              // (T, H) f32: a block's normalised input
  std::unique_ptr<Buffer> xn_low_;          // (T, H) compute dtype: its copy (none in f32)
  std::unique_ptr<Buffer> gate_;            // (T, 2I) compute dtype: Wi's output
  std::unique_ptr<Buffer> zero_positions_;  // (T) i32 zeros
  std::unique_ptr<Buffer> zero_rows_;       // (B, H) f32 zeros
  std::vector<int32_t> zero_host_;  // the zeros' host copy (read by the copies, on the stream)
};

// Loading (model/family_params.h): --precision int8 is refused (the sequence
// has no int8 form yet); the fixed tensors are `zeros` (every LayerNorm's
// beta: they have none, and the one-row zero position table) and the global
// and local rotary frequencies.
void prenorm_check_load(const HfConfig& c, const EncoderLoadOptions& options);
void prenorm_place_fixed(const HfConfig& c, const PlaceFloats& place, EncoderParams& p);
// Training: refused when config.json sets dropout in the layers (the
// sequence trains without, as every hub config sets it).
void prenorm_check_training(const HfConfig& c);

// Training: the workspace (every activation the backward reads, sized for
// the maximum micro-batch; PrenormTraining's views are cut from it per batch)
// and the four phases of family_trainer.h. The head's training form pools
// the real rows only (graph padding never reaches it).
class PrenormTrainer final : public FamilyTrainer {
 public:
  PrenormTrainer(const TrainableEncoder& encoder, Backend& backend, int64_t max_tokens, int64_t max_sequences);
  // ModernBERT trains its layers without dropout (as its hub configs set).
  void check(const MicroBatchKnobs& knobs) const override;
  void forward(const TrainStep& st) const override;
  void loss(const TrainStep& st, const TensorView& metrics) const override;
  // Down to d h_out (in d_x).
  void backward_head(const TrainStep& st) const override;
  // From d h_out (in d_x): the final norm, the layers, the embeddings.
  void backward(const TrainStep& st, const std::function<void(int64_t)>& after_layer) const override;
  TensorView last_hidden(int64_t T) const override { return h_out_.rows(T); }
  TensorView d_last_hidden(int64_t T) const override { return d_x_.rows(T); }

  // Device bytes of the workspace per token and per sequence (auto batch
  // size). Per token it is the size the workspace had when it shared the
  // post-LN family's slabs, an upper bound of what it holds now: the auto
  // batch size stays what it was.
  static int64_t bytes_per_token(const HfConfig& config, DType dtype);
  static int64_t bytes_per_sequence(const HfConfig& config);

 private:
  struct LayerSlabs {
    TrainSlab x_low;                // (T, H) layer 0: h in the compute dtype (bf16 / f16 only)
    TrainSlab qkv, ctx;             // (T, 3H), (T, H) compute dtype
    TrainSlab lse;                  // (T, heads) f32
    TrainSlab ao;                   // (T, H) f32 attention's projection, then h + attention
    TrainSlab xa, xa_low, ma, ra;   // attn_norm (layers > 0): (T, H) f32 and compute dtype, (T) f32 statistics
    TrainSlab xm, xm_low, mm, rm;   // mlp_norm, the same
    TrainSlab gate;                 // (T, 2I) compute dtype: Wi's output
    TrainSlab ffa;                  // (T, I) compute dtype: the GeGLU's output
  };
  SequenceInputs inputs(const TrainStep& st) const;
  PrenormTraining keep(const TrainStep& st) const;

  const TrainableEncoder& enc_;
  Backend& backend_;
  std::vector<TrainSlab> h_;          // L + 1 (T, H) f32: h[l] = input of layer l; h[l + 1] the FFN projection, then the sum
  std::vector<LayerSlabs> layers_;
  TrainSlab em_, er_;                 // (T) f32 the embedding LayerNorm's statistics
  TrainSlab h_out_, mf_, rf_;         // (T, H) f32 the final LayerNorm's output, (T) its statistics
  TrainSlab pooled_, hid_, head_pre_, head_ln_, out_drop_;  // (B, H) f32 the head's rows
  TrainSlab head_m_, head_r_;         // (B) f32 the head LayerNorm's statistics
  TrainSlab logits_, dlogits_;        // (B, C) f32
  TrainSlab g_a_, g_b_;               // (B, H) f32 head gradient rows
  TrainSlab zero_rows_, zero_pos_;    // (B, H) f32 zeros (the head LayerNorm's "residual"), (T) i32 zero positions
  std::vector<int32_t> zeros_host_;   // the zeros' host copy (read by the copies, on the stream)
  TrainSlab d_h_, d_x_;               // (T, H) f32
  TrainSlab d_i_;                     // (T, I) f32
  TrainSlab d_qkv_;                   // (T, 3H) f32
  TrainSlab d_gate_;                  // (T, 2I) f32
};

}  // namespace stoke
