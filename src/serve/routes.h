// The routes of `stoke serve`: the API key, the Content-Type, the method and
// the path are checked here; each route's own parsing and answer live in
// tei_api.cc and openai_api.cc. A request that needs the model goes to the
// batcher; its answer is formatted on an I/O thread, never on the batcher's.
#pragma once

#include <boost/asio/io_context.hpp>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "serve/api_error.h"
#include "serve/http_server.h"
#include "serve/metrics.h"
#include "serve/served_model.h"

namespace stoke::serve {

enum class Api { tei, openai };

// A finished batch request's results, moved out of the BatchRequest on the
// batcher's thread so the answer can be written elsewhere.
struct BatchResult {
  std::vector<float> values;
  int64_t width = 0;
  std::vector<int64_t> row_offsets;
  std::vector<int32_t> token_counts;
  uint64_t total_tokens = 0;
  std::vector<TextExtras> extras;  // per text, when the request asked for sparse / multi-vector outputs
};

// One batcher request of a call (a call may need several: a ColBERT query
// and its documents run with different roles).
struct BatchSubmission {
  std::vector<BatchItem> items;
  BatchRequestOptions options;
};

class Router;

// One request being answered.
class Call : public std::enable_shared_from_this<Call> {
 public:
  Call(Router& router, Api api, std::string route, HttpRequest request, std::shared_ptr<Exchange> exchange);

  Router& router;
  const Api api;
  const std::string route;
  HttpRequest request;

  ServedModel& model();
  const ServeOptions& options();
  // Answers 200 with a JSON body (or another content type).
  void reply(std::string body, const char* content_type = "application/json");
  void reply_error(const ApiError& e);
  void reply_response(HttpResponse response) { finish(std::move(response), 0); }
  // Runs the items through the batcher; `format` turns the results into the
  // 200 body (or throws ApiError). The client's disconnect cancels the request.
  void run_batch(std::vector<BatchItem> items, const BatchRequestOptions& options,
                 std::function<std::string(BatchResult&)> format);
  // Several requests at once; `format` gets their results in order once all
  // are done (the first failure answers the call; the others are cancelled).
  // A format that returns nullopt answers the call itself later (reply /
  // reply_error: after device work of its own, run_on_device).
  void run_batches(std::vector<BatchSubmission> submissions,
                   std::function<std::optional<std::string>(std::vector<BatchResult>&)> format);
  // Runs fn on the batcher's device thread (RequestBatcher::run_on_device),
  // then answers on an I/O thread with format(); errors become the API's.
  void run_on_device(std::function<void(Backend&)> fn, std::function<std::string()> format);
  // An exception thrown while answering, in the API's terms (on an I/O thread).
  void reply_exception(std::exception_ptr error);

 private:
  void finish(HttpResponse response, int texts);
  std::shared_ptr<Exchange> exchange_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

class Router : public HttpHandler {
 public:
  Router(boost::asio::io_context& io, ServedModel& model, const ServeOptions& options, Metrics& metrics);
  void set_server(const HttpServer* server) { server_ = server; }
  // --trace: a "write response" span for each answer formatted from a batch.
  void set_trace(Trace* trace) { trace_ = trace; }
  Trace* trace() const { return trace_; }
  // Ready once the warm-up pass succeeded; not while draining.
  void set_ready(bool ready) { ready_.store(ready); }
  bool ready() const { return ready_.load() && !(server_ && server_->draining()); }

  void handle(HttpRequest& request, std::shared_ptr<Exchange> exchange) override;
  HttpResponse error_response(int status, const std::string& target, const std::string& message) override;

  boost::asio::io_context& io() { return io_; }
  ServedModel& model() { return model_; }
  const ServeOptions& options() const { return options_; }
  Metrics& metrics() { return metrics_; }
  bool draining() const { return server_ && server_->draining(); }
  // The error body in the API's shape, with its status.
  HttpResponse make_error(Api api, const ApiError& e, unsigned version = 11) const;

 private:
  bool authorized(const HttpRequest& request) const;
  boost::asio::io_context& io_;
  ServedModel& model_;
  const ServeOptions& options_;
  Metrics& metrics_;
  const HttpServer* server_ = nullptr;
  Trace* trace_ = nullptr;
  std::string api_key_;
  std::atomic<bool> ready_{false};
};

// tei_api.cc
void tei_embed(Call& call, bool all_tokens);  // /embed, /embed_all
void tei_predict(Call& call);                 // /predict
void tei_rerank(Call& call);                  // /rerank
void tei_tokenize(Call& call);                // /tokenize
std::string tei_info(Router& router);         // /info
// chunks_api.cc
void stoke_embed_chunks(Call& call);          // /embed_chunks (stoke's own: long texts as chunks with spans)
// multi_vector_api.cc: sparse and multi-vector models
void tei_embed_sparse(Call& call);            // /embed_sparse (TEI's, for SPLADE and bge-m3)
void colbert_embed_all(Call& call);           // /embed_all on a model with ColBERT vectors: those vectors
void late_interaction_rerank(Call& call);     // /rerank on a model with ColBERT vectors: MaxSim
void stoke_compute_score(Call& call);         // /compute_score (stoke's own: bge-m3's five scores per pair)
// openai_api.cc
void openai_embeddings(Call& call);           // /v1/embeddings
std::string openai_models(Router& router);    // /v1/models
void cohere_rerank(Call& call);               // /v1/rerank (Cohere/Jina shape)

// Scores of a classifier's logits row as TEI gives them (softmax, sigmoid or raw).
std::vector<float> scores_of(const float* logits, int64_t n, ScoreHead head, bool raw_scores);

}  // namespace stoke::serve
