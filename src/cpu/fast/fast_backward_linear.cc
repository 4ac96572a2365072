// linear_backward through oneDNN matmul:
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
// compile-time, as in fast_linear.cc, for the same reason: oneDNN 2.6 picks
// slower kernels for runtime dims), in an LRU of kCacheCapacity entries.
#include <map>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/half.h"
#include "cpu/fast/fast_ops.h"
#include "cpu/kernels.h"
#include "cpu/fast/fast_backward_common.h"
#include "backend/op_checks_backward.h"

namespace stoke::cpu::fast {

namespace {

using dt = dnnl::memory::data_type;
constexpr size_t kCacheCapacity = 256;

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
        run(Gemm{M, K, N, N, 1, K, 1, da_add, true}, g_in, w.data, out);
      } else {
        const float* wf = f32_input(w, w_buf);
        run(Gemm{M, K, N, N, 1, K, 1, da_add}, g, wf, out);
      }
      finish_output(da, out);
    }
    if (!dw.empty() && N * K > 0 && M > 0) {
      if (low) {
        run(Gemm{N, K, M, 1, N, K, 1, true, true}, g_in, a.data, dw.as<float>());
      } else {
        const float* af = f32_input(a, a_buf);
        run(Gemm{N, K, M, 1, N, K, 1, true}, g, af, dw.as<float>());
      }
    }
  } catch (const dnnl::error& e) {
    throw Error(Errc::internal, std::string("linear_backward: oneDNN matmul failed: ") + e.what() + " (dy " +
                                    dy.shape_string() + ", a " + a.shape_string() + ", w " + w.shape_string() + ")");
  }
  if (!db.empty()) column_sums_add(g, M, N, db.as<float>());
}

}  // namespace stoke::cpu::fast
