#include "serve/http_server.h"

#include <sys/socket.h>

#include <boost/asio/dispatch.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>

#include <cerrno>
#include <optional>
#include <vector>

#include "core/error.h"

namespace stoke::serve {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

namespace {

// Bytes read and thrown away after an error answer before closing, so the
// client sees the answer instead of a reset (its unread body would cause one).
constexpr size_t kLingerBytes = 1 << 20;
constexpr std::chrono::milliseconds kLingerTime{1000};

}  // namespace

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket&& socket, HttpServer& server) : stream_(std::move(socket)), server_(server) {}
  ~Session() {
    if (holds_slot_) finish_slot();
    server_.remove_session(this);
  }

  void start() {
    net::dispatch(stream_.get_executor(), [self = shared_from_this()] { self->wait_for_request(); });
  }

  // From any thread: close the connection unless a request is being answered.
  void close_if_idle() {
    net::post(stream_.get_executor(), [self = shared_from_this()] {
      if (!self->busy_) self->close();
    });
  }

  // From any thread: the answer to request `generation`.
  void deliver(uint64_t generation, HttpResponse response) {
    net::post(stream_.get_executor(), [self = shared_from_this(), generation, r = std::move(response)]() mutable {
      if (generation == self->generation_ && self->busy_) self->write(std::move(r), false);
    });
  }

  void watch_for_close(uint64_t generation, std::function<void()> cancel) {
    net::post(stream_.get_executor(), [self = shared_from_this(), generation, c = std::move(cancel)]() mutable {
      if (generation != self->generation_ || !self->busy_ || self->closed_) return;
      self->cancel_ = std::move(c);
      self->watch(generation);
    });
  }

 private:
  // A keep-alive connection waits (idle timeout) for the first bytes of its
  // next request; the header then has the header timeout.
  void wait_for_request() {
    if (closed_) return;
    if (server_.draining()) return close();
    if (buffer_.size() > 0) return read_header();  // pipelined: the next request is already here
    stream_.expires_after(server_.limits().idle_timeout);
    stream_.async_read_some(buffer_.prepare(4096), [self = shared_from_this()](beast::error_code ec, size_t n) {
      if (ec) return self->close();
      self->buffer_.commit(n);
      self->read_header();
    });
  }

  void read_header() {
    parser_.emplace();
    parser_->header_limit(server_.limits().header_limit);
    parser_->body_limit(server_.limits().payload_limit);
    target_.clear();
    head_ = false;
    stream_.expires_after(server_.limits().header_timeout);
    http::async_read_header(stream_, buffer_, *parser_, [self = shared_from_this()](beast::error_code ec, size_t) {
      self->on_header(ec);
    });
  }

  void on_header(beast::error_code ec) {
    if (ec) return read_failed(ec, "the request header");
    const auto& header = parser_->get();
    target_ = std::string(header.target());
    keep_alive_ = header.keep_alive();
    head_ = header.method() == http::verb::head;
    if (beast::iequals(header[http::field::expect], "100-continue")) {
      // curl asks before sending a large body; the payload limit already held.
      auto cont = std::make_shared<http::response<http::empty_body>>(http::status::continue_, header.version());
      stream_.expires_after(server_.limits().body_timeout);
      http::async_write(stream_, *cont, [self = shared_from_this(), cont](beast::error_code ec2, size_t) {
        if (ec2) return self->close();
        self->read_body();
      });
      return;
    }
    read_body();
  }

  void read_body() {
    stream_.expires_after(server_.limits().body_timeout);
    http::async_read(stream_, buffer_, *parser_, [self = shared_from_this()](beast::error_code ec, size_t) {
      self->on_body(ec);
    });
  }

  void read_failed(beast::error_code ec, const char* what) {
    if (ec == http::error::body_limit)
      return answer_error(413, "the request body is larger than the server's --payload-limit of " +
                                   std::to_string(server_.limits().payload_limit) + " bytes");
    if (ec == http::error::header_limit)
      return answer_error(431, "the request header is larger than " + std::to_string(server_.limits().header_limit) +
                                   " bytes");
    // A timeout: Beast has closed the socket already; a slow client gets no answer.
    if (ec == beast::error::timeout) return close();
    // The client closed (before a request, or half-way through one), or an I/O error: nobody to answer.
    const bool parse_error = &ec.category() == &beast::error_code(http::error::bad_target).category();
    if (ec == http::error::end_of_stream || ec == http::error::partial_message || !parse_error) return close();
    answer_error(400, std::string("malformed HTTP in ") + what + ": " + ec.message());
  }

  void on_body(beast::error_code ec) {
    if (ec) return read_failed(ec, "the request body");
    stream_.expires_never();  // a queued request may wait; the client's close is watched instead
    HttpRequest request = parser_->release();
    if (server_.draining()) {
      keep_alive_ = false;
      return answer_error(503, "the server is shutting down");
    }
    if (!server_.try_acquire())
      return answer_error(429, "the server is at its --max-concurrent-requests of " +
                                   std::to_string(server_.limits().max_concurrent_requests) + " requests in flight");
    holds_slot_ = true;
    busy_ = true;
    ++generation_;
    server_.handler().handle(request, std::make_shared<SessionExchange>(shared_from_this(), generation_));
  }

  // An error the HTTP layer gives; the connection closes after it unless the
  // request itself was read completely (429).
  void answer_error(int status, const std::string& message) {
    const bool request_complete = status == 429 || status == 503;
    if (!request_complete) keep_alive_ = false;
    busy_ = true;
    ++generation_;
    write(server_.handler().error_response(status, target_, message), !request_complete);
  }

  void write(HttpResponse response, bool linger) {
    cancel_ = nullptr;
    response.keep_alive(keep_alive_ && !server_.draining());
    response.prepare_payload();
    stream_.expires_after(server_.limits().body_timeout);  // a client that never reads cannot hold the connection
    if (head_) {
      // HEAD: the GET's header, Content-Length included, and no body (RFC 9110 9.3.2).
      auto held = std::make_shared<http::response<http::empty_body>>(std::move(response.base()));
      http::async_write(stream_, *held, [self = shared_from_this(), held, linger](beast::error_code ec, size_t) {
        self->on_written(ec, held->need_eof(), linger);
      });
      return;
    }
    auto held = std::make_shared<HttpResponse>(std::move(response));
    http::async_write(stream_, *held, [self = shared_from_this(), held, linger](beast::error_code ec, size_t) {
      self->on_written(ec, held->need_eof(), linger);
    });
  }

  void on_written(beast::error_code ec, bool close_after, bool linger) {
    if (holds_slot_) finish_slot();
    busy_ = false;
    ++generation_;
    if (ec) return close();
    if (close_after) return linger ? linger_close() : close();
    wait_for_request();
  }

  void finish_slot() {
    holds_slot_ = false;
    server_.release();
    server_.handler().on_answered();
  }

  // A readable socket while a request is being answered: the client closed
  // (recv peeks 0 bytes) — drop its queued texts — or pipelined its next
  // request (left for later; no more watching).
  void watch(uint64_t generation) {
    stream_.socket().async_wait(tcp::socket::wait_read, [self = shared_from_this(), generation](beast::error_code ec) {
      if (ec || generation != self->generation_ || !self->busy_) return;
      char c;
      const ssize_t n = ::recv(self->stream_.socket().native_handle(), &c, 1, MSG_PEEK | MSG_DONTWAIT);
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) {
        if (auto cancel = std::move(self->cancel_)) cancel();
      }
    });
  }

  void linger_close() {
    if (closed_) return;
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
    stream_.expires_after(kLingerTime);
    drain_some(0);
  }

  void drain_some(size_t so_far) {
    auto scratch = std::make_shared<std::vector<char>>(16384);
    stream_.async_read_some(net::buffer(*scratch),
                            [self = shared_from_this(), scratch, so_far](beast::error_code ec, size_t n) {
                              if (ec || so_far + n >= kLingerBytes) return self->close();
                              self->drain_some(so_far + n);
                            });
  }

  void close() {
    if (closed_) return;
    closed_ = true;
    cancel_ = nullptr;
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
    stream_.close();
  }

  class SessionExchange : public Exchange {
   public:
    SessionExchange(std::shared_ptr<Session> s, uint64_t generation) : s_(std::move(s)), generation_(generation) {}
    ~SessionExchange() override {
      // A handler that dropped its request unanswered still frees the slot.
      if (!replied_.exchange(true))
        s_->deliver(generation_, s_->server_.handler().error_response(500, s_->target_, "the request was not answered"));
    }
    void reply(HttpResponse response) override {
      if (!replied_.exchange(true)) s_->deliver(generation_, std::move(response));
    }
    void on_client_gone(std::function<void()> cancel) override { s_->watch_for_close(generation_, std::move(cancel)); }

   private:
    std::shared_ptr<Session> s_;
    uint64_t generation_;
    std::atomic<bool> replied_{false};
  };

  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  HttpServer& server_;
  std::string target_;
  bool keep_alive_ = true;
  bool head_ = false;        // the request being answered is a HEAD: its answer has no body
  bool busy_ = false;        // a request is being answered (its answer not yet written)
  bool holds_slot_ = false;  // it counts against --max-concurrent-requests
  bool closed_ = false;
  uint64_t generation_ = 0;  // which request an answer or a watch belongs to
  std::function<void()> cancel_;
};

