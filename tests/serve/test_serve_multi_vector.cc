// stoke serve's sparse and multi-vector routes against the libraries the
// models come from: on a bge-m3 model (tests/golden/make_bge_m3.py)
// /embed_sparse and /embed_all against BGEM3FlagModel.encode, /compute_score
// and /rerank against BGEM3FlagModel.compute_score
// (tests/golden/make_bge_m3_scores.py); on a PyLate ColBERT model
// (tests/golden/make_colbert.py) /embed_all per role against ColBERT.encode
// and /rerank against pylate.rank.rerank; and what other models answer.
#include <algorithm>

#include "serve_harness.h"
#include "support/colbert_goldens.h"
#include "support/m3_goldens.h"

namespace stoke::test {
namespace {

std::string m3_model() { return m3::model_dir().string(); }

json scores_golden() {
  std::ifstream in(m3::data_dir() / "scores.json");
  return json::parse(in);
}

class ServeBgeM3 : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ = new ServeProcess("--model " + m3_model() + " --auto-truncate", "bge-m3");
    ASSERT_TRUE(server_->wait_ready()) << server_->stderr_text();
  }
  static void TearDownTestSuite() {
    EXPECT_EQ(server_->terminate(), 0);
    delete server_;
    server_ = nullptr;
  }
  Reply post(const std::string& route, const json& body) {
    Client c(server_->port());
    return c.request(http::verb::post, route, body.dump());
  }
  static ServeProcess* server_;
};
ServeProcess* ServeBgeM3::server_ = nullptr;

// The goldens' non-empty texts with their index in golden.json.
std::vector<std::pair<size_t, std::string>> golden_inputs(const m3::Golden& g) {
  std::vector<std::pair<size_t, std::string>> out;
  for (size_t i = 0; i < g.texts.size(); ++i)
    if (!g.texts[i].empty()) out.emplace_back(i, g.texts[i]);
  return out;
}

TEST_F(ServeBgeM3, EmbedSparseIsFlagEmbeddingsLexicalWeights) {
  const m3::Golden g = m3::open_golden();
  const auto inputs = golden_inputs(g);
  json texts = json::array();
  for (const auto& [i, t] : inputs) texts.push_back(t);
  const Reply r = post("/embed_sparse", {{"inputs", texts}});
  ASSERT_EQ(r.status, 200) << r.body;
  const json got = r.parsed();
  ASSERT_EQ(got.size(), inputs.size());
  const std::vector<double> indices = g.get("sparse_indices"), values = g.get("sparse_values"),
                            indptr = g.get("sparse_indptr");
  for (size_t k = 0; k < inputs.size(); ++k) {
    const size_t row = inputs[k].first;
    const auto begin = static_cast<size_t>(indptr[row]), end = static_cast<size_t>(indptr[row + 1]);
    ASSERT_EQ(got[k].size(), end - begin) << "text " << row;
    double largest = 0;
    for (size_t e = begin; e < end; ++e) largest = std::max(largest, values[e]);
    for (size_t e = begin; e < end; ++e) {
      const json& entry = got[k][e - begin];
      EXPECT_EQ(entry["index"].get<int64_t>(), static_cast<int64_t>(indices[e])) << "text " << row;
      EXPECT_NEAR(entry["value"].get<double>(), values[e], 1e-5 * std::max(largest, 1.0)) << "text " << row;
    }
  }
}

TEST_F(ServeBgeM3, EmbedAllIsFlagEmbeddingsColbertVectors) {
  const m3::Golden g = m3::open_golden();
  const auto inputs = golden_inputs(g);
  json texts = json::array();
  for (const auto& [i, t] : inputs) texts.push_back(t);
  const Reply r = post("/embed_all", {{"inputs", texts}});
  ASSERT_EQ(r.status, 200) << r.body;
  const json got = r.parsed();
  const std::vector<double> vecs = g.get("colbert_vecs"), offsets = g.get("colbert_offsets");
  const size_t D = got[0][0].size();
  ASSERT_EQ(got.size(), inputs.size());
  for (size_t k = 0; k < inputs.size(); ++k) {
    const size_t row = inputs[k].first;
    const auto first = static_cast<size_t>(offsets[row]), last = static_cast<size_t>(offsets[row + 1]);
    ASSERT_EQ(got[k].size(), last - first) << "text " << row;
    for (size_t t = first; t < last; ++t) {
      std::vector<float> v = got[k][t - first].get<std::vector<float>>();
      ASSERT_EQ(v.size(), D);
      EXPECT_LE(m3::row_error(v.data(), vecs.data() + t * D, D), 1e-5) << "text " << row << " vector " << t - first;
    }
  }
}

void expect_scores(const json& got, const json& want, const std::string& what) {
  for (const char* key : {"dense", "sparse", "colbert", "sparse+dense", "colbert+sparse+dense"})
    EXPECT_NEAR(got[key].get<double>(), want[key].get<double>(), 1e-5) << what << " " << key;
}

