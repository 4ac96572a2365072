// oneDNN matmul peak on this machine, the yardstick bench/embed_cpu holds
// stoke's model GEMM time against (DESIGN.md "Physical limits").
//
//   bench_gemm_peak [--threads N] [--seconds S] [--m ROWS]
//
// Times BERT-base's two FFN shapes, [M x 768] x [768 x 3072] and
// [M x 3072] x [3072 x 768] (M = 4096 unless --m says otherwise), in f32, bf16 (bf16 in, bf16 out, f32
// accumulation) and int8 (u8 x s8 -> s32, VNNI/AMX where present: "int8", GOP/s), with the weights in the layout oneDNN picks (format "any",
// reordered once outside the timing, as an engine with packed weights runs)
// and in nn.Linear's stored layout ([N, K] row-major, "ba"). Each case runs
// for S seconds after a warm-up. GFLOP/s from the median call is what the
// machine sustains; from the best call, what it reaches in a burst (with AMX
// here the two differ by up to 2x, so the median is the yardstick). Prints
// one JSON object: every case, and per dtype the best over cases of the
// median ("peak_gflops") and of the best call ("burst_gflops"). It also times
// the machine's own f32 ceiling, "fma_gflops": every thread running
// independent FMAs on registers (AVX-512 where present, else AVX2), no memory
// traffic at all — no f32 GEMM can beat it, and what a GEMM loses to it is
// lost to memory and threading.
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

namespace {

using dt = dnnl::memory::data_type;
using tag = dnnl::memory::format_tag;

struct Case {
  long m, k, n;
  dt type;
  bool packed_weights;  // true: format any (oneDNN's blocked layout); false: [N, K] row-major
};

struct Result {
  double best_s, median_s;
  int calls;
  std::string impl;
};

void fill(dnnl::memory& mem, dt type, size_t count) {
  // Small values in [-1, 1): the speed of a GEMM does not depend on them, but
  // denormals or NaNs could, so none are made.
  void* p = mem.get_data_handle();
  unsigned state = 12345u;
  auto next = [&state]() {
    state = state * 1664525u + 1013904223u;
    return static_cast<float>((state >> 8) & 0xffff) / 32768.0f - 1.0f;
  };
  if (type == dt::u8 || type == dt::s8) {  // int8: codes in [-127, 127] (u8: + 128)
    auto* b = static_cast<uint8_t*>(p);
    for (size_t i = 0; i < count; ++i) b[i] = static_cast<uint8_t>(static_cast<int>(next() * 127.0f) + (type == dt::u8 ? 128 : 0));
  } else if (type == dt::f32) {
    auto* f = static_cast<float*>(p);
    for (size_t i = 0; i < count; ++i) f[i] = next();
  } else {  // bf16: the high half of the f32 bit pattern
    auto* h = static_cast<uint16_t*>(p);
    for (size_t i = 0; i < count; ++i) {
      float v = next();
      uint32_t bits;
      std::memcpy(&bits, &v, 4);
      h[i] = static_cast<uint16_t>(bits >> 16);
    }
  }
}

Result run(const Case& c, dnnl::engine& eng, dnnl::stream& strm, double seconds) {
  // int8 (the type s8 names the case): u8 activations x s8 weights -> s32, as linear_int8 runs it.
  const bool int8 = c.type == dt::s8;
  const dt a_t = int8 ? dt::u8 : c.type, c_t = int8 ? dt::s32 : c.type;
  const dnnl::memory::desc a_md({c.m, c.k}, a_t, tag::ab);
  const dnnl::memory::desc b_plain({c.k, c.n}, c.type, tag::ba);  // [N, K] row-major in memory
  const dnnl::memory::desc b_md = c.packed_weights ? dnnl::memory::desc({c.k, c.n}, c.type, tag::any) : b_plain;
  const dnnl::memory::desc c_md({c.m, c.n}, c_t, tag::ab);
  const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_md, b_md, c_md), eng);
  const dnnl::matmul mm(pd);

  dnnl::memory a(a_md, eng), b_src(b_plain, eng), dst(c_md, eng);
  fill(a, a_t, size_t(c.m) * c.k);
  fill(b_src, c.type, size_t(c.k) * c.n);
  dnnl::memory b = b_src;
  if (pd.weights_desc() != b_plain) {  // pack once, as at model load
    b = dnnl::memory(pd.weights_desc(), eng);
    dnnl::reorder(b_src, b).execute(strm, b_src, b);
    strm.wait();
  }
  auto call = [&] {
    mm.execute(strm, {{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, b}, {DNNL_ARG_DST, dst}});
    strm.wait();
  };
  call();  // warm-up: JIT, page faults, AMX tile permission
  call();
  std::vector<double> times;
  double total = 0.0;
  while (total < seconds || times.size() < 5) {
    const auto t0 = std::chrono::steady_clock::now();
    call();
    times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    total += times.back();
  }
  std::sort(times.begin(), times.end());
  return {times.front(), times[times.size() / 2], static_cast<int>(times.size()), pd.impl_info_str()};
}

