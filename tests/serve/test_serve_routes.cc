// Every route of `stoke serve` against the offline commands on the same
// texts: /embed and /v1/embeddings against `stoke embed` (rows within 1e-6
// relative L2), /predict against `stoke classify`, /rerank and /v1/rerank
// against `stoke classify` on pairs of a one-label cross-encoder; token-id
// input, /embed_all, /tokenize, /info, /v1/models, /health and /metrics.
#include <algorithm>
#include <cstring>

#include "io/safetensors.h"
#include "serve/serve_harness.h"

namespace stoke::test {
namespace {

constexpr double kTol = 1e-6;

std::string texts_json(const std::vector<std::string>& texts, size_t begin, size_t end) {
  json a = json::array();
  for (size_t i = begin; i < end; ++i) a.push_back(texts[i]);
  return a.dump();
}

// /embed (or /v1/embeddings) of every text, 16 texts a request; rows in order.
std::vector<std::vector<float>> served_rows(Client& c, const std::string& route, const std::vector<std::string>& texts,
                                           const std::string& extra_fields) {
  std::vector<std::vector<float>> rows;
  for (size_t b = 0; b < texts.size(); b += 16) {
    const size_t e = std::min(texts.size(), b + 16);
    const bool openai = route == "/v1/embeddings";
    const std::string body = std::string("{\"") + (openai ? "input" : "inputs") + "\":" + texts_json(texts, b, e) +
                             extra_fields + "}";
    const Reply r = c.post(route, body);
    EXPECT_EQ(r.status, 200) << r.body.substr(0, 300);
    if (r.status != 200) return rows;
    const json j = r.parsed();
    if (openai) {
      for (const json& d : j["data"]) rows.push_back(json_floats(d["embedding"]));
    } else {
      for (const json& row : j) rows.push_back(json_floats(row));
    }
  }
  return rows;
}

void expect_rows_match(const std::vector<std::vector<float>>& got, const std::vector<std::vector<float>>& want,
                       const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) EXPECT_LE(relative_l2(got[i], want[i]), kTol) << what << " row " << i;
}

std::vector<float> base64_floats(const std::string& s) {
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    return c == '+' ? 62 : c == '/' ? 63 : -1;
  };
  std::string bytes;
  uint32_t acc = 0;
  int bits = 0;
  for (char c : s) {
    const int v = value(c);
    if (v < 0) break;
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      bytes.push_back(static_cast<char>((acc >> bits) & 0xff));
    }
  }
  std::vector<float> out(bytes.size() / 4);
  std::memcpy(out.data(), bytes.data(), out.size() * 4);
  return out;
}

class ServeEmbedding : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ = new ServeProcess("--model " + model_dir("tiny-bert") + " --auto-truncate", "embedding");
    ASSERT_TRUE(server_->wait_ready()) << server_->stderr_text();
  }
  static void TearDownTestSuite() {
    EXPECT_EQ(server_->terminate(), 0) << server_->stderr_text();
    delete server_;
  }
  static ServeProcess* server_;
};
ServeProcess* ServeEmbedding::server_ = nullptr;

TEST_F(ServeEmbedding, EmbedMatchesStokeEmbed) {
  const std::vector<std::string> texts = golden_texts();
  const std::string m = model_dir("tiny-bert");
  Client c(server_->port());
  expect_rows_match(served_rows(c, "/embed", texts, ""), offline_embeddings(texts, m, "--normalize", "norm"),
                    "/embed normalize=true vs embed --normalize");
  expect_rows_match(served_rows(c, "/embed", texts, ",\"normalize\":false"),
                    offline_embeddings(texts, m, "--no-normalize", "raw"), "/embed normalize=false vs --no-normalize");
  // TEI's order: the first 16 dimensions, then normalized.
  std::vector<std::vector<float>> want = offline_embeddings(texts, m, "--no-normalize", "raw");
  for (auto& row : want) {
    row.resize(16);
    double sum = 0;
    for (float v : row) sum += static_cast<double>(v) * v;
    for (float& v : row) v = static_cast<float>(v / std::sqrt(sum));
  }
  expect_rows_match(served_rows(c, "/embed", texts, ",\"dimensions\":16"), want, "/embed dimensions=16");
  // The base URL dispatches to /embed for an embedding model (huggingface_hub posts there).
  expect_rows_match(served_rows(c, "/", texts, ""), offline_embeddings(texts, m, "--normalize", "norm"), "POST /");
}

