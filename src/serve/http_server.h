// The HTTP/1.1 layer of `stoke serve`: Boost.Beast over Boost.Asio, every
// connection a chain of asynchronous operations on its own strand (thousands
// of idle keep-alive connections cost memory, not threads). It enforces what
// does not need the model: the header size limit, the payload limit while
// reading (by Content-Length before the body, by counting a chunked body as
// it comes), header and body read timeouts, the concurrent request limit
// (429), and the drain on shutdown (503, then close). Everything else is the
// handler's.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/beast/http.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

namespace stoke::serve {

using HttpRequest = boost::beast::http::request<boost::beast::http::string_body>;
using HttpResponse = boost::beast::http::response<boost::beast::http::string_body>;

struct HttpLimits {
  uint64_t payload_limit = 2'000'000;      // request body bytes at most (413 past it)
  uint32_t header_limit = 16 * 1024;       // request line + headers bytes at most (431 past it)
  std::chrono::milliseconds header_timeout{30'000};  // first byte of a request to its last header byte
  std::chrono::milliseconds body_timeout{30'000};    // last header byte to the last body byte
  std::chrono::milliseconds idle_timeout{60'000};    // a keep-alive connection waiting for its next request
  int64_t max_concurrent_requests = 512;   // in flight at once (429 past it)
};

// One request's answer. reply() may be called from any thread, once; the
// connection writes it on its own strand.
class Exchange {
 public:
  virtual ~Exchange() = default;
  virtual void reply(HttpResponse response) = 0;
  // Runs `cancel` (on the connection's strand) if the client closes its
  // connection before the answer is written: its queued texts can be dropped.
  virtual void on_client_gone(std::function<void()> cancel) = 0;
};

class HttpHandler {
 public:
  virtual ~HttpHandler() = default;
  // Answers through `exchange`, now or later.
  virtual void handle(HttpRequest& request, std::shared_ptr<Exchange> exchange) = 0;
  // The body of an error the HTTP layer gives (413, 429, 503, 400, 431, 408)
  // in the shape the target's API uses; `target` is "" when unknown.
  virtual HttpResponse error_response(int status, const std::string& target, const std::string& message) = 0;
  // Called once per answered request (after it is written or abandoned).
  virtual void on_answered() {}
};

class Session;

class HttpServer {
 public:
  HttpServer(boost::asio::io_context& io, HttpHandler& handler, const HttpLimits& limits);
  ~HttpServer();
  // Binds and listens; throws Error naming the address when it cannot. Port 0
  // takes a free port: port() tells which.
  void listen(const std::string& host, uint16_t port);
  uint16_t port() const { return port_; }
  // Stops accepting and closes idle connections; requests in flight are
  // answered, then their connections close; new ones on open connections get
  // 503. Safe from any thread, idempotent.
  void begin_drain();
  bool draining() const { return draining_.load(); }
  // Destroys the listening socket: call once no I/O thread runs, before the
  // io_context is destroyed (its sessions are destroyed with it, and need
  // this server alive).
  void close_acceptor();
  int64_t in_flight() const { return in_flight_.load(); }
  int64_t connections() const { return connections_.load(); }

  // For sessions.
  bool try_acquire();
  void release();
  const HttpLimits& limits() const { return limits_; }
  HttpHandler& handler() { return handler_; }
  void add_session(Session* s, std::weak_ptr<Session> w);
  void remove_session(Session* s);

 private:
  void accept();

  boost::asio::io_context& io_;
  HttpHandler& handler_;
  HttpLimits limits_;
  struct Acceptor;
  std::unique_ptr<Acceptor> acceptor_;
  uint16_t port_ = 0;
  std::atomic<bool> draining_{false};
  std::atomic<int64_t> in_flight_{0};
  std::atomic<int64_t> connections_{0};
  std::mutex sessions_mu_;
  std::unordered_map<Session*, std::weak_ptr<Session>> sessions_;
};

}  // namespace stoke::serve
