// The text-embeddings-inference routes: /embed, /embed_all, /predict,
// /rerank, /tokenize and /info, with TEI's field names, defaults and shapes.
#include <algorithm>
#include <numeric>

#include "jobs/version.h"
#include "serve/embedding_rows.h"
#include "serve/request_json.h"
#include "serve/response_json.h"
#include "serve/routes.h"
#include "serve/tei_request.h"

namespace stoke::serve {

namespace dom = simdjson::dom;

namespace {

// A /predict sequence: "a", ["a"] or ["a", "b"] (a pair).
BatchItem predict_sequence(dom::element e, const std::string& what) {
  if (e.is_string()) return BatchItem{non_empty_text(e, what), std::nullopt, std::nullopt};
  dom::array a;
  if (e.get(a) != simdjson::SUCCESS || a.size() < 1 || a.size() > 2)
    throw validation_error(what + ": expected a text or a list of one or two texts (a pair)", what);
  BatchItem item{non_empty_text(a.at(0).value_unsafe(), what + "[0]"), std::nullopt, std::nullopt};
  if (a.size() == 2) item.pair = non_empty_text(a.at(1).value_unsafe(), what + "[1]");
  return item;
}

void append_label_scores(std::string& out, const float* logits, Call& call, bool raw_scores) {
  const auto& labels = call.model().labels();
  const int64_t n = static_cast<int64_t>(labels.size());
  const std::vector<float> s = scores_of(logits, n, call.model().score_head(), raw_scores);
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&s](int64_t a, int64_t b) { return s[a] > s[b]; });
  out.push_back('[');
  for (size_t k = 0; k < order.size(); ++k) {
    if (k) out.push_back(',');
    out += "{\"label\":";
    append_string(out, labels[static_cast<size_t>(order[k])]);
    out += ",\"score\":";
    append_float(out, s[static_cast<size_t>(order[k])]);
    out.push_back('}');
  }
  out.push_back(']');
}

}  // namespace

void tei_embed(Call& call, bool all_tokens) {
  const dom::object body = parse_object(call.request.body());
  std::vector<BatchItem> items = parse_inputs(required_field(body, "inputs"), "inputs", limits_of(call, true));
  const bool normalize = bool_field(body, "normalize", true);
  const int64_t width = call.model().width();
  const int64_t dims = checked_dimensions(int_field(body, "dimensions"), width, "dimensions");
  BatchRequestOptions o;
  o.product = all_tokens ? RowProduct::tokens : RowProduct::pooled;
  set_truncation(o, call, body);
  o.prompt = call.model().prompt_for(string_field(body, "prompt_name"));
  call.run_batch(std::move(items), o, [all_tokens, normalize, dims](BatchResult& r) {
    std::string out;
    const size_t texts = all_tokens ? r.row_offsets.size() - 1 : r.values.size() / static_cast<size_t>(r.width);
    out.reserve(r.values.size() * 12 + 16);
    out.push_back('[');
    std::vector<float> row;
    for (size_t i = 0; i < texts; ++i) {
      if (i) out.push_back(',');
      if (all_tokens) {
        out.push_back('[');
        for (int64_t t = r.row_offsets[i]; t < r.row_offsets[i + 1]; ++t) {
          if (t > r.row_offsets[i]) out.push_back(',');
          append_float_array(out, r.values.data() + t * r.width, static_cast<size_t>(r.width));
        }
        out.push_back(']');
      } else {
        shape_row(r.values.data() + i * static_cast<size_t>(r.width), dims, normalize, row);
        append_float_array(out, row.data(), row.size());
      }
    }
    out.push_back(']');
    return out;
  });
}

