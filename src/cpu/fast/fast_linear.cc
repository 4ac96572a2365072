// linear through oneDNN matmul: out[M,N] = act(a[M,K] · w[N,K]^T + bias).
//
// - w stays in nn.Linear layout: its memory desc is [K, N] with strides
//   {1, K} (oneDNN's "ba"), so no transpose copy is ever made.
// - bias through matmul's bias (always f32: an activation-dtype bias is widened,
//   N values); GELU-erf and tanh as eltwise post-ops, applied in f32 before
//   the store. Accumulate::yes (an f32 out, no activation) is matmul's sum
//   post-op: out = a·w^T + bias + out, the residual add inside the GEMM.
//   Not bit for bit the unfolded linear + add (the GEMM may add out in
//   before its last K block), but at the GEMM's own f32 rounding.
// - Paths: f32·f32 -> f32 natively; bf16·bf16 -> bf16 natively (f32
//   accumulation) where the CPU has AVX512-BF16 or AMX; every other mix
//   (bf16 without native support, bf16 activations with f32 weights, f16)
//   widens the low-precision operands to f32, runs the f32 GEMM and narrows
//   the result: slower, never less accurate.
// - Primitives are cached by (M, N, K, dtypes, bias, act). M is a compile-time
//   dim on purpose: oneDNN 2.6 answers a runtime M with its generic gemm:jit
//   (no AMX; measured 147 vs 420 GFLOP/s for bf16 [4096x768]x[768x3072] on
//   2 threads), while creating an exact-M primitive costs 0.5-6 ms once. The
//   cache is an LRU bounded at kCacheCapacity entries.
//
// linear_backward (after linear; its GEMMs and their cache in namespace
// backward), through oneDNN matmul too:
//   da[M,K]  = dy[M,N] · w[N,K]       (w read in its nn.Linear layout; "+="
//                                      with Accumulate::yes, an f32 da: the
//                                      sum post-op, as dw's)
//   dw[N,K] += dy^T[N,M] · a[M,K]     (dy read transposed through strides {1, N},
//                                      no copy; "+=" is matmul's sum post-op)
//   db[N]   += column sums of dy      (column_sums_add: fixed-order blocks)
// The products run in the precision of the forward: when a and w are bf16 and
// the CPU multiplies bf16 natively (AMX / AVX512-BF16), dy is rounded to bf16
// once and both GEMMs take bf16 operands with f32 accumulation into f32
// outputs — what torch.autocast's backward does, and where bf16 training gets
// its speed. Otherwise the operands are widened to f32. Gradients (dw, db, an
// f32 da) are f32 either way (f32 master weights, DESIGN "Precision"); a
// low-precision da is narrowed at the end. db always sums the f32 dy.
// Primitives are cached by shape, strides and accumulation (all dims
// compile-time, as linear's, for the same reason: oneDNN 2.6 picks
// slower kernels for runtime dims), in an LRU of kCacheCapacity entries.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <map>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/half.h"
#include "cpu/fast/fast_backward_common.h"
#include "cpu/fast/fast_common.h"
#include "cpu/fast/fast_math.h"
#include "cpu/fast/fast_ops.h"
#include "cpu/kernels.h"
#include "backend/op_checks.h"
#include "backend/op_checks_backward.h"

namespace stoke::cpu::fast {

namespace {

using dt = dnnl::memory::data_type;
constexpr size_t kCacheCapacity = 256;

std::atomic<bool> g_native_bf16_allowed{true};

dnnl::engine& cpu_engine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

struct Key {
  int64_t M, N, K;
  dt src, wei, dst;
  bool bias;
  Activation act;
  bool accumulate = false;  // the sum post-op: dst += the product
  auto operator<=>(const Key&) const = default;
};

class PrimitiveCache {
 public:
  dnnl::matmul get(const Key& key) {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = entries_.find(key); it != entries_.end()) {
      it->second.last_use = ++tick_;
      return it->second.primitive;
    }
    // Made under the lock: two threads asking for the same new shape make it once.
    dnnl::matmul primitive = create(key);
    if (entries_.size() >= kCacheCapacity) {
      auto oldest = entries_.begin();
      for (auto it = entries_.begin(); it != entries_.end(); ++it)
        if (it->second.last_use < oldest->second.last_use) oldest = it;
      entries_.erase(oldest);
    }
    entries_.emplace(key, Entry{primitive, ++tick_});
    return primitive;
  }
  size_t size() {
    std::lock_guard<std::mutex> lock(mu_);
    return entries_.size();
  }

