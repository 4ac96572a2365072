#include "core/pooling.h"

namespace stoke {

namespace {

// The one name table: each mode with both of its spellings.
struct PoolingNames {
  Pooling mode;
  std::string_view name;       // stoke's
  std::string_view flag_name;  // sentence-transformers'
};
constexpr PoolingNames kNames[] = {
    {Pooling::cls, "cls", "cls_token"},
    {Pooling::mean, "mean", "mean_tokens"},
    {Pooling::max, "max", "max_tokens"},
    {Pooling::mean_sqrt_len, "mean_sqrt_len", "mean_sqrt_len_tokens"},
    {Pooling::lasttoken, "lasttoken", "lasttoken"},
};

const PoolingNames* find(Pooling p) {
  for (const PoolingNames& n : kNames)
    if (n.mode == p) return &n;
  return nullptr;
}

}  // namespace

std::string_view pooling_name(Pooling p) {
  const PoolingNames* n = find(p);
  return n ? n->name : "?";
}

std::string_view pooling_flag_name(Pooling p) {
  const PoolingNames* n = find(p);
  return n ? n->flag_name : "?";
}

std::optional<Pooling> pooling_from_name(std::string_view name) {
  for (const PoolingNames& n : kNames)
    if (name == n.name || name == n.flag_name) return n.mode;
  return std::nullopt;
}

}  // namespace stoke
