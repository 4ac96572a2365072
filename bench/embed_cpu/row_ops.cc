// bench_row_ops: the fast CPU kernels of the forward's non-GEMM ops at model
// shapes — attention (MiniLM: 12 heads x 32, sequences of 56, 128 and 512
// tokens), MPNet's attention_relpos (12 x 64, 198 tokens), the residual and
// embedding LayerNorms and mean pooling over [4096, 768] — one thread, each
// the best of `--reps` calls by the thread's CPU time (so time the OS gives
// to other processes on a shared machine does not count). One line per op.
// Built against src/ like the engine; a before/after comparison links the
// same file against the previous kernels (docs/performance.md says how).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <random>
#include <vector>

#include "cpu/kernels.h"

namespace {

using namespace stoke;

double thread_seconds() {
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

template <class F>
double best_ms(F f, int reps) {
  f();  // warm: caches, first-touch pages
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    const double t0 = thread_seconds();
    f();
    best = std::min(best, 1e3 * (thread_seconds() - t0));
  }
  return best;
}

std::vector<float> uniform(std::mt19937_64& g, size_t n, double lo, double hi) {
  std::uniform_real_distribution<double> d(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = static_cast<float>(d(g));
  return v;
}

std::vector<int32_t> cu_of(int64_t B, int64_t len) {
  std::vector<int32_t> cu(static_cast<size_t>(B) + 1);
  for (int64_t b = 0; b <= B; ++b) cu[static_cast<size_t>(b)] = static_cast<int32_t>(b * len);
  return cu;
}

TensorView f32(std::vector<float>& v, std::initializer_list<int64_t> shape) {
  return TensorView(v.data(), DType::f32, shape);
}
TensorView i32(std::vector<int32_t>& v) { return TensorView(v.data(), DType::i32, {static_cast<int64_t>(v.size())}); }

}  // namespace

int main(int argc, char** argv) {
  int reps = 15;
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], "--reps") == 0) reps = std::max(1, std::atoi(argv[i + 1]));
  const cpu::Kernels& k = cpu::fast_kernels();
  std::mt19937_64 g(1);
  for (int64_t len : {56, 128, 512}) {  // ~8k tokens of sequences of one length
    const int heads = 12, d = 32;
    const int64_t B = 8192 / len, T = B * len, C = 3 * heads * d;
    std::vector<float> qkv = uniform(g, static_cast<size_t>(T * C), -2, 2), out(static_cast<size_t>(T * heads * d));
    std::vector<int32_t> cu = cu_of(B, len);
    auto op = [&] {
      k.attention(f32(out, {T, heads * d}), f32(qkv, {T, C}), i32(cu), heads, static_cast<int>(len), 0);
    };
    const double ms = best_ms(op, reps);
    std::printf("attention %ld x %ld tokens, 12 x 32: %.3f ms (%.1f GFLOP/s)\n", B, len, ms,
                4.0 * static_cast<double>(B * len * len * d * heads) / ms / 1e6);
  }
  {
    const int heads = 12, d = 64;
    const int64_t B = 8, len = 198, T = B * len, C = 3 * heads * d, R = 2 * len - 1;
    std::vector<float> qkv = uniform(g, static_cast<size_t>(T * C), -2, 2), out(static_cast<size_t>(T * heads * d));
    std::vector<float> rel = uniform(g, static_cast<size_t>(R * heads), -2, 2);
    std::vector<int32_t> cu = cu_of(B, len);
    auto op = [&] {
      k.attention_relpos(f32(out, {T, heads * d}), f32(qkv, {T, C}), i32(cu), heads, static_cast<int>(len),
                         f32(rel, {R, heads}));
    };
    std::printf("attention_relpos %ld x %ld tokens, 12 x 64: %.3f ms\n", B, len, best_ms(op, std::max(1, reps / 3)));
  }
  const int64_t T = 4096, H = 768;
  std::vector<float> gamma = uniform(g, H, 0.5, 1.5), beta = uniform(g, H, -0.5, 0.5), out(static_cast<size_t>(T * H));
  {
    std::vector<float> x = uniform(g, static_cast<size_t>(T * H), -2, 2);
    std::vector<float> res = uniform(g, static_cast<size_t>(T * H), -2, 2);
    auto op = [&] {
      k.residual_layernorm(f32(out, {T, H}), f32(x, {T, H}), f32(res, {T, H}), f32(gamma, {H}), f32(beta, {H}), 1e-5f,
                           TensorView{});
    };
    std::printf("residual_layernorm f32 [%ld, %ld]: %.3f ms\n", T, H, best_ms(op, reps));
  }
  {
    const int64_t V = 30522, P = 512;  // bert-base's tables
    std::vector<float> word = uniform(g, static_cast<size_t>(V * H), -1, 1);
    std::vector<float> pos = uniform(g, static_cast<size_t>(P * H), -1, 1);
    std::vector<float> type = uniform(g, static_cast<size_t>(2 * H), -1, 1);
    std::vector<int32_t> ids(T), positions(T), types(T, 0);
    for (int64_t t = 0; t < T; ++t) {
      ids[static_cast<size_t>(t)] = static_cast<int32_t>(g() % V);
      positions[static_cast<size_t>(t)] = static_cast<int32_t>(t % P);
    }
    auto op = [&] {
      k.embed_layernorm(f32(out, {T, H}), i32(ids), i32(positions), i32(types), f32(word, {V, H}), f32(pos, {P, H}),
                        f32(type, {2, H}), f32(gamma, {H}), f32(beta, {H}), 1e-12f, TensorView{});
    };
    std::printf("embed_layernorm f32 [%ld, %ld]: %.3f ms\n", T, H, best_ms(op, reps));
  }
  {
    const int64_t B = 32;
    std::vector<float> h = uniform(g, static_cast<size_t>(T * H), -2, 2), pooled(static_cast<size_t>(B * H));
    std::vector<int32_t> cu = cu_of(B, T / B);
    auto op = [&] { k.pool(f32(pooled, {B, H}), f32(h, {T, H}), i32(cu), Pooling::mean); };
    std::printf("pool mean [%ld, %ld], %ld sequences: %.3f ms\n", T, H, B, best_ms(op, reps));
  }
  return 0;
}