TEST_F(ServeEmbedding, OpenAIEmbeddingsMatchStokeEmbed) {
  const std::vector<std::string> texts = golden_texts();
  const std::vector<std::vector<float>> want = offline_embeddings(texts, model_dir("tiny-bert"), "", "default");
  Client c(server_->port());
  expect_rows_match(served_rows(c, "/v1/embeddings", texts, ",\"model\":\"tiny-bert\""), want, "/v1/embeddings float");
  std::vector<std::vector<float>> b64;
  for (size_t b = 0; b < texts.size(); b += 16) {
    const size_t e = std::min(texts.size(), b + 16);
    const Reply r = c.post("/v1/embeddings", "{\"input\":" + texts_json(texts, b, e) +
                                                 ",\"model\":\"m\",\"encoding_format\":\"base64\"}");
    ASSERT_EQ(r.status, 200) << r.body;
    const json j = r.parsed();
    EXPECT_EQ(j["object"], "list");
    EXPECT_EQ(j["model"], "tiny-bert");
    EXPECT_GT(j["usage"]["prompt_tokens"].get<int64_t>(), 0);
    for (size_t i = 0; i < j["data"].size(); ++i) {
      EXPECT_EQ(j["data"][i]["index"], i);
      EXPECT_EQ(j["data"][i]["object"], "embedding");
      b64.push_back(base64_floats(j["data"][i]["embedding"].get<std::string>()));
    }
  }
  expect_rows_match(b64, want, "/v1/embeddings base64");
}

TEST_F(ServeEmbedding, TokenIdsEmbedAsTheirText) {
  Client c(server_->port());
  const Reply tok = c.post("/tokenize", R"({"inputs": "The quick brown fox"})");
  ASSERT_EQ(tok.status, 200) << tok.body;
  const json tokens = tok.parsed();
  json ids = json::array();
  for (const json& t : tokens[0]) ids.push_back(t["id"]);
  EXPECT_TRUE(tokens[0][0]["special"].get<bool>());
  EXPECT_FALSE(tokens[0][1]["special"].get<bool>());
  const Reply by_text = c.post("/embed", R"({"inputs": "The quick brown fox"})");
  const Reply by_ids = c.post("/embed", json{{"inputs", ids}}.dump());
  const Reply by_id_lists = c.post("/v1/embeddings", json{{"input", json::array({ids, ids})}}.dump());
  ASSERT_EQ(by_ids.status, 200) << by_ids.body;
  ASSERT_EQ(by_id_lists.status, 200) << by_id_lists.body;
  const std::vector<float> want = json_floats(by_text.parsed()[0]);
  EXPECT_LE(relative_l2(json_floats(by_ids.parsed()[0]), want), kTol);
  EXPECT_LE(relative_l2(json_floats(by_id_lists.parsed()["data"][1]["embedding"]), want), kTol);
}

TEST_F(ServeEmbedding, EmbedAllTokenRowsMeanPoolToEmbed) {
  Client c(server_->port());
  const std::string texts = R"(["Hello there, general Kenobi", "a"])";
  const Reply all = c.post("/embed_all", "{\"inputs\":" + texts + "}");
  const Reply pooled = c.post("/embed", "{\"inputs\":" + texts + ",\"normalize\":false}");
  ASSERT_EQ(all.status, 200) << all.body;
  ASSERT_EQ(pooled.status, 200) << pooled.body;
  const json all_rows = all.parsed(), pooled_rows = pooled.parsed();
  for (size_t i = 0; i < 2; ++i) {
    const json& rows = all_rows[i];
    std::vector<double> mean(rows[0].size(), 0.0);
    for (const json& row : rows)
      for (size_t k = 0; k < mean.size(); ++k) mean[k] += row[k].get<double>() / static_cast<double>(rows.size());
    const std::vector<float> got(mean.begin(), mean.end());
    EXPECT_LE(relative_l2(got, json_floats(pooled_rows[i])), 1e-5) << "text " << i;  // tiny-bert pools the mean
  }
}

TEST_F(ServeEmbedding, InfoModelsHealthMetrics) {
  Client c(server_->port());
  const Reply info = c.get("/info");
  ASSERT_EQ(info.status, 200);
  EXPECT_EQ(info.parsed()["model_id"], "tiny-bert");
  EXPECT_EQ(info.parsed()["model_type"]["embedding"]["pooling"], "mean");
  EXPECT_EQ(info.parsed()["max_input_length"], 128);
  EXPECT_EQ(info.parsed()["max_client_batch_size"], 32);
  const Reply models = c.get("/v1/models");
  ASSERT_EQ(models.status, 200);
  EXPECT_EQ(models.parsed()["data"][0]["id"], "tiny-bert");
  EXPECT_EQ(c.get("/health").status, 200);
  ASSERT_EQ(c.post("/embed", R"({"inputs": "metrics"})").status, 200);
  const Reply metrics = c.get("/metrics");
  ASSERT_EQ(metrics.status, 200);
  EXPECT_NE(metrics.content_type.find("text/plain"), std::string::npos);
  for (const char* name : {"stoke_requests_total{route=\"/embed\",status=\"200\"}", "stoke_request_duration_seconds_bucket",
                           "stoke_batch_tokens_bucket", "stoke_queue_texts", "stoke_host_syncs_total"})
    EXPECT_NE(metrics.body.find(name), std::string::npos) << name;
  // Routes of other model kinds say what they need.
  EXPECT_EQ(c.post("/predict", R"({"inputs": "a"})").status, 400);
  EXPECT_EQ(c.post("/rerank", R"({"query": "a", "texts": ["b"]})").status, 400);
}

