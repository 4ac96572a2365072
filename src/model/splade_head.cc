#include "model/splade_head.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/file_util.h"
#include "io/model_folder_error.h"
#include "io/safetensors.h"

namespace stoke {

namespace fs = std::filesystem;

namespace {

// The stored names of one architecture's MLM head.
struct MlmHeadNames {
  const char* masked_lm;  // the transformers class, for messages
  const char* transform_w;
  const char* transform_b;
  const char* ln_w[2];  // LayerNorm weight: the name, and the legacy TF-era one ("" if none)
  const char* ln_b[2];
  const char* decoder_w;   // the untied decoder
  const char* decoder_b[2];  // the bias: its name, then the other one checkpoints store it under
};

constexpr MlmHeadNames kBertHead{"BertForMaskedLM",
                                 "cls.predictions.transform.dense.weight",
                                 "cls.predictions.transform.dense.bias",
                                 {"cls.predictions.transform.LayerNorm.weight", "cls.predictions.transform.LayerNorm.gamma"},
                                 {"cls.predictions.transform.LayerNorm.bias", "cls.predictions.transform.LayerNorm.beta"},
                                 "cls.predictions.decoder.weight",
                                 {"cls.predictions.bias", "cls.predictions.decoder.bias"}};
constexpr MlmHeadNames kDistilBertHead{"DistilBertForMaskedLM",
                                       "vocab_transform.weight",
                                       "vocab_transform.bias",
                                       {"vocab_layer_norm.weight", ""},
                                       {"vocab_layer_norm.bias", ""},
                                       "vocab_projector.weight",
                                       {"vocab_projector.bias", ""}};

// config.json's tie_word_embeddings, as transformers reads it (absent: true).
bool ties_word_embeddings(const fs::path& model_dir) {
  const fs::path file = model_dir / "config.json";
  const nlohmann::json cfg = nlohmann::json::parse(read_file(file), nullptr, false);
  if (!cfg.is_object()) return true;  // load_hf_config already refused a malformed file
  const auto it = cfg.find("tie_word_embeddings");
  if (it == cfg.end() || it->is_null()) return true;
  if (!it->is_boolean())
    throw Error(Errc::format, file.string() + ": field \"tie_word_embeddings\": expected true or false, found " + it->dump());
  return it->get<bool>();
}

}  // namespace

int64_t splade_block_rows(int64_t vocab, int64_t max_tokens) {
  const int64_t rows = kSpladeBlockBytes / (std::max<int64_t>(vocab, 1) * 4);
  return std::clamp<int64_t>(rows, 1, std::max<int64_t>(max_tokens, 1));
}

std::vector<float> static_query_weights(const ModelFolder& folder, int64_t vocab) {
  const fs::path dir = folder.dir / folder.st.splade->static_query_path;
  for (const char* name : {"tokenizer.json", "tokenizer_config.json"}) {
    std::error_code ec;
    const bool here = fs::is_regular_file(dir / name, ec), there = fs::is_regular_file(folder.model_dir / name, ec);
    if (here != there || (here && read_file(dir / name) != read_file(folder.model_dir / name)))
      throw Error(Errc::unsupported, (dir / name).string() + " differs from " + (folder.model_dir / name).string() +
                                         ": stoke runs one tokenizer for both routes of an inference-free SPLADE model");
  }
  const fs::path file = dir / "model.safetensors";
  std::error_code ec;
  if (!fs::is_regular_file(file, ec))
    throw ModelFolderError(ModelFolderErrc::no_weights,
                           dir.string() + ": no model.safetensors for the SparseStaticEmbedding (the query weights)");
  const auto weights = SafetensorsFile::open(file);
  const StoredTensor* t = weights->find("weight");
  if (!t) throw ModelFolderError(ModelFolderErrc::missing_tensor, file.string() + ": tensor \"weight\" is missing");
  if (!dtype_is_float(t->dtype))
    throw ModelFolderError(ModelFolderErrc::dtype_unsupported, file.string() + ": tensor \"weight\" has dtype " +
                                                                   std::string(dtype_name(t->dtype)) +
                                                                   "; weights must be F32, F16, BF16 or F64");
  if (t->shape != std::vector<int64_t>{vocab})
    throw ModelFolderError(ModelFolderErrc::shape_mismatch,
                           file.string() + ": tensor \"weight\" has shape " + shape_string(t->shape) + ", expected [" +
                               std::to_string(vocab) + "] (the document side's vocab_size)");
  std::vector<float> w(static_cast<size_t>(vocab));
  copy_stored_as_f32(*t, w.data());
  return w;
}

LexicalWeights static_query_row(std::span<const int32_t> ids, std::span<const float> weights) {
  std::vector<int32_t> distinct(ids.begin(), ids.end());
  std::sort(distinct.begin(), distinct.end());
  distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
  LexicalWeights row;
  for (int32_t id : distinct) {
    if (id < 0 || static_cast<size_t>(id) >= weights.size())  // the tokenizer's ids are checked against vocab_size
      throw Error(Errc::internal, "SPLADE: token id " + std::to_string(id) + " outside the static query weights");
    const float w = weights[static_cast<size_t>(id)];
    if (w == 0.0f) continue;  // to_sparse keeps non-zeros only
    row.ids.push_back(id);
    row.weights.push_back(w);
  }
  return row;
}

Encoding static_query_encoding(const Tokenizer& tokenizer, std::string_view text, EncodeStats* stats) {
  Encoding e;
  e.ids = tokenizer.tokenize(text, stats);
  if (tokenizer.model_max_length && static_cast<int64_t>(e.ids.size()) > *tokenizer.model_max_length) {
    e.ids.resize(static_cast<size_t>(*tokenizer.model_max_length));
    e.truncated = true;
  }
  e.type_ids.assign(e.ids.size(), 0);
  return e;
}

void load_splade_head(LoadedEncoder& enc, const ModelFolder& folder, Backend& backend) {
  if (!folder.st.splade) throw Error(Errc::internal, "load_splade_head: not a SPLADE folder");
  const fs::path& model_dir = folder.model_dir;
  const SpladeModule& pooling = *folder.st.splade;
  const HfConfig& c = enc.config;
  const MlmHeadNames* names = c.model_type == ModelType::bert         ? &kBertHead
                              : c.model_type == ModelType::distilbert ? &kDistilBertHead
                                                                      : nullptr;
  if (!names)
    throw Error(Errc::unsupported, (model_dir / "config.json").string() + ": a SPLADE model over " +
                                       std::string(c.arch->display_name) +
                                       " is not supported: stoke runs the masked-LM heads of BertForMaskedLM and "
                                       "DistilBertForMaskedLM");
  const int64_t H = c.hidden_size, V = c.vocab_size;
  if (c.embedding_size != H || enc.params.word_embeddings.empty())
    throw Error(Errc::unsupported, model_dir.string() + ": SPLADE needs word embeddings of the hidden size");
  if (pooling.embedding_dimension && *pooling.embedding_dimension != V)
    throw ModelFolderError(ModelFolderErrc::shape_mismatch,
                           (folder.dir / pooling.path / "config.json").string() + ": SpladePooling's embedding_dimension " +
                               std::to_string(*pooling.embedding_dimension) + " contradicts config.json vocab_size " +
                               std::to_string(V));
  const ModelWeights& w = enc.weights;
  const std::string where = w.folder().string();
  auto find = [&](const char* const* alternatives, size_t n) -> std::pair<const StoredTensor*, std::string> {
    for (size_t i = 0; i < n; ++i)
      if (alternatives[i][0] != '\0')
        if (const StoredTensor* t = w.find(alternatives[i])) return {t, alternatives[i]};
    return {nullptr, alternatives[0]};
  };
  std::vector<std::vector<float>> pending;  // host copies the enqueued copies read, until the wait below
  auto place = [&](const char* const* alternatives, size_t n, std::vector<int64_t> shape) -> TensorView {
    const auto [t, name] = find(alternatives, n);
    if (!t)
      throw ModelFolderError(ModelFolderErrc::missing_tensor,
                             where + ": tensor \"" + name + "\" is missing (" + names->masked_lm +
                                 "'s masked-LM head, which a SPLADE model needs)");
    const std::string file = where + "/" + w.file_of(name);
    if (!dtype_is_float(t->dtype))
      throw ModelFolderError(ModelFolderErrc::dtype_unsupported,
                             file + ": tensor \"" + name + "\" has dtype " + std::string(dtype_name(t->dtype)) +
                                 "; weights must be F32, F16, BF16 or F64");
    if (t->shape != shape)
      throw ModelFolderError(ModelFolderErrc::shape_mismatch,
                             file + ": tensor \"" + name + "\" has shape " + shape_string(t->shape) + ", expected " +
                                 shape_string(shape) + " from config.json (hidden_size " + std::to_string(H) +
                                 ", vocab_size " + std::to_string(V) + ")");
    std::vector<float> host(static_cast<size_t>(t->numel()));
    copy_stored_as_f32(*t, host.data());
    auto buffer = backend.allocate(host.size() * 4);
    backend.copy_to_device(buffer->data(), host.data(), host.size() * 4);
    const TensorView v = shape.size() == 2 ? TensorView(buffer->data(), DType::f32, {shape[0], shape[1]})
                                           : TensorView(buffer->data(), DType::f32, {shape[0]});
    enc.buffers.push_back(std::move(buffer));
    pending.push_back(std::move(host));
    return v;
  };
  // A refusal half-way must not leave copies queued that read `pending` or
  // write buffers the caller then frees: wait for them before it leaves.
  try {
    SpladeHeadParams p;
    p.transform_w = place(&names->transform_w, 1, {H, H});
    p.transform_b = place(&names->transform_b, 1, {H});
    p.ln_gamma = place(names->ln_w, 2, {H});
    p.ln_beta = place(names->ln_b, 2, {H});
    p.decoder_b = place(names->decoder_b, 2, {V});
    // Tied (transformers' default): the decoder IS the word embeddings, whatever
    // a stored decoder weight holds; untied: the stored one, which must be there.
    p.decoder_w = ties_word_embeddings(model_dir) ? enc.params.word_embeddings : place(&names->decoder_w, 1, {V, H});
    if (p.decoder_w.dtype != DType::f32)
      throw Error(Errc::internal, "SPLADE: the word embeddings are not f32");  // load_encoder keeps them f32
    p.act = Activation::gelu_erf;  // hf_config accepts only the erf GELUs ("gelu", "gelu_python") for these
    p.eps = static_cast<float>(c.layer_norm_eps);
    p.pooling = pooling;
    if (!pooling.static_query_path.empty()) p.static_query = static_query_weights(folder, V);
    backend.synchronize();  // one wait for the copies, at load time
    enc.splade = p;
  } catch (...) {
    backend.synchronize();
    throw;
  }
}

void splade_head_forward(const Ops& ops, const SpladeHeadParams& head, const TensorView& h, const TensorView& cu_seqlens,
                         const SpladeViews& v, const TensorView& out) {
  const int64_t T = h.dim(0), H = h.dim(1), V = head.vocab();
  // The transform on every token at once ((T, H): small), in place for the LayerNorm.
  ops.linear(v.transformed, h, head.transform_w, head.transform_b, head.act, Accumulate::no);
  ops.residual_layernorm(v.transformed, v.transformed, TensorView{}, head.ln_gamma, head.ln_beta, head.eps, TensorView{});
  Ops::SpladePool p;
  p.sum = head.pooling.strategy == SpladeModule::Strategy::sum;
  p.log1p_count = head.pooling.log1p_count;
  const int64_t rows = v.block.dim(0);
  if (T == 0) {  // no token: every text pools to zeros
    ops.splade_pool(out, TensorView(v.block.data, DType::f32, {0, V}), cu_seqlens, p);
    return;
  }
  for (int64_t r0 = 0; r0 < T; r0 += rows) {
    const int64_t n = std::min(rows, T - r0);
    const TensorView t_rows(static_cast<float*>(v.transformed.data) + r0 * H, DType::f32, {n, H});
    const TensorView logits(v.block.data, DType::f32, {n, V});
    ops.linear(logits, t_rows, head.decoder_w, head.decoder_b, Activation::none, Accumulate::no);
    p.first_row = r0;
    p.acc = r0 == 0 ? Accumulate::no : Accumulate::yes;
    ops.splade_pool(out, logits, cu_seqlens, p);
  }
}

}  // namespace stoke