 private:
  static dnnl::matmul create(const Key& k) {
    using md = dnnl::memory::desc;
    const md src({k.M, k.K}, k.src, {k.K, 1});
    const md wei({k.K, k.N}, k.wei, {1, k.K});  // w[N, K] read as its transpose, in place
    const md dst({k.M, k.N}, k.dst, {k.N, 1});
    dnnl::primitive_attr attr;
    dnnl::post_ops ops;
    if (k.act != Activation::none) {
      const dnnl::algorithm alg = k.act == Activation::gelu_erf ? dnnl::algorithm::eltwise_gelu_erf
                                  : k.act == Activation::tanh   ? dnnl::algorithm::eltwise_tanh
                                                                : dnnl::algorithm::eltwise_relu;  // alpha 0: max(x, 0)
      ops.append_eltwise(1.0f, alg, 0.0f, 0.0f);
    }
    if (k.accumulate) ops.append_sum(1.0f);
    if (ops.len() > 0) attr.set_post_ops(ops);
    if (k.bias) {
      const md bias({1, k.N}, dt::f32, {k.N, 1});
      return dnnl::matmul(dnnl::matmul::primitive_desc(dnnl::matmul::desc(src, wei, bias, dst), attr, cpu_engine()));
    }
    return dnnl::matmul(dnnl::matmul::primitive_desc(dnnl::matmul::desc(src, wei, dst), attr, cpu_engine()));
  }

  struct Entry {
    dnnl::matmul primitive;
    uint64_t last_use;
  };
  std::mutex mu_;
  std::map<Key, Entry> entries_;
  uint64_t tick_ = 0;
};

PrimitiveCache& cache() {
  static PrimitiveCache c;
  return c;
}

dt to_dnnl(DType t) { return t == DType::f32 ? dt::f32 : t == DType::bf16 ? dt::bf16 : dt::f16; }

// Runs the cached primitive on raw pointers; waits for it (the op table's
// CPU kernels are synchronous: the executor thread is the "device").
void run_matmul(const Key& key, const void* a, const void* w, const float* bias, void* out) {
  dnnl::matmul prim = cache().get(key);
  thread_local dnnl::stream stream(cpu_engine());
  using md = dnnl::memory::desc;
  auto& e = cpu_engine();
  dnnl::memory am(md({key.M, key.K}, key.src, {key.K, 1}), e, const_cast<void*>(a));
  dnnl::memory wm(md({key.K, key.N}, key.wei, {1, key.K}), e, const_cast<void*>(w));
  dnnl::memory om(md({key.M, key.N}, key.dst, {key.N, 1}), e, out);
  std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, wm}, {DNNL_ARG_DST, om}};
  if (bias) args.emplace(DNNL_ARG_BIAS, dnnl::memory(md({1, key.N}, dt::f32, {key.N, 1}), e, const_cast<float*>(bias)));
  prim.execute(stream, args);
  stream.wait();
}

// Scratch reused across calls by the calling thread (the executor), so the
// widening path does not fault in fresh pages every call.
float* scratch(std::vector<float>& buf, int64_t n) {
  if (buf.size() < static_cast<size_t>(n)) buf.resize(static_cast<size_t>(n));
  return buf.data();
}

// K == 0: no products, out = act(bias) (out += bias when accumulating: no activation then).
void linear_no_k(const TensorView& out, const std::vector<float>& bias, int64_t M, int64_t N, Activation act,
                 bool accumulate) {
  std::vector<float> row(static_cast<size_t>(N));
  for (int64_t n = 0; n < N; ++n) {
    const float v = bias.empty() ? 0.0f : bias[static_cast<size_t>(n)];
    row[static_cast<size_t>(n)] = act == Activation::gelu_erf ? gelu_erf_approx(v)
                                  : act == Activation::tanh   ? std::tanh(v)
                                  : act == Activation::relu   ? std::max(v, 0.0f)
                                                              : v;
  }
  if (accumulate) {  // out is f32 (check_linear)
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) out.as<float>()[m * N + n] += row[static_cast<size_t>(n)];
    return;
  }
  for (int64_t m = 0; m < M; ++m)
    convert_n(row.data(), DType::f32, static_cast<char*>(out.data) + static_cast<size_t>(m * N) * dtype_size(out.dtype),
              out.dtype, N);
}

}  // namespace

