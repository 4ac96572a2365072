// The request fields TEI's routes share: inputs' limits, `truncate` and
// `truncation_direction`, a count against --max-client-batch-size, a
// non-empty text. One place for the routes of tei_api.cc and
// multi_vector_api.cc.
#pragma once

#include <simdjson.h>

#include <string>

#include "pipeline/request_batcher.h"
#include "serve/request_json.h"
#include "serve/routes.h"

namespace stoke::serve {

InputLimits limits_of(Call& call, bool allow_ids);

// TEI's `truncate` (default: --auto-truncate) and `truncation_direction`
// (Right keeps the first tokens, Left the last; special tokens stay).
struct Truncation {
  bool truncate = false;
  bool left = false;
};
Truncation truncation_of(Call& call, simdjson::dom::object body);
void set_truncation(BatchRequestOptions& o, Call& call, simdjson::dom::object body);

// 422 when n is more than the server's --max-client-batch-size.
void check_count(Call& call, size_t n, const char* field);

// A string element that is not empty (400 Empty for "", 422 for a non-string).
std::string non_empty_text(simdjson::dom::element e, const std::string& what);

}  // namespace stoke::serve
