#include "io/encoder_layout.h"

namespace stoke {

namespace {

void add(std::vector<ExpectedTensor>& out, std::string name, ExpectedTensor::Part part,
         std::vector<std::pair<int64_t, std::string>> dims) {
  ExpectedTensor t;
  t.name = std::move(name);
  t.part = part;
  for (auto& [size, field] : dims) {
    t.shape.push_back(size);
    t.dims.push_back(std::move(field));
  }
  out.push_back(std::move(t));
}

// weight [out, in] + bias [out] of a torch Linear.
void add_linear(std::vector<ExpectedTensor>& out, const std::string& name, ExpectedTensor::Part part,
                std::pair<int64_t, std::string> out_dim, std::pair<int64_t, std::string> in_dim) {
  add(out, name + ".weight", part, {out_dim, in_dim});
  add(out, name + ".bias", part, {out_dim});
}

void add_layer_norm(std::vector<ExpectedTensor>& out, const std::string& name, std::pair<int64_t, std::string> dim) {
  add(out, name + ".weight", ExpectedTensor::encoder, {dim});
  add(out, name + ".bias", ExpectedTensor::encoder, {dim});
}

}  // namespace

std::vector<ExpectedTensor> expected_tensors(const HfConfig& c) {
  using P = ExpectedTensor::Part;
  const std::pair<int64_t, std::string> H{c.hidden_size, "hidden_size"};
  const std::pair<int64_t, std::string> I{c.intermediate_size, "intermediate_size"};
  const std::pair<int64_t, std::string> V{c.vocab_size, "vocab_size"};
  const std::pair<int64_t, std::string> Pos{c.max_position_embeddings, "max_position_embeddings"};
  const std::pair<int64_t, std::string> T{c.type_vocab_size, "type_vocab_size"};
  const std::pair<int64_t, std::string> N{c.num_labels(), "num_labels (id2label)"};

  std::vector<ExpectedTensor> out;
  add(out, "embeddings.word_embeddings.weight", P::encoder, {V, H});          // (V, H)
  add(out, "embeddings.position_embeddings.weight", P::encoder, {Pos, H});    // (P, H)
  add(out, "embeddings.token_type_embeddings.weight", P::encoder, {T, H});    // (T, H)
  add_layer_norm(out, "embeddings.LayerNorm", H);
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const std::string p = "encoder.layer." + std::to_string(l) + ".";
    add_linear(out, p + "attention.self.query", P::encoder, H, H);
    add_linear(out, p + "attention.self.key", P::encoder, H, H);
    add_linear(out, p + "attention.self.value", P::encoder, H, H);
    add_linear(out, p + "attention.output.dense", P::encoder, H, H);
    add_layer_norm(out, p + "attention.output.LayerNorm", H);
    add_linear(out, p + "intermediate.dense", P::encoder, I, H);
    add_linear(out, p + "output.dense", P::encoder, H, I);
    add_layer_norm(out, p + "output.LayerNorm", H);
  }
  // BertModel and RobertaModel both have a pooler when built with
  // add_pooling_layer=True (bare models, sentence-transformers checkpoints);
  // *ForSequenceClassification of RoBERTa / XLM-R drops it.
  add_linear(out, "pooler.dense", P::pooler, H, H);
  if (c.model_type == ModelType::bert) {
    add_linear(out, "classifier", P::classifier, N, H);
  } else {
    add_linear(out, "classifier.dense", P::classifier, H, H);
    add_linear(out, "classifier.out_proj", P::classifier, N, H);
  }
  return out;
}

std::vector<ResolvedTensor> resolve_encoder_tensors(const HfConfig& c, const ModelWeights& w, bool need_pooler,
                                                    bool need_classifier) {
  const std::string where = w.folder().string();
  const std::string prefix(c.checkpoint_prefix());
  // One naming scheme per folder, decided by the word embeddings.
  const std::string probe = "embeddings.word_embeddings.weight";
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
