// Every route of `stoke serve` against the offline commands on the same
// texts: /embed and /v1/embeddings against `stoke embed` (rows within 1e-6
// relative L2), /predict against `stoke classify`, /rerank and /v1/rerank
// against `stoke classify` on pairs of a one-label cross-encoder; token-id
// input, /embed_all, /tokenize, /info, /v1/models, /health and /metrics.
#include <algorithm>
#include <cctype>
#include <cstring>
#include <map>
#include <set>
#include <thread>

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

// /embed_chunks: each text's chunks and spans, the rows and ids lines
// `stoke embed --chunk-tokens` writes for the same texts (plain and late).
TEST_F(ServeEmbedding, EmbedChunksMatchesStokeEmbedChunks) {
  std::vector<std::string> texts;
  const std::vector<std::string> golden = golden_texts();
  for (size_t i = 0; i + 6 <= golden.size() && texts.size() < 4; i += 6) {
    std::string doc;
    for (size_t k = i; k < i + 6; ++k) doc += (doc.empty() ? "" : ". ") + golden[k];
    texts.push_back(doc);
  }
  const std::string m = model_dir("tiny-bert");
  Client c(server_->port());
  for (const bool late : {false, true}) {
    const std::string flags = std::string("--chunk-tokens 24 --chunk-overlap 4 --chunk-boundary word") +
                              (late ? " --late-chunking" : "");
    const auto want = offline_embeddings(texts, m, flags, late ? "chunks-late" : "chunks");
    const std::string body = "{\"inputs\":" + texts_json(texts, 0, texts.size()) +
                             ",\"chunk_tokens\":24,\"chunk_overlap\":4,\"chunk_boundary\":\"word\"" +
                             (late ? ",\"late_chunking\":true" : "") + "}";
    const Reply r = c.post("/embed_chunks", body);
    ASSERT_EQ(r.status, 200) << r.body.substr(0, 300);
    const json j = r.parsed();
    ASSERT_EQ(j.size(), texts.size());
    std::vector<std::vector<float>> got;
    for (size_t i = 0; i < j.size(); ++i) {
      EXPECT_EQ(j[i]["index"], i);
      for (const json& chunk : j[i]["chunks"]) {
        got.push_back(json_floats(chunk["embedding"]));
        const auto b = chunk["bytes"][0].get<size_t>(), e = chunk["bytes"][1].get<size_t>();
        EXPECT_LE(e, texts[i].size());
        EXPECT_LE(chunk["tokens"][1].get<int>() - chunk["tokens"][0].get<int>(), 24);
        EXPECT_LE(b, e);
      }
    }
    expect_rows_match(got, want, late ? "/embed_chunks late" : "/embed_chunks");
  }
  // Bad requests name the field.
  Reply r = c.post("/embed_chunks", "{\"inputs\":[\"a b c\"]}");
  EXPECT_EQ(r.status, 422);
  EXPECT_NE(r.body.find("chunk_tokens: required"), std::string::npos) << r.body;
  r = c.post("/embed_chunks", "{\"inputs\":[\"a b c\"],\"chunk_tokens\":500}");
  EXPECT_EQ(r.status, 422);
  EXPECT_NE(r.body.find("more than the max length 128"), std::string::npos) << r.body;
  r = c.post("/embed_chunks", "{\"inputs\":[\"a b c\"],\"chunk_tokens\":8,\"chunk_boundary\":\"clause\"}");
  EXPECT_EQ(r.status, 422);
  EXPECT_NE(r.body.find("expected none, word, sentence or paragraph"), std::string::npos) << r.body;
}

