// maxsim: ColBERT's late-interaction scores of one query against N documents.
// Each document is one task (threads over documents): for every query vector
// the best dot product over the document's vectors, f32 dot products
// (vectorised over the width), the sum over query vectors in double.
// attention_keys is the attention kernel's (fast_attention.cc).
#include <algorithm>
#include <cmath>

#include "backend/colbert_checks.h"
#include "cpu/fast/fast_common.h"
#include "cpu/fast/fast_ops.h"

namespace stoke::cpu::fast {

namespace {

// sum_i max_j q_i · d_j over a document's rows d[n, D].
STOKE_CPU_CLONES double document_score(const float* q, int64_t Tq, const float* d, int64_t n, int64_t D) {
  double total = 0.0;
  for (int64_t i = 0; i < Tq; ++i) {
    const float* qi = q + i * D;
    float best = -INFINITY;
    for (int64_t j = 0; j < n; ++j) {
      const float* dj = d + j * D;
      float s = 0.0f;
#pragma omp simd reduction(+ : s)
      for (int64_t c = 0; c < D; ++c) s += qi[c] * dj[c];
      best = std::max(best, s);
    }
    total += static_cast<double>(best);
  }
  return total;
}

}  // namespace

void maxsim(const TensorView& scores, const TensorView& q, const TensorView& docs, const TensorView& offsets) {
  const MaxSimShape s = check_maxsim(scores, q, docs, offsets);
  const int32_t* o = offsets.as<const int32_t>();
  const float* qv = q.as<const float>();
  const float* dv = docs.as<const float>();
  float* out = scores.as<float>();
  const bool parallel = s.N > 1 && s.Tq * s.Td * s.D >= kParallelMinElements;
#pragma omp parallel for schedule(dynamic) if (parallel)
  for (int64_t n = 0; n < s.N; ++n) {
    const int64_t first = o[n], len = o[n + 1] - o[n];
    out[n] = len > 0 ? static_cast<float>(document_score(qv, s.Tq, dv + first * s.D, len, s.D)) : 0.0f;
  }
}

}  // namespace stoke::cpu::fast
