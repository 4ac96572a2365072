// The OpenAI-shaped routes: POST /v1/embeddings, GET /v1/models, and the
// Cohere/Jina-shaped POST /v1/rerank that OpenAI-style clients use for
// cross-encoders. Errors take OpenAI's {"error": {...}} shape (routes.cc).
#include <algorithm>
#include <numeric>

#include "serve/embedding_rows.h"
#include "serve/request_json.h"
#include "serve/response_json.h"
#include "serve/routes.h"

namespace stoke::serve {

namespace dom = simdjson::dom;

void openai_embeddings(Call& call) {
  const dom::object body = parse_object(call.request.body());
  InputLimits limits;
  limits.max_inputs = static_cast<size_t>(call.options().max_client_batch_size);
  limits.vocab_size = call.model().tokenizer().vocab_size();
  std::vector<BatchItem> items = parse_inputs(required_field(body, "input"), "input", limits);
  (void)string_field(body, "model");  // any name: one model is served (a non-string is still 422)
  const std::string format = string_field(body, "encoding_format").value_or("float");
  if (format != "float" && format != "base64")
    throw validation_error("encoding_format \"" + format + "\": expected float or base64", "encoding_format");
  const bool base64 = format == "base64";
  const int64_t dims = checked_dimensions(int_field(body, "dimensions"), call.model().width(), "dimensions");
  BatchRequestOptions o;
  o.product = RowProduct::pooled;
  o.truncate = call.options().auto_truncate;
  o.prompt = call.model().prompt_for(std::nullopt);
  const bool normalize = call.model().model_normalizes();
  const std::string name = call.model().name();
  call.run_batch(std::move(items), o, [base64, dims, normalize, name](BatchResult& r) {
    const size_t texts = r.values.size() / static_cast<size_t>(r.width);
    std::string out;
    out.reserve(texts * static_cast<size_t>(dims) * (base64 ? 6 : 12) + 128);
    out = "{\"object\":\"list\",\"data\":[";
    std::vector<float> row;
    for (size_t i = 0; i < texts; ++i) {
      if (i) out.push_back(',');
      out += "{\"object\":\"embedding\",\"index\":" + std::to_string(i) + ",\"embedding\":";
      shape_row(r.values.data() + i * static_cast<size_t>(r.width), dims, normalize, row);
      if (base64) {
        out.push_back('"');
        append_base64_floats(out, row.data(), row.size());
        out.push_back('"');
      } else {
        append_float_array(out, row.data(), row.size());
      }
      out.push_back('}');
    }
    out += "],\"model\":";
    append_string(out, name);
    const std::string tokens = std::to_string(r.total_tokens);
    out += ",\"usage\":{\"prompt_tokens\":" + tokens + ",\"total_tokens\":" + tokens + "}}";
    return out;
  });
}

std::string openai_models(Router& router) {
  std::string out = "{\"object\":\"list\",\"data\":[{\"id\":";
  append_string(out, router.model().name());
  out += ",\"object\":\"model\",\"created\":0,\"owned_by\":\"stoke\"}]}";
  return out;
}

void cohere_rerank(Call& call) {
  const dom::object body = parse_object(call.request.body());
  const std::string_view query_view = as_string(required_field(body, "query"), "query");
  if (query_view.empty()) throw empty_error("query: an empty string", "query");
  const std::string query(query_view);
  dom::array docs;
  if (required_field(body, "documents").get(docs) != simdjson::SUCCESS)
    throw validation_error("documents: expected a list of texts or of {\"text\": ...} objects", "documents");
  if (docs.size() == 0) throw empty_error("documents: the list is empty", "documents");
  if (docs.size() > static_cast<size_t>(call.options().max_client_batch_size))
    throw validation_error("documents: " + std::to_string(docs.size()) + " documents, more than the server's " +
                               "--max-client-batch-size " + std::to_string(call.options().max_client_batch_size),
                           "documents");
  std::vector<BatchItem> items;
  std::vector<std::string> kept;
  size_t k = 0;
  for (dom::element e : docs) {
    const std::string what = "documents[" + std::to_string(k++) + "]";
    std::string_view text;
    if (e.is_object()) {
      dom::element t;
      if (e.get_object().value_unsafe().at_key("text").get(t) != simdjson::SUCCESS)
        throw validation_error(what + ": missing field \"text\"", "documents");
      text = as_string(t, what + ".text");
    } else {
      text = as_string(e, what);
    }
    if (text.empty()) throw empty_error(what + ": an empty string", "documents");
    items.push_back(BatchItem{query, std::string(text), std::nullopt});
    kept.emplace_back(text);
  }
  const std::optional<int64_t> top_n = int_field(body, "top_n");
  if (top_n && *top_n < 1) throw validation_error("top_n: expected a positive number", "top_n");
  const bool return_documents = bool_field(body, "return_documents", false);
  (void)string_field(body, "model");
  BatchRequestOptions o;
  o.product = RowProduct::logits;
  o.truncate = true;  // Cohere and Jina truncate long documents
  const ScoreHead head = call.model().score_head();
  const std::string name = call.model().name();
  call.run_batch(std::move(items), o, [top_n, return_documents, head, name, kept = std::move(kept)](BatchResult& r) {
    const size_t n = kept.size();
    std::vector<float> score(n);
    for (size_t i = 0; i < n; ++i) score[i] = scores_of(r.values.data() + i * r.width, 1, head, false)[0];
    std::vector<size_t> order(n);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&score](size_t a, size_t b) { return score[a] > score[b]; });
    const size_t shown = top_n ? std::min(n, static_cast<size_t>(*top_n)) : n;
    std::string out = "{\"model\":";
    append_string(out, name);
    out += ",\"results\":[";
    for (size_t j = 0; j < shown; ++j) {
      const size_t i = order[j];
      if (j) out.push_back(',');
      out += "{\"index\":" + std::to_string(i) + ",\"relevance_score\":";
      append_float(out, score[i]);
      if (return_documents) {
        out += ",\"document\":{\"text\":";
        append_string(out, kept[i]);
        out.push_back('}');
      }
      out.push_back('}');
    }
    out += "],\"usage\":{\"total_tokens\":" + std::to_string(r.total_tokens) + "}}";
    return out;
  });
}

}  // namespace stoke::serve
