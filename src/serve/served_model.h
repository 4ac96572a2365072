// The model behind `stoke serve`: opened once, its kind decided (embedding,
// classifier, one-label cross-encoder = reranker), its batcher started, and
// what the routes need to know about it (labels, prompts, widths, limits).
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "jobs/model_session.h"
#include "model/text_outputs.h"
#include "pipeline/request_batcher.h"
#include "serve/serve_options.h"

namespace stoke::serve {

// How a classifier's logits become scores when raw_scores is false.
enum class ScoreHead { softmax, sigmoid, raw };

class ServedModel {
 public:
  // Throws Error with one clear line (a folder that is not a model, a kind it
  // cannot be, a bad flag).
  // trace (may be nullptr) gets the batcher's stage spans; on_thread_start
  // (may be empty) is called first on each of the batcher's threads.
  explicit ServedModel(const ServeOptions& options, Trace* trace = nullptr,
              std::function<void(const std::string&)> on_thread_start = {});
  ~ServedModel();

  // One forward pass through the batcher; true when it gave finite values.
  void warm_up();

  ModelKind kind() const { return kind_; }
  const std::string& name() const { return name_; }
  const ModelSession& session() const { return session_; }
  RequestBatcher& batcher() { return *batcher_; }
  const Tokenizer& tokenizer() const { return *session_.text.tokenizer; }
  int64_t max_length() const { return session_.text.max_length; }
  int64_t width() const;  // pooled sentence width (embedding) or labels (classifier)
  const std::vector<std::string>& labels() const { return session_.encoder.config.id2label; }
  ScoreHead score_head() const { return head_; }
  const std::string& pooling_name() const { return pooling_name_; }
  Pooling pooling() const { return pooling_; }
  int tokenizer_workers() const { return workers_; }
  bool model_normalizes() const { return normalizes_; }
  // The sparse / multi-vector outputs the model gives (model/text_outputs.h).
  const TextOutputSources& output_sources() const { return sources_; }
  // The settings a request for those outputs runs with (each route first
  // checks output_sources(), answering 424 for what the model lacks); throws
  // Error(invalid_argument) naming what the model lacks.
  TextOutputSettings output_settings(bool sparse, bool colbert, TextRole role = TextRole::document) const;
  // The precision the model runs in, as --precision names it: "f32", "bf16",
  // "f16" or "int8" (the session's activation dtype alone says f32 for int8).
  const char* precision_name() const;
  // /info's model_dtype as TEI means it, the dtype the model runs in:
  // "float32", "bfloat16", "float16" — and "int8" under --precision int8,
  // where the layers' GEMM weights are int8 (TEI has no such mode; saying
  // "float32" would hide the quantization from a client checking quality).
  const char* model_dtype() const;
  // The prompt text for a request's prompt_name (absent: the model's default
  // prompt, if any). Throws ApiError 422 for a name the model does not define.
  std::string prompt_for(const std::optional<std::string>& prompt_name) const;

 private:
  ModelKind kind_ = ModelKind::embedding;
  std::string name_;
  ModelSession session_;
  std::string pooling_name_ = "mean";
  Pooling pooling_ = Pooling::mean;
  bool normalizes_ = false;
  int workers_ = 1;
  TextOutputSources sources_;
  TextOutputSettings output_settings_;  // every output the model gives, read once from its folder
  ScoreHead head_ = ScoreHead::softmax;
  std::unique_ptr<RequestBatcher> batcher_;
};

}  // namespace stoke::serve
