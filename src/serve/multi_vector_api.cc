// The routes of sparse and multi-vector models (model/text_outputs.h):
// TEI's /embed_sparse, /embed_all answered with the ColBERT vectors of a
// model that has them, /rerank scored by late interaction, and stoke's own
// /compute_score for bge-m3 (FlagEmbedding's compute_score). Shapes in
// docs/serve.md.
#include <algorithm>
#include <numeric>

#include "model/maxsim.h"
#include "serve/embedding_rows.h"
#include "serve/late_interaction_scores.h"
#include "serve/request_json.h"
#include "serve/response_json.h"
#include "serve/routes.h"
#include "serve/tei_request.h"

namespace stoke::serve {

namespace dom = simdjson::dom;

namespace {

// stoke's `role` field: which side of retrieval the inputs are on (ColBERT
// models prefix and expand queries; other models ignore it).
TextRole role_of(dom::object body, TextRole fallback) {
  const auto role = string_field(body, "role");
  if (!role) return fallback;
  if (*role == "query") return TextRole::query;
  if (*role == "document") return TextRole::document;
  throw validation_error("role \"" + *role + "\": expected \"query\" or \"document\"", "role");
}

// 424 as TEI answers a route the model cannot serve, naming why and what would.
ApiError no_output(const char* route, const std::string& why) {
  return ApiError(424, "Backend", std::string(route) + ": " + why);
}

std::vector<std::string> texts_field(Call& call, dom::object body, const char* field) {
  dom::array list;
  if (required_field(body, field).get(list) != simdjson::SUCCESS)
    throw validation_error(std::string(field) + ": expected a list of texts", field);
  if (list.size() == 0) throw empty_error(std::string(field) + ": the list is empty", field);
  check_count(call, list.size(), field);
  std::vector<std::string> texts;
  size_t k = 0;
  for (dom::element e : list) texts.push_back(non_empty_text(e, std::string(field) + "[" + std::to_string(k++) + "]"));
  return texts;
}

std::vector<BatchItem> items_of(const std::vector<std::string>& texts) {
  std::vector<BatchItem> items;
  items.reserve(texts.size());
  for (const auto& t : texts) items.push_back(BatchItem{t, std::nullopt, std::nullopt});
  return items;
}

void append_vectors(std::string& out, const std::vector<float>& vectors, int64_t dim) {
  out.push_back('[');
  const size_t n = dim > 0 ? vectors.size() / static_cast<size_t>(dim) : 0;
  for (size_t t = 0; t < n; ++t) {
    if (t) out.push_back(',');
    append_float_array(out, vectors.data() + t * static_cast<size_t>(dim), static_cast<size_t>(dim));
  }
  out.push_back(']');
}

bool is_bge_m3(const ServedModel& m) {
  const TextOutputSources& s = m.output_sources();
  return s.dense && s.sparse == SparseSource::m3 && s.multi_vector == MultiVectorSource::m3;
}

// FlagEmbedding's weights_for_different_modes: [dense, sparse, colbert].
std::optional<M3Weights> weights_field(dom::object body) {
  const auto field = optional_field(body, "weights");
  if (!field) return std::nullopt;
  dom::array a;
  if (field->get(a) != simdjson::SUCCESS || a.size() != 3)
    throw validation_error("weights: expected three numbers [dense, sparse, colbert]", "weights");
  double w[3];
  size_t k = 0;
  for (dom::element e : a) {
    double v;
    if (e.get(v) != simdjson::SUCCESS || !(v >= 0))
      throw validation_error("weights[" + std::to_string(k) + "]: expected a number >= 0", "weights");
    w[k++] = v;
  }
  if (w[0] + w[1] + w[2] <= 0 || w[0] + w[1] <= 0)
    throw validation_error("weights: the dense and sparse weights must not both be 0", "weights");
  return M3Weights{w[0], w[1], w[2]};
}

// The dot product of row a of `ra` and row b of `rb`, both normalized (bge-m3's dense score).
double dense_score(const BatchResult& ra, size_t a, const BatchResult& rb, size_t b) {
  std::vector<float> x, y;
  shape_row(ra.values.data() + a * static_cast<size_t>(ra.width), ra.width, true, x);
  shape_row(rb.values.data() + b * static_cast<size_t>(rb.width), rb.width, true, y);
  double dot = 0;
  for (size_t k = 0; k < x.size(); ++k) dot += static_cast<double>(x[k]) * y[k];
  return dot;
}

// A bge-m3 query/passage pair's scores from their batch results (rows q and p of r).
M3Scores pair_scores(const ServedModel& m, const BatchResult& r, size_t q, size_t p, const M3Weights& w) {
  const int64_t dim = m.output_sources().colbert_dim;
  const auto nq = static_cast<int64_t>(r.extras[q].colbert.size() / static_cast<size_t>(dim));
  return m3_scores(dense_score(r, q, r, p), lexical_match(r.extras[q].sparse, r.extras[p].sparse),
                   maxsim(r.extras[q].colbert, r.extras[p].colbert, dim), nq, w);
}

// TEI's rerank answer: best first (ties in input order).
std::string ranked_answer(const std::vector<double>& score, const std::vector<std::string>& texts, bool return_text) {
  std::vector<size_t> order(score.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&score](size_t a, size_t b) { return score[a] > score[b]; });
  std::string out = "[";
  for (size_t k = 0; k < order.size(); ++k) {
    const size_t i = order[k];
    if (k) out.push_back(',');
    out += "{\"index\":" + std::to_string(i) + ",\"score\":";
    append_float(out, static_cast<float>(score[i]));
    if (return_text) {
      out += ",\"text\":";
      append_string(out, texts[i]);
    }
    out.push_back('}');
  }
  out.push_back(']');
  return out;
}

// TEI's `inputs` (texts or token ids).
std::vector<BatchItem> inputs_of(Call& call, dom::object body) {
  return parse_inputs(required_field(body, "inputs"), "inputs", limits_of(call, true));
}

// A TEI embedding request's fields (truncate, truncation_direction,
// prompt_name) and stoke's `role`, asking for the sparse / ColBERT outputs.
BatchRequestOptions extras_request(Call& call, dom::object body, bool sparse, bool colbert) {
  BatchRequestOptions o;
  o.product = RowProduct::pooled;
  set_truncation(o, call, body);
  o.prompt = call.model().prompt_for(string_field(body, "prompt_name"));
  o.extras = call.model().output_settings(sparse, colbert, role_of(body, TextRole::document));
  return o;
}

}  // namespace