void tei_predict(Call& call) {
  const dom::object body = parse_object(call.request.body());
  const dom::element in = required_field(body, "inputs");
  std::vector<BatchItem> items;
  bool batch = false;
  if (in.is_string()) {
    items.push_back(predict_sequence(in, "inputs"));
  } else {
    dom::array list;
    if (in.get(list) != simdjson::SUCCESS)
      throw validation_error("inputs: expected a text, a pair [\"a\", \"b\"] or a list of them", "inputs");
    if (list.size() == 0) throw empty_error("inputs: the input list is empty", "inputs");
    bool all_strings = true;
    for (dom::element e : list) all_strings = all_strings && e.is_string();
    if (all_strings && list.size() <= 2) {
      items.push_back(predict_sequence(in, "inputs"));  // "a" in a list, or ONE pair, as TEI reads it
    } else {
      batch = true;
      check_count(call, list.size(), "inputs");
      size_t k = 0;
      for (dom::element e : list) items.push_back(predict_sequence(e, "inputs[" + std::to_string(k++) + "]"));
    }
  }
  const bool raw_scores = bool_field(body, "raw_scores", false);
  BatchRequestOptions o;
  o.product = RowProduct::logits;
  set_truncation(o, call, body);
  Call* c = &call;
  call.run_batch(std::move(items), o, [c, batch, raw_scores](BatchResult& r) {
    std::string out;
    const size_t n = r.values.size() / static_cast<size_t>(r.width);
    if (batch) out.push_back('[');
    for (size_t i = 0; i < n; ++i) {
      if (i) out.push_back(',');
      append_label_scores(out, r.values.data() + i * static_cast<size_t>(r.width), *c, raw_scores);
    }
    if (batch) out.push_back(']');
    return out;
  });
}

void tei_rerank(Call& call) {
  const dom::object body = parse_object(call.request.body());
  const std::string query = non_empty_text(required_field(body, "query"), "query");
  dom::array texts;
  if (required_field(body, "texts").get(texts) != simdjson::SUCCESS)
    throw validation_error("texts: expected a list of texts", "texts");
  if (texts.size() == 0) throw empty_error("texts: the list is empty", "texts");
  check_count(call, texts.size(), "texts");
  std::vector<BatchItem> items;
  std::vector<std::string> kept;
  size_t k = 0;
  for (dom::element e : texts) {
    std::string t = non_empty_text(e, "texts[" + std::to_string(k++) + "]");
    items.push_back(BatchItem{query, t, std::nullopt});
    kept.push_back(std::move(t));
  }
  const bool raw_scores = bool_field(body, "raw_scores", false);
  const bool return_text = bool_field(body, "return_text", false);
  BatchRequestOptions o;
  o.product = RowProduct::logits;
  set_truncation(o, call, body);
  const ScoreHead head = call.model().score_head();
  call.run_batch(std::move(items), o, [raw_scores, return_text, head, kept = std::move(kept)](BatchResult& r) {
    const size_t n = kept.size();
    std::vector<float> score(n);
    for (size_t i = 0; i < n; ++i) score[i] = scores_of(r.values.data() + i * r.width, 1, head, raw_scores)[0];
    std::vector<size_t> order(n);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&score](size_t a, size_t b) { return score[a] > score[b]; });
    std::string out = "[";
    for (size_t k2 = 0; k2 < n; ++k2) {
      const size_t i = order[k2];
      if (k2) out.push_back(',');
      out += "{\"index\":" + std::to_string(i) + ",\"score\":";
      append_float(out, score[i]);
      if (return_text) {
        out += ",\"text\":";
        append_string(out, kept[i]);
      }
      out.push_back('}');
    }
    out.push_back(']');
    return out;
  });
}