void gemm_u8s8s32(const uint8_t* a, const int8_t* w, int32_t* out, int64_t M, int64_t N, int64_t K) {
  try {
    run_matmul(Key{M, N, K, dt::u8, dt::s8, dt::s32, false, Activation::none, false}, a, w, nullptr, out);
  } catch (const dnnl::error& e) {
    throw Error(Errc::internal, std::string("linear_int8: oneDNN u8 x s8 matmul failed: ") + e.what() + " (M " +
                                    std::to_string(M) + ", N " + std::to_string(N) + ", K " + std::to_string(K) + ")");
  }
}

void set_linear_native_bf16_for_testing(bool allowed) { g_native_bf16_allowed.store(allowed); }
size_t linear_cached_primitives() { return cache().size(); }

void linear(const TensorView& out, const TensorView& a, const TensorView& w, const TensorView& bias, Activation act,
            Accumulate acc) {
  const auto [M, N, K] = check_linear(out, a, w, bias, act, acc);
  const bool accumulate = acc == Accumulate::yes;
  if (M == 0 || N == 0) return;
  thread_local std::vector<float> bias_buf, a_buf, w_buf, out_buf;
  const float* b = nullptr;
  if (!bias.empty()) {
    if (bias.dtype == DType::f32) {
      b = bias.as<const float>();
    } else {
      bias_buf = widen_vector(bias);
      b = bias_buf.data();
    }
  }
  if (K == 0) {
    linear_no_k(out, bias.empty() ? std::vector<float>{} : std::vector<float>(b, b + N), M, N, act, accumulate);
    return;
  }
  try {
    const bool native_bf16 = a.dtype == DType::bf16 && w.dtype == DType::bf16 && cpu_has_native_bf16() &&
                             g_native_bf16_allowed.load(std::memory_order_relaxed);
    if ((a.dtype == DType::f32 && w.dtype == DType::f32) || native_bf16) {
      const dt t = to_dnnl(a.dtype);
      run_matmul(Key{M, N, K, t, t, to_dnnl(out.dtype), b != nullptr, act, accumulate}, a.data, w.data, b, out.data);
      return;
    }
    // Widen what is not f32, run f32, narrow the result.
    const float* af = a.as<const float>();
    if (a.dtype != DType::f32) {
      float* p = scratch(a_buf, M * K);
      convert_n(a.data, a.dtype, p, DType::f32, M * K);
      af = p;
    }
    const float* wf = w.as<const float>();
    if (w.dtype != DType::f32) {
      float* p = scratch(w_buf, N * K);
      convert_n(w.data, w.dtype, p, DType::f32, N * K);
      wf = p;
    }
    float* of = out.dtype == DType::f32 ? out.as<float>() : scratch(out_buf, M * N);  // f32 when accumulating
    run_matmul(Key{M, N, K, dt::f32, dt::f32, dt::f32, b != nullptr, act, accumulate}, af, wf, b, of);
    if (out.dtype != DType::f32) convert_n(of, DType::f32, out.data, out.dtype, M * N);
  } catch (const dnnl::error& e) {
    throw Error(Errc::internal, std::string("linear: oneDNN matmul failed: ") + e.what() + " (a " + a.shape_string() +
                                    ", w " + w.shape_string() + ")");
  }
}

// ---- linear_backward

namespace {
namespace backward {

dnnl::engine& engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

// dst[M,N] (+)= src[M,K] · wei[K,N], f32 dst, with the given element strides;
// src and wei both f32, or both bf16.
struct Gemm {
  int64_t M, N, K;
  int64_t src_s0, src_s1;  // strides of src's [M, K]
  int64_t wei_s0, wei_s1;  // strides of wei's [K, N]
  bool accumulate;
  bool bf16 = false;
  auto operator<=>(const Gemm&) const = default;

  dt in() const { return bf16 ? dt::bf16 : dt::f32; }
  dnnl::memory::desc src() const { return dnnl::memory::desc({M, K}, in(), {src_s0, src_s1}); }
  dnnl::memory::desc wei() const { return dnnl::memory::desc({K, N}, in(), {wei_s0, wei_s1}); }
  dnnl::memory::desc dst() const { return dnnl::memory::desc({M, N}, dt::f32, {N, 1}); }
};

class Cache {
 public:
  dnnl::matmul get(const Gemm& g) {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = entries_.find(g); it != entries_.end()) {
      it->second.last_use = ++tick_;
      return it->second.primitive;
    }
    dnnl::primitive_attr attr;
    if (g.accumulate) {
      dnnl::post_ops ops;
      ops.append_sum(1.0f);
      attr.set_post_ops(ops);
    }
    dnnl::matmul p(dnnl::matmul::primitive_desc(dnnl::matmul::desc(g.src(), g.wei(), g.dst()), attr, engine()));
    if (entries_.size() >= kCacheCapacity) {
      auto oldest = entries_.begin();
      for (auto it = entries_.begin(); it != entries_.end(); ++it)
        if (it->second.last_use < oldest->second.last_use) oldest = it;
      entries_.erase(oldest);
    }
    entries_.emplace(g, Entry{p, ++tick_});
    return p;
  }