void tei_embed_sparse(Call& call) {
  ServedModel& m = call.model();
  if (m.output_sources().sparse == SparseSource::none)
    throw no_output("/embed_sparse", "the served model gives no sparse output (serve a SPLADE sparse encoder, or "
                                     "bge-m3 with its sparse_linear.pt)");
  const dom::object body = parse_object(call.request.body());
  call.run_batch(inputs_of(call, body), extras_request(call, body, true, false), [](BatchResult& r) {
    std::string out = "[";
    for (size_t i = 0; i < r.extras.size(); ++i) {
      if (i) out.push_back(',');
      out.push_back('[');
      const LexicalWeights& w = r.extras[i].sparse;
      for (size_t k = 0; k < w.ids.size(); ++k) {
        if (k) out.push_back(',');
        out += "{\"index\":" + std::to_string(w.ids[k]) + ",\"value\":";
        append_float(out, w.weights[k]);
        out.push_back('}');
      }
      out.push_back(']');
    }
    out.push_back(']');
    return out;
  });
}

void colbert_embed_all(Call& call) {
  ServedModel& m = call.model();
  const dom::object body = parse_object(call.request.body());
  const int64_t dim = m.output_sources().colbert_dim;
  call.run_batch(inputs_of(call, body), extras_request(call, body, false, true), [dim](BatchResult& r) {
    std::string out = "[";
    for (size_t i = 0; i < r.extras.size(); ++i) {
      if (i) out.push_back(',');
      append_vectors(out, r.extras[i].colbert, dim);
    }
    out.push_back(']');
    return out;
  });
}