void tei_tokenize(Call& call) {
  const dom::object body = parse_object(call.request.body());
  const std::vector<BatchItem> items = parse_inputs(required_field(body, "inputs"), "inputs", limits_of(call, false));
  const bool add_special = bool_field(body, "add_special_tokens", true);
  const std::string prompt = call.model().prompt_for(string_field(body, "prompt_name"));
  const Tokenizer& tok = call.model().tokenizer();
  // The special tokens the single-text template puts before the text.
  size_t prefix = 0;
  for (const TemplatePiece& p : tok.post_processor().single) {
    if (p.is_sequence) break;
    prefix += p.ids.size();
  }
  const size_t specials = tok.special_tokens_added(false);
  EncodeOptions eo;
  eo.max_length = static_cast<size_t>(call.model().max_length());
  const Truncation truncation = truncation_of(call, body);
  eo.truncate = truncation.truncate;
  eo.truncate_left = truncation.left;
  std::string out = "[";
  for (size_t i = 0; i < items.size(); ++i) {
    const std::string text = prompt + items[i].text;
    std::vector<int32_t> ids;
    bool truncated = false;
    if (add_special) {
      Encoding enc = tok.encode(text, eo);
      ids = std::move(enc.ids);
      truncated = enc.truncated;
    } else {
      ids = tok.tokenize(text);
    }
    if (!eo.truncate && ids.size() > eo.max_length)
      throw validation_error("inputs[" + std::to_string(i) + "]: " + std::to_string(ids.size()) +
                                 " tokens, more than the max length " + std::to_string(eo.max_length) +
                                 " (send truncate: true)",
                             "inputs");
    // The text's ids (special tokens aside) are a run of its whole
    // tokenization, the first ones or (left truncation) the last ones: each
    // gets its offsets from there. tokenize_with_offsets follows every
    // tokenizer stoke loads; it has none only for a text over 64 KiB or a
    // BertNormalizer inside a Unigram/BPE pipeline (then start/stop are null).
    const size_t lead = add_special ? std::min(prefix, ids.size()) : 0;
    const size_t seq = add_special ? ids.size() - std::min(ids.size(), specials) : ids.size();
    std::vector<TokenOffset> offsets;
    if (auto whole = tok.tokenize_with_offsets(text); whole && whole->ids.size() >= seq) {
      const size_t from = truncated && eo.truncate_left ? whole->ids.size() - seq : 0;
      if (std::equal(ids.begin() + static_cast<std::ptrdiff_t>(lead), ids.begin() + static_cast<std::ptrdiff_t>(lead + seq),
                     whole->ids.begin() + static_cast<std::ptrdiff_t>(from)))
        offsets.assign(whole->offsets.begin() + static_cast<std::ptrdiff_t>(from),
                       whole->offsets.begin() + static_cast<std::ptrdiff_t>(from + seq));
    }
    if (i) out.push_back(',');
    out.push_back('[');
    for (size_t t = 0; t < ids.size(); ++t) {
      const bool special = add_special && (t < lead || t >= lead + seq);
      if (t) out.push_back(',');
      out += "{\"id\":" + std::to_string(ids[t]) + ",\"text\":";
      // As TEI: a token of the text is its bytes of the input (offsets into
      // what the client sent, the prompt excluded); a special token its name.
      const TokenOffset* at = special || offsets.empty() ? nullptr : &offsets[t - lead];
      if (at && at->start >= prompt.size()) {
        const size_t start = at->start - prompt.size(), stop = at->end - prompt.size();
        append_string(out, std::string_view(items[i].text).substr(start, stop - start));
        out += ",\"special\":false,\"start\":" + std::to_string(start) + ",\"stop\":" + std::to_string(stop) + "}";
      } else {
        append_string(out, tok.id_to_token(ids[t]));
        out += special ? ",\"special\":true" : ",\"special\":false";
        out += ",\"start\":null,\"stop\":null}";
      }
    }
    out.push_back(']');
  }
  out.push_back(']');
  call.reply(std::move(out));
}

std::string tei_info(Router& router) {
  ServedModel& m = router.model();
  const ServeOptions& o = router.options();
  std::string out = "{\"model_id\":";
  append_string(out, m.name());
  out += ",\"model_sha\":null,\"model_dtype\":";
  append_string(out, m.model_dtype());
  out += ",\"model_type\":{";
  if (m.kind() == ModelKind::embedding) {
    out += "\"embedding\":{\"pooling\":";
    append_string(out, m.pooling_name());
    out += "}";
  } else {
    out += m.kind() == ModelKind::classifier ? "\"classifier\":{\"id2label\":{" : "\"reranker\":{\"id2label\":{";
    const auto& labels = m.labels();
    for (size_t i = 0; i < labels.size(); ++i) {
      if (i) out.push_back(',');
      append_string(out, std::to_string(i));
      out.push_back(':');
      append_string(out, labels[i]);
    }
    out += "},\"label2id\":{";
    for (size_t i = 0; i < labels.size(); ++i) {
      if (i) out.push_back(',');
      append_string(out, labels[i]);
      out += ":" + std::to_string(i);
    }
    out += "}}";
  }
  out += "},\"max_concurrent_requests\":" + std::to_string(o.max_concurrent_requests);
  out += ",\"max_input_length\":" + std::to_string(m.max_length());
  out += ",\"max_batch_tokens\":" + std::to_string(m.batcher().stats().batch_tokens);
  out += ",\"max_batch_requests\":" + std::to_string(o.max_batch_size);
  out += ",\"max_client_batch_size\":" + std::to_string(o.max_client_batch_size);
  out += ",\"auto_truncate\":" + std::string(o.auto_truncate ? "true" : "false");
  out += ",\"tokenization_workers\":" + std::to_string(m.tokenizer_workers());
  out += ",\"device\":";
  append_string(out, m.session().device_name);
  out += ",\"backend\":\"stoke\",\"version\":";
  append_string(out, stoke_version());
  out += "}";
  return out;
}

}  // namespace stoke::serve
