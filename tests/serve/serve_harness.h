// What the serve tests share: `stoke serve` started as a child on an
// ephemeral loopback port (read from its "listening on" line), a small
// blocking HTTP/1.1 client (Beast) with keep-alive, raw-socket exchanges for
// malformed requests, and the offline vectors `stoke embed` writes. Every wait
// is bounded in time.
#pragma once

#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/file_util.h"
#include "support/background_stoke.h"
#include "support/fixtures.h"

namespace stoke::test {

namespace beast = boost::beast;
namespace http = beast::http;
using tcp = boost::asio::ip::tcp;
using json = nlohmann::json;

inline std::string model_dir(const std::string& name) { return fixture("models/" + name).string(); }

// The fixture texts (the golden set, empty ones left out: the server answers 400 for those).
inline std::vector<std::string> golden_texts() {
  std::vector<std::string> texts;
  std::ifstream in(fixture("golden/texts.jsonl"));
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    std::string t = json::parse(line)["text"].get<std::string>();
    if (!t.empty()) texts.push_back(std::move(t));
  }
  return texts;
}

inline void write_texts_jsonl(const std::filesystem::path& path, const std::vector<std::string>& texts) {
  std::ofstream out(path);
  for (const std::string& t : texts) out << json{{"text", t}}.dump() << "\n";
}

// A float32 .npy file as rows.
inline std::vector<std::vector<float>> read_npy_rows(const std::filesystem::path& path) {
  const std::string bytes = read_file(path);
  const size_t hlen = static_cast<uint8_t>(bytes[8]) | (static_cast<size_t>(static_cast<uint8_t>(bytes[9])) << 8);
  const std::string header = bytes.substr(10, hlen);
  long long rows = 0, cols = 0;
  std::sscanf(header.c_str() + header.find("'shape': (") + 10, "%lld, %lld", &rows, &cols);
  std::vector<std::vector<float>> out(static_cast<size_t>(rows), std::vector<float>(static_cast<size_t>(cols)));
  for (long long r = 0; r < rows; ++r)
    std::memcpy(out[static_cast<size_t>(r)].data(), bytes.data() + 10 + hlen + static_cast<size_t>(r * cols) * 4,
                static_cast<size_t>(cols) * 4);
  return out;
}

// `stoke embed` on the texts with extra flags: its rows in input order.
inline std::vector<std::vector<float>> offline_embeddings(const std::vector<std::string>& texts,
                                                          const std::string& model, const std::string& flags,
                                                          const std::string& name) {
  const std::filesystem::path dir = scratch_dir("serve-offline-" + name);
  write_texts_jsonl(dir / "texts.jsonl", texts);
  const RunResult r = run_stoke("embed --quiet --model " + model + " --input " + (dir / "texts.jsonl").string() +
                                " --output " + (dir / "out").string() + " --shard-size 100000 " + flags);
  EXPECT_EQ(r.status, 0) << r.err;
  return read_npy_rows(dir / "out" / "embeddings-00000.npy");
}

inline double relative_l2(const std::vector<float>& got, const std::vector<float>& want) {
  if (got.size() != want.size()) return INFINITY;
  double diff = 0, norm = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    diff += (static_cast<double>(got[i]) - want[i]) * (static_cast<double>(got[i]) - want[i]);
    norm += static_cast<double>(want[i]) * want[i];
  }
  return std::sqrt(diff) / std::max(std::sqrt(norm), 1e-30);
}

inline std::vector<float> json_floats(const json& j) {
  std::vector<float> v;
  for (const json& x : j) v.push_back(x.get<float>());
  return v;
}

