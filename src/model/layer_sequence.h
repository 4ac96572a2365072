// The encoder's layer sequence, written once: the embeddings (with their
// projection where the architecture has one) and one post-LN transformer
// layer. The inference runner (encoder.cc) and the training runner
// (encoder_training.cc) both enqueue exactly this; the backward in
// encoder_training.cc mirrors it line by line.
//
// Inference and training differ only in what they keep: training passes a
// SequenceTraining (dropout, and buffers for the statistics the backward
// reads), and takes the ops' _train variants; inference passes none and
// takes the fused ops (GELU in the GEMM's epilogue, LayerNorm writing the
// compute-dtype copy of its output in the same pass). The training forwards
// give the inference forwards' outputs bit for bit.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "model/encoder_params.h"

namespace stoke {

// One batch's device inputs. T = tokens, B = sequences.
struct SequenceInputs {
  TensorView ids;        // (T) i32
  TensorView positions;  // (T) i32
  TensorView types;      // (T) i32; empty: the architecture has no token types
  TensorView cu;         // (B + 1) i32
  int max_seqlen = 0;
  int heads = 0;
  float eps = 0;
  TensorView rel;        // (2 * max_seqlen - 1, heads) f32 relative-position bias (MPNet); empty: none
  // (B) i32: only the first key_lens[b] tokens of sequence b are attention
  // keys (attention_keys: a ColBERT model's unattended query expansion);
  // empty: every token. Inference only.
  TensorView key_lens;
  // Rotary encoders (GTE, NomicBERT): q and k of the packed qkv rotated after
  // the QKV GEMM, positions restarting at 0 in every sequence (from cu).
  TensorView inv_freq;   // (rotary_dim / 2) f32; empty: no rotary
  Ops::Rotary rope;
  // Gated encoders: the FFN GEMM writes both GLU halves (LayerViews::ffgu),
  // glu makes the activation; glu_dropout: the hidden dropout on it (GTE).
  bool gated = false;
  Ops::Glu glu;
  bool glu_dropout = false;
};

// The architecture's parts of SequenceInputs (rotary, GLU) from its config
// and parameters; both runners call it.
void set_architecture_inputs(SequenceInputs& in, const HfConfig& c, const EncoderParams& p);

// MPNet's relative-position bucket (transformers' relative_position_bucket:
// T5's, bidirectional, max distance 128) of every key-minus-query distance
// j - i in [-(max_seqlen - 1), max_seqlen - 1], at index j - i + max_seqlen - 1.
std::vector<int32_t> relative_position_buckets(int max_seqlen, int64_t num_buckets);

// rel (2M - 1, heads) = table[buckets] for one batch (M = its max_seqlen).
void relative_bias_forward(const Ops& ops, const TensorView& rel, const TensorView& table, const TensorView& buckets);

// Training: dropout (Philox sites: 0 the embeddings, 1 + 3l / 2 + 3l / 3 + 3l
// layer l's attention probabilities / attention output / FFN output).
struct SequenceTraining {
  float hidden = 0, attention = 0;  // dropout rates
  uint64_t seed = 0;
  Ops::DropoutStep step{};          // the masks' Philox step: a host value, or device memory (training graphs)
  uint64_t token_offset = 0;        // the batch's first token in the whole batch (the masks' row_offset)
  bool low = false;                 // GEMMs in bf16 / f16: convert their inputs
  static uint32_t site(int64_t l, int which) { return static_cast<uint32_t>(1 + 3 * l + which); }
  // Layer l's GLU output (GTE): its own range, so the sites above keep their numbers.
  static uint32_t glu_site(int64_t l) { return static_cast<uint32_t>((1u << 21) + l); }
};

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

}  // namespace stoke
