#include "serve/tei_request.h"

namespace stoke::serve {

namespace dom = simdjson::dom;

InputLimits limits_of(Call& call, bool allow_ids) {
  InputLimits l;
  l.max_inputs = static_cast<size_t>(call.options().max_client_batch_size);
  l.vocab_size = call.model().tokenizer().vocab_size();
  l.allow_ids = allow_ids;
  return l;
}

Truncation truncation_of(Call& call, dom::object body) {
  Truncation t;
  if (auto dir = string_field(body, "truncation_direction")) {
    if (*dir == "Left" || *dir == "left")
      t.left = true;
    else if (*dir != "Right" && *dir != "right")
      throw validation_error("truncation_direction \"" + *dir + "\": expected Right or Left", "truncation_direction");
  }
  t.truncate = bool_field(body, "truncate", call.options().auto_truncate);
  return t;
}

void set_truncation(BatchRequestOptions& o, Call& call, dom::object body) {
  const Truncation t = truncation_of(call, body);
  o.truncate = t.truncate;
  o.truncate_left = t.left;
}

void check_count(Call& call, size_t n, const char* field) {
  if (n > static_cast<size_t>(call.options().max_client_batch_size))
    throw validation_error(std::string(field) + ": " + std::to_string(n) + " inputs, more than the server's " +
                               "--max-client-batch-size " + std::to_string(call.options().max_client_batch_size),
                           field);
}

std::string non_empty_text(dom::element e, const std::string& what) {
  const std::string_view s = as_string(e, what);
  if (s.empty()) throw empty_error(what + ": an empty string", what);
  return std::string(s);
}

}  // namespace stoke::serve