void late_interaction_rerank(Call& call) {
  ServedModel& m = call.model();
  const dom::object body = parse_object(call.request.body());
  const std::string query = non_empty_text(required_field(body, "query"), "query");
  std::vector<std::string> texts = texts_field(call, body, "texts");
  const bool return_text = bool_field(body, "return_text", false);
  const std::optional<M3Weights> weights = weights_field(body);
  if (weights && !is_bge_m3(m))
    throw validation_error("weights: only a bge-m3 model (dense, sparse and ColBERT outputs) mixes scores", "weights");
  BatchRequestOptions q, d;
  q.product = d.product = RowProduct::pooled;
  set_truncation(q, call, body);
  set_truncation(d, call, body);
  q.extras = m.output_settings(weights.has_value(), true, TextRole::query);
  d.extras = m.output_settings(weights.has_value(), true, TextRole::document);
  std::vector<BatchSubmission> runs;
  runs.push_back({items_of({query}), q});
  runs.push_back({items_of(texts), d});
  const ServedModel* model = &m;
  Call* c = &call;
  call.run_batches(std::move(runs), [c, model, weights, return_text, texts = std::move(texts)](
                                        std::vector<BatchResult>& r) -> std::optional<std::string> {
    // The documents' vectors packed for the MaxSim op, which runs on the
    // device thread (between batches); the answer follows from there.
    auto results = std::make_shared<std::vector<BatchResult>>(std::move(r));
    auto docs = std::make_shared<std::vector<float>>();
    auto offsets = std::make_shared<std::vector<int64_t>>(1, 0);
    const int64_t dim = model->output_sources().colbert_dim;
    for (const TextExtras& d : (*results)[1].extras) {
      docs->insert(docs->end(), d.colbert.begin(), d.colbert.end());
      offsets->push_back(static_cast<int64_t>(docs->size()) / dim);
    }
    auto sums = std::make_shared<std::vector<float>>();
    c->run_on_device(
        [results, docs, offsets, sums, dim](Backend& backend) {
          *sums = maxsim_scores(backend, (*results)[0].extras[0].colbert, dim, *docs, *offsets);
        },
        [results, sums, model, weights, return_text, texts, dim] {
          const BatchResult& q = (*results)[0];
          const size_t n = texts.size();
          const auto nq = static_cast<int64_t>(q.extras[0].colbert.size() / static_cast<size_t>(dim));
          const bool flag_embedding = model->output_sources().multi_vector == MultiVectorSource::m3;
          std::vector<double> score(n);
          for (size_t i = 0; i < n; ++i) {
            const double sum = (*sums)[i];
            if (weights) {
              const BatchResult& d = (*results)[1];
              score[i] = m3_scores(dense_score(q, 0, d, i), lexical_match(q.extras[0].sparse, d.extras[i].sparse), sum,
                                   nq, *weights)
                             .all;
            } else {
              // PyLate's score is the sum; FlagEmbedding's colbert_score its mean over the query's vectors.
              score[i] = flag_embedding ? (nq > 0 ? sum / static_cast<double>(nq) : 0) : sum;
            }
          }
          return ranked_answer(score, texts, return_text);
        });
    return std::nullopt;
  });
}

void stoke_compute_score(Call& call) {
  ServedModel& m = call.model();
  if (!is_bge_m3(m))
    throw no_output("/compute_score", "needs a bge-m3 model (dense, sparse_linear.pt and colbert_linear.pt); the "
                                      "served model lacks one of them");
  const dom::object body = parse_object(call.request.body());
  dom::array pairs;
  if (required_field(body, "pairs").get(pairs) != simdjson::SUCCESS)
    throw validation_error("pairs: expected a list of [query, passage] pairs", "pairs");
  if (pairs.size() == 0) throw empty_error("pairs: the list is empty", "pairs");
  check_count(call, pairs.size(), "pairs");  // a pair is one input, as in /rerank
  std::vector<std::string> texts;  // query 0, passage 0, query 1, ...
  size_t k = 0;
  for (dom::element e : pairs) {
    const std::string what = "pairs[" + std::to_string(k++) + "]";
    dom::array pair;
    if (e.get(pair) != simdjson::SUCCESS || pair.size() != 2)
      throw validation_error(what + ": expected [query, passage]", "pairs");
    texts.push_back(non_empty_text(pair.at(0).value_unsafe(), what + "[0]"));
    texts.push_back(non_empty_text(pair.at(1).value_unsafe(), what + "[1]"));
  }
  const M3Weights weights = weights_field(body).value_or(M3Weights{});
  BatchRequestOptions o;
  o.product = RowProduct::pooled;
  set_truncation(o, call, body);
  o.extras = m.output_settings(true, true);
  const ServedModel* model = &m;
  call.run_batch(items_of(texts), o, [model, weights](BatchResult& r) {
    std::string out = "[";
    for (size_t p = 0; p + 1 < r.extras.size(); p += 2) {
      const M3Scores s = pair_scores(*model, r, p, p + 1, weights);
      if (p) out.push_back(',');
      out += "{\"dense\":";
      append_float(out, static_cast<float>(s.dense));
      out += ",\"sparse\":";
      append_float(out, static_cast<float>(s.sparse));
      out += ",\"colbert\":";
      append_float(out, static_cast<float>(s.colbert));
      out += ",\"sparse+dense\":";
      append_float(out, static_cast<float>(s.sparse_dense));
      out += ",\"colbert+sparse+dense\":";
      append_float(out, static_cast<float>(s.all));
      out.push_back('}');
    }
    out.push_back(']');
    return out;
  });
}

}  // namespace stoke::serve