// kChains independent FMA chains per thread (enough to cover FMA latency on
// two ports), iters steps; returns a value so the loop is not optimised away.
// One function per ISA, alike in shape: intrinsics only inline into a
// function compiled for their target, so a shared template body cannot hold
// them.
constexpr int kChains = 12;

__attribute__((target("avx512f"))) float fma_loop_avx512(long iters) {
  __m512 acc[kChains];
  const __m512 x = _mm512_set1_ps(0.999f), y = _mm512_set1_ps(0.001f);
  for (int i = 0; i < kChains; ++i) acc[i] = _mm512_set1_ps(static_cast<float>(i));
  for (long n = 0; n < iters; ++n)
#pragma GCC unroll 12
    for (int i = 0; i < kChains; ++i) acc[i] = _mm512_fmadd_ps(acc[i], x, y);
  float lanes[16], sum = 0.0f;  // (not _mm512_reduce_add_ps: GCC 12 warns inside its header)
  for (int i = 0; i < kChains; ++i) {
    _mm512_storeu_ps(lanes, acc[i]);
    for (float l : lanes) sum += l;
  }
  return sum;
}

__attribute__((target("avx2,fma"))) float fma_loop_avx2(long iters) {
  __m256 acc[kChains];
  const __m256 x = _mm256_set1_ps(0.999f), y = _mm256_set1_ps(0.001f);
  for (int i = 0; i < kChains; ++i) acc[i] = _mm256_set1_ps(static_cast<float>(i));
  for (long n = 0; n < iters; ++n)
#pragma GCC unroll 12
    for (int i = 0; i < kChains; ++i) acc[i] = _mm256_fmadd_ps(acc[i], x, y);
  float lanes[8], sum = 0.0f;
  for (int i = 0; i < kChains; ++i) {
    _mm256_storeu_ps(lanes, acc[i]);
    for (float l : lanes) sum += l;
  }
  return sum;
}

struct FmaPeak {
  double median, best;  // GFLOP/s over rounds of all threads at once
  const char* isa;
};

