// The bad-request table: malformed and truncated JSON, wrong types, nesting
// bombs, huge arrays, invalid UTF-8, empty inputs, bad dimensions, bodies over
// the payload limit (by Content-Length and chunked), header floods, pipelined
// requests, a half body and a close — each gets TEI's status (or is dropped
// cleanly), and the server stays up and answers correctly afterwards.
#include "serve/serve_harness.h"

namespace stoke::test {
namespace {

constexpr int64_t kPayloadLimit = 65536;
constexpr int kMaxClientBatch = 8;

struct Case {
  std::string name;
  std::string route;
  std::string body;
  int status;
  std::string content_type = "application/json";
};

std::string nested(const std::string& open, const std::string& close, int depth, const std::string& inner) {
  std::string s;
  for (int i = 0; i < depth; ++i) s += open;
  s += inner;
  for (int i = 0; i < depth; ++i) s += close;
  return s;
}

std::string strings_array(int n) {
  std::string s = "[";
  for (int i = 0; i < n; ++i) s += std::string(i ? "," : "") + "\"t\"";
  return s + "]";
}

std::vector<Case> json_cases() {
  const std::string long_text = [] {
    std::string t;
    for (int i = 0; i < 300; ++i) t += "word ";
    return t;
  }();
  return {
      {"malformed JSON", "/embed", "{\"inputs\": ", 400},
      {"truncated JSON", "/embed", "{\"inputs\": [\"a\", \"b\"", 400},
      {"trailing garbage", "/embed", "{\"inputs\": \"a\"} x", 400},
      {"bare word", "/embed", "inputs", 400},
      {"empty body", "/embed", "", 400},
      {"single quotes", "/embed", "{'inputs': 'a'}", 400},
      {"root is a string", "/embed", "\"a\"", 422},
      {"root is an array", "/embed", "[\"a\"]", 422},
      {"missing inputs", "/embed", "{}", 422},
      {"inputs null", "/embed", "{\"inputs\": null}", 422},
      {"inputs a number", "/embed", "{\"inputs\": 5}", 422},
      {"inputs an object", "/embed", "{\"inputs\": {\"text\": \"a\"}}", 422},
      {"inputs a boolean in a list", "/embed", "{\"inputs\": [true]}", 422},
      {"inputs null in a list", "/embed", "{\"inputs\": [\"a\", null]}", 422},
      {"fractional token id", "/embed", "{\"inputs\": [1.5]}", 422},
      {"negative token id", "/embed", "{\"inputs\": [2, -1, 3]}", 422},
      {"token id past the vocabulary", "/embed", "{\"inputs\": [2, 999999, 3]}", 422},
      {"token id past 64 bits", "/embed", "{\"inputs\": [18446744073709551615]}", 422},
      {"empty token id list", "/embed", "{\"inputs\": [[2, 3], []]}", 400},
      {"empty string", "/embed", "{\"inputs\": \"\"}", 400},
      {"empty list", "/embed", "{\"inputs\": []}", 400},
      {"empty string in a list", "/embed", "{\"inputs\": [\"a\", \"\"]}", 400},
      {"nesting bomb (lists)", "/embed", "{\"inputs\": " + nested("[", "]", 5000, "1") + "}", 400},
      {"nesting bomb (objects)", "/embed", nested("{\"a\":", "}", 5000, "1"), 400},
      {"more texts than --max-client-batch-size", "/embed", "{\"inputs\": " + strings_array(kMaxClientBatch + 1) + "}", 422},
      {"huge array", "/embed", "{\"inputs\": " + strings_array(10000) + "}", 422},
      {"invalid UTF-8 in a string", "/embed", "{\"inputs\": \"ab\xff\xfe\"}", 400},
      {"overlong UTF-8 in a string", "/embed", "{\"inputs\": \"\xc0\xaf\"}", 400},
      {"raw control character in a string", "/embed", std::string("{\"inputs\": \"a\x01") + "b\"}", 400},
      {"escaped NUL is a character", "/embed", "{\"inputs\": \"a\\u0000b\"}", 200},
      {"normalize not a boolean", "/embed", "{\"inputs\": \"a\", \"normalize\": \"yes\"}", 422},
      {"truncate not a boolean", "/embed", "{\"inputs\": \"a\", \"truncate\": 1}", 422},
      {"dimensions zero", "/embed", "{\"inputs\": \"a\", \"dimensions\": 0}", 422},
      {"dimensions negative", "/embed", "{\"inputs\": \"a\", \"dimensions\": -3}", 422},
      {"dimensions past the width", "/embed", "{\"inputs\": \"a\", \"dimensions\": 100000}", 422},
      {"dimensions fractional", "/embed", "{\"inputs\": \"a\", \"dimensions\": 1.5}", 422},
      {"dimensions a string", "/embed", "{\"inputs\": \"a\", \"dimensions\": \"8\"}", 422},
      {"unknown truncation_direction", "/embed", "{\"inputs\": \"a\", \"truncation_direction\": \"Up\"}", 422},
      {"unknown prompt_name", "/embed", "{\"inputs\": \"a\", \"prompt_name\": \"nope\"}", 422},
      {"too long without truncation", "/embed", "{\"inputs\": \"" + long_text + "\", \"truncate\": false}", 422},
      {"too long, truncated", "/embed", "{\"inputs\": \"" + long_text + "\", \"truncate\": true}", 200},
      {"unknown fields are ignored", "/embed", "{\"inputs\": \"a\", \"whatever\": [1, {\"b\": null}]}", 200},
      {"no Content-Type", "/embed", "{\"inputs\": \"a\"}", 415, ""},
      {"text/plain", "/embed", "{\"inputs\": \"a\"}", 415, "text/plain"},
      {"JSON with a charset", "/embed", "{\"inputs\": \"a\"}", 200, "application/json; charset=utf-8"},
      {"unknown route", "/nope", "{}", 404},
      {"GET-only route posted", "/health", "{}", 405},
      {"openai: wrong encoding_format", "/v1/embeddings", "{\"input\": \"a\", \"encoding_format\": \"hex\"}", 422},
      {"openai: missing input", "/v1/embeddings", "{\"model\": \"m\"}", 422},
      {"openai: model not a string", "/v1/embeddings", "{\"input\": \"a\", \"model\": 3}", 422},
      {"openai: empty input", "/v1/embeddings", "{\"input\": []}", 400},
      {"openai: malformed JSON", "/v1/embeddings", "{\"input\": [", 400},
      {"tokenize: ids are not texts", "/tokenize", "{\"inputs\": [1, 2]}", 422},
      {"predict on an embedding model", "/predict", "{\"inputs\": \"a\"}", 400},
      {"rerank on an embedding model", "/rerank", "{\"query\": \"a\", \"texts\": [\"b\"]}", 400},
  };
}

class ServeBadRequests : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ = new ServeProcess("--model " + model_dir("tiny-bert") + " --payload-limit " + std::to_string(kPayloadLimit) +
                                   " --max-client-batch-size " + std::to_string(kMaxClientBatch) +
                                   " --header-timeout 2 --body-timeout 2 --idle-timeout 5",
                               "bad-requests");
    ASSERT_TRUE(server_->wait_ready()) << server_->stderr_text();
  }
  static void TearDownTestSuite() {
    EXPECT_EQ(server_->terminate(), 0) << server_->stderr_text();
    delete server_;
  }
  // The server still answers a good request correctly.
  static void expect_alive() {
    Client c(server_->port());
    const Reply r = c.post("/embed", "{\"inputs\": \"still here\"}");
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.parsed()[0].size(), 64u);
  }
  static ServeProcess* server_;
};
ServeProcess* ServeBadRequests::server_ = nullptr;