 private:
  struct Entry {
    dnnl::matmul primitive;
    uint64_t last_use;
  };
  std::mutex mu_;
  std::map<Gemm, Entry> entries_;
  uint64_t tick_ = 0;
};

Cache& cache() {
  static Cache c;
  return c;
}

void run(const Gemm& g, const void* src, const void* wei, float* dst) {
  dnnl::matmul prim = cache().get(g);
  thread_local dnnl::stream stream(engine());
  auto& e = engine();
  std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, dnnl::memory(g.src(), e, const_cast<void*>(src))},
                                             {DNNL_ARG_WEIGHTS, dnnl::memory(g.wei(), e, const_cast<void*>(wei))},
                                             {DNNL_ARG_DST, dnnl::memory(g.dst(), e, dst)}};
  prim.execute(stream, args);
  stream.wait();
}

}  // namespace backward
}  // namespace

void column_sums_add(const float* x, int64_t rows, int64_t N, float* acc) {
  if (rows == 0 || N == 0) return;
  const int64_t nb = (rows + kReduceRows - 1) / kReduceRows;
  std::vector<float> partial(static_cast<size_t>(nb * N), 0.0f);
#pragma omp parallel for schedule(static) if (rows * N >= kParallelMinElements && nb > 1)
  for (int64_t b = 0; b < nb; ++b) {
    float* p = partial.data() + b * N;
    const int64_t r1 = std::min(rows, (b + 1) * kReduceRows);
    for (int64_t r = b * kReduceRows; r < r1; ++r) {
      const float* xr = x + r * N;
#pragma omp simd
      for (int64_t i = 0; i < N; ++i) p[i] += xr[i];
    }
  }
  add_partials(partial.data(), nb, N, acc);
}

void linear_backward(const TensorView& da, const TensorView& dw, const TensorView& db, const TensorView& dy,
                     const TensorView& a, const TensorView& w, Accumulate da_acc) {
  const LinearShape shape = check_linear_backward(da, dw, db, dy, a, w, da_acc);
  const bool da_add = da_acc == Accumulate::yes;  // da is f32 then (the check)
  const int64_t M = shape.M, N = shape.N, K = shape.K;
  thread_local std::vector<float> dy_buf, a_buf, w_buf, da_buf;
  thread_local std::vector<bf16> dy_low;
  const float* g = f32_input(dy, dy_buf);
  const bool low = a.dtype == DType::bf16 && w.dtype == DType::bf16 && cpu_has_native_bf16() && M * N > 0;
  const void* g_in = g;
  if (low) {
    if (dy.dtype == DType::bf16) {
      g_in = dy.data;
    } else {
      dy_low.resize(static_cast<size_t>(M * N));
      convert_n(g, DType::f32, dy_low.data(), DType::bf16, M * N);
      g_in = dy_low.data();
    }
  }
  try {
    if (!da.empty() && M * K > 0) {
      float* out = f32_output(da, da_buf);
      if (N == 0) {
        if (!da_add) std::fill(out, out + M * K, 0.0f);  // a sum of nothing
      } else if (low) {
        backward::run(backward::Gemm{M, K, N, N, 1, K, 1, da_add, true}, g_in, w.data, out);
      } else {
        const float* wf = f32_input(w, w_buf);
        backward::run(backward::Gemm{M, K, N, N, 1, K, 1, da_add}, g, wf, out);
      }
      finish_output(da, out);
    }
    if (!dw.empty() && N * K > 0 && M > 0) {
      if (low) {
        backward::run(backward::Gemm{N, K, M, 1, N, K, 1, true, true}, g_in, a.data, dw.as<float>());
      } else {
        const float* af = f32_input(a, a_buf);
        backward::run(backward::Gemm{N, K, M, 1, N, K, 1, true}, g, af, dw.as<float>());
      }
    }
  } catch (const dnnl::error& e) {
    throw Error(Errc::internal, std::string("linear_backward: oneDNN matmul failed: ") + e.what() + " (dy " +
                                    dy.shape_string() + ", a " + a.shape_string() + ", w " + w.shape_string() + ")");
  }
  if (!db.empty()) column_sums_add(g, M, N, db.as<float>());
}

}  // namespace stoke::cpu::fast