struct HttpServer::Acceptor {
  explicit Acceptor(net::io_context& io) : strand(net::make_strand(io)), socket(strand), retry(strand) {}
  net::strand<net::io_context::executor_type> strand;
  tcp::acceptor socket;
  net::steady_timer retry;  // out of file descriptors: accept again a little later
};

HttpServer::HttpServer(net::io_context& io, HttpHandler& handler, const HttpLimits& limits)
    : io_(io), handler_(handler), limits_(limits), acceptor_(std::make_unique<Acceptor>(io)) {}

HttpServer::~HttpServer() = default;

void HttpServer::listen(const std::string& host, uint16_t port) {
  beast::error_code ec;
  const net::ip::address address = net::ip::make_address(host == "localhost" ? "127.0.0.1" : host, ec);
  if (ec) throw Error(Errc::invalid_argument, "--host " + host + ": expected an IP address (e.g. 127.0.0.1 or 0.0.0.0)");
  const tcp::endpoint endpoint(address, port);
  auto& a = acceptor_->socket;
  const std::string where = host + ":" + std::to_string(port);
  if (a.open(endpoint.protocol(), ec); ec) throw Error(Errc::io, "listening on " + where + ": " + ec.message());
  a.set_option(net::socket_base::reuse_address(true), ec);
  if (a.bind(endpoint, ec); ec) throw Error(Errc::io, "listening on " + where + ": " + ec.message());
  if (a.listen(net::socket_base::max_listen_connections, ec); ec)
    throw Error(Errc::io, "listening on " + where + ": " + ec.message());
  port_ = a.local_endpoint().port();
  net::post(acceptor_->strand, [this] { accept(); });
}