TEST_F(ServeBadRequests, JsonTable) {
  const std::vector<Case> cases = json_cases();
  ASSERT_GE(cases.size(), 40u);
  for (const Case& k : cases) {
    Client c(server_->port());
    const Reply r = c.request(http::verb::post, k.route, k.body, k.content_type);
    EXPECT_EQ(r.status, k.status) << k.name << ": " << r.body.substr(0, 300);
    if (r.status >= 400) {
      // Errors in the route's API shape.
      const json j = json::parse(r.body, nullptr, false);
      ASSERT_FALSE(j.is_discarded()) << k.name << ": " << r.body;
      if (k.route == "/v1/embeddings") {
        EXPECT_TRUE(j["error"].is_object() && j["error"]["message"].is_string()) << k.name << ": " << r.body;
      } else {
        EXPECT_TRUE(j["error"].is_string() && j["error_type"].is_string()) << k.name << ": " << r.body;
      }
    }
  }
  expect_alive();
}

TEST_F(ServeBadRequests, BodyOverTheLimitByContentLength) {
  const std::string body = "{\"inputs\": \"" + std::string(kPayloadLimit + 100, 'a') + "\"}";
  const std::string raw = raw_exchange(server_->port(), raw_request("POST", "/embed", body));
  EXPECT_EQ(statuses_of(raw), std::vector<int>{413}) << raw.substr(0, 300);
  // Announced but not sent: refused from the header alone.
  const std::string announced = raw_exchange(
      server_->port(), "POST /embed HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 99999999\r\n\r\n");
  EXPECT_EQ(statuses_of(announced), std::vector<int>{413}) << announced.substr(0, 300);
  expect_alive();
}

