#include "model/maxsim.h"

#include <limits>
#include <string>

#include "core/error.h"

namespace stoke {

std::vector<float> maxsim_scores(Backend& backend, std::span<const float> query, int64_t dim,
                                 std::span<const float> docs, std::span<const int64_t> offsets) {
  if (dim < 1) throw Error(Errc::invalid_argument, "maxsim: vector width " + std::to_string(dim) + ", expected >= 1");
  const auto D = static_cast<size_t>(dim);
  if (query.size() % D != 0 || docs.size() % D != 0)
    throw Error(Errc::invalid_argument, "maxsim: " + std::to_string(query.size()) + " query and " +
                                            std::to_string(docs.size()) + " document floats are not whole vectors of " +
                                            std::to_string(dim));
  if (offsets.empty()) throw Error(Errc::invalid_argument, "maxsim: offsets need N + 1 entries (got none)");
  const int64_t Tq = static_cast<int64_t>(query.size() / D), Td = static_cast<int64_t>(docs.size() / D);
  const int64_t N = static_cast<int64_t>(offsets.size()) - 1;
  if (Td > std::numeric_limits<int32_t>::max())
    throw Error(Errc::invalid_argument, "maxsim: more than 2^31 document vectors in one call");
  std::vector<int32_t> cu(offsets.size());
  for (size_t n = 0; n < offsets.size(); ++n) {
    if (offsets[n] < (n ? offsets[n - 1] : 0) || offsets[n] > Td || (n == 0 && offsets[0] != 0))
      throw Error(Errc::invalid_argument, "maxsim: offsets[" + std::to_string(n) + "] = " + std::to_string(offsets[n]) +
                                              ": expected ascending from 0 to " + std::to_string(Td));
    cu[n] = static_cast<int32_t>(offsets[n]);
  }
  if (offsets.back() != Td)
    throw Error(Errc::invalid_argument, "maxsim: offsets end at " + std::to_string(offsets.back()) + ", expected " +
                                            std::to_string(Td) + " (the document vectors)");
  std::vector<float> scores(static_cast<size_t>(N));
  if (N == 0) return scores;
  // Device copies (a host backend's buffers are host memory; one allocation each).
  auto q_buf = backend.allocate(std::max<size_t>(query.size(), 1) * 4);
  auto d_buf = backend.allocate(std::max<size_t>(docs.size(), 1) * 4);
  auto o_buf = backend.allocate(cu.size() * 4);
  auto s_buf = backend.allocate(scores.size() * 4);
  if (!query.empty()) backend.copy_to_device(q_buf->data(), query.data(), query.size() * 4);
  if (!docs.empty()) backend.copy_to_device(d_buf->data(), docs.data(), docs.size() * 4);
  backend.copy_to_device(o_buf->data(), cu.data(), cu.size() * 4);
  backend.ops().maxsim(TensorView(s_buf->data(), DType::f32, {N}), TensorView(q_buf->data(), DType::f32, {Tq, dim}),
                       TensorView(d_buf->data(), DType::f32, {Td, dim}), TensorView(o_buf->data(), DType::i32, {N + 1}));
  backend.copy_to_host(scores.data(), s_buf->data(), scores.size() * 4);
  backend.wait(*backend.record_event());  // the one host sync: the scores (and the copies' sources outlive it)
  return scores;
}

}  // namespace stoke
