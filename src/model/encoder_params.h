// The parameters of an encoder and its heads, as views into device memory,
// with their shapes — the same struct for every architecture (the
// description in io/architecture.h says which are present). H = hidden,
// E = embedding size (= H unless projected), I = intermediate, V = vocab,
// P = max positions, TV = type vocab, C = labels, L = layers.
#pragma once

#include <memory>
#include <vector>

#include "backend/backend.h"
#include "core/tensor.h"
#include "io/hf_config.h"
#include "io/model_weights.h"
#include "io/sentence_transformers.h"

namespace stoke {

// Precision: the layers' weight matrices (qkv_w, attn_out_w, ffn_in_w,
// ffn_out_w) are in the compute dtype; everything else is f32 (but qkv_b on
// a GPU: see load_encoder).
struct EncoderLayerParams {
  TensorView qkv_w;          // (3H, H)  query, key, value weights stacked (one GEMM)
  TensorView qkv_b;          // (3H)  f32; the compute dtype on a GPU (fused into the GEMM)
  TensorView attn_out_w;     // (H, H)
  TensorView attn_out_b;     // (H)
  TensorView attn_ln_gamma;  // (H)
  TensorView attn_ln_beta;   // (H)
  TensorView ffn_in_w;       // (I, H)
  TensorView ffn_in_b;       // (I)
  TensorView ffn_out_w;      // (H, I)
  TensorView ffn_out_b;      // (H)
  TensorView ffn_ln_gamma;   // (H)
  TensorView ffn_ln_beta;    // (H)
  // --precision int8 (model/int8_weights.h): the four GEMM weights above are
  // then i8 codes, and these hold their per-channel scales and row sums
  // ((2, N) f32, linear_int8's wq_meta). Empty otherwise.
  TensorView qkv_meta, attn_out_meta, ffn_in_meta, ffn_out_meta;
  // Gated feed-forwards (Architecture::gated_ffn: GTE, NomicBERT, Qwen): ffn_in_w is
  // (2I, H), both GLU halves in the architecture's order (its fused tensor,
  // or its up and gate stacked), ffn_in_b empty, ffn_gate_w empty.
  // Decoders (Qwen2, Qwen3: LayerFamily::decoder). qkv_w is then
  // ((heads + 2 kv_heads) d, H) and qkv_b the same rows or empty; attn_out_w
  // (H, heads d); attn_ln_gamma / ffn_ln_gamma the pre-attention / pre-FFN
  // RMSNorm weights (no betas); ffn_in_w SwiGLU's gate and up projections
  // stacked, (2I, H): [gate; up], one GEMM.
  TensorView q_norm, k_norm;  // (d) f32: Qwen3's per-head RMSNorm of q and k; empty for Qwen2
  TensorView ffn_gate_w;      // (I, H) the gate alone: empty wherever ffn_in_w holds both halves (every gated FFN)
};

struct EncoderParams {
  TensorView word_embeddings;        // (V, E)
  TensorView position_embeddings;    // (P, E)
  TensorView token_type_embeddings;  // (TV, E)  empty: no token types (DistilBERT)
  TensorView emb_ln_gamma;           // (E)
  TensorView emb_ln_beta;            // (E)
  TensorView emb_proj_w;             // (H, E)  empty unless E != H (ELECTRA's embeddings_project)
  TensorView emb_proj_b;             // (H)
  TensorView rel_bias;               // (NB, heads)  MPNet's relative-position bucket table; empty elsewhere
  TensorView final_norm;             // (H)  a decoder's RMSNorm after the last layer; empty for encoders
  // Rotary encoders (GTE, NomicBERT): the rotary op's frequencies, and
  // position_embeddings above is then a (1, E) zero table (see
  // PositionScheme::rotary). Fixed: neither is trained nor saved.
  TensorView rope_inv_freq;          // (rotary_dim / 2) f32
  std::vector<EncoderLayerParams> layers;  // L of them
  // Classification head: hidden = act(head_dense(h[first token])), logits =
  // head_out(hidden). The dense is BERT's pooler, RoBERTa's classifier.dense,
  // DistilBERT's pre_classifier (the architecture says which); act its
  // head_activation. Empty when the checkpoint has none.
  TensorView head_dense_w;           // (H, H)
  TensorView head_dense_b;           // (H)
  TensorView head_out_w;             // (C, H)
  TensorView head_out_b;             // (C)
  // ModernBERT (LayerFamily::prenorm_encoder): qkv_w is its stored Wqkv, ffn_in_w
  // the GeGLU's Wi (2I, H), attn_ln_gamma empty in layer 0 (no norm there),
  // final_norm the final LayerNorm's weight; no biases anywhere but the
  // classifier's. Its LayerNorms have no bias, so every beta (emb_ln_beta,
  // the layers', final and head) is `zeros`, and the embeddings add the
  // one-row zero position table position_embeddings = zeros (1, H) at
  // position 0 (rotary positions live in the attention).
  TensorView head_norm;              // (H) the head's LayerNorm weight, after dense and GELU
  TensorView zeros;                  // (H) f32 zeros
  TensorView rope_global;            // (head_dim / 2) f32 rotary frequencies of the global layers
  TensorView rope_local;             // (head_dim / 2) f32 those of the local (sliding-window) layers
};

// The fixed tensors of a rotary encoder, on the host: the rotary op's
// frequencies (transformers' default RoPE of the config's theta) and the
// one-row zero position table. Empty vectors for other architectures.
struct RotaryTables {
  std::vector<float> inv_freq;  // (rotary_dim / 2)
  std::vector<float> zero_row;  // (E)
};
RotaryTables rotary_tables(const HfConfig& config);

// Which member holds each role's tensor, for the loader (load_encoder) and
// the training layout (ParamLayout::views) alike. The stacked q/k/v and the
// head (pooler or the head's own dense, by architecture) are placed by hand.
struct EncoderParamField {
  TensorRole role;
  TensorView EncoderParams::*member;
};
inline constexpr EncoderParamField kEmbeddingParamFields[] = {
    {TensorRole::word_embeddings, &EncoderParams::word_embeddings},
    {TensorRole::position_embeddings, &EncoderParams::position_embeddings},
    {TensorRole::token_type_embeddings, &EncoderParams::token_type_embeddings},
    {TensorRole::embeddings_ln_weight, &EncoderParams::emb_ln_gamma},
    {TensorRole::embeddings_ln_bias, &EncoderParams::emb_ln_beta},
    {TensorRole::embeddings_project_weight, &EncoderParams::emb_proj_w},
    {TensorRole::embeddings_project_bias, &EncoderParams::emb_proj_b},
    {TensorRole::relative_attention_bias, &EncoderParams::rel_bias},
    {TensorRole::final_norm_weight, &EncoderParams::final_norm},
};
struct LayerParamField {
  TensorRole role;
  TensorView EncoderLayerParams::*member;
  bool gemm_weight;  // takes the compute dtype in mixed precision (everything else stays f32)
};
inline constexpr LayerParamField kLayerParamFields[] = {
    {TensorRole::attn_out_weight, &EncoderLayerParams::attn_out_w, true},
    {TensorRole::attn_out_bias, &EncoderLayerParams::attn_out_b, false},
    {TensorRole::attn_ln_weight, &EncoderLayerParams::attn_ln_gamma, false},
    {TensorRole::attn_ln_bias, &EncoderLayerParams::attn_ln_beta, false},
    {TensorRole::ffn_in_weight, &EncoderLayerParams::ffn_in_w, true},
    {TensorRole::ffn_in_bias, &EncoderLayerParams::ffn_in_b, false},
    {TensorRole::ffn_out_weight, &EncoderLayerParams::ffn_out_w, true},
    {TensorRole::ffn_out_bias, &EncoderLayerParams::ffn_out_b, false},
    {TensorRole::ffn_ln_weight, &EncoderLayerParams::ffn_ln_gamma, false},
    {TensorRole::ffn_ln_bias, &EncoderLayerParams::ffn_ln_beta, false},
    {TensorRole::q_norm_weight, &EncoderLayerParams::q_norm, false},
    {TensorRole::k_norm_weight, &EncoderLayerParams::k_norm, false},
    {TensorRole::ffn_gate_weight, &EncoderLayerParams::ffn_gate_w, true},
};

// The backend activation of the architecture's classification head (tanh,
// GELU, ReLU); throws Error(unsupported) for one no op computes.
Activation head_activation(const Architecture& a);

// A sentence-transformers Dense module on the device: pooled = act(pooled W^T + b).
struct DenseLayerParams {
  TensorView w;  // (out, in) f32
  TensorView b;  // (out) f32; empty without bias
  Activation act = Activation::tanh;
};

// bge-m3's per-token heads (model/m3_heads.h loads them from the folder's
// sparse_linear.pt and colbert_linear.pt), f32, applied to the f32 last
// hidden state. Each is empty when its file is absent.
struct M3HeadParams {
  TensorView sparse_w;   // (1, H)  a token's lexical weight is relu(h · sparse_w + sparse_b)
  TensorView sparse_b;   // (1)
  TensorView colbert_w;  // (D, H)  a token's ColBERT vector is h · colbert_w^T + colbert_b, then L2-normalized
  TensorView colbert_b;  // (D)
  bool has_sparse() const { return !sparse_w.empty(); }
  bool has_colbert() const { return !colbert_w.empty(); }
  int64_t colbert_dim() const { return has_colbert() ? colbert_w.dim(0) : 0; }
};

// A SPLADE model's MLM head and pooling (model/splade_head.h loads them),
// f32, on the f32 last hidden state h: logits = decoder(LayerNorm(act(
// transform(h)))), then SpladePooling's log1p(relu(.)) pooled per text.
struct SpladeHeadParams {
  TensorView transform_w;  // (H, H)  BERT's cls.predictions.transform.dense
  TensorView transform_b;  // (H)
  TensorView ln_gamma;     // (H)
  TensorView ln_beta;      // (H)
  TensorView decoder_w;    // (V, H)  the word embeddings when tied, else the file's decoder
  TensorView decoder_b;    // (V)
  Activation act = Activation::gelu_erf;  // the transform's (config.json hidden_act)
  float eps = 1e-12f;                     // the transform LayerNorm's
  SpladeModule pooling;                   // SpladePooling's strategy and activation
  // Inference-free SPLADE: the query route's SparseStaticEmbedding weight, one
  // per token id, on the host (a query's row is the weights of its distinct
  // ids: no forward). Empty when every text runs the encoder.
  std::vector<float> static_query;        // (V)
  bool present() const { return !decoder_w.empty(); }
  int64_t vocab() const { return present() ? decoder_w.dim(0) : 0; }
};

// Where the parameters live: device buffers the loader filled, plus the
// mapped weight files that zero-copy views point into.
struct LoadedEncoder {
  HfConfig config;
  EncoderParams params;
  DType dtype = DType::f32;  // weights and activations
  bool int8_linears = false; // the layers' GEMMs run as linear_int8 (activations stay f32)
  std::vector<std::unique_ptr<Buffer>> buffers;
  ModelWeights weights;      // keeps the mmap alive for zero-copy views
  std::vector<DenseLayerParams> dense;  // sentence-transformers Dense modules, after pooling
  // A PyLate ColBERT model's Dense modules, on EVERY token's last hidden
  // state, (T, H) -> (T, D) (model/colbert_model.h); empty otherwise.
  std::vector<DenseLayerParams> colbert_dense;
  M3HeadParams m3;                      // bge-m3's sparse / ColBERT heads (model/m3_heads.h)
  SpladeHeadParams splade;              // a SPLADE model's MLM head (model/splade_head.h)
  // Width of a sentence vector: the last Dense module's out_features, else hidden_size.
  int64_t sentence_width() const { return dense.empty() ? config.hidden_size : dense.back().w.dim(0); }
  bool has_head_dense() const { return !params.head_dense_w.empty(); }
  // A decoder's classifier (score) has no hidden layer.
  bool has_classifier() const { return !params.head_out_w.empty() && (has_head_dense() || !config.arch->head_has_dense()); }
};

struct EncoderLoadOptions {
  DType dtype = DType::f32;   // f32, bf16 or f16
  bool need_pooler = false;       // the base model's pooler must be there (BERT's head needs it anyway)
  bool need_classifier = false;   // the whole classification head must be there
  bool int8_linears = false;      // quantize the layers' GEMM weights (dtype must be f32; host backends)
};

// Checks every tensor against the config (io/encoder_layout), then places the
// weights on the backend: used where they lie when the backend's memory is
// host memory and the dtype already matches, converted and copied once
// otherwise. Query/key/value are stacked into one matrix for one GEMM.
// A stored tensor's elements widened or narrowed to f32 (any float dtype; the
// data may be unaligned), into dst[numel].
void copy_stored_as_f32(const StoredTensor& src, float* dst);

LoadedEncoder load_encoder(const HfConfig& config, ModelWeights weights, Backend& backend,
                           const EncoderLoadOptions& options);

// Places the Dense modules of a sentence-transformers folder (their weights:
// <folder>/<path>/model.safetensors, "linear.weight" [out, in] and
// "linear.bias" [out]) on the backend, f32, after the encoder's pooling.
// Throws ModelFolderError / Error naming the file and tensor: a missing
// tensor, a shape that contradicts the module's config.json, a first
// in_features that is not the hidden size, a chain whose sizes do not meet.
void load_dense_modules(LoadedEncoder& encoder, const std::filesystem::path& folder,
                        const std::vector<DenseModule>& modules, Backend& backend);

// One Dense module's tensors as f32 host values, checked as load_dense_modules
// checks them; `width`: the number of values the module receives.
struct DenseModuleValues {
  std::vector<float> weight;  // (out, in)
  std::vector<float> bias;    // (out); empty without bias
};
DenseModuleValues read_dense_module(const std::filesystem::path& folder, const DenseModule& module, int64_t width);

}  // namespace stoke