TEST(ServeXlmr, EmbedMatchesStokeEmbed) {
  const std::vector<std::string> texts = golden_texts();
  ServeProcess server("--model " + model_dir("tiny-xlmr") + " --auto-truncate", "xlmr");
  ASSERT_TRUE(server.wait_ready()) << server.stderr_text();
  Client c(server.port());
  expect_rows_match(served_rows(c, "/v1/embeddings", texts, ""),
                    offline_embeddings(texts, model_dir("tiny-xlmr"), "", "xlmr"), "tiny-xlmr /v1/embeddings");
  EXPECT_EQ(server.terminate(), 0);
}

// `stoke classify` on a JSONL file: each line's logits.
std::vector<std::vector<float>> offline_logits(const std::string& model, const std::vector<json>& records,
                                               const std::string& name) {
  const std::filesystem::path dir = scratch_dir("serve-classify-" + name);
  {
    std::ofstream out(dir / "in.jsonl");
    for (const json& r : records) out << r.dump() << "\n";
  }
  const RunResult r = run_stoke("classify --quiet --model " + model + " --input " + (dir / "in.jsonl").string() +
                                " --output " + (dir / "out.jsonl").string());
  EXPECT_EQ(r.status, 0) << r.err;
  std::vector<std::vector<float>> out;
  std::ifstream in(dir / "out.jsonl");
  for (std::string line; std::getline(in, line);) out.push_back(json_floats(json::parse(line)["logits"]));
  return out;
}

TEST(ServeClassifier, PredictMatchesStokeClassify) {
  const std::vector<std::string> texts = golden_texts();
  std::vector<json> records;
  for (const std::string& t : texts) records.push_back({{"text", t}});
  const std::vector<std::vector<float>> logits = offline_logits(model_dir("tiny-bert"), records, "predict");
  ServeProcess server("--model " + model_dir("tiny-bert") + " --model-kind classifier --auto-truncate", "classifier");
  ASSERT_TRUE(server.wait_ready()) << server.stderr_text();
  Client c(server.port());
  for (size_t b = 0; b < texts.size(); b += 8) {
    const size_t e = std::min(texts.size(), b + 8);
    json batch = json::array();
    for (size_t i = b; i < e; ++i) batch.push_back(json::array({texts[i]}));
    const Reply raw = c.post("/predict", json{{"inputs", batch}, {"raw_scores", true}}.dump());
    ASSERT_EQ(raw.status, 200) << raw.body;
    const Reply soft = c.post("/predict", json{{"inputs", batch}}.dump());
    ASSERT_EQ(soft.status, 200) << soft.body;
    const json raw_j = raw.parsed(), soft_j = soft.parsed();
    for (size_t i = b; i < e; ++i) {
      // Sorted by score; put back in label order to compare.
      std::vector<float> got(3), probs(3);
      for (const json& ls : raw_j[i - b]) got[std::stoi(ls["label"].get<std::string>().substr(6))] = ls["score"];
      for (const json& ls : soft_j[i - b]) probs[std::stoi(ls["label"].get<std::string>().substr(6))] = ls["score"];
      EXPECT_LE(relative_l2(got, logits[i]), kTol) << "text " << i;
      double mx = *std::max_element(logits[i].begin(), logits[i].end()), sum = 0;
      for (float v : logits[i]) sum += std::exp(v - mx);
      std::vector<float> want;
      for (float v : logits[i]) want.push_back(static_cast<float>(std::exp(v - mx) / sum));
      EXPECT_LE(relative_l2(probs, want), kTol) << "text " << i;
      EXPECT_GE(soft_j[i - b][0]["score"].get<float>(), soft_j[i - b][1]["score"].get<float>());
    }
  }
  // TEI's shapes: one text, and ["a", "b"] as ONE pair.
  const Reply one = c.post("/predict", json{{"inputs", texts[0]}}.dump());
  ASSERT_EQ(one.status, 200) << one.body;
  EXPECT_EQ(one.parsed().size(), 3u);
  EXPECT_TRUE(one.parsed()[0].contains("label"));
  const Reply pair = c.post("/predict", json{{"inputs", {texts[0], texts[1]}}, {"raw_scores", true}}.dump());
  ASSERT_EQ(pair.status, 200) << pair.body;
  const std::vector<std::vector<float>> pair_logits =
      offline_logits(model_dir("tiny-bert"), {{{"text", texts[0]}, {"text_pair", texts[1]}}}, "pair");
  std::vector<float> got(3);
  const json pair_j = pair.parsed();
  for (const json& ls : pair_j) got[std::stoi(ls["label"].get<std::string>().substr(6))] = ls["score"];
  EXPECT_LE(relative_l2(got, pair_logits[0]), kTol);
  EXPECT_EQ(c.post("/embed", R"({"inputs": "a"})").status, 400);  // not an embedding model
  EXPECT_EQ(server.terminate(), 0);
}

