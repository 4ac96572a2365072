#include "serve/served_model.h"

#include <cmath>
#include <filesystem>
#include <thread>

#include "core/error.h"
#include "io/sentence_transformers.h"
#include "serve/api_error.h"

namespace stoke::serve {

namespace {

bool has_classification_architecture(const HfConfig& c) {
  for (const std::string& a : c.architectures)
    if (a.find("ForSequenceClassification") != std::string::npos) return true;
  return false;
}

// Unset (--model-kind auto): a sentence-transformers folder embeds; else a
// sequence-classification checkpoint classifies (one label: a cross-encoder,
// so it reranks); else the base encoder embeds with mean pooling.
ModelKind decide_kind(const std::optional<ModelKind>& asked, const ModelFolder& folder) {
  const int64_t labels = folder.config.num_labels();
  if (asked == ModelKind::embedding) return ModelKind::embedding;
  if (asked) {
    const std::string flag = std::string("--model-kind ") + model_kind_name(*asked);
    if (labels < 1) throw Error(Errc::invalid_argument, flag + ": config.json has no labels");
    if (asked == ModelKind::reranker && labels != 1)
      throw Error(Errc::invalid_argument, flag + ": a reranker is a one-label cross-encoder; config.json has " +
                                              std::to_string(labels) + " labels");
    return *asked;
  }
  if (folder.st.present || !has_classification_architecture(folder.config) || labels < 1) return ModelKind::embedding;
  return labels == 1 ? ModelKind::reranker : ModelKind::classifier;
}

int tokenizer_threads(const ServeOptions& o, const std::string& device_name) {
  return o.common.workers > 0 ? o.common.workers : default_workers(device_name);
}

}  // namespace

const char* model_kind_name(ModelKind k) {
  switch (k) {
    case ModelKind::embedding: return "embedding";
    case ModelKind::classifier: return "classifier";
    case ModelKind::reranker: return "reranker";
  }
  return "?";
}

ServedModel::ServedModel(const ServeOptions& o, Trace* trace, std::function<void(const std::string&)> on_thread_start) {
  // The kind decides whether the classification head is loaded, so the folder is read first.
  const ModelFolder folder = open_model_folder(o.common.model);
  kind_ = decide_kind(o.model_kind, folder);
  session_ = open_model_session(o.common, kind_ != ModelKind::embedding);
  if (kind_ == ModelKind::embedding) {
    load_text_output_heads(session_.encoder, session_.text.folder, *session_.backend);
    sources_ = text_output_sources(session_.encoder, session_.text.tokenizer->vocab_size());
    // Read once (tokenizer and ColBERT files); each request copies it with its own choices.
    output_settings_ = text_output_settings(session_.encoder, session_.text.folder.model_dir, *session_.text.tokenizer,
                                            sources_.sparse != SparseSource::none,
                                            sources_.multi_vector != MultiVectorSource::none);
  }
  name_ = o.served_model_name;
  if (name_.empty()) {
    // A hub id as given ("org/name"); a local folder by its name.
    if (o.common.model_location && o.common.model_location->hub) name_ = o.common.model_location->given;
    const std::filesystem::path dir = std::filesystem::path(o.common.model).lexically_normal();
    if (name_.empty()) name_ = dir.filename().string();
    if (name_.empty()) name_ = dir.parent_path().filename().string();  // "folder/"
  }
  const SentenceTransformersConfig& st = session_.text.folder.st;
  RequestBatcherOptions bo;
  bo.encode.max_length = static_cast<size_t>(session_.text.max_length);
  bo.encode.truncate = true;
  if (st.pooling) {
    bo.pooling = *st.pooling;
    pooling_ = bo.pooling;
    pooling_name_ = std::string(stoke::pooling_name(*st.pooling));
  }
  normalizes_ = st.present && st.normalize;
  bo.normalize = false;  // normalization is per request (TEI's `normalize`), done on the rows
  bo.batch_tokens = o.common.batch_tokens;
  bo.max_batch_size = o.max_batch_size;
  bo.workers = workers_ = tokenizer_threads(o, session_.device_name);
  bo.max_wait_seconds = o.max_wait_ms / 1000.0;
  bo.trace = trace;
  bo.on_thread_start = std::move(on_thread_start);
  if (kind_ != ModelKind::embedding) {
    const HfConfig& c = session_.encoder.config;
    head_ = c.problem_type == ProblemType::regression ? ScoreHead::raw
            : (c.problem_type == ProblemType::multi_label_classification || c.num_labels() == 1) ? ScoreHead::sigmoid
                                                                                                    : ScoreHead::softmax;
  }
  batcher_ = std::make_unique<RequestBatcher>(session_.encoder, *session_.backend, *session_.text.tokenizer, bo);
}

ServedModel::~ServedModel() {
  if (batcher_) batcher_->stop(false);
  batcher_.reset();  // before the session's backend and encoder it runs on
}

const char* ServedModel::precision_name() const {
  if (session_.int8) return "int8";
  return session_.precision == DType::bf16 ? "bf16" : session_.precision == DType::f16 ? "f16" : "f32";
}

const char* ServedModel::model_dtype() const {
  if (session_.int8) return "int8";
  return session_.precision == DType::bf16 ? "bfloat16" : session_.precision == DType::f16 ? "float16" : "float32";
}

int64_t ServedModel::width() const {
  return kind_ == ModelKind::embedding ? session_.encoder.sentence_width() : session_.encoder.config.num_labels();
}

std::string ServedModel::prompt_for(const std::optional<std::string>& prompt_name) const {
  const SentenceTransformersConfig& st = session_.text.folder.st;
  const std::string name = prompt_name ? *prompt_name : st.default_prompt_name.value_or("");
  if (name.empty()) return {};
  auto it = st.prompts.find(name);
  if (it == st.prompts.end()) {
    std::string known;
    for (const auto& [k, v] : st.prompts) known += (known.empty() ? "" : ", ") + k;
    throw validation_error("prompt_name \"" + name + "\": the model defines no such prompt (" +
                               (known.empty() ? std::string("it has none") : "it has: " + known) + ")",
                           "prompt_name");
  }
  return it->second;
}

TextOutputSettings ServedModel::output_settings(bool sparse, bool colbert, TextRole role) const {
  return text_output_choice(session_.encoder, output_settings_, sources_, sparse, colbert, role, 0);
}

void ServedModel::warm_up() {
  BatchRequestOptions ro;
  ro.product = kind_ == ModelKind::embedding ? RowProduct::pooled : RowProduct::logits;
  // A model with no dense vector warms up on the output it does give.
  if (kind_ == ModelKind::embedding && !sources_.dense)
    ro.extras = output_settings(sources_.sparse != SparseSource::none, sources_.sparse == SparseSource::none);
  std::vector<BatchItem> items{BatchItem{"warm-up", std::nullopt, std::nullopt}};
  if (kind_ == ModelKind::reranker) items[0].pair = "warm-up";
  auto r = batcher_->submit(std::move(items), ro);
  if (r->wait() != BatchRequest::State::done) {
    if (r->error()) std::rethrow_exception(r->error());
    throw Error(Errc::internal, "the warm-up forward pass was cancelled");
  }
  for (float v : r->values)
    if (!std::isfinite(v)) throw Error(Errc::internal, "the warm-up forward pass gave a non-finite value");
}

}  // namespace stoke::serve
