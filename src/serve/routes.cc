#include "serve/routes.h"

#include <boost/asio/post.hpp>
#include <boost/beast/core/string.hpp>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <string>
#include <string_view>

#include "core/error.h"
#include "core/trace.h"
#include "serve/response_json.h"

namespace stoke::serve {

namespace http = boost::beast::http;
namespace net = boost::asio;

namespace {

enum class Method { get, post };

struct Route {
  const char* path;
  Method method;
  Api api;
};

// Every route; the kind of model decides which of them answer 200.
constexpr Route kRoutes[] = {
    {"/", Method::post, Api::tei},          {"/embed", Method::post, Api::tei},
    {"/embed_all", Method::post, Api::tei}, {"/embed_chunks", Method::post, Api::tei}, {"/predict", Method::post, Api::tei},
    {"/rerank", Method::post, Api::tei},    {"/tokenize", Method::post, Api::tei},
    {"/health", Method::get, Api::tei},     {"/info", Method::get, Api::tei},
    {"/metrics", Method::get, Api::tei},    {"/v1/embeddings", Method::post, Api::openai},
    {"/v1/models", Method::get, Api::openai}, {"/v1/rerank", Method::post, Api::tei},
    {"/embed_sparse", Method::post, Api::tei}, {"/compute_score", Method::post, Api::tei},
};

const Route* find_route(std::string_view path) {
  for (const Route& r : kRoutes)
    if (path == r.path) return &r;
  return nullptr;
}

std::string_view path_of(std::string_view target) {
  const size_t q = target.find('?');
  return q == std::string_view::npos ? target : target.substr(0, q);
}

// The batcher (pipeline/request_batcher.h, InputTooLongError) says which
// input is too long in no API's terms; each API's way to make it pass is
// added here. TEI's routes have a `truncate` field; OpenAI's embeddings API
// has no such field (OpenAI itself refuses such an input), so there only the
// server's --auto-truncate can.
std::string in_api_terms(Api api, const std::string& said) {
  if (api == Api::openai)
    return said + " (the OpenAI API has no truncation field: shorten the input, or start the server with "
                  "--auto-truncate, which cuts every input to the max length)";
  return said + " (send \"truncate\": true, or start the server with --auto-truncate)";
}

HttpResponse make_response(int status, std::string body, const char* content_type, unsigned version) {
  HttpResponse r{static_cast<http::status>(status), version};
  r.set(http::field::server, "stoke");
  if (content_type) r.set(http::field::content_type, content_type);
  r.body() = std::move(body);
  return r;
}

// Constant time in the key's content: a timing attack learns only its length.
bool same_secret(std::string_view given, std::string_view key) {
  unsigned char diff = given.size() == key.size() ? 0 : 1;
  for (size_t i = 0; i < given.size(); ++i) diff |= static_cast<unsigned char>(given[i] ^ key[i % key.size()]);
  return diff == 0;
}

bool is_json_content_type(std::string_view v) {
  const size_t semi = v.find(';');
  std::string_view media = v.substr(0, semi);
  while (!media.empty() && (media.back() == ' ' || media.back() == '\t')) media.remove_suffix(1);
  while (!media.empty() && (media.front() == ' ' || media.front() == '\t')) media.remove_prefix(1);
  return boost::beast::iequals(media, "application/json");
}

const char* openai_error_type(int status) {
  switch (status) {
    case 401: return "authentication_error";
    case 404: return "not_found_error";
    case 429: return "rate_limit_error";
    case 500: return "server_error";
    case 503: return "service_unavailable";
    default: return "invalid_request_error";
  }
}

std::string read_key_file(const std::string& path) {
  std::ifstream f(path);
  if (!f) throw Error(Errc::io, "--api-key-file " + path + ": cannot read it");
  std::string key;
  std::getline(f, key);
  while (!key.empty() && (key.back() == '\r' || key.back() == ' ')) key.pop_back();
  if (key.empty()) throw Error(Errc::invalid_argument, "--api-key-file " + path + ": the first line is empty");
  return key;
}

ApiError wrong_kind(const ServedModel& m, const char* needs) {
  return ApiError(400, "Backend", std::string("this route needs ") + needs + "; the served model is " +
                                      (m.kind() == ModelKind::embedding ? "an embedding model" : m.kind() == ModelKind::classifier ? "a classifier" : "a reranker"));
}

}  // namespace

// ---- Call

Call::Call(Router& r, Api a, std::string rt, HttpRequest req, std::shared_ptr<Exchange> exchange)
    : router(r), api(a), route(std::move(rt)), request(std::move(req)), exchange_(std::move(exchange)) {}

ServedModel& Call::model() { return router.model(); }
const ServeOptions& Call::options() { return router.options(); }

void Call::reply(std::string body, const char* content_type) {
  finish(make_response(200, std::move(body), content_type, request.version()), 0);
}

void Call::reply_error(const ApiError& e) { finish(router.make_error(api, e, request.version()), 0); }

void Call::finish(HttpResponse response, int texts) {
  const int status = static_cast<int>(response.result_int());
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  router.metrics().count_request(route, status);
  if (router.options().log_requests)
    std::fprintf(stderr, "stoke serve: %s %s %d %.2f ms\n", std::string(request.method_string()).c_str(),
                 route.c_str(), status, seconds * 1e3);
  exchange_->reply(std::move(response));
}

void Call::run_batch(std::vector<BatchItem> items, const BatchRequestOptions& o,
                     std::function<std::string(BatchResult&)> format) {
  std::vector<BatchSubmission> one;
  one.push_back({std::move(items), o});
  run_batches(std::move(one), [format = std::move(format)](std::vector<BatchResult>& r) -> std::optional<std::string> {
    return format(r[0]);
  });
}

void Call::reply_exception(std::exception_ptr error) {
  try {
    std::rethrow_exception(error);
  } catch (const ApiError& e) {
    reply_error(e);
  } catch (const InputTooLongError& e) {
    reply_error(validation_error(in_api_terms(api, e.what())));
  } catch (const Error& e) {
    if (e.code() == Errc::invalid_argument) {
      reply_error(validation_error(e.what()));
    } else if (e.code() == Errc::unsupported) {  // an output the model cannot give (TEI: a Backend error)
      reply_error(ApiError(424, "Backend", e.what()));
    } else if (e.code() == Errc::refused) {  // the batcher is stopping: draining
      reply_error(ApiError(503, "Unhealthy", e.what()));
    } else {
      reply_error(ApiError(500, "Backend", e.what()));
    }
  } catch (const std::exception& e) {
    reply_error(ApiError(500, "Backend", e.what()));
  }
}

void Call::run_on_device(std::function<void(Backend&)> fn, std::function<std::string()> format) {
  auto self = shared_from_this();
  model().batcher().run_on_device(std::move(fn), [self, format = std::move(format)](std::exception_ptr error) {
    net::post(self->router.io(), [self, error, format] {
      if (error) return self->reply_exception(error);
      try {
        self->reply(format());
      } catch (...) {
        self->reply_exception(std::current_exception());
      }
    });
  });
}

namespace {

// The requests of one call: results gathered as each finishes (on batcher
// threads); the last one to finish answers.
struct CallBatches {
  std::mutex mu;
  std::vector<BatchResult> results;
  std::vector<std::weak_ptr<BatchRequest>> requests;
  size_t left = 0;
  BatchRequest::State state = BatchRequest::State::done;  // the first one not done
  std::exception_ptr error;
  Metrics::Stages stages{};
};

}  // namespace

void Call::run_batches(std::vector<BatchSubmission> submissions,
                       std::function<std::optional<std::string>(std::vector<BatchResult>&)> format) {
  auto self = shared_from_this();
  auto gathered = std::make_shared<CallBatches>();
  gathered->results.resize(submissions.size());
  gathered->requests.resize(submissions.size());
  gathered->left = submissions.size();
  auto answer = [self, gathered, format = std::move(format)]() mutable {
    net::post(self->router.io(), [self, gathered, format = std::move(format)] {
      TraceSpan span(self->router.trace(), "write response");  // the answer's JSON, handed to the connection
      const BatchRequest::State state = gathered->state;
      span.set_arg(static_cast<int64_t>(gathered->results.empty() ? 0 : gathered->results[0].token_counts.size()));
      const double total = std::chrono::duration<double>(std::chrono::steady_clock::now() - self->start_).count();
      self->router.metrics().observe_request(total, state == BatchRequest::State::done ? &gathered->stages : nullptr);
      try {
        if (state == BatchRequest::State::done) {
          std::optional<std::string> body = format(gathered->results);
          if (body) self->reply(std::move(*body));
          return;
        }
        if (state == BatchRequest::State::cancelled)
          throw ApiError(503, "Unhealthy", self->router.draining() ? "the server is shutting down"
                                                                   : "the request was cancelled");
        if (gathered->error) std::rethrow_exception(gathered->error);
        throw ApiError(500, "Backend", "the request failed");
      } catch (...) {
        self->reply_exception(std::current_exception());
      }
    });
  };
  auto shared_answer = std::make_shared<decltype(answer)>(std::move(answer));
  for (size_t k = 0; k < submissions.size(); ++k) {
    auto on_done = [gathered, shared_answer, k](BatchRequest& r) {
      // On a batcher thread: take the rows; the last request to finish answers on an I/O thread.
      const BatchRequest::State state = r.state();
      std::vector<std::shared_ptr<BatchRequest>> to_cancel;
      bool last;
      {
        std::lock_guard lock(gathered->mu);
        BatchResult& result = gathered->results[k];
        if (state == BatchRequest::State::done) {
          result.values = std::move(r.values);
          result.width = r.width;
          result.row_offsets = std::move(r.row_offsets);
          result.token_counts = std::move(r.token_counts);
          result.total_tokens = r.total_tokens;
          result.extras = std::move(r.extras);
        } else if (gathered->state == BatchRequest::State::done) {
          gathered->state = state;
          gathered->error = r.error();
          for (auto& w : gathered->requests)
            if (auto other = w.lock(); other && other.get() != &r) to_cancel.push_back(other);
        }
        gathered->stages.tokenize = std::max(gathered->stages.tokenize, r.tokenize_seconds);
        gathered->stages.queue = std::max(gathered->stages.queue, r.queue_seconds);
        gathered->stages.inference = std::max(gathered->stages.inference, r.inference_seconds);
        last = --gathered->left == 0;
      }
      for (auto& other : to_cancel) other->cancel();
      if (last) (*shared_answer)();
    };
    std::shared_ptr<BatchRequest> batch =
        model().batcher().submit(std::move(submissions[k].items), submissions[k].options, std::move(on_done));
    std::lock_guard lock(gathered->mu);
    gathered->requests[k] = batch;
  }
  exchange_->on_client_gone([gathered] {
    std::vector<std::shared_ptr<BatchRequest>> all;
    {
      std::lock_guard lock(gathered->mu);
      for (auto& w : gathered->requests)
        if (auto b = w.lock()) all.push_back(b);
    }
    for (auto& b : all) b->cancel();
  });
}

// ---- Router

Router::Router(net::io_context& io, ServedModel& model, const ServeOptions& options, Metrics& metrics)
    : io_(io), model_(model), options_(options), metrics_(metrics) {
  api_key_ = options.api_key_file.empty() ? options.api_key : read_key_file(options.api_key_file);
}

HttpResponse Router::make_error(Api api, const ApiError& e, unsigned version) const {
  std::string body;
  if (api == Api::openai) {
    body = "{\"error\":{\"message\":";
    append_string(body, e.what());
    body += ",\"type\":";
    append_string(body, openai_error_type(e.status()));
    body += ",\"param\":";
    if (e.param().empty()) {
      body += "null";
    } else {
      append_string(body, e.param());
    }
    body += ",\"code\":null}}";
  } else {
    body = "{\"error\":";
    append_string(body, e.what());
    body += ",\"error_type\":";
    append_string(body, e.type());
    body += "}";
  }
  return make_response(e.status(), std::move(body), "application/json", version);
}

HttpResponse Router::error_response(int status, const std::string& target, const std::string& message) {
  const Route* r = find_route(path_of(target));
  const char* type = status == 429 ? "Overloaded" : status == 503 ? "Unhealthy" : status >= 500 ? "Backend" : "Validation";
  metrics_.count_request(r ? r->path : "other", status);
  return make_error(r ? r->api : Api::tei, ApiError(status, type, message));
}

bool Router::authorized(const HttpRequest& request) const {
  if (api_key_.empty()) return true;
  std::string_view auth = request[http::field::authorization];
  constexpr std::string_view bearer = "Bearer ";
  if (auth.size() < bearer.size() || !boost::beast::iequals(auth.substr(0, bearer.size()), bearer)) return false;
  return same_secret(auth.substr(bearer.size()), api_key_);
}

void Router::handle(HttpRequest& request, std::shared_ptr<Exchange> exchange) {
  const std::string_view path = path_of(request.target());
  const Route* r = find_route(path);
  auto call = std::make_shared<Call>(*this, r ? r->api : Api::tei, r ? r->path : "other", std::move(request),
                                     std::move(exchange));
  try {
    if (!r) throw ApiError(404, "Validation", "no route " + std::string(path));
    const http::verb want = r->method == Method::get ? http::verb::get : http::verb::post;
    const http::verb got = call->request.method();
    if (got != want && !(want == http::verb::get && got == http::verb::head)) {
      ApiError e(405, "Validation", std::string(path) + " takes " + (want == http::verb::get ? "GET" : "POST"));
      HttpResponse res = make_error(call->api, e, call->request.version());
      res.set(http::field::allow, want == http::verb::get ? "GET" : "POST");
      return call->reply_response(std::move(res));
    }
    if (!authorized(call->request)) {
      if (path != "/health") throw ApiError(401, "Validation", "missing or wrong API key (Authorization: Bearer KEY)");
    }
    if (path == "/health") {
      if (!ready()) throw ApiError(503, "Unhealthy", draining() ? "the server is shutting down" : "the model is warming up");
      return call->reply("", nullptr);
    }
    if (path == "/metrics")
      return call->reply(metrics_.render(model_.batcher().stats(), server_ ? server_->in_flight() : 0, ready()),
                         "text/plain; version=0.0.4");
    if (path == "/info") return call->reply(tei_info(*this));
    if (path == "/v1/models") return call->reply(openai_models(*this));

    if (!is_json_content_type(call->request[http::field::content_type]))
      throw ApiError(415, "Validation", "expected Content-Type: application/json");
    if (!ready()) throw ApiError(503, "Unhealthy", draining() ? "the server is shutting down" : "the model is warming up");
    const ModelKind kind = model_.kind();
    if (path == "/tokenize") return tei_tokenize(*call);
    if (path == "/" ) {
      if (kind == ModelKind::embedding) return tei_embed(*call, false);
      if (kind == ModelKind::classifier) return tei_predict(*call);
      return tei_rerank(*call);
    }
    const TextOutputSources& outputs = model_.output_sources();
    if (path == "/embed_sparse" || path == "/compute_score") {
      if (kind != ModelKind::embedding) throw wrong_kind(model_, "an embedding model");
      return path == "/embed_sparse" ? tei_embed_sparse(*call) : stoke_compute_score(*call);
    }
    if (kind == ModelKind::embedding && outputs.multi_vector != MultiVectorSource::none) {
      if (path == "/embed_all") return colbert_embed_all(*call);
      if (path == "/rerank") return late_interaction_rerank(*call);
    }
    if (path == "/embed" || path == "/embed_all" || path == "/embed_chunks" || path == "/v1/embeddings") {
      if (kind != ModelKind::embedding) throw wrong_kind(model_, "an embedding model");
      if (!outputs.dense)
        throw ApiError(424, "Backend", std::string(path) + ": the served model has no dense vector (" +
                                           (outputs.sparse != SparseSource::none
                                                ? "a sparse encoder: use /embed_sparse"
                                                : "a ColBERT model: use /embed_all for its vectors, /rerank to score") +
                                           ")");
      if (path == "/v1/embeddings") return openai_embeddings(*call);
      if (path == "/embed_chunks") return stoke_embed_chunks(*call);
      return tei_embed(*call, path == "/embed_all");
    }
    if (path == "/predict") {
      if (kind == ModelKind::embedding) throw wrong_kind(model_, "a classifier");
      return tei_predict(*call);
    }
    if (kind != ModelKind::reranker) throw wrong_kind(model_, "a reranker (a one-label cross-encoder)");
    if (path == "/rerank") return tei_rerank(*call);
    return cohere_rerank(*call);
  } catch (const ApiError& e) {
    call->reply_error(e);
  } catch (const Error& e) {
    call->reply_error(e.code() == Errc::invalid_argument ? validation_error(e.what())
                      : e.code() == Errc::refused        ? ApiError(503, "Unhealthy", e.what())
                                                         : ApiError(500, "Backend", e.what()));
  } catch (const std::bad_alloc&) {
    call->reply_error(ApiError(500, "Backend", "out of memory"));
  } catch (const std::exception& e) {
    call->reply_error(ApiError(500, "Backend", e.what()));
  }
}

std::vector<float> scores_of(const float* logits, int64_t n, ScoreHead head, bool raw_scores) {
  std::vector<float> s(logits, logits + n);
  if (raw_scores || head == ScoreHead::raw) return s;
  if (head == ScoreHead::sigmoid) {
    for (float& v : s) v = static_cast<float>(1.0 / (1.0 + std::exp(-static_cast<double>(v))));
    return s;
  }
  double mx = -INFINITY, sum = 0;
  for (float v : s) mx = std::max(mx, static_cast<double>(v));
  for (float v : s) sum += std::exp(v - mx);
  for (float& v : s) v = static_cast<float>(std::exp(v - mx) / sum);
  return s;
}

}  // namespace stoke::serve
