// Shared pieces of the fast CPU kernels.
//
// How the kernels are built: each op dispatches ONCE per call on the
// activation dtype (with_act_type) to a template on T = float, bf16 or f16.
// Inside, a row of T is widened into a float scratch row, computed on with
// plain float loops, and narrowed back (RNE, exactly as core/half.h rounds).
// The per-row (or per-head) leaf functions are marked STOKE_CPU_CLONES: the
// compiler builds them for AVX-512, AVX2 and baseline x86-64 and picks one at
// load time (ifunc), so the default build (no -march) still runs 16-wide on
// this CPU. OpenMP regions stay outside the clones.
// Reductions use `omp simd reduction`, which lets the compiler vectorise a
// float sum without -ffast-math. Threads: OpenMP over tokens / sequences, with
// an `if` so tiny calls stay on the calling thread.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "core/half.h"
#include "core/tensor.h"

#ifndef STOKE_CPU_CLONES
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define STOKE_CPU_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define STOKE_CPU_CLONES
#endif
#endif

namespace stoke::cpu::fast {

// Below this many elements an op runs on the calling thread: starting the
// OpenMP team costs more than the work.
inline constexpr int64_t kParallelMinElements = 1 << 15;

template <class F>
decltype(auto) with_act_type(DType t, F&& f) {
  switch (t) {
    case DType::f32: return f(float{});
    case DType::bf16: return f(bf16{});
    case DType::f16: return f(f16{});
    default: throw Error(Errc::internal, "fast kernels: not an activation dtype");
  }
}

// float -> T with the rounding of core/half.h.
template <class T>
inline T narrow_one(float x);
template <>
inline float narrow_one<float>(float x) {
  return x;
}
template <>
inline bf16 narrow_one<bf16>(float x) {
  return to_bf16(x);
}
template <>
inline f16 narrow_one<f16>(float x) {
  return to_f16(x);
}

template <class T>
inline void widen(const T* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = to_float(src[i]);
}
template <class T>
inline void narrow(const float* src, T* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = narrow_one<T>(src[i]);
}
template <class T>
inline void widen_add(const T* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] += to_float(src[i]);
}

// Row `row` of a 2-D float tensor of any float dtype added into dst (one
// switch per row, not per element).
inline void add_row_any(const TensorView& t, int64_t row, float* dst) {
  const int64_t n = t.dim(1);
  switch (t.dtype) {
    case DType::f32: widen_add(t.as<const float>() + row * n, dst, n); return;
    case DType::bf16: widen_add(t.as<const bf16>() + row * n, dst, n); return;
    case DType::f16: widen_add(t.as<const f16>() + row * n, dst, n); return;
    default: throw Error(Errc::internal, "fast kernels: not a float tensor");
  }
}

// A whole (small) weight vector as floats: gamma, beta, bias. Empty -> empty.
inline std::vector<float> widen_vector(const TensorView& t) {
  std::vector<float> v(t.empty() ? 0 : static_cast<size_t>(t.numel()));
  const int64_t n = static_cast<int64_t>(v.size());
  switch (t.dtype) {
    case DType::f32: widen(t.as<const float>(), v.data(), n); break;
    case DType::bf16: widen(t.as<const bf16>(), v.data(), n); break;
    case DType::f16: widen(t.as<const f16>(), v.data(), n); break;
    default: throw Error(Errc::internal, "fast kernels: not a float tensor");
  }
  return v;
}

// Element-wise conversion of n values between any two activation dtypes
// (fast_misc.cc); threaded for large n.
void convert_n(const void* src, DType src_type, void* dst, DType dst_type, int64_t n);

}  // namespace stoke::cpu::fast
