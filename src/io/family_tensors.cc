#include "io/family_tensors.h"

namespace stoke {

namespace {

using R = TensorRole;

TensorDim hidden(const HfConfig& c) { return {c.hidden_size, std::string(c.arch->fields.hidden_size)}; }

// ---- post-LN encoders: the shared shapes; a variant's tensors are its entry's names.
std::vector<TensorDim> post_ln_dims(const HfConfig&, R) { return {}; }
bool post_ln_lacks(const HfConfig&, R, int64_t) { return false; }

// ---- pre-norm encoders (ModernBERT): Wi is the GeGLU's [input | gate] (Wqkv stacked: the shared qkv_weight).
std::vector<TensorDim> prenorm_dims(const HfConfig& c, R r) {
  const ConfigFields& f = c.arch->fields;
  switch (r) {
    case R::ffn_in_weight: return {{2 * c.intermediate_size, "2 * " + std::string(f.intermediate_size)}, hidden(c)};
    default: return {};
  }
}
// The first layer has no attention norm (nn.Identity).
bool prenorm_lacks(const HfConfig&, R r, int64_t layer) { return r == R::attn_ln_weight && layer == 0; }

// ---- decoders (Qwen): grouped-query attention, q has heads x d rows, k and v kv_heads x d.
std::vector<TensorDim> decoder_dims(const HfConfig& c, R r) {
  const TensorDim H = hidden(c);
  const TensorDim Q{c.num_attention_heads * c.head_dim(), "num_attention_heads * head_dim"};
  const TensorDim KV{c.num_key_value_heads * c.head_dim(), "num_key_value_heads * head_dim"};
  const TensorDim D{c.head_dim(), "head_dim"};
  switch (r) {
    case R::query_weight: return {Q, H};
    case R::key_weight: case R::value_weight: return {KV, H};
    case R::query_bias: return {Q};
    case R::key_bias: case R::value_bias: return {KV};
    case R::attn_out_weight: return {H, Q};
    case R::q_norm_weight: case R::k_norm_weight: return {D};
    default: return {};
  }
}
// Attention biases exist only with attention_bias (Qwen2: q/k/v always).
bool decoder_lacks(const HfConfig& c, R r, int64_t) {
  return !c.attention_bias && (r == R::query_bias || r == R::key_bias || r == R::value_bias || r == R::attn_out_bias);
}

}  // namespace

std::vector<TensorDim> family_tensor_dims(const HfConfig& c, TensorRole r) {
  switch (c.arch->family) {
    case LayerFamily::post_ln_encoder: return post_ln_dims(c, r);
    case LayerFamily::prenorm_encoder: return prenorm_dims(c, r);
    case LayerFamily::decoder: return decoder_dims(c, r);
  }
  return {};
}

bool family_lacks_tensor(const HfConfig& c, TensorRole r, int64_t layer) {
  switch (c.arch->family) {
    case LayerFamily::post_ln_encoder: return post_ln_lacks(c, r, layer);
    case LayerFamily::prenorm_encoder: return prenorm_lacks(c, r, layer);
    case LayerFamily::decoder: return decoder_lacks(c, r, layer);
  }
  return false;
}

}  // namespace stoke
