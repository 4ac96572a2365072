// The inputs every encoder family's layer sequence reads (one batch's ids,
// positions, offsets, heads; the post-LN variants' rotary, GLU and relative
// bias settings), and its training form's dropout keys. The sequences
// themselves are the families' units: model/post_ln_family.h (BERT-style),
// model/prenorm_family.h (ModernBERT), model/decoder_family.h (Qwen).
#pragma once

#include <cstdint>

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

}  // namespace stoke
