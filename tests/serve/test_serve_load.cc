// Many clients at once: 200 concurrent keep-alive clients with mixed request
// sizes, every row checked against `stoke embed` offline (a text's vector must
// not depend on which requests shared its batch); then SIGTERM in the middle
// of a load: every request is answered correctly or refused cleanly (503, or
// the connection closed before an answer began), and the server exits 0.
#include <atomic>
#include <mutex>

#include "serve/serve_harness.h"

namespace stoke::test {
namespace {

std::vector<std::string> load_texts() {
  std::vector<std::string> texts = golden_texts();
  std::ifstream in(fixture("corpus/fortunes-multilingual.jsonl"));
  std::string line;
  for (int i = 0; i < 300 && std::getline(in, line); ++i) {
    std::string t = json::parse(line)["text"].get<std::string>();
    if (!t.empty()) texts.push_back(std::move(t));
  }
  return texts;
}

struct Load {
  std::vector<std::string> texts;
  std::vector<std::vector<float>> offline;
};

const Load& load() {
  static const Load* l = [] {
    auto* x = new Load;
    x->texts = load_texts();
    x->offline = offline_embeddings(x->texts, model_dir("tiny-bert"), "", "load");
    return x;
  }();
  return *l;
}

// Request k of client c: 1 to 8 texts from a spread of offsets; its first index.
size_t first_text(int c, int k, size_t n) { return (static_cast<size_t>(c) * 37 + static_cast<size_t>(k) * 101) % n; }
size_t text_count(int c, int k) { return 1 + static_cast<size_t>(c + 3 * k) % 8; }

std::string request_body(const Load& l, size_t first, size_t count, bool openai) {
  json texts = json::array();
  for (size_t i = 0; i < count; ++i) texts.push_back(l.texts[(first + i) % l.texts.size()]);
  return json{{openai ? "input" : "inputs", texts}}.dump();
}

// "" when every row matches offline, else what is wrong.
std::string check_rows(const Load& l, const Reply& r, size_t first, size_t count, bool openai) {
  const json j = json::parse(r.body, nullptr, false);
  if (j.is_discarded()) return "unparsable answer";
  const json& rows = openai ? j["data"] : j;
  if (rows.size() != count) return "wrong row count";
  for (size_t i = 0; i < count; ++i) {
    const std::vector<float> got = json_floats(openai ? rows[i]["embedding"] : rows[i]);
    const double err = relative_l2(got, l.offline[(first + i) % l.texts.size()]);
    if (!(err <= 1e-6)) return "row " + std::to_string(i) + " differs by " + std::to_string(err);
  }
  return "";
}

TEST(ServeLoad, TwoHundredKeepAliveClients) {
  const Load& l = load();
  ASSERT_EQ(l.offline.size(), l.texts.size());
  ServeProcess server("--model " + model_dir("tiny-bert") + " --auto-truncate", "load");
  ASSERT_TRUE(server.wait_ready()) << server.stderr_text();
  constexpr int kClients = 200, kRequests = 5;
  std::atomic<int> ok{0};
  std::mutex mu;
  std::vector<std::string> failures;
  std::vector<std::thread> threads;
  for (int c = 0; c < kClients; ++c) {
    threads.emplace_back([&, c] {
      Client client(server.port());
      for (int k = 0; k < kRequests; ++k) {
        const size_t first = first_text(c, k, l.texts.size()), count = text_count(c, k);
        const bool openai = (c + k) % 2 == 1;
        const Reply r = client.post(openai ? "/v1/embeddings" : "/embed", request_body(l, first, count, openai));
        std::string why = r.status == 200 ? check_rows(l, r, first, count, openai)
                                          : "status " + std::to_string(r.status) + " " + r.error + " " + r.body;
        if (why.empty()) {
          ++ok;
        } else {
          std::lock_guard lock(mu);
          failures.push_back("client " + std::to_string(c) + " request " + std::to_string(k) + ": " + why);
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(ok.load(), kClients * kRequests);
  for (size_t i = 0; i < std::min<size_t>(failures.size(), 10); ++i) ADD_FAILURE() << failures[i];
  EXPECT_EQ(server.terminate(), 0) << server.stderr_text();
}

TEST(ServeLoad, SigtermMidLoadAnswersOrRefusesCleanly) {
  const Load& l = load();
  ServeProcess server("--model " + model_dir("tiny-bert") + " --auto-truncate --drain-timeout 60", "sigterm");
  ASSERT_TRUE(server.wait_ready()) << server.stderr_text();
  constexpr int kClients = 32, kRequests = 40;
  std::atomic<int> answered{0}, refused{0};
  std::mutex mu;
  std::vector<std::string> failures;
  std::vector<std::thread> threads;
  for (int c = 0; c < kClients; ++c) {
    threads.emplace_back([&, c] {
      auto client = std::make_unique<Client>(server.port());
      for (int k = 0; k < kRequests; ++k) {
        if (!client->connected()) client = std::make_unique<Client>(server.port());
        const size_t first = first_text(c, k, l.texts.size()), count = text_count(c, k);
        const Reply r = client->post("/embed", request_body(l, first, count, false));
        if (r.status == 200) {
          const std::string why = check_rows(l, r, first, count, false);
          if (why.empty()) {
            ++answered;
            continue;
          }
          std::lock_guard lock(mu);
          failures.push_back(why);
        } else if (r.status == 503 || r.error == "connect" || r.error == "closed before answering" ||
                   r.error == "write") {
          ++refused;  // refused cleanly: the server is draining
          return;
        } else {
          std::lock_guard lock(mu);
          failures.push_back("status " + std::to_string(r.status) + " " + r.error + " " + r.body);
          return;
        }
      }
    });
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (answered.load() < 100 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  const int status = server.terminate();
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(status, 0) << server.stderr_text();
  EXPECT_GE(answered.load(), 100);
  for (size_t i = 0; i < std::min<size_t>(failures.size(), 10); ++i) ADD_FAILURE() << failures[i];
  EXPECT_TRUE(failures.empty());
  EXPECT_NE(server.stderr_text().find("stoke serve: stopped:"), std::string::npos) << server.stderr_text();
}

}  // namespace
}  // namespace stoke::test
