#include "io/encoder_layout.h"

#include "io/family_tensors.h"

namespace stoke {

namespace {

using R = TensorRole;
using Dim = std::pair<int64_t, std::string>;

ExpectedTensor::Part part_of(R r) {
  if (r == R::pooler_weight || r == R::pooler_bias) return ExpectedTensor::pooler;
  if ((r >= R::head_dense_weight && r <= R::head_out_bias) || r == R::head_norm_weight) return ExpectedTensor::classifier;
  return ExpectedTensor::encoder;
}

}  // namespace

std::vector<ExpectedTensor> expected_tensors(const HfConfig& c) {
  const Architecture& a = *c.arch;
  const ConfigFields& f = a.fields;
  const Dim H{c.hidden_size, std::string(f.hidden_size)};
  const Dim E = a.embedding_projection ? Dim{c.embedding_size, std::string(f.embedding_size)} : H;
  const Dim I{c.intermediate_size, std::string(f.intermediate_size)};
  const Dim V{c.vocab_size, "vocab_size"};
  const Dim Pos{c.max_position_embeddings, "max_position_embeddings"};
  const Dim T{c.type_vocab_size, std::string(f.type_vocab_size)};
  const Dim N{c.num_labels(), "num_labels (id2label)"};
  // The shape of each role, in dimensions named by their config field: the
  // layer family's where it differs (io/family_tensors.h), else the shared rule.
  const auto dims_of = [&](R r) -> std::vector<Dim> {
    if (std::vector<Dim> d = family_tensor_dims(c, r); !d.empty()) return d;
    switch (r) {
      case R::word_embeddings: return {V, E};
      case R::position_embeddings: return {Pos, E};
      case R::token_type_embeddings: return {T, E};
      case R::embeddings_ln_weight: case R::embeddings_ln_bias: return {E};
      case R::embeddings_project_weight: return {H, E};
      case R::relative_attention_bias:
        return {{c.relative_attention_num_buckets, std::string(f.relative_attention_num_buckets)},
                {c.num_attention_heads, std::string(f.num_attention_heads)}};
      case R::qkv_weight: return {{3 * c.hidden_size, "3 * " + std::string(f.hidden_size)}, H};
      case R::qkv_bias: return {{3 * c.hidden_size, "3 * " + std::string(f.hidden_size)}};
      case R::ffn_up_gate_weight: return {{2 * c.intermediate_size, "2 * " + std::string(f.intermediate_size)}, H};
      case R::ffn_gate_weight: return {I, H};
      case R::ffn_in_weight: return {I, H};
      case R::ffn_in_bias: return {I};
      case R::ffn_out_weight: return {H, I};
      case R::head_out_weight: return {N, H};
      case R::head_out_bias: return {N};
      case R::query_weight: case R::key_weight: case R::value_weight: case R::attn_out_weight:
      case R::pooler_weight: case R::head_dense_weight:
        return {H, H};
      default: return {H};
    }
  };
  std::vector<ExpectedTensor> out;
  auto add = [&](R r, int64_t layer) {
    if (!a.has(r)) return;
    if (family_lacks_tensor(c, r, layer)) return;  // ModernBERT's layer 0 attention norm, a decoder's biases
    // ELECTRA projects only when the sizes differ (ElectraModel has no
    // embeddings_project otherwise).
    if ((r == R::embeddings_project_weight || r == R::embeddings_project_bias) && c.embedding_size == c.hidden_size)
      return;
    if (r == R::token_type_embeddings && c.type_vocab_size == 0) return;  // gte-base-en-v1.5 has no type table
    ExpectedTensor t;
    t.name = a.tensor_name(r, layer);
    t.role = r;
    t.layer = layer;
    t.part = part_of(r);
    for (auto& [size, field] : dims_of(r)) {
      t.shape.push_back(size);
      t.dims.push_back(field);
    }
    out.push_back(std::move(t));
  };
  for (size_t r = 0; r < kTensorRoles; ++r) {
    const R role = static_cast<R>(r);
    if (role_is_per_layer(role)) continue;
    if (role == R::pooler_weight) {  // the layers come before the pooler and heads
      for (int64_t l = 0; l < c.num_hidden_layers; ++l)
        for (size_t q = 0; q < kTensorRoles; ++q)
          if (role_is_per_layer(static_cast<R>(q))) add(static_cast<R>(q), l);
    }
    add(role, -1);
  }
  return out;
}

std::vector<ResolvedTensor> resolve_encoder_tensors(const HfConfig& c, const ModelWeights& w, bool need_pooler,
                                                    bool need_classifier) {
  const std::string where = w.folder().string();
  const std::string prefix(c.checkpoint_prefix());
  // One naming scheme per folder, decided by the word embeddings.
  const std::string probe(c.arch->name_of(TensorRole::word_embeddings));
  bool prefixed = w.find(prefix + probe) != nullptr;
  if (!prefixed && w.find(probe) == nullptr) {
    throw ModelFolderError(ModelFolderErrc::missing_tensor,
                           where + ": tensor \"" + prefix + probe + "\" (or \"" + probe +
                               "\") is missing: these weights hold no " + c.model_type_name + " embeddings");
  }

  std::vector<ResolvedTensor> out;
  for (ExpectedTensor& e : expected_tensors(c)) {
    const bool has_prefix = prefixed && e.part != ExpectedTensor::classifier;
    ResolvedTensor r;
    const std::string stored = has_prefix ? prefix + e.name : e.name;
    r.view = w.find(stored);
    const bool needed = e.part == ExpectedTensor::encoder || (e.part == ExpectedTensor::pooler && need_pooler) ||
                        (e.part == ExpectedTensor::classifier && need_classifier);
    if (!r.view) {
      if (needed) {
        std::string what = e.part == ExpectedTensor::pooler       ? " (the pooler, needed here)"
                           : e.part == ExpectedTensor::classifier ? " (the classification head, needed here)"
                                                                  : "";
        throw ModelFolderError(ModelFolderErrc::missing_tensor,
                               where + ": tensor \"" + stored + "\" is missing" + what);
      }
      r.expected = std::move(e);
      out.push_back(std::move(r));
      continue;
    }
    r.stored_name = stored;
    const std::string file = w.file_of(stored);
    if (!dtype_is_float(r.view->dtype)) {
      throw ModelFolderError(ModelFolderErrc::dtype_unsupported,
                             where + "/" + file + ": tensor \"" + stored + "\" has dtype " +
                                 std::string(dtype_name(r.view->dtype)) +
                                 "; weights must be F32, F16, BF16 or F64");
    }
    if (r.view->shape != e.shape) {
      std::string why;
      if (r.view->shape.size() != e.shape.size()) {
        why = "rank " + std::to_string(r.view->shape.size()) + " instead of " + std::to_string(e.shape.size());
      } else {
        for (size_t i = 0; i < e.shape.size(); ++i) {
          if (r.view->shape[i] == e.shape[i]) continue;
          if (!why.empty()) why += "; ";
          why += "dimension " + std::to_string(i) + " is " + std::to_string(r.view->shape[i]) + " but " +
                 e.dims[i] + " = " + std::to_string(e.shape[i]);
        }
      }
      std::string fields = "[";
      for (size_t i = 0; i < e.dims.size(); ++i) fields += (i ? ", " : "") + e.dims[i];
      fields += "]";
      throw ModelFolderError(ModelFolderErrc::shape_mismatch,
                             where + "/" + file + ": tensor \"" + stored + "\" has shape " +
                                 shape_string(r.view->shape) + ", expected " + shape_string(e.shape) + " = " +
                                 fields + " from config.json (" + why + ")");
    }
    r.expected = std::move(e);
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace stoke