void HttpServer::accept() {
  acceptor_->socket.async_accept(net::make_strand(io_), [this](beast::error_code ec, tcp::socket socket) {
    if (draining_.load() || ec == net::error::operation_aborted || !acceptor_->socket.is_open()) return;
    if (ec) {  // EMFILE and the like: try again shortly rather than spin
      acceptor_->retry.expires_after(std::chrono::milliseconds(50));
      acceptor_->retry.async_wait([this](beast::error_code e) {
        if (!e) accept();
      });
      return;
    }
    socket.set_option(tcp::no_delay(true), ec);
    auto session = std::make_shared<Session>(std::move(socket), *this);
    add_session(session.get(), session);
    session->start();
    accept();
  });
}

void HttpServer::begin_drain() {
  if (draining_.exchange(true)) return;
  net::post(acceptor_->strand, [this] {
    beast::error_code ec;
    acceptor_->socket.close(ec);
    acceptor_->retry.cancel();
  });
  std::vector<std::shared_ptr<Session>> live;
  {
    std::lock_guard lock(sessions_mu_);
    for (auto& [ptr, weak] : sessions_)
      if (auto s = weak.lock()) live.push_back(std::move(s));
  }
  for (auto& s : live) s->close_if_idle();
}

void HttpServer::close_acceptor() { acceptor_.reset(); }

bool HttpServer::try_acquire() {
  if (in_flight_.fetch_add(1) >= limits_.max_concurrent_requests) {
    in_flight_.fetch_sub(1);
    return false;
  }
  return true;
}

void HttpServer::release() { in_flight_.fetch_sub(1); }

void HttpServer::add_session(Session* s, std::weak_ptr<Session> w) {
  std::lock_guard lock(sessions_mu_);
  sessions_.emplace(s, std::move(w));
  connections_.fetch_add(1);
}

void HttpServer::remove_session(Session* s) {
  std::lock_guard lock(sessions_mu_);
  sessions_.erase(s);
  connections_.fetch_sub(1);
}

}  // namespace stoke::serve