// tiny-bert with its classification head cut to the first label: a one-label cross-encoder.
std::filesystem::path make_cross_encoder() {
  namespace fs = std::filesystem;
  const fs::path dir = scratch_dir("serve-cross-encoder");
  const fs::path src = fixture("models/tiny-bert");
  for (const char* f : {"vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"})
    fs::copy_file(src / f, dir / f);
  json config = json::parse(read_file(src / "config.json"));
  config["id2label"] = {{"0", "LABEL_0"}};
  config["label2id"] = {{"LABEL_0", 0}};
  std::ofstream(dir / "config.json") << config.dump(2);
  auto weights = SafetensorsFile::open(src / "model.safetensors");
  std::vector<TensorToWrite> tensors;
  for (const StoredTensor& t : weights->tensors()) {
    TensorToWrite w{t.name, t.dtype, t.shape, {t.data.data(), t.data.size()}};
    if (t.name == "classifier.weight" || t.name == "classifier.bias") {  // f32 [3, H] and [3]: keep row 0
      EXPECT_EQ(t.dtype, DType::f32);
      w.shape[0] = 1;
      w.data = w.data.subspan(0, t.data.size() / static_cast<size_t>(t.shape[0]));
    }
    tensors.push_back(w);
  }
  write_safetensors(dir / "model.safetensors", tensors);
  return dir;
}

TEST(ServeReranker, RerankMatchesStokeClassifyOnPairs) {
  const std::filesystem::path model = make_cross_encoder();
  const std::vector<std::string> texts = golden_texts();
  const std::string query = "Which text talks about computers?";
  std::vector<json> records;
  for (size_t i = 0; i < 12; ++i) records.push_back({{"text", query}, {"text_pair", texts[i]}});
  const std::vector<std::vector<float>> logits = offline_logits(model.string(), records, "rerank");
  ServeProcess server("--model " + model.string() + " --auto-truncate", "reranker");
  ASSERT_TRUE(server.wait_ready()) << server.stderr_text();
  Client c(server.port());
  const std::vector<std::string> docs(texts.begin(), texts.begin() + 12);
  const Reply raw = c.post("/rerank", json{{"query", query}, {"texts", docs}, {"raw_scores", true}, {"return_text", true}}.dump());
  ASSERT_EQ(raw.status, 200) << raw.body;
  float previous = INFINITY;
  const json raw_j = raw.parsed();
  for (const json& r : raw_j) {
    const size_t i = r["index"];
    EXPECT_LE(relative_l2({r["score"].get<float>()}, {logits[i][0]}), kTol) << i;
    EXPECT_LE(r["score"].get<float>(), previous);
    EXPECT_EQ(r["text"], docs[i]);
    previous = r["score"];
  }
  const Reply cohere = c.post("/v1/rerank", json{{"query", query}, {"documents", docs}, {"top_n", 3}, {"model", "x"}}.dump());
  ASSERT_EQ(cohere.status, 200) << cohere.body;
  const json cohere_j = cohere.parsed();
  ASSERT_EQ(cohere_j["results"].size(), 3u);
  for (const json& r : cohere_j["results"]) {
    const size_t i = r["index"];
    const float want = static_cast<float>(1.0 / (1.0 + std::exp(-static_cast<double>(logits[i][0]))));
    EXPECT_LE(relative_l2({r["relevance_score"].get<float>()}, {want}), kTol) << i;
  }
  const Reply base = c.post("/", json{{"query", query}, {"texts", docs}}.dump());
  EXPECT_EQ(base.status, 200) << base.body;
  EXPECT_EQ(server.terminate(), 0);
}

}  // namespace
}  // namespace stoke::test