TEST_F(ServeBadRequests, BodyOverTheLimitChunked) {
  std::string req = "POST /embed HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n";
  const std::string chunk(8192, 'a');
  req += "c\r\n{\"inputs\": \"\r\n";
  for (int64_t sent = 0; sent <= kPayloadLimit; sent += 8192) req += "2000\r\n" + chunk + "\r\n";
  req += "2\r\n\"}\r\n0\r\n\r\n";
  const std::string raw = raw_exchange(server_->port(), req);
  EXPECT_EQ(statuses_of(raw), std::vector<int>{413}) << raw.substr(0, 300);
  // A chunked body under the limit is read whole.
  const std::string small = "POST /embed HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n"
                            "Connection: close\r\n\r\n5\r\n{\"inp\r\nb\r\nuts\": \"ab\"}\r\n0\r\n\r\n";
  EXPECT_EQ(statuses_of(raw_exchange(server_->port(), small)), std::vector<int>{200});
  expect_alive();
}

TEST_F(ServeBadRequests, HeaderFloodAndMalformedHttp) {
  std::string flood = "GET /health HTTP/1.1\r\nHost: x\r\n";
  for (int i = 0; i < 200; ++i) flood += "X-Flood-" + std::to_string(i) + ": " + std::string(200, 'v') + "\r\n";
  flood += "\r\n";
  EXPECT_EQ(statuses_of(raw_exchange(server_->port(), flood)), std::vector<int>{431});
  EXPECT_EQ(statuses_of(raw_exchange(server_->port(), "GARBAGE\r\n\r\n")), std::vector<int>{400});
  EXPECT_EQ(statuses_of(raw_exchange(server_->port(), "POST /embed HTTP/1.1\r\nContent-Length: nope\r\n\r\n")),
            std::vector<int>{400});
  expect_alive();
}

TEST_F(ServeBadRequests, PipelinedRequestsAnsweredInOrder) {
  auto post = [](const std::string& body) {
    return "POST /embed HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " +
           std::to_string(body.size()) + "\r\n\r\n" + body;
  };
  const std::string last = "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
  const std::string raw = raw_exchange(server_->port(), post("{\"inputs\":\"a\"}") + post("{}") +
                                                             post("{\"inputs\":[\"b\",\"c\"]}") + last);
  EXPECT_EQ(statuses_of(raw), (std::vector<int>{200, 422, 200, 200})) << raw.substr(0, 500);
}

