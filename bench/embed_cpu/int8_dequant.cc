// How linear_int8 applies the per-row activation scale: measured, not assumed
// (src/cpu/fast/fast_linear_int8.cc keeps the faster).
//
//   bench_int8_dequant [--threads N] [--seconds S] [--m ROWS]
//
// oneDNN 2.6 takes output scales per tensor or per column only, so a per-row
// scale needs one of:
//   fused: u8 x s8 -> s32 matmul, then one pass of ours over the s32 result
//          (zero-point correction, row x column scale, bias, GELU) in place;
//   postop: u8 x s8 -> f32 matmul with per-column output scales and binary
//          post-ops: + [1,N] (the zero-point correction), x [M,1] (the row
//          scale), + [1,N] (bias), then eltwise GELU — all in oneDNN's epilogue.
// Both on the BERT FFN and attention shapes at MiniLM-L6 and bert-base sizes;
// prints one JSON object with the median ms of each and oneDNN's impl names.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

#include "cpu/fast/fast_math.h"  // stoke's vectorisable GELU, as the kernel runs it

namespace {

using dt = dnnl::memory::data_type;
using md = dnnl::memory::desc;

double median_ms(const std::function<void()>& call, double seconds) {
  call();
  call();
  std::vector<double> t;
  double total = 0;
  while (total < seconds || t.size() < 5) {
    const auto t0 = std::chrono::steady_clock::now();
    call();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    total += t.back();
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2] * 1e3;
}

__attribute__((target_clones("arch=x86-64-v4", "default"))) void dequant_row(int32_t* acc, float* out, float s,
                                                                               const float* ws, const int32_t* zr,
                                                                               const float* b, long n_cols) {
  for (long n = 0; n < n_cols; ++n) {
    const float v = s * ws[n] * static_cast<float>(acc[n] - zr[n]) + b[n];
    out[n] = stoke::cpu::fast::gelu_erf_approx(v);
  }
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 2;
  double seconds = 0.5;
  long M = 2048;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--threads") && i + 1 < argc) threads = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--seconds") && i + 1 < argc) seconds = std::atof(argv[++i]);
    else if (!std::strcmp(argv[i], "--m") && i + 1 < argc) M = std::atol(argv[++i]);
    else {
      std::fprintf(stderr, "usage: %s [--threads N] [--seconds S] [--m ROWS]\n", argv[0]);
      return 2;
    }
  }
  omp_set_num_threads(threads);
  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream strm(eng);
  const long shapes[][2] = {{384, 1536}, {1536, 384}, {384, 1152}, {768, 3072}, {3072, 768}, {768, 2304}};  // K, N
  std::printf("{\"threads\": %d, \"m\": %ld, \"cases\": [\n", threads, M);
  for (size_t si = 0; si < std::size(shapes); ++si) {
    const long K = shapes[si][0], N = shapes[si][1];
    std::vector<uint8_t> a(static_cast<size_t>(M * K));
    std::vector<int8_t> w(static_cast<size_t>(N * K));
    for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<uint8_t>(1 + (i * 7919) % 254);
    for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<int8_t>(static_cast<int>((i * 104729) % 255) - 127);
    std::vector<float> ws(N, 1e-3f), bias(N, 0.01f), rs(M, 2e-2f), zfix(N), out(static_cast<size_t>(M * N));
    std::vector<int32_t> zr(N, 128 * 3);
    for (long n = 0; n < N; ++n) zfix[n] = -static_cast<float>(zr[n]) * ws[n];
    const md a_md({M, K}, dt::u8, {K, 1}), w_md({K, N}, dt::s8, {1, K});

    // fused: s32 out, then our pass
    const md s32_md({M, N}, dt::s32, {N, 1});
    dnnl::matmul mm_s32(dnnl::matmul::primitive_desc(dnnl::matmul::desc(a_md, w_md, s32_md), eng));
    std::vector<int32_t> acc(static_cast<size_t>(M * N));
    dnnl::memory am(a_md, eng, a.data()), wm(w_md, eng, w.data()), sm(s32_md, eng, acc.data());
    const double fused_ms = median_ms(
        [&] {
          mm_s32.execute(strm, {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, wm}, {DNNL_ARG_DST, sm}});
          strm.wait();
#pragma omp parallel for schedule(static)
          for (long m = 0; m < M; ++m)
            dequant_row(acc.data() + m * N, out.data() + m * N, rs[m], ws.data(), zr.data(), bias.data(), N);
        },
        seconds);
    const double gemm_ms = median_ms(
        [&] {
          mm_s32.execute(strm, {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, wm}, {DNNL_ARG_DST, sm}});
          strm.wait();
        },
        seconds);

    // postop: f32 out, oneDNN's epilogue does it all
    const md f32_md({M, N}, dt::f32, {N, 1}), col_md({1, N}, dt::f32, {N, 1}), row_md({M, 1}, dt::f32, {1, 1});
    dnnl::primitive_attr attr;
    attr.set_output_scales(2, ws);
    dnnl::post_ops po;
    po.append_binary(dnnl::algorithm::binary_add, col_md);
    po.append_binary(dnnl::algorithm::binary_mul, row_md);
    po.append_binary(dnnl::algorithm::binary_add, col_md);
    po.append_eltwise(1.0f, dnnl::algorithm::eltwise_gelu_erf, 0.0f, 0.0f);
    attr.set_post_ops(po);
    double post_ms = -1;
    std::string post_impl = "unsupported";
    try {
      const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_md, w_md, f32_md), attr, eng);
      post_impl = pd.impl_info_str();
      // oneDNN's reference kernels take seconds a call here: named, not timed.
      if (post_impl.rfind("ref", 0) == 0) throw dnnl::error(dnnl_unimplemented, "only a reference implementation");
      dnnl::matmul mm_post(pd);
      dnnl::memory om(f32_md, eng, out.data()), zm(col_md, eng, zfix.data()), rm(row_md, eng, rs.data()),
          bm(col_md, eng, bias.data());
      post_ms = median_ms(
          [&] {
            mm_post.execute(strm, {{DNNL_ARG_SRC, am},
                                   {DNNL_ARG_WEIGHTS, wm},
                                   {DNNL_ARG_DST, om},
                                   {DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1, zm},
                                   {DNNL_ARG_ATTR_MULTIPLE_POST_OP(1) | DNNL_ARG_SRC_1, rm},
                                   {DNNL_ARG_ATTR_MULTIPLE_POST_OP(2) | DNNL_ARG_SRC_1, bm}});
            strm.wait();
          },
          seconds);
    } catch (const dnnl::error& e) {
      post_impl += std::string(" (not timed: ") + e.what() + ")";
    }
    std::printf("%s  {\"k\": %ld, \"n\": %ld, \"gemm_s32_ms\": %.3f, \"fused_ms\": %.3f, \"postop_ms\": %.3f, "
                "\"gemm_impl\": \"%s\", \"postop_impl\": \"%s\"}",
                si ? ",\n" : "", K, N, gemm_ms, fused_ms, post_ms,
                dnnl::matmul::primitive_desc(dnnl::matmul::desc(a_md, w_md, s32_md), eng).impl_info_str(),
                post_impl.c_str());
    std::fflush(stdout);
  }
  std::printf("\n]}\n");
  return 0;
}
