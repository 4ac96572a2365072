#include "serve/serve_job.h"

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>

#include <chrono>
#include <condition_variable>
#include <csignal>
#include <functional>
#include <memory>
#include <string>
#include <cstdio>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "core/error.h"
#include "serve/http_server.h"
#include "serve/metrics.h"
#include "serve/routes.h"
#include "serve/serve_trace.h"
#include "serve/served_model.h"

namespace stoke {

namespace net = boost::asio;
using namespace std::chrono_literals;

namespace {

// What the table cannot say of one flag alone (each value was range-checked
// as it was set: serve_option_table.cc).
void check_serve_options(const ServeOptions& o) {
  if (!o.api_key.empty() && !o.api_key_file.empty())
    throw Error(Errc::invalid_argument, "--api-key and --api-key-file: give one of them");
}

std::chrono::milliseconds ms(double seconds) { return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000)); }

// Signalled by SIGTERM/SIGINT (on an I/O thread), waited on by run_serve.
struct StopSignal {
  std::mutex mu;
  std::condition_variable cv;
  bool stop = false;
  void raise() {
    std::lock_guard lock(mu);
    stop = true;
    cv.notify_all();
  }
  void wait() {
    std::unique_lock lock(mu);
    cv.wait(lock, [this] { return stop; });
  }
};

}  // namespace

int run_serve(const ServeOptions& o) {
  check_serve_options(o);
  std::unique_ptr<serve::ServeTrace> trace;
  if (!o.common.trace.empty()) trace = std::make_unique<serve::ServeTrace>(o.common.trace);
  std::function<void(const std::string&)> on_thread_start;
  if (trace) on_thread_start = [t = trace.get()](const std::string& name) { t->on_thread_start(name); };
  serve::ServedModel model(o, trace ? trace->trace() : nullptr, on_thread_start);
  auto io = std::make_unique<net::io_context>(static_cast<int>(o.io_threads));
  serve::Metrics metrics;
  serve::Router router(*io, model, o, metrics);
  if (trace) router.set_trace(trace->trace());
  model.batcher().set_batch_observer(
      [&metrics](int64_t sequences, int64_t tokens) { metrics.observe_batch(sequences, tokens); });
  serve::HttpLimits limits;
  limits.payload_limit = static_cast<uint64_t>(o.payload_limit);
  limits.header_timeout = ms(o.header_timeout_s);
  limits.body_timeout = ms(o.body_timeout_s);
  limits.idle_timeout = ms(o.idle_timeout_s);
  limits.max_concurrent_requests = o.max_concurrent_requests;
  serve::HttpServer server(*io, router, limits);
  router.set_server(&server);
  server.listen(o.host, static_cast<uint16_t>(o.port));

  StopSignal stop;
  std::optional<net::signal_set> signals;
  signals.emplace(*io, SIGINT, SIGTERM);
  signals->async_wait([&](const boost::system::error_code& ec, int) {
    if (ec) return;
    server.begin_drain();
    stop.raise();
  });
  std::vector<std::thread> threads;
  for (int64_t i = 0; i < o.io_threads; ++i)
    threads.emplace_back([&io, &on_thread_start, i] {
      if (on_thread_start) on_thread_start("io-" + std::to_string(i));
      io->run();
    });
  const auto started = std::chrono::steady_clock::now();
  // The precision is the one that runs (what /info's model_dtype says too), so
  // a client comparing vectors knows an int8 or bf16 server from an f32 one.
  std::fprintf(stderr, "stoke serve: listening on http://%s:%u (model %s, %s, %s, precision %s, max length %lld)\n",
               o.host.c_str(), static_cast<unsigned>(server.port()), model.name().c_str(),
               serve::model_kind_name(model.kind()), model.session().device_name.c_str(), model.precision_name(),
               static_cast<long long>(model.max_length()));
  std::fflush(stderr);

  auto shut_down = [&](bool drain) {
    // Requests in flight are answered (the batcher finishes them) until the deadline; then cancelled.
    const auto deadline = std::chrono::steady_clock::now() + ms(o.drain_timeout_s);
    while (drain && (server.in_flight() > 0 || server.connections() > 0) && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(10ms);
    const bool drained = server.in_flight() == 0;
    model.batcher().stop(drained);
    const auto grace = std::chrono::steady_clock::now() + 2s;  // cancelled requests get their 503 written
    while (server.connections() > 0 && std::chrono::steady_clock::now() < grace) std::this_thread::sleep_for(10ms);
    io->stop();
    for (std::thread& t : threads) t.join();
    signals.reset();
    server.close_acceptor();
    io.reset();  // pending handlers and their sessions go now, while the server and router live
  };

  try {
    model.warm_up();
  } catch (...) {
    server.begin_drain();
    shut_down(false);
    throw;
  }
  router.set_ready(true);
  std::fprintf(stderr, "stoke serve: ready (warm-up forward pass done)\n");
  std::fflush(stderr);

  stop.wait();
  std::fprintf(stderr, "stoke serve: draining (%lld requests in flight)\n", static_cast<long long>(server.in_flight()));
  std::fflush(stderr);
  shut_down(true);

  const RequestBatcherStats s = model.batcher().stats();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  std::string busy = "n/a";
  if (s.device_busy_seconds >= 0 && s.seconds > 0) busy = std::to_string(static_cast<int>(100 * s.device_busy_seconds / s.seconds)) + "%";
  std::fprintf(stderr, "stoke serve: stopped: %llu requests, %llu texts, %llu tokens (%.0f tokens/s over %.1f s), device busy %s\n",
               static_cast<unsigned long long>(metrics.requests()), static_cast<unsigned long long>(s.texts),
               static_cast<unsigned long long>(s.tokens), seconds > 0 ? static_cast<double>(s.tokens) / seconds : 0.0,
               seconds, busy.c_str());
  if (trace) {
    serve::ServeTraceSummary ts;
    ts.model = model.name();
    ts.device = model.session().device_name;
    ts.precision = model.precision_name();
    ts.seconds = seconds;
    ts.requests = metrics.requests();
    ts.batcher = s;
    ts.workers = model.tokenizer_workers();
    ts.io_threads = o.io_threads;
    trace->write(ts);
    std::fprintf(stderr, "stoke serve: trace written to %s (%llu events dropped past the first %zu)\n",
                 trace->path().c_str(), static_cast<unsigned long long>(trace->trace()->dropped_events()),
                 serve::kServeTraceEvents);
  }
  return 0;
}

}  // namespace stoke
