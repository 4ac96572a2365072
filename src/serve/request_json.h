// Reading request bodies with simdjson: the parse (400 on a syntax error,
// invalid UTF-8 or nesting deeper than kMaxJsonDepth), then typed field reads
// that raise 422 naming the field and what was expected. Unknown fields are
// ignored, as TEI and OpenAI do; a null field counts as absent.
#pragma once

#include <simdjson.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pipeline/request_batcher.h"

namespace stoke::serve {

inline constexpr size_t kMaxJsonDepth = 64;

// The body's root object. Valid until the next parse_object on this thread
// (one parser per thread, reused: no allocation per request once warm).
simdjson::dom::object parse_object(std::string_view body);

// A field, or nullopt when it is absent or null.
std::optional<simdjson::dom::element> optional_field(simdjson::dom::object obj, std::string_view name);
simdjson::dom::element required_field(simdjson::dom::object obj, std::string_view name);

bool bool_field(simdjson::dom::object obj, std::string_view name, bool fallback);
std::optional<int64_t> int_field(simdjson::dom::object obj, std::string_view name);
std::optional<std::string> string_field(simdjson::dom::object obj, std::string_view name);

// A string element's text (422 naming `what` when it is not a string).
std::string_view as_string(simdjson::dom::element e, std::string_view what);

// What the inputs may be: texts, and (for embeddings) lists of token ids.
struct InputLimits {
  size_t max_inputs = 32;    // --max-client-batch-size
  int64_t vocab_size = 0;    // ids must be below it
  bool allow_ids = true;
};

// TEI's and OpenAI's `inputs`/`input`: a string, a list of strings, a list of
// token ids (one input) or a list of lists of ids. Empty strings and lists
// are 400 (Empty); more inputs than max_inputs, ids outside the vocabulary
// and other shapes are 422. `field` names the field in errors.
std::vector<BatchItem> parse_inputs(simdjson::dom::element e, std::string_view field, const InputLimits& limits);

}  // namespace stoke::serve