TEST_F(ServeBgeM3, ComputeScoreIsFlagEmbeddingsComputeScore) {
  const json golden = scores_golden();
  const Reply plain = post("/compute_score", {{"pairs", golden["pairs"]}});
  ASSERT_EQ(plain.status, 200) << plain.body;
  const Reply weighted = post("/compute_score", {{"pairs", golden["pairs"]}, {"weights", golden["weights"]}});
  ASSERT_EQ(weighted.status, 200) << weighted.body;
  ASSERT_EQ(plain.parsed().size(), golden["pairs"].size());
  for (size_t i = 0; i < golden["pairs"].size(); ++i) {
    expect_scores(plain.parsed()[i], golden["default"][i], "pair " + std::to_string(i) + " default weights");
    expect_scores(weighted.parsed()[i], golden["weighted"][i], "pair " + std::to_string(i) + " weighted");
  }
}

TEST_F(ServeBgeM3, RerankScoresByLateInteractionOrByTheWeightedSum) {
  const json golden = scores_golden();
  // The golden pairs of the first query, as one rerank.
  const std::string query = golden["pairs"][0][0];
  json texts = json::array();
  std::vector<size_t> rows;
  for (size_t i = 0; i < golden["pairs"].size(); ++i)
    if (golden["pairs"][i][0] == query) {
      texts.push_back(golden["pairs"][i][1]);
      rows.push_back(i);
    }
  ASSERT_GE(texts.size(), 3u);
  for (const bool mixed : {false, true}) {
    json body = {{"query", query}, {"texts", texts}, {"return_text", true}};
    if (mixed) body["weights"] = golden["weights"];
    const Reply r = post("/rerank", body);
    ASSERT_EQ(r.status, 200) << r.body;
    const json got = r.parsed();
    ASSERT_EQ(got.size(), texts.size());
    double previous = 1e300;
    for (const json& e : got) {
      const size_t k = e["index"].get<size_t>();
      const json& want = golden[mixed ? "weighted" : "default"][rows[k]];
      EXPECT_NEAR(e["score"].get<double>(), want[mixed ? "colbert+sparse+dense" : "colbert"].get<double>(), 1e-5);
      EXPECT_EQ(e["text"], texts[k]);
      EXPECT_LE(e["score"].get<double>(), previous) << "sorted best first";
      previous = e["score"].get<double>();
    }
  }
}

TEST_F(ServeBgeM3, BadRequestsSayWhy) {
  Reply r = post("/embed_sparse", {{"inputs", "a"}, {"role", "questioner"}});
  EXPECT_EQ(r.status, 422) << r.body;
  EXPECT_NE(r.body.find("expected \\\"query\\\" or \\\"document\\\""), std::string::npos) << r.body;
  r = post("/compute_score", {{"pairs", json::array({json::array({"only one"})})}});
  EXPECT_EQ(r.status, 422) << r.body;
  r = post("/compute_score", {{"pairs", json::array({json::array({"a", "b"})})}, {"weights", {1, 2}}});
  EXPECT_EQ(r.status, 422) << r.body;
  r = post("/rerank", {{"query", "a"}, {"texts", json::array()}});
  EXPECT_EQ(r.status, 400) << r.body;
}

TEST(ServeColbert, EmbedAllPerRoleAndRerankArePylates) {
  const colbert::Golden g = colbert::open_golden();
  ServeProcess server("--model " + colbert::model_dir().string() + " --auto-truncate", "colbert");
  ASSERT_TRUE(server.wait_ready()) << server.stderr_text();
  Client c(server.port());
  std::vector<size_t> rows;
  json texts = json::array();
  for (size_t i = 0; i < g.texts.size(); ++i)
    if (!g.texts[i].empty()) {
      rows.push_back(i);
      texts.push_back(g.texts[i]);
    }
  for (const char* role : {"query", "document"}) {
    const Reply r = c.request(http::verb::post, "/embed_all", json{{"inputs", texts}, {"role", role}}.dump());
    ASSERT_EQ(r.status, 200) << r.body;
    const json got = r.parsed();
    ASSERT_EQ(got.size(), rows.size());
    const std::string side = role;
    const std::vector<double> vecs = g.get(side + "_vecs"), offsets = g.get(side + "_offsets");
    for (size_t k = 0; k < rows.size(); ++k) {
      const auto first = static_cast<size_t>(offsets[rows[k]]), last = static_cast<size_t>(offsets[rows[k] + 1]);
      ASSERT_EQ(got[k].size(), last - first) << role << " text " << rows[k];
      for (size_t t = first; t < last; ++t) {
        const std::vector<float> v = got[k][t - first].get<std::vector<float>>();
        ASSERT_EQ(v.size(), static_cast<size_t>(g.dim));
        EXPECT_LE(colbert::row_error(v.data(), vecs.data() + t * v.size(), v.size()), 1e-5)
            << role << " text " << rows[k] << " vector " << t - first;
      }
    }
  }
  // pylate.rank.rerank's scores: query rerank_queries[k] over the texts rerank_documents[k].
  const std::vector<double> queries = g.get("rerank_queries"), docs = g.get("rerank_documents"),
                            scores = g.get("rerank_scores");
  const size_t per = docs.size() / queries.size();
  for (size_t k = 0; k < queries.size(); ++k) {
    json body = {{"query", g.texts[static_cast<size_t>(queries[k])]}, {"texts", json::array()}};
    std::vector<size_t> sent;  // the server refuses empty texts (400, as TEI): those are left out
    for (size_t j = 0; j < per; ++j)
      if (const std::string& t = g.texts[static_cast<size_t>(docs[k * per + j])]; !t.empty()) {
        body["texts"].push_back(t);
        sent.push_back(j);
      }
    ASSERT_GE(sent.size(), 3u);
    const Reply r = c.request(http::verb::post, "/rerank", body.dump());
    ASSERT_EQ(r.status, 200) << r.body;
    for (const json& e : r.parsed()) {
      const size_t j = sent[e["index"].get<size_t>()];
      EXPECT_NEAR(e["score"].get<double>(), scores[k * per + j], 1e-5 * std::max(1.0, std::abs(scores[k * per + j])))
          << "query " << k << " document " << j;
    }
  }
  // No dense vector: /embed says what to use instead.
  const Reply dense = c.request(http::verb::post, "/embed", json{{"inputs", "a"}}.dump());
  EXPECT_EQ(dense.status, 424) << dense.body;
  EXPECT_NE(dense.body.find("a ColBERT model: use /embed_all"), std::string::npos) << dense.body;
  EXPECT_EQ(server.terminate(), 0);
}

