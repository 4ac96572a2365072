// The post-LN encoder family (LayerFamily::post_ln_encoder: BERT, RoBERTa,
// XLM-R, CamemBERT, ELECTRA, DistilBERT, MPNet, GTE, NomicBERT), as
// transformers' BertModel computes it: its layer sequence written once, in
// its inference and its training form, the training backward beside it, its
// classification head in both forms, and its training workspace.
//
//   e = LN_emb(word[ids] + position[positions] + type[types]);  [dropout]; h = e [W_proj^T]   (ELECTRA: E != H)
//   per layer l:  qkv = x W_qkv^T (+ b); q, k rotated (GTE, NomicBERT)
//                 hm  = LN(dropout(attention(q, k, v [+ MPNet's relative bias]) W_o^T) + x)
//                 out = LN(dropout(GELU(hm W_1^T) W_2^T) + hm)      (gated: glu(hm W_1^T) of both halves)
//   head: hidden = act(dense(h[first token])) (BERT: the pooler), logits = out(hidden)
//
// Inference and training differ only in what they keep: training passes a
// SequenceTraining (dropout, and buffers for the statistics the backward
// reads), and takes the ops' _train variants; inference passes none and
// takes the fused ops (GELU in the GEMM's epilogue, LayerNorm writing the
// compute-dtype copy of its output in the same pass). The training forwards
// give the inference forwards' outputs bit for bit. A variant (names,
// embeddings, head, rotary, gating, MPNet's bias) is an Architecture entry;
// this unit reads its fields.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "backend/backend.h"
#include "io/hf_config.h"
#include "model/encoder_params.h"
#include "model/family_trainer.h"
#include "model/layer_sequence.h"
#include "model/trainable_encoder.h"

namespace stoke {

// The architecture's parts of SequenceInputs (rotary, GLU) from its config
// and parameters; the inference forward and the trainer call it.
void set_architecture_inputs(SequenceInputs& in, const HfConfig& c, const EncoderParams& p);

// MPNet's relative-position bucket (transformers' relative_position_bucket:
// T5's, bidirectional, max distance 128) of every key-minus-query distance
// j - i in [-(max_seqlen - 1), max_seqlen - 1], at index j - i + max_seqlen - 1.
std::vector<int32_t> relative_position_buckets(int max_seqlen, int64_t num_buckets);

// rel (2M - 1, heads) = table[buckets] for one batch (M = its max_seqlen).
void relative_bias_forward(const Ops& ops, const TensorView& rel, const TensorView& table, const TensorView& buckets);

// One layer's buffers for one batch (all (T, ·)). Inference points several at
// the same memory (x = hm = out: the residual stream updated in place;
// ao = fo: one f32 scratch); training gives each its own, kept for backward.
struct LayerViews {
  TensorView x;       // (T, H) f32 input
  TensorView x_in;    // (T, H) the QKV GEMM's input in the compute dtype (= x in f32)
  TensorView qkv;     // (T, 3H)
  TensorView ctx;     // (T, H)
  TensorView lse;     // (T, heads) f32, training
  TensorView ao;      // (T, H) f32 attention output projection
  TensorView hm;      // (T, H) f32 after the attention block's LayerNorm
  TensorView hm_low;  // (T, H) hm in the compute dtype; empty in f32
  TensorView m1, r1;  // (T) f32 LayerNorm statistics, training
  TensorView ffgu;    // (T, 2I) gated encoders: the FFN GEMM's output, both GLU halves
  TensorView ffa;     // (T, I) the FFN activation
  TensorView ffpre;   // (T, I) f32 its pre-activation, training
  TensorView fo;      // (T, H) f32 FFN output projection
  TensorView out;     // (T, H) f32 the layer's output
  TensorView out_low; // (T, H) out in the compute dtype (inference; empty in f32)
  TensorView m2, r2;  // (T) f32, training
};

// Embeddings: gather + LayerNorm into `e` (= h unless the architecture
// projects: then (T, E)), [dropout], [projection into h]. Inference: h_low
// receives the compute-dtype copy of h (empty in f32). Training: mean / rstd
// (T) receive the LayerNorm statistics.
void embeddings_forward(const Ops& ops, const EncoderParams& p, const SequenceInputs& in, const TensorView& e,
                        const TensorView& h, const TensorView& h_low, const TensorView& mean, const TensorView& rstd,
                        const SequenceTraining* train);

// Layer l: hm = LN(dropout(attention(x) W_o) + x), out = LN(dropout(GELU(hm W_1) W_2) + hm).
// Rotary encoders rotate q and k between the QKV GEMM and attention; gated
// ones replace GELU(hm W_1) by [dropout](glu(hm W_1)), W_1 of both halves.
void layer_forward(const Ops& ops, const EncoderLayerParams& w, const SequenceInputs& in, const LayerViews& v,
                   int64_t l, const SequenceTraining* train);

// Inference: the embeddings (into e, then projected into v.x where the
// architecture projects) and every layer on v's buffers, v.x = v.hm = v.out
// the residual stream updated in place; leaves the last hidden state in v.out.
// in's rotary and GLU settings are filled here.
void post_ln_encoder_forward(const Ops& ops, const EncoderParams& p, const HfConfig& c, SequenceInputs in,
                             const TensorView& e, const LayerViews& v);

// The classification head's hidden state (inference): first (B, H) = h's
// rows at `rows` (each sequence's first token), hidden (B, H) =
// act(first W_dense^T + b) (BERT: the pooler).
void post_ln_head_forward(const Ops& ops, const EncoderParams& p, const HfConfig& c, const TensorView& h,
                          const TensorView& rows, const TensorView& first, const TensorView& hidden);

// Inference (EncoderRunner, model/encoder.h): the layers' workspace, sized
// once for T tokens (all (T, ·): q/k/v, attention output, the f32 dense
// outputs before residual + LayerNorm, the FFN activation, a gated encoder's
// both GLU halves). Default-constructed: holds nothing.
class PostLnBuffers {
 public:
  PostLnBuffers() = default;
  PostLnBuffers(Backend& backend, const HfConfig& c, DType dt, size_t T);
  // A batch of T tokens' views for post_ln_encoder_forward: the residual
  // stream h (T, H) f32 updated in place, h_low its compute-dtype copy (empty in f32).
  LayerViews views(const TensorView& h, const TensorView& h_low, int64_t T) const;

