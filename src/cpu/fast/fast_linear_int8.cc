// linear_int8 (contract: backend/op_list.h), in three passes:
// 1. each row of a quantized to u8 (per-row scale and zero point), vectorised, threads over rows;
// 2. oneDNN's u8 x s8 -> s32 matmul (VNNI / AMX where present), written
//    straight into out's memory (int32 and f32 are the same size);
// 3. one fused dequantize pass over out in place: the row's zero point times
//    the weights' row sums, row scale x column scale, bias and the activation.
// Why not oneDNN's own epilogue: 2.6 takes output scales per tensor or per
// column only, so the per-row scale and zero point would need binary
// post-ops on [M,1] and [1,N] tensors; measured (bench/embed_cpu/
// int8_dequant.cc), oneDNN 2.6 answers that matmul with its reference
// kernel (ref_int8, seconds a call), while pass 3 costs one read and one
// write of out (docs/performance.md, int8).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <immintrin.h>
#include <vector>

#include "cpu/fast/fast_common.h"
#include "cpu/fast/fast_math.h"
#include "cpu/fast/fast_ops.h"
#include "cpu/int8_rows.h"
#include "cpu/kernels.h"
#include "backend/op_checks.h"

namespace stoke::cpu::fast {

namespace {

#if defined(__GNUC__) && defined(__x86_64__)
#define STOKE_HAVE_AVX512_QUANT 1
// GCC 12's AVX-512 headers start some intrinsics from _mm512_undefined_ps(),
// which -Wuninitialized reports at every inlined use; nothing here is read
// uninitialised.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#define STOKE_AVX512_QUANT_TARGET __attribute__((target("avx512f,avx512bw,avx512vl")))

// 16 floats -> 16 codes: clamp(round-to-nearest-even(x * inv) + zero, 0, levels).
STOKE_AVX512_QUANT_TARGET inline __m128i codes16(__m512 x, __m512 inv, __m512 zero, __m512 levels) {
  __m512 v = _mm512_roundscale_ps(_mm512_mul_ps(x, inv), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  v = _mm512_min_ps(_mm512_max_ps(_mm512_add_ps(v, zero), _mm512_setzero_ps()), levels);
  return _mm512_cvtepi32_epi8(_mm512_cvtps_epi32(v));
}

// The AVX-512 twin of cpu::quantize_row: the same f32 operations lane by lane
// (the range by min/max, which do not round; the code from cpu::row_code
// itself; x * inv rounded, + zero, clamped), so the same bytes.
STOKE_AVX512_QUANT_TARGET RowCode quantize_row_avx512(const float* x, int64_t K, Int8ActivationCode code,
                                                      uint8_t* q) {
  __m512 vlo = _mm512_setzero_ps(), vhi = _mm512_setzero_ps();
  int64_t k = 0;
  for (; k + 16 <= K; k += 16) {
    const __m512 v = _mm512_loadu_ps(x + k);
    vlo = _mm512_min_ps(vlo, v);
    vhi = _mm512_max_ps(vhi, v);
  }
  if (k < K) {
    const __m512 v = _mm512_maskz_loadu_ps(static_cast<__mmask16>((1u << (K - k)) - 1u), x + k);  // masked lanes: 0
    vlo = _mm512_min_ps(vlo, v);
    vhi = _mm512_max_ps(vhi, v);
  }
  const RowCode c = row_code(RowRange{_mm512_reduce_min_ps(vlo), _mm512_reduce_max_ps(vhi)}, code);
  const __m512 inv = _mm512_set1_ps(c.inv), zero = _mm512_set1_ps(static_cast<float>(c.zero)),
               levels = _mm512_set1_ps(static_cast<float>(code.levels));
  for (k = 0; k + 16 <= K; k += 16)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + k), codes16(_mm512_loadu_ps(x + k), inv, zero, levels));
  if (k < K) {
    const __mmask16 m = static_cast<__mmask16>((1u << (K - k)) - 1u);
    _mm_mask_storeu_epi8(q + k, m, codes16(_mm512_maskz_loadu_ps(m, x + k), inv, zero, levels));
  }
  return c;
}
#pragma GCC diagnostic pop
#endif

// out row n: act(s * ws[n] * (acc[n] - z * rs[n]) + b[n]) in place over the
// int32 acc. In chunks: the chunk's int32 copied out (memcpy: no type
// punning), then plain loops on distinct arrays the compiler vectorises, the
// activation chosen outside them (a per-element branch or an aliasing store
// kept this pass scalar: it was 20% of a MiniLM run). rs: the weights' row
// sums as int32.
STOKE_CPU_CLONES void dequantize_chunk(const int32_t* __restrict acc, float* __restrict out, float s, int32_t z,
                                       const float* __restrict ws, const int32_t* __restrict rs,
                                       const float* __restrict b, int64_t n) {
  if (b) {
    for (int64_t i = 0; i < n; ++i) out[i] = s * ws[i] * static_cast<float>(acc[i] - z * rs[i]) + b[i];
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = s * ws[i] * static_cast<float>(acc[i] - z * rs[i]);
  }
}
STOKE_CPU_CLONES void gelu_chunk(float* __restrict x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] = gelu_erf_approx(x[i]);
}
STOKE_CPU_CLONES void relu_chunk(float* __restrict x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

void dequantize_row(void* row, float s, int32_t z, const float* ws, const int32_t* rs, const float* b, int64_t N,
                    Activation act) {
  constexpr int64_t kChunk = 256;
  alignas(64) int32_t acc[kChunk];
  alignas(64) float val[kChunk];
  char* p = static_cast<char*>(row);
  for (int64_t at = 0; at < N; at += kChunk) {
    const int64_t n = std::min(kChunk, N - at);
    std::memcpy(acc, p + 4 * at, static_cast<size_t>(n) * 4);
    dequantize_chunk(acc, val, s, z, ws + at, rs + at, b ? b + at : nullptr, n);
    if (act == Activation::gelu_erf) gelu_chunk(val, n);
    else if (act == Activation::relu) relu_chunk(val, n);
    else if (act == Activation::tanh)  // the heads' activation: not in the layers' GEMMs
      for (int64_t i = 0; i < n; ++i) val[i] = std::tanh(val[i]);
    std::memcpy(p + 4 * at, val, static_cast<size_t>(n) * 4);
  }
}

}  // namespace

