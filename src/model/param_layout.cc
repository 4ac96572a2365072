#include "model/param_layout.h"

#include <algorithm>

#include "core/error.h"
#include "core/sha256.h"

namespace stoke {

namespace {

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

TensorView view_at(float* base, const ParamSlot& s) {
  TensorView v;
  v.data = base + s.offset;
  v.dtype = DType::f32;
  for (int64_t d : s.shape) v.dims[static_cast<size_t>(v.rank++)] = d;
  return v;
}

}  // namespace

ParamLayout::ParamLayout(const HfConfig& config, ParamHeads heads, const std::vector<DenseModule>& dense)
    : config_(config), heads_(heads), dense_(dense) {
  if (!dense.empty() && heads != ParamHeads::none)
    throw Error(Errc::internal, "parameter layout: Dense modules with a classification head");
  using R = TensorRole;
  std::vector<ExpectedTensor> expected = expected_tensors(config);
  // Query, key and value next to each other: weights first, then biases.
  auto rank = [](R r) -> int {
    static const R order[] = {R::query_weight, R::key_weight, R::value_weight, R::query_bias, R::key_bias, R::value_bias};
    for (int i = 0; i < 6; ++i)
      if (order[i] == r) return i;
    return -1;
  };
  // A gated encoder that stores its GLU halves apart (NomicBERT's fc11, fc12):
  // the second right after the first, so the two are one (2I, H) matrix.
  const Architecture& arch = *config.arch;
  const bool glu_apart = arch.gated_ffn && !arch.has(R::ffn_up_gate_weight);
  const R glu_first = arch.glu_act_on_second ? R::ffn_in_weight : R::ffn_gate_weight;
  const R glu_second = arch.glu_act_on_second ? R::ffn_gate_weight : R::ffn_in_weight;
  std::vector<ExpectedTensor> ordered;
  for (size_t i = 0; i < expected.size(); ++i) {
    const ExpectedTensor& t = expected[i];
    if (t.part == ExpectedTensor::pooler && (!config.arch->head_on_pooler || heads == ParamHeads::none)) continue;
    if (t.part == ExpectedTensor::classifier && heads == ParamHeads::none) continue;
    if (glu_apart && t.role == glu_second) continue;  // placed with the first half
    if (glu_apart && t.role == glu_first) {
      ordered.push_back(t);
      for (const ExpectedTensor& u : expected)
        if (u.role == glu_second && u.layer == t.layer) ordered.push_back(u);
      continue;
    }
    if (rank(t.role) < 0) {
      ordered.push_back(t);
      continue;
    }
    if (rank(t.role) != 0) continue;  // placed with its query weight
    // The six q/k/v tensors of this layer are expected[i .. i+5] in the order
    // q.w q.b k.w k.b v.w v.b; emit them as q.w k.w v.w q.b k.b v.b.
    for (int want = 0; want < 6; ++want)
      for (size_t j = i; j < i + 6 && j < expected.size(); ++j)
        if (rank(expected[j].role) == want) ordered.push_back(expected[j]);
  }
  const std::string prefix(config.checkpoint_prefix());
  for (const ExpectedTensor& t : ordered) {
    ParamSlot s;
    s.canonical = t.name;
    // An embedding model is saved as its bare encoder (AutoModel's names, as
    // sentence-transformers' Transformer module writes them).
    s.name = t.part == ExpectedTensor::classifier || heads == ParamHeads::none ? t.name : prefix + t.name;
    s.role = t.role;
    s.layer = t.layer;
    s.shape = t.shape;
    s.numel = 1;
    for (int64_t d : t.shape) s.numel *= d;
    s.offset = numel_;
    s.part = t.part;
    // Biases and LayerNorm weights (by role: DistilBERT calls them sa_layer_norm, ...).
    const bool layer_norm = t.role == R::embeddings_ln_weight || t.role == R::attn_ln_weight ||
                            t.role == R::ffn_ln_weight || t.role == R::final_norm_weight || t.role == R::head_norm_weight;
    s.decay = !(t.shape.size() == 1 && (layer_norm || ends_with(t.name, ".bias")));
    numel_ += s.numel;
    slots_.push_back(std::move(s));
  }
  // The Dense modules, after the encoder: weight (out, in), then bias (out).
  // Weights decay, biases not (the HF rule: a name that ends in "bias").
  for (size_t i = 0; i < dense_.size(); ++i) {
    const DenseModule& m = dense_[i];
    for (const bool bias : {false, true}) {
      if (bias && !m.bias) continue;
      ParamSlot s;
      s.canonical = s.name = m.path + (bias ? "/linear.bias" : "/linear.weight");
      s.role = TensorRole::count;
      s.shape = bias ? std::vector<int64_t>{m.out_features} : std::vector<int64_t>{m.out_features, m.in_features};
      s.numel = bias ? m.out_features : m.out_features * m.in_features;
      s.offset = numel_;
      s.decay = !bias;
      s.dense = static_cast<int64_t>(i);
      numel_ += s.numel;
      slots_.push_back(std::move(s));
    }
  }
}

const ParamSlot& ParamLayout::slot(const std::string& canonical) const {
  for (const ParamSlot& s : slots_)
    if (s.canonical == canonical) return s;
  throw Error(Errc::internal, "parameter layout has no tensor " + canonical);
}

const ParamSlot* ParamLayout::find(TensorRole role, int64_t layer) const {
  for (const ParamSlot& s : slots_)
    if (s.role == role && s.layer == layer) return &s;
  return nullptr;
}

EncoderParams ParamLayout::views(float* base) const {
  using R = TensorRole;
  auto v = [&](R role, int64_t layer = -1) {
    const ParamSlot* s = find(role, layer);
    return s ? view_at(base, *s) : TensorView{};
  };
  EncoderParams p;
  for (const EncoderParamField& f : kEmbeddingParamFields) p.*f.member = v(f.role);
  const int64_t H = config_.hidden_size;
  for (int64_t l = 0; l < config_.num_hidden_layers; ++l) {
    EncoderLayerParams layer;
    const bool fused_qkv = config_.arch->has(R::qkv_weight);  // stored as one tensor (GTE, NomicBERT)
    layer.qkv_w = v(fused_qkv ? R::qkv_weight : R::query_weight, l);
    layer.qkv_w.dims[0] = 3 * H;  // query, key, value stacked (see the layout)
    layer.qkv_b = v(fused_qkv ? R::qkv_bias : R::query_bias, l);
    layer.qkv_b.dims[0] = 3 * H;
    for (const LayerParamField& f : kLayerParamFields) layer.*f.member = v(f.role, l);
    const Architecture& a = *config_.arch;
    if (a.gated_ffn) {  // both GLU halves: one (2I, H) matrix (see the layout)
      const bool fused = a.has(R::ffn_up_gate_weight);
      layer.ffn_in_w = v(fused ? R::ffn_up_gate_weight : a.glu_act_on_second ? R::ffn_in_weight : R::ffn_gate_weight, l);
      layer.ffn_in_w.dims[0] = 2 * config_.intermediate_size;
      layer.ffn_gate_w = TensorView{};
    }
    p.layers.push_back(layer);
  }
  const bool pooler = config_.arch->head_on_pooler;
  p.head_dense_w = v(pooler ? R::pooler_weight : R::head_dense_weight);
  p.head_dense_b = v(pooler ? R::pooler_bias : R::head_dense_bias);
  p.head_out_w = v(R::head_out_weight);
  p.head_out_b = v(R::head_out_bias);
  p.head_norm = v(R::head_norm_weight);
  return p;
}

std::vector<DenseLayerParams> ParamLayout::dense_views(float* base) const {
  std::vector<DenseLayerParams> out(dense_.size());
  for (size_t i = 0; i < dense_.size(); ++i)
    out[i].act = dense_[i].activation == DenseModule::Activation::tanh ? Activation::tanh : Activation::none;
  for (const ParamSlot& s : slots_) {
    if (s.dense < 0) continue;
    DenseLayerParams& d = out[static_cast<size_t>(s.dense)];
    (s.shape.size() == 2 ? d.w : d.b) = view_at(base, s);
  }
  return out;
}

std::vector<int64_t> ParamLayout::decay_ranges(bool decay_all) const {
  std::vector<int64_t> out;
  for (const ParamSlot& s : slots_) {
    if (!(decay_all || s.decay)) continue;
    if (!out.empty() && out.back() == s.offset)
      out.back() = s.offset + s.numel;  // adjacent: merge
    else
      out.insert(out.end(), {s.offset, s.offset + s.numel});
  }
  return out;
}

std::string ParamLayout::fingerprint() const {
  std::string text;
  for (const ParamSlot& s : slots_) {
    text += s.name + ":" + std::to_string(s.offset);
    for (int64_t d : s.shape) text += "," + std::to_string(d);
    text += ";";
  }
  return sha256_hex(text).substr(0, 16);
}

}  // namespace stoke