// Rounds of ~50 ms with every thread in its own FMA loop, for `seconds`.
FmaPeak fma_peak(int threads, double seconds) {
  const bool avx512 = __builtin_cpu_supports("avx512f");
  const long iters = avx512 ? 5'000'000 : 10'000'000;
  const double flop_per_thread = 2.0 * kChains * (avx512 ? 16 : 8) * static_cast<double>(iters);
  std::vector<double> rates;
  double total = 0.0, sink = 0.0;
  while (total < seconds || rates.size() < 5) {
    const auto t0 = std::chrono::steady_clock::now();
#pragma omp parallel num_threads(threads) reduction(+ : sink)
    sink += avx512 ? fma_loop_avx512(iters) : fma_loop_avx2(iters);
    const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    rates.push_back(flop_per_thread * threads / dt / 1e9);
    total += dt;
  }
  std::sort(rates.begin(), rates.end());
  if (sink == 42.0) std::fprintf(stderr, " ");  // keeps the loops' results live
  return {rates[rates.size() / 2], rates.back(), avx512 ? "avx512" : "avx2"};
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 2;
  double seconds = 1.0;
  long m_rows = 4096;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--threads") && i + 1 < argc) {
      threads = std::atoi(argv[++i]);
    } else if (!std::strcmp(argv[i], "--seconds") && i + 1 < argc) {
      seconds = std::atof(argv[++i]);
    } else if (!std::strcmp(argv[i], "--m") && i + 1 < argc) {
      m_rows = std::atol(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: %s [--threads N] [--seconds S] [--m ROWS]\n", argv[0]);
      return 2;
    }
  }
  if (threads < 1 || seconds < 0 || m_rows < 1) {
    std::fprintf(stderr, "bench_gemm_peak: --threads and --m must be >= 1, --seconds >= 0\n");
    return 2;
  }
  omp_set_num_threads(threads);  // Debian's oneDNN uses the OpenMP runtime

  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream strm(eng);
  const dnnl_version_t* v = dnnl_version();

  std::vector<Case> cases;
  for (dt type : {dt::f32, dt::bf16, dt::s8})
    for (bool packed : {true, false}) {
      cases.push_back({m_rows, 768, 3072, type, packed});
      cases.push_back({m_rows, 3072, 768, type, packed});
    }

  double peak[3] = {0, 0, 0}, burst[3] = {0, 0, 0};  // [f32, bf16, int8] (int8: GOP/s)
  auto name = [](dt t) { return t == dt::f32 ? "f32" : t == dt::bf16 ? "bf16" : "int8"; };
  std::string rows;
  for (const Case& c : cases) {
    Result r;
    try {
      r = run(c, eng, strm, seconds);
    } catch (const dnnl::error& e) {
      std::fprintf(stderr, "bench_gemm_peak: %ldx%ldx%ld %s: oneDNN: %s\n", c.m, c.k, c.n,
                   name(c.type), e.what());
      continue;
    }
    const double flop = 2.0 * c.m * c.k * c.n;
    const double g_median = flop / r.median_s / 1e9, g_best = flop / r.best_s / 1e9;
    const int d = c.type == dt::f32 ? 0 : c.type == dt::bf16 ? 1 : 2;
    peak[d] = std::max(peak[d], g_median);
    burst[d] = std::max(burst[d], g_best);
    char row[512];
    std::snprintf(row, sizeof row,
                  "%s    {\"dtype\": \"%s\", \"m\": %ld, \"k\": %ld, \"n\": %ld, \"weights\": \"%s\", "
                  "\"calls\": %d, \"median_ms\": %.3f, \"best_ms\": %.3f, \"gflops_median\": %.1f, "
                  "\"gflops_best\": %.1f, \"impl\": \"%s\"}",
                  rows.empty() ? "" : ",\n", name(c.type), c.m, c.k, c.n,
                  c.packed_weights ? "packed" : "nk-row-major", r.calls, r.median_s * 1e3, r.best_s * 1e3,
                  g_median, g_best, r.impl.c_str());
    rows += row;
  }
  std::printf("{\n  \"onednn\": \"%d.%d.%d\", \"threads\": %d, \"seconds_per_case\": %.2f,\n", v->major, v->minor,
              v->patch, threads, seconds);
  std::printf("  \"peak_gflops\": {\"f32\": %.1f, \"bf16\": %.1f, \"int8\": %.1f},\n", peak[0], peak[1], peak[2]);
  std::printf("  \"burst_gflops\": {\"f32\": %.1f, \"bf16\": %.1f, \"int8\": %.1f},\n", burst[0], burst[1], burst[2]);
  const FmaPeak fma = fma_peak(threads, seconds);
  std::printf("  \"fma_gflops\": {\"f32_median\": %.1f, \"f32_best\": %.1f, \"isa\": \"%s\"},\n", fma.median,
              fma.best, fma.isa);
  std::printf("  \"cases\": [\n%s\n  ]\n}\n", rows.c_str());
  return (peak[0] > 0 && peak[1] > 0) ? 0 : 1;
}
