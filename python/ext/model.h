// What a Python `stoke.Model` holds: one model opened on one device (the same
// open as `stoke embed` / `stoke classify`: tokenizer, encoder, Dense modules,
// classification head when the folder has one) and the request batcher every
// encode / predict call of the process shares. Plain C++ (no Python API):
// the bindings (module.cc) own the GIL and the signals.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "io/sentence_transformers.h"
#include "jobs/model_session.h"
#include "model/text_outputs.h"
#include "pipeline/request_batcher.h"

namespace stoke::py {

struct ModelOptions {
  std::string path;
  std::string device = "auto";
  std::string dtype = "f32";  // the compute precision: f32, bf16, f16
  std::optional<int64_t> max_length;
  std::optional<int> workers;  // tokenizer threads (None: as `stoke embed` picks)
};

// The batch shape settings of a batcher: `stoke embed`'s defaults unless a
// call asks otherwise (--batch-tokens, --max-batch-size).
struct BatchShape {
  int64_t batch_tokens = 16384;
  int64_t max_batch_size = 256;
  bool operator==(const BatchShape&) const = default;
};

class Model;

// A call's hold on the batcher: while any lease is held, the batcher's shape
// stays; a call that needs another shape waits for the holders to finish.
class BatcherLease {
 public:
  BatcherLease(Model& model, std::shared_ptr<RequestBatcher> batcher) : model_(&model), batcher_(std::move(batcher)) {}
  BatcherLease(BatcherLease&& o) noexcept : model_(o.model_), batcher_(std::move(o.batcher_)) { o.model_ = nullptr; }
  BatcherLease(const BatcherLease&) = delete;
  ~BatcherLease();
  RequestBatcher& operator*() const { return *batcher_; }
  RequestBatcher* operator->() const { return batcher_.get(); }

 private:
  Model* model_;
  std::shared_ptr<RequestBatcher> batcher_;
};

class Model {
 public:
  // Throws Error: invalid_argument for a bad device / dtype / max length,
  // not_found for a path that does not exist, ModelRefused (errors.h) for a
  // folder stoke does not run.
  explicit Model(const ModelOptions& options);
  ~Model();
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  // The batcher with these settings (made, or remade once no call holds the
  // old one). Blocks: call without the GIL.
  BatcherLease batcher(const BatchShape& shape);

  // Texts (and pairs) tokenized as the model's encode does them, with the max
  // length's truncation.
  std::vector<Encoding> tokenize(const std::vector<BatchItem>& items) const;

  // The prompt sentence-transformers' encode would use: `prompt` when given,
  // else the named one, else the model's default prompt name's (none: "").
  // Throws Error(invalid_argument) for a name the model does not define.
  // The sparse / multi-vector outputs the model gives (model/text_outputs.h).
  const TextOutputSources& output_sources() const { return sources_; }
  // The settings of a call asking for them; throws Error(invalid_argument)
  // naming what the model lacks.
  TextOutputSettings output_settings(bool sparse, bool colbert, TextRole role, int64_t sparse_top_k) const;

  std::string resolve_prompt(const std::optional<std::string>& prompt,
                             const std::optional<std::string>& prompt_name) const;

  const ModelSession& session() const { return s_; }
  const SentenceTransformersConfig& st() const { return s_.text.folder.st; }
  int64_t dimension() const { return s_.encoder.sentence_width(); }
  int64_t hidden_size() const { return s_.encoder.config.hidden_size; }
  int64_t max_length() const { return s_.text.max_length; }
  std::string architecture() const;
  std::string pooling_name() const;
  Pooling pooling() const { return pooling_; }
  bool normalize() const { return st().present && st().normalize; }
  std::string device() const { return s_.device_name; }
  std::string dtype() const;
  bool has_classifier() const { return s_.encoder.has_classifier(); }
  int workers() const { return workers_; }

 private:
  friend class BatcherLease;
  void release_lease();

  ModelSession s_;
  Pooling pooling_ = Pooling::mean;
  std::string pooling_name_ = "mean";
  int workers_ = 1;
  TextOutputSources sources_;
  TextOutputSettings all_outputs_;  // every output the model gives, read once from its folder

  std::mutex mu_;
  std::condition_variable cv_;
  std::shared_ptr<RequestBatcher> batcher_;  // declared after the session: stopped before it goes
  BatchShape shape_;
  int leases_ = 0;
};

}  // namespace stoke::py