 private:
  DType dt_ = DType::f32;
  int64_t H_ = 0, I_ = 0;
  std::unique_ptr<Buffer> qkv_;   // (T, 3H) compute dtype
  std::unique_ptr<Buffer> ctx_;   // (T, H) compute dtype: attention output
  std::unique_ptr<Buffer> tmp_;   // (T, H) f32: dense outputs before residual + LayerNorm
  std::unique_ptr<Buffer> ffn_;   // (T, I) compute dtype: the FFN activation
  std::unique_ptr<Buffer> ffgu_;  // (T, 2I) compute dtype, gated encoders only: both GLU halves
};

// Training: the workspace (every activation the backward reads, per layer,
// sized for the maximum micro-batch) and the four phases of family_trainer.h.
class PostLnTrainer final : public FamilyTrainer {
 public:
  PostLnTrainer(const TrainableEncoder& encoder, Backend& backend, int64_t max_tokens, int64_t max_sequences);
  void forward(const TrainStep& st) const override;
  void loss(const TrainStep& st, const TensorView& metrics) const override;
  void backward_head(const TrainStep& st) const override;
  void backward(const TrainStep& st, const std::function<void(int64_t)>& after_layer) const override;
  TensorView last_hidden(int64_t T) const override { return h_.back().rows(T); }
  TensorView d_last_hidden(int64_t T) const override { return d_h_.rows(T); }

  // Device bytes of the workspace per token and per sequence (auto batch size).
  static int64_t bytes_per_token(const HfConfig& config, DType dtype);
  static int64_t bytes_per_sequence(const HfConfig& config);

 private:
  struct LayerSlabs {
    TrainSlab x_low;          // (T, H) the QKV GEMM's input in the compute dtype (bf16 / f16 only)
    TrainSlab qkv, ctx;       // (T, 3H), (T, H) compute dtype
    TrainSlab lse;            // (T, heads) f32
    TrainSlab ao;             // (T, H) f32 attention output projection
    TrainSlab m1, r1;         // (T) f32 the attention LayerNorm's statistics
    TrainSlab hm, hm_low;     // (T, H) f32 its output, and the compute copy (bf16 / f16 only)
    TrainSlab ffgu;           // (T, 2I) compute dtype, gated: glu's input
    TrainSlab ffa;            // (T, I) compute dtype: the FFN activation
    TrainSlab ffpre;          // (T, I) f32, not gated: GELU's pre-activation
    TrainSlab fo;             // (T, H) f32 FFN output projection
    TrainSlab m2, r2;         // (T) f32 the FFN LayerNorm's statistics
  };
  // MPNet: the buckets of the distances of this batch's max_seqlen.
  TensorView rel_buckets_view(const TrainStep& st) const;

  const TrainableEncoder& enc_;
  Backend& backend_;
  std::vector<TrainSlab> h_;       // L + 1 residual streams (T, H) f32: h[l] = input of layer l
  std::vector<LayerSlabs> layers_;
  TrainSlab em_, er_;              // (T) f32 embedding LayerNorm statistics
  TrainSlab emb_, d_emb_;          // (T, E) f32: LayerNorm output before the projection, its gradient (E != H only)
  TrainSlab first_, pooled_, pooled_drop_, first_drop_;  // (B, H) f32 the head's rows
  TrainSlab head_pre_;             // (B, H) f32 the head's pre-activation (GELU heads)
  TrainSlab logits_, dlogits_;     // (B, C) f32
  TrainSlab g_a_, g_b_;            // (B, H) f32 head gradient rows
  TrainSlab rel_, d_rel_, d_rel_l_;  // (2P - 1, heads) f32 MPNet's relative bias, its gradient, one layer's
  std::unique_ptr<Buffer> rel_buckets_;  // (2P - 1) i32 the bucket of every distance, copied once
  std::vector<int32_t> rel_buckets_host_;
  TrainSlab d_h_, d_x_, d_t_;      // (T, H) f32 gradients
  TrainSlab d_i_;                  // (T, I) f32
  TrainSlab d_qkv_;                // (T, 3H) f32
  TrainSlab d_gu_;                 // (T, 2I) f32 gated: the GLU input's gradient
};

}  // namespace stoke