TEST_F(ServeBadRequests, HalfABodyThenCloseOrSilence) {
  const std::string head = "POST /embed HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n";
  // The client closes half-way: nobody to answer; the server drops it.
  EXPECT_EQ(statuses_of(raw_exchange(server_->port(), head + "{\"inputs\": ", true)), std::vector<int>{});
  // The client stops sending: the body timeout (2 s here) closes the connection
  // (Beast closes the socket on a timeout; there is no answer to give).
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(statuses_of(raw_exchange(server_->port(), head + "{\"inputs\": ", false, std::chrono::seconds(30))),
            std::vector<int>{});
  // Half a header, then silence: the header timeout closes it.
  EXPECT_EQ(statuses_of(raw_exchange(server_->port(), "POST /embed HTTP/1.1\r\nHost:", false, std::chrono::seconds(30))),
            std::vector<int>{});
  // Both closed by the server, not by the 30 s waits running out.
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
  expect_alive();
}

TEST(ServeOverload, OneRequestPastTheLimitGets429AndAGoneClientIsDropped) {
  // One request in flight at most; the batcher holds a lone short request up
  // to 3 s hoping for company, so a second request arriving meanwhile finds
  // the slot taken. Which of the two wins the slot is the server's choice.
  ServeProcess server("--model " + model_dir("tiny-bert") + " --max-concurrent-requests 1 --max-wait-ms 3000",
                      "overload");
  ASSERT_TRUE(server.wait_ready()) << server.stderr_text();
  int statuses[2] = {0, 0};
  std::thread first([&] { statuses[0] = Client(server.port()).post("/embed", "{\"inputs\": \"one\"}").status; });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  statuses[1] = Client(server.port()).post("/embed", "{\"inputs\": \"two\"}").status;
  first.join();
  EXPECT_EQ(std::min(statuses[0], statuses[1]), 200);
  EXPECT_EQ(std::max(statuses[0], statuses[1]), 429);

  // A client that goes away while its request waits in the batcher: its text
  // is dropped before the device (a closed sending side counts as gone; the
  // answer, 503, is still written for it to read).
  const std::string raw = raw_exchange(server.port(), raw_request("POST", "/embed", "{\"inputs\": \"bye\"}"), true);
  EXPECT_EQ(statuses_of(raw), std::vector<int>{503}) << raw;
  std::string metrics;  // counted just after the answer is handed over: look a few times
  for (int i = 0; i < 100 && metrics.find("stoke_cancelled_texts_total 1\n") == std::string::npos; ++i) {
    if (i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    metrics = Client(server.port()).get("/metrics").body;
  }
  EXPECT_NE(metrics.find("stoke_cancelled_texts_total 1\n"), std::string::npos) << metrics.substr(0, 2000);
  EXPECT_EQ(server.terminate(), 0);
}

TEST(ServeApiKey, RequiredEverywhereButHealth) {
  ServeProcess server("--model " + model_dir("tiny-bert") + " --api-key s3cret", "api-key");
  ASSERT_TRUE(server.wait_ready()) << server.stderr_text();
  Client c(server.port());
  EXPECT_EQ(c.post("/embed", "{\"inputs\": \"a\"}").status, 401);
  EXPECT_EQ(c.request(http::verb::post, "/embed", "{\"inputs\": \"a\"}", "application/json",
                      {{"Authorization", "Bearer wrong!"}}).status,
            401);
  EXPECT_EQ(c.request(http::verb::post, "/embed", "{\"inputs\": \"a\"}", "application/json",
                      {{"Authorization", "Bearer s3cret"}}).status,
            200);
  const Reply openai = c.post("/v1/embeddings", "{\"input\": \"a\"}");
  EXPECT_EQ(openai.status, 401);
  EXPECT_EQ(openai.parsed()["error"]["type"], "authentication_error");
  EXPECT_EQ(c.get("/health").status, 200);
  EXPECT_EQ(server.terminate(), 0);
}

}  // namespace
}  // namespace stoke::test
