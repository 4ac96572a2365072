#include "serve/request_json.h"

#include "serve/api_error.h"

namespace stoke::serve {

namespace dom = simdjson::dom;

namespace {

dom::parser& thread_parser() {
  thread_local dom::parser parser = [] {
    dom::parser p;
    // A nesting bomb ([[[[...) stops at this depth instead of growing the tape's stack.
    if (p.allocate(4096, kMaxJsonDepth) != simdjson::SUCCESS) throw ApiError(500, "Backend", "out of memory");
    return p;
  }();
  return parser;
}

std::string quoted(std::string_view s) { return "\"" + std::string(s) + "\""; }

const char* type_name(dom::element_type t) {
  switch (t) {
    case dom::element_type::ARRAY: return "a list";
    case dom::element_type::OBJECT: return "an object";
    case dom::element_type::INT64:
    case dom::element_type::UINT64: return "an integer";
    case dom::element_type::DOUBLE: return "a number";
    case dom::element_type::STRING: return "a string";
    case dom::element_type::BOOL: return "a boolean";
    case dom::element_type::NULL_VALUE: return "null";
  }
  return "?";
}

ApiError wrong_type(std::string_view what, std::string_view expected, dom::element e) {
  return validation_error(std::string(what) + ": expected " + std::string(expected) + ", got " + type_name(e.type()),
                          std::string(what));
}

// One list of token ids, each checked against the vocabulary.
std::vector<int32_t> parse_ids(dom::array a, std::string_view what, int64_t vocab_size) {
  std::vector<int32_t> ids;
  ids.reserve(a.size());
  size_t k = 0;
  for (dom::element v : a) {
    int64_t id = 0;
    if (v.is_int64()) {
      id = v.get_int64().value_unsafe();
    } else if (v.is_uint64()) {
      id = INT64_MAX;
    } else {
      throw wrong_type(std::string(what) + "[" + std::to_string(k) + "]", "a token id (an integer)", v);
    }
    if (id < 0 || id >= vocab_size)
      throw validation_error(std::string(what) + "[" + std::to_string(k) + "]: token id " + std::to_string(id) +
                                 " is outside this model's vocabulary (0 to " + std::to_string(vocab_size - 1) +
                                 "); send texts, or ids of this model's tokenizer",
                             std::string(what));
    ids.push_back(static_cast<int32_t>(id));
    ++k;
  }
  return ids;
}

void check_count(size_t n, std::string_view field, const InputLimits& limits) {
  if (n > limits.max_inputs)
    throw validation_error(std::string(field) + ": " + std::to_string(n) + " inputs, more than the server's " +
                               "--max-client-batch-size " + std::to_string(limits.max_inputs),
                           std::string(field));
}

}  // namespace

dom::object parse_object(std::string_view body) {
  dom::element root;
  if (const auto err = thread_parser().parse(body.data(), body.size()).get(root); err != simdjson::SUCCESS)
    throw ApiError(400, "Validation", std::string("invalid JSON body: ") + simdjson::error_message(err));
  dom::object obj;
  if (root.get(obj) != simdjson::SUCCESS) throw wrong_type("the request body", "a JSON object", root);
  return obj;
}

std::optional<dom::element> optional_field(dom::object obj, std::string_view name) {
  dom::element e;
  if (obj.at_key(name).get(e) != simdjson::SUCCESS || e.is_null()) return std::nullopt;
  return e;
}

dom::element required_field(dom::object obj, std::string_view name) {
  auto e = optional_field(obj, name);
  if (!e) throw validation_error("missing field " + quoted(name), std::string(name));
  return *e;
}

bool bool_field(dom::object obj, std::string_view name, bool fallback) {
  auto e = optional_field(obj, name);
  if (!e) return fallback;
  if (!e->is_bool()) throw wrong_type(name, "true or false", *e);
  return e->get_bool().value_unsafe();
}

std::optional<int64_t> int_field(dom::object obj, std::string_view name) {
  auto e = optional_field(obj, name);
  if (!e) return std::nullopt;
  if (e->is_int64()) return e->get_int64().value_unsafe();
  if (e->is_uint64()) return INT64_MAX;  // out of every range a caller checks
  throw wrong_type(name, "an integer", *e);
}

std::optional<std::string> string_field(dom::object obj, std::string_view name) {
  auto e = optional_field(obj, name);
  if (!e) return std::nullopt;
  return std::string(as_string(*e, name));
}

std::string_view as_string(dom::element e, std::string_view what) {
  std::string_view s;
  if (e.get(s) != simdjson::SUCCESS) throw wrong_type(what, "a string", e);
  return s;
}

std::vector<BatchItem> parse_inputs(dom::element e, std::string_view field, const InputLimits& limits) {
  std::vector<BatchItem> items;
  if (e.is_string()) {
    const std::string_view text = e.get_string().value_unsafe();
    if (text.empty()) throw empty_error(std::string(field) + ": the input is an empty string", std::string(field));
    items.push_back(BatchItem{std::string(text), std::nullopt, std::nullopt});
    return items;
  }
  dom::array list;
  if (e.get(list) != simdjson::SUCCESS)
    throw wrong_type(field, "a string, a list of strings or a list of token id lists", e);
  if (list.size() == 0) throw empty_error(std::string(field) + ": the input list is empty", std::string(field));
  // A list of numbers is one input given as token ids.
  if (dom::element first = list.at(0).value_unsafe(); first.is_number()) {
    if (!limits.allow_ids) throw wrong_type(std::string(field) + "[0]", "a string", first);
    items.push_back(BatchItem{{}, std::nullopt, parse_ids(list, field, limits.vocab_size)});
    return items;
  }
  check_count(list.size(), field, limits);
  items.reserve(list.size());
  size_t k = 0;
  for (dom::element v : list) {
    const std::string what = std::string(field) + "[" + std::to_string(k) + "]";
    if (v.is_string()) {
      const std::string_view text = v.get_string().value_unsafe();
      if (text.empty()) throw empty_error(what + ": an empty string", std::string(field));
      items.push_back(BatchItem{std::string(text), std::nullopt, std::nullopt});
    } else if (v.is_array() && limits.allow_ids) {
      dom::array ids = v.get_array().value_unsafe();
      if (ids.size() == 0) throw empty_error(what + ": an empty list of token ids", std::string(field));
      items.push_back(BatchItem{{}, std::nullopt, parse_ids(ids, what, limits.vocab_size)});
    } else {
      throw wrong_type(what, limits.allow_ids ? "a string or a list of token ids" : "a string", v);
    }
    ++k;
  }
  return items;
}

}  // namespace stoke::serve
