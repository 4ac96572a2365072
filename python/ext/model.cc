#include "model.h"

#include <algorithm>
#include <filesystem>
#include <thread>

#include "core/error.h"
#include "errors.h"
#include "jobs/common_options.h"
#include "model/encoder_params.h"

namespace stoke::py {

namespace fs = std::filesystem;

namespace {

// numpy / torch spellings of the compute dtypes are taken too.
Precision canonical_dtype(const std::string& d) {
  if (d == "f32" || d == "float32" || d == "fp32") return Precision::f32;
  if (d == "bf16" || d == "bfloat16") return Precision::bf16;
  if (d == "f16" || d == "float16" || d == "fp16") return Precision::f16;
  throw Error(Errc::invalid_argument, "dtype \"" + d + "\": expected f32, bf16 or f16");
}

bool is_classifier_config(const HfConfig& cfg) {
  for (const auto& a : cfg.architectures)
    if (a.find("ForSequenceClassification") != std::string::npos) return true;
  return false;
}

// The open of model_session.cc, with both the Dense modules (encode) and the
// classification head (predict) when the folder has them: one Model serves
// every call sentence-transformers' SentenceTransformer and CrossEncoder make.
ModelSession open_session(const ModelOptions& o) {
  CommonOptions common;
  common.model = o.path;
  common.device = o.device;
  common.precision = canonical_dtype(o.dtype);
  common.max_length = o.max_length;
  if (o.workers) {
    if (*o.workers < 1 || *o.workers > max_workers())
      throw Error(Errc::invalid_argument, "workers " + std::to_string(*o.workers) + ": expected 1 to " +
                                              std::to_string(max_workers()) + " (" + max_workers_reason() + ")");
    common.workers = *o.workers;
  }
  validate_common_options(common);
  resolve_model_flag(common);  // a hub id becomes its snapshot folder in the local cache

  ModelSession s;
  s.precision = precision_dtype(common.precision);
  s.text = open_model_tokenizer(common.model, common.max_length);
  s.backend = open_backend(common.device, BackendUse::inference);
  s.device_name = s.backend->name();
  EncoderLoadOptions load;
  load.dtype = s.precision;
  load.need_classifier = is_classifier_config(s.text.folder.config);
  s.encoder = load_encoder(s.text.folder.config, open_model_folder_weights(s.text.folder), *s.backend, load);
  load_sentence_modules(s.encoder, s.text.folder, *s.backend);
  if (!load.need_classifier) load_text_output_heads(s.encoder, s.text.folder, *s.backend);
  return s;
}

}  // namespace

Model::Model(const ModelOptions& o) {
  try {
    s_ = open_session(o);
  } catch (const Error& e) {
    // Bad arguments and a path that is not there keep their kind; anything
    // the folder itself caused is a refused model.
    std::error_code ec;
    const bool missing = e.code() == Errc::not_found && !fs::exists(o.path, ec);
    if (e.code() == Errc::invalid_argument || e.code() == Errc::device || e.code() == Errc::internal ||
        e.code() == Errc::io || missing)
      throw;
    throw ModelRefused(e);
  }
  if (st().pooling) {
    pooling_ = *st().pooling;
    pooling_name_ = std::string(stoke::pooling_name(*st().pooling));
  }
  workers_ = o.workers ? *o.workers : default_workers(s_.device_name);
  sources_ = text_output_sources(s_.encoder, s_.text.tokenizer->vocab_size());
  // Read once (tokenizer and ColBERT files); each call copies it with its own choices.
  all_outputs_ = text_output_settings(s_.encoder, s_.text.folder.model_dir, *s_.text.tokenizer,
                                      sources_.sparse != SparseSource::none,
                                      sources_.multi_vector != MultiVectorSource::none);
}

TextOutputSettings Model::output_settings(bool sparse, bool colbert, TextRole role, int64_t sparse_top_k) const {
  return text_output_choice(s_.encoder, all_outputs_, sources_, sparse, colbert, role, sparse_top_k);
}

Model::~Model() {
  std::lock_guard<std::mutex> lock(mu_);
  batcher_.reset();  // stops and joins its threads before the encoder goes
}

BatcherLease::~BatcherLease() {
  batcher_.reset();
  if (model_) model_->release_lease();
}

void Model::release_lease() {
  std::lock_guard<std::mutex> lock(mu_);
  --leases_;
  cv_.notify_all();
}

BatcherLease Model::batcher(const BatchShape& shape) {
  if (shape.batch_tokens <= 0) throw Error(Errc::invalid_argument, "batch_tokens: expected a positive number");
  if (shape.max_batch_size <= 0) throw Error(Errc::invalid_argument, "batch_size: expected a positive number");
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return leases_ == 0 || (batcher_ && shape_ == shape); });
  if (!batcher_ || !(shape_ == shape)) {
    batcher_.reset();
    RequestBatcherOptions bo;
    bo.encode.max_length = static_cast<size_t>(s_.text.max_length);
    bo.encode.truncate = true;
    bo.pooling = pooling_;
    bo.normalize = normalize();
    bo.batch_tokens = shape.batch_tokens;
    bo.max_batch_size = shape.max_batch_size;
    bo.workers = workers_;
    batcher_ = std::make_shared<RequestBatcher>(s_.encoder, *s_.backend, *s_.text.tokenizer, bo);
    shape_ = shape;
  }
  ++leases_;
  return BatcherLease(*this, batcher_);
}

std::vector<Encoding> Model::tokenize(const std::vector<BatchItem>& items) const {
  EncodeOptions eo;
  eo.max_length = static_cast<size_t>(s_.text.max_length);
  eo.truncate = true;
  std::vector<TextInput> inputs;
  inputs.reserve(items.size());
  for (const auto& it : items)
    inputs.push_back(TextInput{it.text, it.pair ? std::optional<std::string_view>(*it.pair) : std::nullopt});
  return s_.text.tokenizer->encode_batch(inputs, eo, nullptr);
}

std::string Model::resolve_prompt(const std::optional<std::string>& prompt,
                                  const std::optional<std::string>& prompt_name) const {
  // sentence-transformers: an explicit prompt wins over a prompt name; with
  // neither, the model's default prompt name applies.
  std::string text;
  if (prompt) {
    text = *prompt;
  } else {
    const std::string name = prompt_name ? *prompt_name : st().default_prompt_name.value_or("");
    if (!name.empty()) {
      auto it = st().prompts.find(name);
      if (it == st().prompts.end()) {
        std::string known;
        for (const auto& [k, v] : st().prompts) known += (known.empty() ? "" : ", ") + k;
        throw Error(Errc::invalid_argument, "prompt_name " + name + ": the model defines no such prompt (" +
                                                (known.empty() ? std::string("it has none") : "it has: " + known) +
                                                ")");
      }
      text = it->second;
    }
  }
  if (!text.empty() && !st().include_prompt)
    throw Error(Errc::unsupported, "this model's pooling excludes prompt tokens (include_prompt false), which stoke "
                                   "does not do yet; encode without a prompt");
  return text;
}

std::string Model::architecture() const {
  const HfConfig& c = s_.encoder.config;
  return c.architectures.empty() ? c.model_type_name : c.architectures[0];
}

std::string Model::pooling_name() const { return pooling_name_; }

std::string Model::dtype() const {
  switch (s_.precision) {
    case DType::bf16: return "bf16";
    case DType::f16: return "f16";
    default: return "f32";
  }
}

}  // namespace stoke::py
