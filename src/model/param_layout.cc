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

ParamLayout::ParamLayout(const HfConfig& config) : config_(config) {
  std::vector<ExpectedTensor> expected = expected_tensors(config);
  const bool bert = config.model_type == ModelType::bert;
  // Query, key and value next to each other: weights first, then biases.
  auto rank = [](const std::string& name) -> int {
    static const char* order[] = {"query.weight", "key.weight", "value.weight", "query.bias", "key.bias", "value.bias"};
    for (int i = 0; i < 6; ++i)
      if (ends_with(name, std::string("attention.self.") + order[i])) return i;
    return -1;
  };
  std::vector<ExpectedTensor> ordered;
  for (size_t i = 0; i < expected.size(); ++i) {
    const ExpectedTensor& t = expected[i];
    if (t.part == ExpectedTensor::pooler && !bert) continue;
    if (rank(t.name) < 0) {
      ordered.push_back(t);
      continue;
    }
    if (rank(t.name) != 0) continue;  // placed with its query weight
    // The six q/k/v tensors of this layer are expected[i .. i+5] in the order
    // q.w q.b k.w k.b v.w v.b; emit them as q.w k.w v.w q.b k.b v.b.
    for (int want = 0; want < 6; ++want)
      for (size_t j = i; j < i + 6 && j < expected.size(); ++j)
        if (rank(expected[j].name) == want) ordered.push_back(expected[j]);
  }
  const std::string prefix(config.checkpoint_prefix());
  for (const ExpectedTensor& t : ordered) {
    ParamSlot s;
    s.canonical = t.name;
    s.name = t.part == ExpectedTensor::classifier ? t.name : prefix + t.name;
    s.shape = t.shape;
    s.numel = 1;
    for (int64_t d : t.shape) s.numel *= d;
    s.offset = numel_;
    s.part = t.part;
    s.decay = !(ends_with(t.name, ".bias") || ends_with(t.name, "LayerNorm.weight"));
    numel_ += s.numel;
    slots_.push_back(std::move(s));
  }
}

const ParamSlot& ParamLayout::slot(const std::string& canonical) const {
  for (const ParamSlot& s : slots_)
    if (s.canonical == canonical) return s;
  throw Error(Errc::internal, "parameter layout has no tensor " + canonical);
}

EncoderParams ParamLayout::views(float* base) const {
  auto v = [&](const std::string& name) { return view_at(base, slot(name)); };
  EncoderParams p;
  p.word_embeddings = v("embeddings.word_embeddings.weight");
  p.position_embeddings = v("embeddings.position_embeddings.weight");
  p.token_type_embeddings = v("embeddings.token_type_embeddings.weight");
  p.emb_ln_gamma = v("embeddings.LayerNorm.weight");
  p.emb_ln_beta = v("embeddings.LayerNorm.bias");
  const int64_t H = config_.hidden_size;
  for (int64_t l = 0; l < config_.num_hidden_layers; ++l) {
    const std::string pre = "encoder.layer." + std::to_string(l) + ".";
    EncoderLayerParams layer;
    layer.qkv_w = v(pre + "attention.self.query.weight");
    layer.qkv_w.dims[0] = 3 * H;  // query, key, value stacked (see the layout)
    layer.qkv_b = v(pre + "attention.self.query.bias");
    layer.qkv_b.dims[0] = 3 * H;
    layer.attn_out_w = v(pre + "attention.output.dense.weight");
    layer.attn_out_b = v(pre + "attention.output.dense.bias");
    layer.attn_ln_gamma = v(pre + "attention.output.LayerNorm.weight");
    layer.attn_ln_beta = v(pre + "attention.output.LayerNorm.bias");
    layer.ffn_in_w = v(pre + "intermediate.dense.weight");
    layer.ffn_in_b = v(pre + "intermediate.dense.bias");
    layer.ffn_out_w = v(pre + "output.dense.weight");
    layer.ffn_out_b = v(pre + "output.dense.bias");
    layer.ffn_ln_gamma = v(pre + "output.LayerNorm.weight");
    layer.ffn_ln_beta = v(pre + "output.LayerNorm.bias");
    p.layers.push_back(layer);
  }
  if (config_.model_type == ModelType::bert) {
    p.pooler_w = v("pooler.dense.weight");
    p.pooler_b = v("pooler.dense.bias");
    p.head_out_w = v("classifier.weight");
    p.head_out_b = v("classifier.bias");
  } else {
    p.head_dense_w = v("classifier.dense.weight");
    p.head_dense_b = v("classifier.dense.bias");
    p.head_out_w = v("classifier.out_proj.weight");
    p.head_out_b = v("classifier.out_proj.bias");
  }
  return p;
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