// SPLADE (tests/golden/make_splade.py): /embed_sparse is SparseEncoder.encode;
// an inference-free model's role "query" is its encode_query.
void expect_splade_route(const std::string& folder, const std::string& variant, const std::string& role) {
  const std::filesystem::path data = test::source_dir() / "tests" / "data" / "splade_tiny";
  std::ifstream in(data / "golden.json");
  const json g = json::parse(in);
  const auto tensors = SafetensorsFile::open(data / "golden.safetensors");
  const std::vector<double> indptr = goldens::golden(*tensors, variant + "_indptr"),
                            indices = goldens::golden(*tensors, variant + "_indices"),
                            values = goldens::golden(*tensors, variant + "_values");
  ServeProcess server("--model " + (data / folder).string() + " --auto-truncate", "splade-" + folder);
  ASSERT_TRUE(server.wait_ready()) << server.stderr_text();
  Client c(server.port());
  json texts = json::array();
  std::vector<size_t> rows;
  for (size_t i = 0; i < g["texts"].size(); ++i)
    if (!g["texts"][i].get<std::string>().empty()) {
      texts.push_back(g["texts"][i]);
      rows.push_back(i);
    }
  const Reply r = c.request(http::verb::post, "/embed_sparse", json{{"inputs", texts}, {"role", role}}.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  const json got = r.parsed();
  ASSERT_EQ(got.size(), rows.size());
  for (size_t k = 0; k < rows.size(); ++k) {
    const auto begin = static_cast<size_t>(indptr[rows[k]]), end = static_cast<size_t>(indptr[rows[k] + 1]);
    ASSERT_EQ(got[k].size(), end - begin) << folder << " text " << rows[k];
    for (size_t e = begin; e < end; ++e) {
      EXPECT_EQ(got[k][e - begin]["index"].get<int64_t>(), static_cast<int64_t>(indices[e])) << "text " << rows[k];
      EXPECT_NEAR(got[k][e - begin]["value"].get<double>(), values[e], 1e-5 * std::max(1.0, values[e]))
          << "text " << rows[k];
    }
  }
  const Reply dense = c.request(http::verb::post, "/v1/embeddings", json{{"input", "a"}}.dump());
  EXPECT_EQ(dense.status, 424) << dense.body;
  EXPECT_NE(dense.body.find("a sparse encoder: use /embed_sparse"), std::string::npos) << dense.body;
  EXPECT_EQ(server.terminate(), 0);
}

TEST(ServeSplade, EmbedSparseIsSparseEncoderEncode) { expect_splade_route("model", "max", "document"); }
TEST(ServeSplade, InferenceFreeQueriesAreEncodeQuery) { expect_splade_route("inference_free", "query", "query"); }

TEST(ServeDenseModel, SparseAndScoreRoutesAre424NamingWhy) {
  ServeProcess server("--model " + model_dir("tiny-bert"), "dense-only");
  ASSERT_TRUE(server.wait_ready()) << server.stderr_text();
  Client c(server.port());
  Reply r = c.request(http::verb::post, "/embed_sparse", json{{"inputs", "hello"}}.dump());
  EXPECT_EQ(r.status, 424) << r.body;
  EXPECT_NE(r.body.find("gives no sparse output"), std::string::npos) << r.body;
  r = c.request(http::verb::post, "/compute_score", json{{"pairs", {{"a", "b"}}}}.dump());
  EXPECT_EQ(r.status, 424) << r.body;
  EXPECT_NE(r.body.find("needs a bge-m3 model"), std::string::npos) << r.body;
  // TEI's /embed_all (the last hidden state) is unchanged on a model without ColBERT vectors.
  r = c.request(http::verb::post, "/embed_all", json{{"inputs", "hello"}}.dump());
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(server.terminate(), 0);
}

}  // namespace
}  // namespace stoke::test