TEST_F(ServeEmbedding, InfoModelsHealthMetrics) {
  Client c(server_->port());
  const Reply info = c.get("/info");
  ASSERT_EQ(info.status, 200);
  EXPECT_EQ(info.parsed()["model_id"], "tiny-bert");
  EXPECT_EQ(info.parsed()["model_type"]["embedding"]["pooling"], "mean");
  EXPECT_EQ(info.parsed()["max_input_length"], 128);
  EXPECT_EQ(info.parsed()["max_client_batch_size"], 32);
  EXPECT_EQ(info.parsed()["model_dtype"], "float32");
  EXPECT_NE(server_->stderr_text().find("(model tiny-bert, embedding, cpu, precision f32, max length 128)"),
            std::string::npos)
      << server_->stderr_text();
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

// ---- the precision that runs, in /info and the start line; an over-long input's 422 in each API's terms

// TEI's model_dtype is the dtype the model runs in; under --precision int8 the
// layers' GEMM weights are int8, and /info says so (docs/serve.md).
TEST(ServePrecision, Int8IsReportedAsItRunsAndLongInputsSayWhatToDo) {
  ServeProcess server("--model " + model_dir("tiny-bert") + " --precision int8", "int8");
  ASSERT_TRUE(server.wait_ready()) << server.stderr_text();
  EXPECT_NE(server.stderr_text().find("(model tiny-bert, embedding, cpu, precision int8, max length 128)"),
            std::string::npos)
      << server.stderr_text();
  Client c(server.port());
  const Reply info = c.get("/info");
  ASSERT_EQ(info.status, 200);
  EXPECT_EQ(info.parsed()["model_dtype"], "int8");
  // 300 words: 302 tokens with [CLS] and [SEP], past the max length 128; no --auto-truncate.
  std::string long_text;
  for (int i = 0; i < 300; ++i) long_text += "word ";
  const Reply openai = c.post("/v1/embeddings", json{{"input", long_text}}.dump());
  ASSERT_EQ(openai.status, 422) << openai.body;
  EXPECT_EQ(openai.parsed()["error"]["message"],
            "input 0 has 302 tokens, more than the maximum length 128 (the OpenAI API has no truncation field: "
            "shorten the input, or start the server with --auto-truncate, which cuts every input to the max length)");
  const Reply tei = c.post("/embed", json{{"inputs", long_text}}.dump());
  ASSERT_EQ(tei.status, 422) << tei.body;
  EXPECT_EQ(tei.parsed()["error"], "input 0 has 302 tokens, more than the maximum length 128 (send \"truncate\": "
                                   "true, or start the server with --auto-truncate)");
  EXPECT_EQ(server.terminate(), 0) << server.stderr_text();
}

TEST(ServePrecision, Bf16IsBfloat16) {
  ServeProcess server("--model " + model_dir("tiny-bert") + " --precision bf16", "bf16");
  ASSERT_TRUE(server.wait_ready()) << server.stderr_text();
  EXPECT_NE(server.stderr_text().find("precision bf16, max length 128)"), std::string::npos) << server.stderr_text();
  Client c(server.port());
  const Reply info = c.get("/info");
  ASSERT_EQ(info.status, 200);
  EXPECT_EQ(info.parsed()["model_dtype"], "bfloat16");
  EXPECT_EQ(server.terminate(), 0) << server.stderr_text();
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

// ---- truncation_direction, HEAD, --trace

// Every golden text with its index (empty ones too: the goldens are indexed by line).
std::vector<std::string> indexed_golden_texts() {
  std::vector<std::string> texts;
  std::ifstream in(fixture("golden/texts.jsonl"));
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) texts.push_back(json::parse(line)["text"].get<std::string>());
  return texts;
}

// TEI's truncation_direction over the route, against transformers' ids
// (tests/golden/tokenizers/truncation.expected.jsonl, max length 16): /tokenize
// gives them, and /embed of a text cut on the left equals /embed of those ids.
void expect_truncation_matches_transformers(const std::string& model) {
  const std::vector<std::string> texts = indexed_golden_texts();
  std::ifstream in(std::filesystem::path(STOKE_SOURCE_DIR) / "tests" / "golden" / "tokenizers" /
                   "truncation.expected.jsonl");
  ServeProcess server("--model " + model_dir(model) + " --max-length 16", "truncation-" + model);
  ASSERT_TRUE(server.wait_ready()) << server.stderr_text();
  Client c(server.port());
  // transformers' offsets of each text's whole tokenization, in bytes (make_offset_goldens.py).
  std::map<size_t, std::vector<std::vector<int64_t>>> offsets_of;
  {
    std::ifstream off(std::filesystem::path(STOKE_SOURCE_DIR) / "tests" / "golden" / "tokenizers" /
                      "offsets.expected.jsonl");
    for (std::string line; std::getline(off, line);) {
      const json row = json::parse(line);
      if (row["model"] == model) offsets_of[row["text"].get<size_t>()] = row["offsets"];
    }
  }
  size_t checked = 0, embedded = 0;
  for (std::string line; std::getline(in, line);) {
    const json row = json::parse(line);
    if (row["model"] != model || row["max_length"] != 16 || !row["pair"].is_null()) continue;
    const std::string& text = texts.at(row["text"].get<size_t>());
    if (text.empty()) continue;  // the server refuses empty texts (400)
    // XLM-R: text 50 has other ids in the Rust tokenizer (test_tokenizer_golden.cc).
    if (model == "tiny-xlmr" && row["text"] == 50) continue;
    const std::string side = row["side"] == "left" ? "Left" : "Right";
    const json request = {{"inputs", text}, {"truncate", true}, {"truncation_direction", side}};
    const Reply tok = c.post("/tokenize", request.dump());
    ASSERT_EQ(tok.status, 200) << tok.body;
    std::vector<int32_t> ids;
    std::vector<std::vector<int64_t>> offsets;
    const json answer = tok.parsed();
    for (const json& t : answer[0]) {
      ids.push_back(t["id"].get<int32_t>());
      if (t["special"].get<bool>()) {
        EXPECT_TRUE(t["start"].is_null());
        continue;
      }
      // TEI's start/stop: byte offsets into the input, and the token's text is those bytes.
      ASSERT_TRUE(t["start"].is_number()) << t.dump();
      const auto start = t["start"].get<int64_t>(), stop = t["stop"].get<int64_t>();
      offsets.push_back({start, stop});
      EXPECT_EQ(t["text"].get<std::string>(), text.substr(static_cast<size_t>(start), static_cast<size_t>(stop - start)));
    }
    EXPECT_EQ(ids, row["ids"].get<std::vector<int32_t>>()) << model << " " << side << " text " << row["text"];
    const auto& whole = offsets_of.at(row["text"].get<size_t>());
    ASSERT_LE(offsets.size(), whole.size());
    const size_t from = side == "Left" ? whole.size() - offsets.size() : 0;
    EXPECT_EQ(offsets, std::vector<std::vector<int64_t>>(whole.begin() + static_cast<std::ptrdiff_t>(from),
                                                         whole.begin() + static_cast<std::ptrdiff_t>(from + offsets.size())))
        << model << " " << side << " text " << row["text"];
    ++checked;
    if (side == "Left" && row["ids"].size() == 16) {  // cut: the text's row is the row of the kept ids
      const Reply by_text = c.post("/embed", request.dump());
      const Reply by_ids = c.post("/embed", json{{"inputs", row["ids"]}}.dump());
      ASSERT_EQ(by_text.status, 200) << by_text.body;
      ASSERT_EQ(by_ids.status, 200) << by_ids.body;
      EXPECT_LE(relative_l2(json_floats(by_text.parsed()[0]), json_floats(by_ids.parsed()[0])), kTol)
          << model << " text " << row["text"];
      ++embedded;
    }
  }
  EXPECT_GT(checked, 100u);
  EXPECT_GT(embedded, 20u);
  // Without truncate, a long text is still refused (422), whichever direction is named.
  EXPECT_EQ(c.post("/embed", json{{"inputs", texts.back()}, {"truncation_direction", "Left"}}.dump()).status, 422);
  // Token ids over the max length are cut on the side asked for too.
  json long_ids = json::array();
  for (int i = 0; i < 20; ++i) long_ids.push_back(5 + i);
  json last16 = json::array();
  for (int i = 4; i < 20; ++i) last16.push_back(5 + i);
  const Reply cut = c.post("/embed", json{{"inputs", long_ids}, {"truncate", true}, {"truncation_direction", "Left"}}.dump());
  const Reply kept = c.post("/embed", json{{"inputs", last16}}.dump());
  ASSERT_EQ(cut.status, 200) << cut.body;
  EXPECT_LE(relative_l2(json_floats(cut.parsed()[0]), json_floats(kept.parsed()[0])), kTol);
  EXPECT_EQ(server.terminate(), 0) << server.stderr_text();
}

TEST(ServeTruncation, LeftAndRightMatchTransformersBert) { expect_truncation_matches_transformers("tiny-bert"); }
TEST(ServeTruncation, LeftAndRightMatchTransformersXlmr) { expect_truncation_matches_transformers("tiny-xlmr"); }

// The bytes after the header of a raw answer ("" when none).
std::string body_after_header(const std::string& raw) {
  const size_t end = raw.find("\r\n\r\n");
  return end == std::string::npos ? raw : raw.substr(end + 4);
}

std::string header_value(const std::string& raw, const std::string& name) {
  std::string lower = raw.substr(0, raw.find("\r\n\r\n"));
  for (char& ch : lower) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  const size_t at = lower.find("\r\n" + name + ": ");
  if (at == std::string::npos) return "";
  const size_t from = at + name.size() + 4;
  return raw.substr(from, raw.find("\r\n", from) - from);
}

TEST_F(ServeEmbedding, HeadAnswersTheGetsHeadersWithoutABody) {
  Client c(server_->port());
  for (const char* route : {"/info", "/v1/models", "/health"}) {
    const Reply get = c.get(route);
    ASSERT_EQ(get.status, 200) << route;
    const std::string head = raw_exchange(server_->port(), raw_request("HEAD", route, "", ""));
    EXPECT_EQ(statuses_of(head), std::vector<int>{200}) << route << ": " << head;
    EXPECT_EQ(header_value(head, "content-length"), std::to_string(get.body.size())) << route;
    EXPECT_EQ(header_value(head, "content-type"), get.content_type) << route;
    EXPECT_EQ(body_after_header(head), "") << route;
  }
  // Errors to a HEAD have no body either; a POST route says which method it takes.
  const std::string wrong = raw_exchange(server_->port(), raw_request("HEAD", "/embed", "", ""));
  EXPECT_EQ(statuses_of(wrong), std::vector<int>{405}) << wrong;
  EXPECT_EQ(header_value(wrong, "allow"), "POST");
  EXPECT_EQ(body_after_header(wrong), "");
  const std::string missing = raw_exchange(server_->port(), raw_request("HEAD", "/nowhere", "", ""));
  EXPECT_EQ(statuses_of(missing), std::vector<int>{404}) << missing;
  EXPECT_EQ(body_after_header(missing), "");
  // A HEAD then a GET on one keep-alive connection: the GET's answer is read whole.
  const std::string both = raw_exchange(
      server_->port(), "HEAD /info HTTP/1.1\r\nHost: x\r\n\r\nGET /info HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(statuses_of(both), (std::vector<int>{200, 200})) << both;
  EXPECT_NE(both.find("\"model_id\":\"tiny-bert\""), std::string::npos);
}

TEST(ServeTrace, SigtermWritesATraceTheDoctorReads) {
  const std::filesystem::path dir = scratch_dir("serve-trace");
  const std::filesystem::path file = dir / "serve-trace.json";
  ServeProcess server("--model " + model_dir("tiny-bert") + " --auto-truncate --trace " + file.string(), "trace");
  ASSERT_TRUE(server.wait_ready()) << server.stderr_text();
  const std::vector<std::string> texts = golden_texts();
  {
    std::vector<std::thread> clients;
    for (int k = 0; k < 4; ++k)
      clients.emplace_back([&, k] {
        Client c(server.port());
        for (size_t b = static_cast<size_t>(k) * 8; b < texts.size(); b += 32)
          EXPECT_EQ(c.post("/embed", json{{"inputs", json(std::vector<std::string>(
                                                     texts.begin() + static_cast<std::ptrdiff_t>(b),
                                                     texts.begin() + static_cast<std::ptrdiff_t>(std::min(b + 8, texts.size()))))}}
                                       .dump())
                        .status,
                    200);
      });
    for (auto& t : clients) t.join();
  }
  EXPECT_FALSE(std::filesystem::exists(file));  // written when the server stops
  ASSERT_EQ(server.terminate(), 0) << server.stderr_text();
  ASSERT_TRUE(std::filesystem::exists(file)) << server.stderr_text();
  const std::string text = read_file(file);
  const json trace = json::parse(text);  // complete, valid JSON
  EXPECT_EQ(trace["otherData"]["job"], "serve");
  EXPECT_EQ(trace["otherData"]["facts"]["texts"].get<uint64_t>(), texts.size() + 1);  // + the warm-up text
  std::map<std::string, int> spans;
  for (const json& e : trace["traceEvents"])
    if (e["ph"] == "X") ++spans[e["name"].get<std::string>()];
  for (const char* stage : {"tokenize", "queue wait", "copy", "compute", "scatter", "write response"})
    EXPECT_GT(spans[stage], 0) << stage;
  EXPECT_EQ(spans["compute"], trace["otherData"]["facts"]["batches"].get<int>());  // one host sync per batch
  // The doctor reads it back: its trace reader, then `stoke doctor --trace`.
  const RunResult doctor = run_stoke("doctor --trace " + file.string() + " --html " + (dir / "report.html").string());
  EXPECT_EQ(doctor.status, 0) << doctor.err;
  EXPECT_NE(doctor.out.find("stoke doctor: serve"), std::string::npos) << doctor.out;
  EXPECT_NE(doctor.out.find("served "), std::string::npos) << doctor.out;
}

TEST(ServeTrace, AMissingFolderIsRefusedAtStart) {
  const RunResult r = run_stoke("serve --port 0 --model " + model_dir("tiny-bert") + " --trace " +
                                (scratch_dir("serve-trace-missing") / "no" / "such" / "t.json").string());
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("--trace"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace stoke::test