// A running `stoke serve`; SIGTERM and its exit status at the end.
class ServeProcess {
 public:
  explicit ServeProcess(const std::string& args, const std::string& name = "serve") {
    err_ = scratch_dir("serve-proc-" + name) / "stderr.txt";
    pid_ = spawn_stoke("serve --port 0 " + args, err_);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    const std::regex listening("listening on http://127\\.0\\.0\\.1:([0-9]+)");
    while (std::chrono::steady_clock::now() < deadline) {
      std::smatch m;
      const std::string text = stderr_text();
      if (std::regex_search(text, m, listening)) {
        port_ = static_cast<uint16_t>(std::stoi(m[1]));
        break;
      }
      if (::waitpid(pid_, nullptr, WNOHANG) == pid_) {
        pid_ = -1;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  ~ServeProcess() {
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      wait_exit(pid_);
    }
  }
  uint16_t port() const { return port_; }
  pid_t pid() const { return pid_; }
  // Whether /health turned 200 (the warm-up pass done) within two minutes.
  bool wait_ready() const;
  // What it wrote to stderr so far ("" before the child opened the file).
  std::string stderr_text() const {
    std::ifstream in(err_);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
  }
  // SIGTERM, then the exit status.
  int terminate() {
    ::kill(pid_, SIGTERM);
    const int status = wait_exit(pid_);
    pid_ = -1;
    return status;
  }

 private:
  std::filesystem::path err_;
  pid_t pid_ = -1;
  uint16_t port_ = 0;
};

struct Reply {
  int status = 0;  // 0: no answer (the connection closed or failed first)
  std::string body;
  std::string content_type;
  std::string error;  // why there is no answer: "connect", "write", or the read's error
  json parsed() const { return json::parse(body); }
};

// One keep-alive connection.
class Client {
 public:
  explicit Client(uint16_t port) : socket_(io_) {
    beast::error_code ec;
    socket_.connect(tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), port), ec);
    connected_ = !ec;
    timeval tv{60, 0};  // no answer within a minute is a failure, not a hang
    ::setsockopt(socket_.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  }
  bool connected() const { return connected_; }

  Reply request(http::verb method, const std::string& target, const std::string& body = "",
                const std::string& content_type = "application/json",
                const std::vector<std::pair<std::string, std::string>>& headers = {}) {
    Reply reply;
    if (!connected_) {
      reply.error = "connect";
      return reply;
    }
    http::request<http::string_body> req{method, target, 11};
    req.set(http::field::host, "127.0.0.1");
    if (!content_type.empty()) req.set(http::field::content_type, content_type);
    for (const auto& [k, v] : headers) req.set(k, v);
    req.body() = body;
    req.prepare_payload();
    beast::error_code ec;
    http::write(socket_, req, ec);
    if (ec) {
      reply.error = "write";
      connected_ = false;
      return reply;
    }
    http::response_parser<http::string_body> parser;
    parser.body_limit(1 << 30);
    http::read(socket_, buffer_, parser, ec);
    if (ec) {
      reply.error = ec == http::error::end_of_stream ? "closed before answering" : ec.message();
      connected_ = false;
      return reply;
    }
    auto res = parser.release();
    reply.status = static_cast<int>(res.result_int());
    reply.body = std::move(res.body());
    reply.content_type = std::string(res[http::field::content_type]);
    if (!res.keep_alive()) connected_ = false;
    return reply;
  }
  Reply post(const std::string& target, const std::string& body) { return request(http::verb::post, target, body); }
  Reply get(const std::string& target) { return request(http::verb::get, target, "", ""); }

 private:
  boost::asio::io_context io_;
  tcp::socket socket_;
  beast::flat_buffer buffer_;
  bool connected_ = false;
};

// Sends raw bytes on a fresh connection (optionally closing the write side
// after), then reads until the server closes or `wait` passes: everything it said.
inline std::string raw_exchange(uint16_t port, const std::string& bytes, bool shut_write = false,
                                std::chrono::milliseconds wait = std::chrono::milliseconds(10000)) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string out;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return out;
  }
  size_t sent = 0;
  while (sent < bytes.size()) {
    const ssize_t n = ::send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) break;
    sent += static_cast<size_t>(n);
  }
  if (shut_write) ::shutdown(fd, SHUT_WR);
  const auto deadline = std::chrono::steady_clock::now() + wait;
  char buf[65536];
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    const int left = static_cast<int>(
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count());
    if (::poll(&p, 1, std::max(left, 1)) <= 0) break;
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

// The status codes of every response in a raw reply, in order.
inline std::vector<int> statuses_of(const std::string& raw) {
  std::vector<int> out;
  size_t at = 0;
  while ((at = raw.find("HTTP/1.1 ", at)) != std::string::npos) {
    out.push_back(std::atoi(raw.c_str() + at + 9));
    at += 9;
  }
  return out;
}

inline bool ServeProcess::wait_ready() const {
  if (port_ == 0) return false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (std::chrono::steady_clock::now() < deadline) {
    Client c(port_);
    if (c.get("/health").status == 200) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

// A full HTTP/1.1 request's bytes.
inline std::string raw_request(const std::string& method, const std::string& target, const std::string& body,
                               const std::string& content_type = "application/json", const std::string& extra = "") {
  std::string r = method + " " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\n";
  if (!content_type.empty()) r += "Content-Type: " + content_type + "\r\n";
  r += extra + "Content-Length: " + std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
  return r;
}

}  // namespace stoke::test