RowCode quantize_row_fast(const float* x, int64_t K, Int8ActivationCode code, uint8_t* q) {
#ifdef STOKE_HAVE_AVX512_QUANT
  static const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                             __builtin_cpu_supports("avx512vl");
  if (avx512) return quantize_row_avx512(x, K, code, q);
#endif
  return quantize_row(x, K, code, q);
}

void linear_int8(const TensorView& out, const TensorView& a, const TensorView& wq, const TensorView& wq_meta,
                 const TensorView& bias, Activation act) {
  // Plain variables, not a structured binding: clang 14 (the fuzz build)
  // cannot capture a binding in the OpenMP regions below.
  const LinearShape shape = check_linear_int8(out, a, wq, wq_meta, bias);
  const int64_t M = shape.M, N = shape.N, K = shape.K;
  if (M == 0 || N == 0) return;
  const Int8ActivationCode code = cpu_int8_activation_code();
  const float* meta = wq_meta.as<const float>();
  thread_local std::vector<uint8_t> qa;
  thread_local std::vector<RowCode> row_codes;
  thread_local std::vector<int32_t> row_sums;
  if (qa.size() < static_cast<size_t>(M * K)) qa.resize(static_cast<size_t>(M * K));
  if (row_codes.size() < static_cast<size_t>(M)) row_codes.resize(static_cast<size_t>(M));
  if (row_sums.size() < static_cast<size_t>(N)) row_sums.resize(static_cast<size_t>(N));
  // The row sums are integers held exactly in f32 (|sum| <= 127 K < 2^24).
  for (int64_t n = 0; n < N; ++n) row_sums[static_cast<size_t>(n)] = static_cast<int32_t>(meta[N + n]);
  const float* ap = a.as<const float>();
  uint8_t* qp = qa.data();
  RowCode* cp = row_codes.data();
#pragma omp parallel for schedule(static) if (M * K >= kParallelMinElements)
  for (int64_t m = 0; m < M; ++m) cp[m] = quantize_row_fast(ap + m * K, K, code, qp + m * K);
  auto* acc = static_cast<int32_t*>(out.data);
  if (K > 0)
    gemm_u8s8s32(qp, wq.as<const int8_t>(), acc, M, N, K);
  else
    std::memset(acc, 0, static_cast<size_t>(M * N) * 4);
  const float* b = bias.empty() ? nullptr : bias.as<const float>();
  const int32_t* rs = row_sums.data();
  char* op = static_cast<char*>(out.data);
#pragma omp parallel for schedule(static) if (M * N >= kParallelMinElements)
  for (int64_t m = 0; m < M; ++m) dequantize_row(op + m * N * 4, cp[m].scale, cp[m].zero, meta, rs, b, N, act);
}

}  // namespace stoke::cpu::fast
