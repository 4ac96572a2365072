// Every op of the CUDA op table against the CPU reference kernels (the
// oracle), over awkward sizes and every dtype, with the tolerances of the CPU
// op tests; plus the backend itself: stream order across the copy streams,
// host-sync counting, out of memory as a recoverable error, graph replay.
// On a machine without a GPU every test is skipped, saying why.
#include <cuda_runtime.h>
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <string>
#include <tuple>
#include <vector>

#include "core/error.h"
#include "cpu/kernels.h"
#include "cuda/cuda_test_support.h"
#include "cuda/flash_tiles.h"
#include "cuda/cuda_internal.h"
#include "cuda/device_errors.h"
#include "cuda/kernels.h"
#include "cuda/relpos_drel_tiles.h"

namespace stoke {
namespace {

using namespace test::cuda_support;

const cpu::Kernels& ref() { return cpu::reference_kernels(); }

std::string name_of(DType t) { return std::string(dtype_name(t)); }

// Random cu_seqlens for the given lengths.
std::vector<int32_t> offsets(const std::vector<int32_t>& lengths) {
  std::vector<int32_t> cu{0};
  for (int32_t n : lengths) cu.push_back(cu.back() + n);
  return cu;
}

TEST(CudaOps, LinearMatchesReference) {
  STOKE_REQUIRE_GPU(backend);
  Rng rng(1);
  for (DType dt : {DType::f32, DType::bf16, DType::f16})
    for (auto [M, N, K] : {std::tuple<int64_t, int64_t, int64_t>{1, 3, 16}, {7, 16, 63}, {65, 64, 64},
                           {300, 768, 128}, {33, 5, 768}, {9, 1, 64}, {1, 1, 768}})
      for (bool out_f32 : {false, true})
        for (int bias_kind : {0, 1, 2})  // none, f32, activation dtype
          for (Activation act : {Activation::none, Activation::gelu_erf, Activation::tanh}) {
            if (dt == DType::f32 && (out_f32 || bias_kind == 2)) continue;  // the same cases again
            DeviceTensors dev(*backend);
            const HostTensor a = random_tensor(rng, dt, {M, K});
            const HostTensor w = random_tensor(rng, dt, {N, K}, -0.2, 0.2);
            const HostTensor bias = bias_kind == 0 ? HostTensor{}
                                                    : random_tensor(rng, bias_kind == 1 ? DType::f32 : dt, {N});
            const DType out_t = out_f32 ? DType::f32 : dt;
            HostTensor want = host_tensor(out_t, {M, N});
            ref().linear(want.view, a.view, w.view, bias.view, act, Accumulate::no);
            const TensorView out = dev.make(out_t, {M, N});
            backend->ops().linear(out, dev.upload(a), dev.upload(w), dev.upload(bias), act, Accumulate::no);
            const HostTensor got = dev.download(out);
            const double tol = std::max(tolerance(out_t == DType::f32 ? dt : out_t),
                                        dt == DType::f32 ? 16 * 0x1.0p-24 * std::sqrt(double(K)) : 0.0);
            EXPECT_LE(relative_error(got.view, want.view), tol)
                << name_of(dt) << " M" << M << " N" << N << " K" << K << " out " << name_of(out_t) << " bias "
                << bias_kind << " act " << static_cast<int>(act);
          }
}

// The residual add folded into the GEMMs (Accumulate::yes): cuBLASLt with
// beta = 1 and C = D = the f32 destination, at the model's shapes too (where
// the heuristic may pick split-K kernels, whose reduction must still add C
// once), then the LayerNorm that reads the sum alone.
TEST(CudaOps, AccumulatingGemmsMatchReference) {
  STOKE_REQUIRE_GPU(backend);
  Rng rng(17);
  for (DType dt : {DType::f32, DType::bf16, DType::f16})
    for (auto [M, N, K] : {std::tuple<int64_t, int64_t, int64_t>{1, 3, 16}, {9, 1, 64}, {300, 768, 128},
                           {1024, 768, 3072}, {2048, 768, 768}, {33, 5, 0}})
      for (int bias_kind : {0, 1, 2}) {  // none, f32 (the epilogue), activation dtype (our kernel after)
        if (M >= 1024 && bias_kind != 1) continue;  // the model's shapes once: the reference's loops are slow
        DeviceTensors dev(*backend);
        const float w_range = std::sqrt(3.0f / static_cast<float>(std::max<int64_t>(K, 1)));
        const HostTensor a = random_tensor(rng, dt, {M, K}), w = random_tensor(rng, dt, {N, K}, -w_range, w_range);
        const HostTensor bias =
            bias_kind == 0 ? HostTensor{} : random_tensor(rng, bias_kind == 1 ? DType::f32 : dt, {N});
        const HostTensor residual = random_tensor(rng, DType::f32, {M, N}, -3, 3);
        HostTensor want = residual;
        ref().linear(want.view, a.view, w.view, bias.view, Activation::none, Accumulate::yes);
        const TensorView out = dev.upload(residual);
        backend->ops().linear(out, dev.upload(a), dev.upload(w), dev.upload(bias), Activation::none,
                              Accumulate::yes);
        const HostTensor got = dev.download(out);
        const double tol = dt == DType::f32 ? std::max(1e-5, 16 * 0x1.0p-24 * std::sqrt(double(K))) : tolerance(dt);
        EXPECT_LE(relative_error(got.view, want.view), tol)
            << "linear " << name_of(dt) << " M" << M << " N" << N << " K" << K << " bias " << bias_kind;
      }
  // linear_backward: da (f32) += dy · w, at the FFN's shapes.
  for (DType dt : {DType::f32, DType::bf16, DType::f16})
    for (auto [M, N, K] : {std::tuple<int64_t, int64_t, int64_t>{1, 70, 17}, {1024, 3072, 768}, {2048, 768, 768}}) {
      DeviceTensors dev(*backend);
      const HostTensor a = random_tensor(rng, dt, {M, K}), w = random_tensor(rng, dt, {N, K}, -0.05, 0.05);
      const HostTensor dy = random_tensor(rng, dt, {M, N}), residual = random_tensor(rng, DType::f32, {M, K}, -2, 2);
      HostTensor want = residual;
      ref().linear_backward(want.view, TensorView{}, TensorView{}, dy.view, a.view, w.view, Accumulate::yes);
      const TensorView da = dev.upload(residual);
      backend->ops().linear_backward(da, TensorView{}, TensorView{}, dev.upload(dy), dev.upload(a), dev.upload(w),
                                     Accumulate::yes);
      const HostTensor got = dev.download(da);
      const double tol = dt == DType::f32 ? std::max(1e-5, 16 * 0x1.0p-24 * std::sqrt(double(N))) : tolerance(dt);
      EXPECT_LE(relative_error(got.view, want.view), tol)
          << "linear_backward " << name_of(dt) << " M" << M << " N" << N << " K" << K;
    }
  // The trainer's mix: f32 dy against 16-bit a and w (dy rounded to 16 bits
  // for cuBLASLt), bert-base's width, with the full workspace (one chunk)
  // and with a workspace of 256 rows (three chunks, the last short: da by
  // row blocks, dw accumulated chunk after chunk), da f32 with the residual's
  // gradient in it.
  for (DType dt : {DType::bf16, DType::f16})
    for (size_t chunk_rows : {size_t{0}, size_t{256}}) {
      DeviceTensors dev(*backend);
      const int64_t M = 600, N = 768, K = 768;
      const HostTensor a = random_tensor(rng, dt, {M, K}), w = random_tensor(rng, dt, {N, K}, -0.05, 0.05);
      const HostTensor dy = random_tensor(rng, DType::f32, {M, N}), residual = random_tensor(rng, DType::f32, {M, K}, -2, 2);
      const HostTensor dw0 = random_tensor(rng, DType::f32, {N, K});
      HostTensor want_da = residual, want_dw = dw0;
      ref().linear_backward(want_da.view, want_dw.view, TensorView{}, dy.view, a.view, w.view, Accumulate::yes);
      cuda::CudaBackend::Impl& impl = backend->impl();
      const size_t full = impl.convert_workspace_bytes;
      if (chunk_rows) impl.convert_workspace_bytes = chunk_rows * static_cast<size_t>(N) * 2;
      const TensorView da = dev.upload(residual), dw = dev.upload(dw0);
      backend->ops().linear_backward(da, dw, TensorView{}, dev.upload(dy), dev.upload(a), dev.upload(w),
                                     Accumulate::yes);
      const HostTensor got_da = dev.download(da), got_dw = dev.download(dw);
      impl.convert_workspace_bytes = full;
      EXPECT_LE(relative_error(got_da.view, want_da.view), tolerance(dt))
          << "linear_backward f32 dy, " << name_of(dt) << " a/w, da, chunk rows " << chunk_rows;
      EXPECT_LE(relative_error(got_dw.view, want_dw.view), tolerance(dt))
          << "linear_backward f32 dy, " << name_of(dt) << " a/w, dw, chunk rows " << chunk_rows;
    }
  // No product of these went to the plain kernel for its operand mix (odd
  // shapes above may find no cuBLASLt algorithm; that is counted too, not here).
  for (const Backend::GemmFallback& f : backend->gemm_fallbacks())
    EXPECT_EQ(f.why.find("operand mix"), std::string::npos) << f.op << " " << f.shape << ": " << f.why;
  // residual_layernorm without a residual, on the warp rows and the block rows.
  for (int64_t H : {16, 63, 768, 1025, 2048}) {
    DeviceTensors dev(*backend);
    const int64_t T = 37;
    const HostTensor x = random_tensor(rng, DType::f32, {T, H}, -2, 3);
    const HostTensor g = random_tensor(rng, DType::f32, {H}, 0.5, 1.5), b = random_tensor(rng, DType::f32, {H});
    HostTensor want = host_tensor(DType::f32, {T, H});
    ref().residual_layernorm(want.view, x.view, TensorView{}, g.view, b.view, 1e-5f, TensorView{});
    const TensorView out = dev.make(DType::f32, {T, H});
    backend->ops().residual_layernorm(out, dev.upload(x), TensorView{}, dev.upload(g), dev.upload(b), 1e-5f,
                                      TensorView{});
    EXPECT_LE(relative_error(dev.download(out).view, want.view), 1e-5) << "residual_layernorm H" << H;
  }
}

TEST(CudaOps, LayerNormsMatchReference) {
  STOKE_REQUIRE_GPU(backend);
  Rng rng(2);
  for (DType dt : {DType::f32, DType::bf16, DType::f16})
    for (int64_t T : {1, 7, 65})
      for (int64_t H : {16, 63, 768, 1024, 1025, 2048})  // warp rows up to 1024, block rows above
        for (bool with_types : {false, true}) {
          DeviceTensors dev(*backend);
          const int64_t V = 50, P = 80, TV = 2;
          std::vector<int32_t> ids, pos, types;
          for (int64_t t = 0; t < T; ++t) {
            ids.push_back(rng.below(V));
            pos.push_back(rng.below(P));
            types.push_back(rng.below(TV));
          }
          const HostTensor hid = index_tensor(ids), hpos = index_tensor(pos),
                           htypes = with_types ? index_tensor(types) : HostTensor{};
          const HostTensor word = random_tensor(rng, DType::f32, {V, H}), pe = random_tensor(rng, DType::f32, {P, H}),
                           te = random_tensor(rng, DType::f32, {TV, H});
          const HostTensor gamma = random_tensor(rng, DType::f32, {H}, 0.5, 1.5),
                           beta = random_tensor(rng, DType::f32, {H});
          HostTensor want = host_tensor(dt, {T, H});
          ref().embed_layernorm(want.view, hid.view, hpos.view, htypes.view, word.view, pe.view, te.view,
                                gamma.view, beta.view, 1e-12f, TensorView{});
          const TensorView out = dev.make(dt, {T, H});
          backend->ops().embed_layernorm(out, dev.upload(hid), dev.upload(hpos), dev.upload(htypes), dev.upload(word),
                                         dev.upload(pe), dev.upload(te), dev.upload(gamma), dev.upload(beta), 1e-12f, TensorView{});
          EXPECT_LE(relative_error(dev.download(out).view, want.view), tolerance(dt))
              << "embed_layernorm " << name_of(dt) << " T" << T << " H" << H << " types " << with_types;

          // residual_layernorm, written over its residual input (as the encoder does).
          const HostTensor x = random_tensor(rng, dt, {T, H}, -3, 3);
          const HostTensor res = random_tensor(rng, dt, {T, H}, -3, 3);
          HostTensor want2 = host_tensor(dt, {T, H});
          ref().residual_layernorm(want2.view, x.view, res.view, gamma.view, beta.view, 1e-5f, TensorView{});
          const TensorView dres = dev.upload(res);
          // With the second copy in another dtype, as the encoder asks for it.
          const DType low_t = dt == DType::f32 ? DType::bf16 : DType::f32;
          const TensorView low = dev.make(low_t, {T, H});
          backend->ops().residual_layernorm(dres, dev.upload(x), dres, dev.upload(gamma), dev.upload(beta), 1e-5f, low);
          const HostTensor got = dev.download(dres);
          EXPECT_LE(relative_error(got.view, want2.view), tolerance(dt))
              << "residual_layernorm " << name_of(dt) << " T" << T << " H" << H;
          HostTensor low_want = host_tensor(low_t, {T, H});
          ref().convert(low_want.view, got.view);  // exactly the convert of what the GPU wrote
          EXPECT_EQ(relative_error(dev.download(low).view, low_want.view), 0.0) << "second copy " << name_of(dt);
        }
}

TEST(CudaOps, BiasGeluMatchesReference) {
  STOKE_REQUIRE_GPU(backend);
  Rng rng(3);
  for (DType dt : {DType::f32, DType::bf16, DType::f16})
    for (auto [T, N] : {std::pair<int64_t, int64_t>{1, 3}, {65, 64}, {7, 3072}}) {
      DeviceTensors dev(*backend);
      const HostTensor x = random_tensor(rng, dt, {T, N}, -4, 4);
      const HostTensor bias = random_tensor(rng, DType::f32, {N});
      HostTensor want = x;
      ref().bias_gelu(want.view, bias.view);
      const TensorView dx = dev.upload(x);
      backend->ops().bias_gelu(dx, dev.upload(bias));
      EXPECT_LE(relative_error(dev.download(dx).view, want.view), tolerance(dt)) << name_of(dt) << " " << T << "x" << N;
    }
}

// Attention: the flash path (bf16/f16, head dim <= 128, padded to 16/32/64/128)
// and the plain path (f32, or head dim > 128), over lengths around the
// 64-row tiles, empty sequences and long ones.
TEST(CudaOps, AttentionMatchesReference) {
  STOKE_REQUIRE_GPU(backend);
  Rng rng(4);
  const std::vector<std::vector<int32_t>> batches = {{1}, {3, 0, 7}, {64}, {65, 1, 130}, {512}, {17, 200, 63, 64, 2}};
  for (DType dt : {DType::f32, DType::bf16, DType::f16})
    for (int d : {16, 32, 48, 64, 100, 128, 160})
      for (int heads : {1, 3, 12}) {
        if (heads == 12 && d > 64) continue;  // enough of the big ones
        for (const auto& lengths : batches) {
          DeviceTensors dev(*backend);
          const auto cu = offsets(lengths);
          const int64_t T = cu.back();
          const int max_seqlen = *std::max_element(lengths.begin(), lengths.end());
          const HostTensor qkv = random_tensor(rng, dt, {T, 3 * int64_t{heads} * d}, -2, 2);
          const HostTensor hcu = index_tensor(cu);
          HostTensor want = host_tensor(dt, {T, int64_t{heads} * d});
          ref().attention(want.view, qkv.view, hcu.view, heads, max_seqlen, 0);
          const TensorView out = dev.make(dt, {T, int64_t{heads} * d});
          backend->ops().attention(out, dev.upload(qkv), dev.upload(hcu), heads, max_seqlen, 0);
          EXPECT_LE(relative_error(dev.download(out).view, want.view), tolerance(dt))
              << name_of(dt) << " d" << d << " heads " << heads << " T" << T << " max_seqlen " << max_seqlen;
        }
      }
}

// The flash training kernels (bf16/f16, head dim <= 128) need O(tile)
// shared memory: a 6,000-token sequence, past the exact backward's ~5,000, is
// taken, with the trainer's f32 gradients; the backward is bitwise the same
// run to run (no atomics) and finite; with a window the bf16 forward meets
// the reference (the op table checks the rest at tile-edge lengths).
TEST(CudaOps, FlashTrainingAttentionTakesLongSequencesDeterministically) {
  STOKE_REQUIRE_GPU(backend);
  Rng rng(11);
  for (DType dt : {DType::bf16, DType::f16})
    for (int window : {0, 128}) {
      SCOPED_TRACE(name_of(dt) + " window " + std::to_string(window));
      DeviceTensors dev(*backend);
      const std::vector<int32_t> lengths = {6000, 70};
      const auto cu = offsets(lengths);
      const int64_t T = cu.back();
      const int heads = 2, d = 64, max_seqlen = 6000;
      const HostTensor hqkv = random_tensor(rng, dt, {T, 3 * heads * d}, -2, 2), hcu = index_tensor(cu);
      const TensorView qkv = dev.upload(hqkv), cu_dev = dev.upload(hcu);
      const TensorView out = dev.make(dt, {T, heads * d}), lse = dev.make(DType::f32, {T, heads});
      const Ops::AttentionDropout drop{0.1f, 77, 3, 4};
      backend->ops().attention_train(out, lse, qkv, cu_dev, heads, max_seqlen, window, drop);
      const TensorView dout = dev.upload(random_tensor(rng, DType::f32, {T, heads * d}));
      std::vector<HostTensor> runs;
      for (int run = 0; run < 2; ++run) {
        const TensorView dqkv = dev.make(DType::f32, {T, 3 * heads * d});
        backend->ops().attention_backward(dqkv, dout, qkv, out, lse, cu_dev, heads, max_seqlen, window, drop);
        runs.push_back(dev.download(dqkv));
      }
      const float* a = runs[0].view.as<const float>();
      EXPECT_TRUE(std::all_of(a, a + runs[0].view.numel(), [](float v) { return std::isfinite(v); }));
      EXPECT_EQ(std::memcmp(runs[0].view.data, runs[1].view.data, runs[0].view.bytes()), 0) << "not bitwise repeatable";
      if (window && dt == DType::bf16) {  // the reference's forward: a few seconds at this length
        HostTensor want = host_tensor(dt, {T, heads * d}), want_lse = host_tensor(DType::f32, {T, heads});
        ref().attention_train(want.view, want_lse.view, hqkv.view, hcu.view, heads, max_seqlen, window, drop);
        EXPECT_LE(relative_error(dev.download(out).view, want.view), tolerance(dt));
        EXPECT_LE(relative_error(dev.download(lse).view, want_lse.view), tolerance(dt));
      }
    }
}

// Device memory of the test's own (a workspace of a chosen size), freed on scope exit.
struct DeviceBytes {
  void* p = nullptr;
  explicit DeviceBytes(size_t n) {
    if (n && cudaMalloc(&p, n) != cudaSuccess) p = nullptr;
  }
  ~DeviceBytes() {
    if (p) cudaFree(p);
  }
  DeviceBytes(const DeviceBytes&) = delete;
  DeviceBytes& operator=(const DeviceBytes&) = delete;
};

// MPNet's drel through each of its paths (src/cuda/kernels_attention_relpos.cu),
// chosen by the workspace the launcher is given: every head in one pass (the
// backend's 32 MiB: what the op table reaches), one head per pass (one
// head's partials) and the walk over tokens (no workspace), each against the
// CPU reference; the two tiled runs bit for bit equal (passes change which
// launch sums a head, not the order of its sums), every path equal to itself
// run to run. The launcher is called directly: the backend's op always
// passes its own 32 MiB workspace.
TEST(CudaOps, RelposDrelEveryPathMatchesReference) {
  STOKE_REQUIRE_GPU(backend);
  const std::vector<int32_t> lens = {130, 1, 65, 200, 64, 0};  // an empty slot last, as a graph's bucket has
  const int64_t T = std::accumulate(lens.begin(), lens.end(), int64_t{0});
  const int heads = 3, d = 40, max_len = 210;
  const int64_t slots = cuda::flash_tiles::slot_count(T, static_cast<int64_t>(lens.size()));
  const size_t one_head = static_cast<size_t>(slots * cuda::relpos_drel::row_entries(max_len)) * sizeof(float);
  DeviceBytes workspace(size_t{32} << 20);
  ASSERT_NE(workspace.p, nullptr);
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  Rng rng(11);
  for (DType at : {DType::f32, DType::bf16})
    for (float p : {0.0f, 0.1f}) {
      const Ops::AttentionDropout dropout{p, 1234, 5, 6};
      const HostTensor qkv = random_tensor(rng, at, {T, 3 * heads * d}, -2.5, 2.5);
      const HostTensor rel = random_tensor(rng, DType::f32, {2 * max_len - 1, heads}, -2, 2);
      const HostTensor dout = random_tensor(rng, at, {T, heads * d});
      const HostTensor cu = index_tensor(offsets(lens));
      HostTensor out = host_tensor(at, {T, heads * d}), lse = host_tensor(DType::f32, {T, heads});
      HostTensor want_dqkv = host_tensor(at, {T, 3 * heads * d});
      HostTensor want = host_tensor(DType::f32, {2 * max_len - 1, heads});
      ref().attention_relpos_train(out.view, lse.view, qkv.view, cu.view, heads, max_len, rel.view, dropout);
      ref().attention_relpos_backward(want_dqkv.view, want.view, dout.view, qkv.view, out.view, lse.view, cu.view,
                                      heads, max_len, rel.view, dropout);

      DeviceTensors dev(*backend);
      const TensorView d_qkv = dev.upload(qkv), d_rel = dev.upload(rel), d_dout = dev.upload(dout);
      const TensorView d_cu = dev.upload(cu), d_out = dev.upload(out), d_lse = dev.upload(lse);
      const TensorView dqkv = dev.make(at, {T, 3 * heads * d});
      backend->synchronize();  // the uploads are done before this stream reads them
      auto run = [&](size_t workspace_bytes) {
        const TensorView drel = dev.make(DType::f32, {2 * max_len - 1, heads});
        const cuda::Scratch scratch{workspace_bytes ? workspace.p : nullptr, workspace_bytes};
        cuda::launch_attention_relpos_backward(stream, scratch, dqkv, drel, d_dout, d_qkv, d_out, d_lse, d_cu, heads,
                                               max_len, d_rel, dropout);
        EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
        return dev.download(drel);
      };
      const std::string what = std::string(dtype_name(at)) + " p" + std::to_string(p);
      ASSERT_EQ(cuda::relpos_drel::heads_per_pass(slots, heads, max_len, size_t{32} << 20), heads) << what;
      ASSERT_EQ(cuda::relpos_drel::heads_per_pass(slots, heads, max_len, one_head), 1) << what;
      const HostTensor all = run(size_t{32} << 20), again = run(size_t{32} << 20);
      const HostTensor single = run(one_head), walk = run(0), walk_again = run(0);
      // drel is f32 from f32 arithmetic on every dtype's values: f32's bound.
      const double tol = tolerance(DType::f32) * 4;
      EXPECT_LE(relative_error(all.view, want.view), tol) << what << ": one pass";
      EXPECT_LE(relative_error(single.view, want.view), tol) << what << ": a head per pass";
      EXPECT_LE(relative_error(walk.view, want.view), tol) << what << ": the walk";
      EXPECT_EQ(std::memcmp(all.view.data, again.view.data, all.view.bytes()), 0) << what << ": run to run";
      EXPECT_EQ(std::memcmp(all.view.data, single.view.data, all.view.bytes()), 0) << what << ": passes of heads";
      EXPECT_EQ(std::memcmp(walk.view.data, walk_again.view.data, walk.view.bytes()), 0) << what << ": walk, run to run";
    }
  cudaStreamDestroy(stream);
}

// As the encoder's graphs call it: 40 padding rows past the last sequence
// (in none), empty sequence slots after the real ones, and max_seqlen the
// bucket's (above the longest sequence). The real rows must be exact as ever.
TEST(CudaOps, AttentionWithGraphBucketShapes) {
  STOKE_REQUIRE_GPU(backend);
  Rng rng(10);
  for (DType dt : {DType::f32, DType::bf16})
    for (int d : {16, 64}) {
      DeviceTensors dev(*backend);
      const int heads = 2;
      const int64_t C = 3 * int64_t{heads} * d, pad = 40;
      const auto cu = offsets({5, 70, 1, 0, 0, 0});
      const int64_t T = cu.back();
      const HostTensor qkv = random_tensor(rng, dt, {T + pad, C}, -2, 2);
      const HostTensor hcu = index_tensor(cu);
      TensorView real_rows = qkv.view;  // the reference sees the real rows only
      real_rows.dims[0] = T;
      HostTensor want = host_tensor(dt, {T, int64_t{heads} * d});
      ref().attention(want.view, real_rows, hcu.view, heads, 70, 0);
      const TensorView out = dev.make(dt, {T + pad, int64_t{heads} * d});
      backend->ops().attention(out, dev.upload(qkv), dev.upload(hcu), heads, 256, 0);
      HostTensor got = dev.download(out);
      got.view.dims[0] = T;
      EXPECT_LE(relative_error(got.view, want.view), tolerance(dt)) << name_of(dt) << " d" << d;
    }
}

TEST(CudaOps, PoolingAndRowOpsMatchReference) {
  STOKE_REQUIRE_GPU(backend);
  Rng rng(5);
  for (DType dt : {DType::f32, DType::bf16, DType::f16})
    for (int64_t H : {16, 63, 768}) {
      DeviceTensors dev(*backend);
      const auto cu = offsets({3, 0, 1, 70, 5});
      const int64_t T = cu.back(), B = static_cast<int64_t>(cu.size()) - 1;
      const HostTensor h = random_tensor(rng, dt, {T, H}, -3, 3);
      const HostTensor hcu = index_tensor(cu);
      const TensorView dh = dev.upload(h), dcu = dev.upload(hcu);
      for (Pooling mode : {Pooling::cls, Pooling::mean, Pooling::max, Pooling::mean_sqrt_len,
                               Pooling::lasttoken}) {
        HostTensor want = host_tensor(DType::f32, {B, H});
        ref().pool(want.view, h.view, hcu.view, mode);
        const TensorView out = dev.make(DType::f32, {B, H});
        backend->ops().pool(out, dh, dcu, mode);
        const HostTensor got = dev.download(out);
        EXPECT_LE(relative_error(got.view, want.view), 1e-6) << "pool " << static_cast<int>(mode) << " " << name_of(dt);

        // l2_normalize and slice_columns on the pooled rows (the slice of
        // what the GPU normalised: exact).
        ref().l2_normalize(want.view);
        backend->ops().l2_normalize(out);
        const HostTensor normed = dev.download(out);
        EXPECT_LE(relative_error(normed.view, want.view), 1e-6) << "l2_normalize";
        const int64_t D = std::max<int64_t>(1, H / 3);
        HostTensor cut_want = host_tensor(DType::f32, {B, D});
        ref().slice_columns(cut_want.view, normed.view);
        const TensorView cut = dev.make(DType::f32, {B, D});
        backend->ops().slice_columns(cut, out);
        EXPECT_EQ(relative_error(dev.download(cut).view, cut_want.view), 0.0) << "slice_columns";
      }
      // gather_rows into f32 (the heads) and convert between every pair: exact.
      const HostTensor rows = index_tensor({0, 3, 3, static_cast<int32_t>(T - 1)});
      HostTensor gw = host_tensor(DType::f32, {4, H});
      ref().gather_rows(gw.view, h.view, rows.view);
      const TensorView g = dev.make(DType::f32, {4, H});
      backend->ops().gather_rows(g, dh, dev.upload(rows));
      EXPECT_EQ(relative_error(dev.download(g).view, gw.view), 0.0) << "gather_rows " << name_of(dt);
      for (DType to : {DType::f32, DType::bf16, DType::f16}) {
        HostTensor cw = host_tensor(to, {T, H});
        ref().convert(cw.view, h.view);
        const TensorView c = dev.make(to, {T, H});
        backend->ops().convert(c, dh);
        EXPECT_EQ(relative_error(dev.download(c).view, cw.view), 0.0) << "convert " << name_of(dt) << " -> " << name_of(to);
      }
    }
}

// Copies and ops keep one order across the copy streams: each round's input
// is the host copy of the last round's output (pinned, both ways).
TEST(CudaBackend, WaitsAreCountedAndResultsArriveInOrder) {
  STOKE_REQUIRE_GPU(backend);
  Rng rng(7);
  const int64_t n = 1 << 24;  // 64 MiB a copy: long enough for a missing join to show
  HostTensor x = random_tensor(rng, DType::f32, {1, n}, -2, 2);
  auto pin_in = backend->allocate_host(x.view.bytes());
  auto pin_out = backend->allocate_host(x.view.bytes());
  auto dev = backend->allocate(x.view.bytes());
  const TensorView d(dev->data(), DType::f32, {1, n});
  std::memcpy(pin_in->data(), x.view.data, x.view.bytes());
  const uint64_t before = backend->host_syncs();
  // Three rounds of up, GELU, down, enqueued back to back with no wait: each
  // round uploads what the last one downloaded into the same pinned buffer,
  // so only the joins between the copy streams and the compute stream keep
  // the result right.
  for (int round = 0; round < 3; ++round) {
    backend->copy_to_device(dev->data(), round == 0 ? pin_in->data() : pin_out->data(), x.view.bytes());
    backend->ops().bias_gelu(d, TensorView{});
    backend->copy_to_host(pin_out->data(), dev->data(), x.view.bytes());
  }
  backend->wait(*backend->record_event());
  EXPECT_EQ(backend->host_syncs() - before, 1u);
  HostTensor want = x;
  for (int round = 0; round < 3; ++round) cpu::reference_kernels().bias_gelu(want.view, TensorView{});
  const TensorView got(pin_out->data(), DType::f32, {1, n});
  EXPECT_LE(relative_error(got, want.view), 1e-6);
}

TEST(CudaBackend, OutOfMemoryIsRecoverable) {
  STOKE_REQUIRE_GPU(backend);
  EXPECT_THROW(backend->allocate(size_t{1} << 52), OutOfMemoryError);  // 4 PiB
  // The backend still works.
  DeviceTensors dev(*backend);
  Rng rng(8);
  const HostTensor x = random_tensor(rng, DType::f32, {4, 16});
  HostTensor want = host_tensor(DType::bf16, {4, 16});
  cpu::reference_kernels().convert(want.view, x.view);
  const TensorView out = dev.make(DType::bf16, {4, 16});
  backend->ops().convert(out, dev.upload(x));
  EXPECT_EQ(relative_error(dev.download(out).view, want.view), 0.0);
}

// A capture that fails (a call the capture does not allow: here a fresh
// device allocation, which thread-local capture mode refuses) leaves no stale
// error behind: the eager run that follows works (issue 16's fix: check_cuda
// clears the thread's last error, end_capture ends the capture either way).
TEST(CudaBackend, FailedCaptureLeavesTheEagerPathWorking) {
  STOKE_REQUIRE_GPU(backend);
  Rng rng(13);
  DeviceTensors dev(*backend);
  const TensorView in = dev.make(DType::f32, {8, 64});
  const HostTensor bias = random_tensor(rng, DType::f32, {64});
  const TensorView db = dev.upload(bias);
  backend->synchronize();
  backend->begin_capture();
  bool failed = false;
  try {
    const auto fresh = backend->allocate((size_t{7} << 20) + 4096);  // a size class nothing cached
    backend->ops().bias_gelu(in, db);
  } catch (const Error&) {
    failed = true;
  }
  try {
    backend->end_capture();
  } catch (const Error&) {
    failed = true;
  }
  EXPECT_TRUE(failed) << "the capture was expected to refuse the allocation";
  // Eager: must run and be right.
  HostTensor x = random_tensor(rng, DType::f32, {8, 64}, -3, 3);
  backend->copy_to_device(in.data, x.view.data, x.view.bytes());
  backend->ops().bias_gelu(in, db);
  cpu::reference_kernels().bias_gelu(x.view, bias.view);
  EXPECT_LE(relative_error(dev.download(in).view, x.view), 1e-5);
}

// A captured graph replays the recorded ops on whatever the buffers hold then.
TEST(CudaBackend, GraphReplaysOnNewInputs) {
  STOKE_REQUIRE_GPU(backend);
  ASSERT_TRUE(backend->can_capture());
  Rng rng(9);
  DeviceTensors dev(*backend);
  const TensorView in = dev.make(DType::f32, {8, 64});
  const TensorView out = dev.make(DType::bf16, {8, 64});
  const HostTensor bias = random_tensor(rng, DType::f32, {64});
  const TensorView db = dev.upload(bias);
  backend->synchronize();
  backend->begin_capture();
  backend->ops().bias_gelu(in, db);
  backend->ops().convert(out, in);
  const auto graph = backend->end_capture();
  for (int round = 0; round < 2; ++round) {
    HostTensor x = random_tensor(rng, DType::f32, {8, 64}, -3, 3);
    backend->copy_to_device(in.data, x.view.data, x.view.bytes());
    backend->replay(*graph);
    HostTensor want = host_tensor(DType::bf16, {8, 64});
    cpu::reference_kernels().bias_gelu(x.view, bias.view);
    cpu::reference_kernels().convert(want.view, x.view);
    EXPECT_LE(relative_error(dev.download(out).view, want.view), 2e-2) << "round " << round;
  }
}

// cuBLASLt inside a capture (the encoder's graphs are mostly GEMMs).
TEST(CudaBackend, GraphReplaysGemms) {
  STOKE_REQUIRE_GPU(backend);
  Rng rng(11);
  DeviceTensors dev(*backend);
  const HostTensor w = random_tensor(rng, DType::bf16, {96, 64}, -0.2, 0.2);
  const HostTensor bias = random_tensor(rng, DType::f32, {96});
  const TensorView a = dev.make(DType::bf16, {40, 64});
  const TensorView out = dev.make(DType::f32, {40, 96});
  const TensorView dw = dev.upload(w), db = dev.upload(bias);
  backend->synchronize();
  backend->begin_capture();
  backend->ops().linear(out, a, dw, db, Activation::gelu_erf, Accumulate::no);
  const auto graph = backend->end_capture();
  for (int round = 0; round < 2; ++round) {
    const HostTensor x = random_tensor(rng, DType::bf16, {40, 64});
    backend->copy_to_device(a.data, x.view.data, x.view.bytes());
    backend->replay(*graph);
    HostTensor want = host_tensor(DType::f32, {40, 96});
    ref().linear(want.view, x.view, w.view, bias.view, Activation::gelu_erf, Accumulate::no);
    EXPECT_LE(relative_error(dev.download(out).view, want.view), 2e-2) << "round " << round;
  }
}

// Two AdamW steps on the GPU against torch.optim.AdamW's numbers (torch 2.15.0,
// float32; the "decay" case of tests/ops/test_ops_train.cc, made by
// tests/ops/gen_adamw_torch.py): elements 0..4 decay (weight_decay 0.01),
// 5..7 do not; lr 0.01, betas (0.9, 0.999), eps 1e-8. The gradient goes
// through the device's sum of squares and clip scale too (max_norm large:
// the coefficient is 1), as the trainer's step takes it.
TEST(CudaOps, AdamWMatchesTorchOverTwoSteps) {
  STOKE_REQUIRE_GPU(backend);
  const float p0[8] = {0.5f, -1.25f, 2.0f, 0.0f, 3.5f, -0.75f, 1e-3f, -2.5f};
  const float grads[2][8] = {{0.1f, -0.2f, 0.3f, -0.4f, 0.05f, 1.5f, -0.001f, 0.25f},
                             {-0.3f, 0.1f, 0.02f, 0.5f, -0.6f, -1.0f, 0.002f, 0.0f}};
  const float want_p[2][8] = {
      {0.489950001f, -1.23987496f, 1.98979998f, 0.00999999978f, 3.48965001f, -0.75999999f, 0.0109999003f, -2.50999999f},
      {0.494842917f, -1.23708761f, 1.98242009f, 0.00837167725f, 3.49616051f, -0.761445224f, 0.00733888801f,
       -2.51670051f}};
  DeviceTensors dev(*backend);
  HostTensor hp0 = host_tensor(DType::f32, {8});
  std::copy(p0, p0 + 8, hp0.view.as<float>());
  HostTensor zeros = host_tensor(DType::f32, {8});
  std::fill(zeros.view.as<float>(), zeros.view.as<float>() + 8, 0.0f);
  HostTensor ranges = host_tensor(DType::i64, {1, 2});
  ranges.view.as<int64_t>()[0] = 0;
  ranges.view.as<int64_t>()[1] = 5;
  HostTensor zero64 = host_tensor(DType::f64, {1});
  zero64.view.as<double>()[0] = 0.0;
  const TensorView p = dev.upload(hp0), m = dev.upload(zeros), v = dev.upload(zeros), r = dev.upload(ranges);
  for (int s = 0; s < 2; ++s) {
    HostTensor g = host_tensor(DType::f32, {8});
    std::copy(grads[s], grads[s] + 8, g.view.as<float>());
    const TensorView dg = dev.upload(g), sumsq = dev.upload(zero64), scale = dev.make(DType::f32, {1});
    backend->ops().sum_squares(sumsq, dg);
    backend->ops().clip_scale(scale, sumsq, 1e6f);
    Ops::AdamWStep hp;
    hp.step = s + 1;
    hp.lr = 1e-2;
    hp.weight_decay = 0.01;
    backend->ops().adamw(p, dg, m, v, r, scale, TensorView{}, hp);
    HostTensor want = host_tensor(DType::f32, {8});
    std::copy(want_p[s], want_p[s] + 8, want.view.as<float>());
    EXPECT_LE(relative_error(dev.download(p).view, want.view), 1e-5) << "step " << s + 1;
  }
}

// MPNet's relative-position training ops, the last ones CUDA lacked, are
// there: a malformed call meets the shared shape check, not a refusal (the op
// table compares their results with the reference).
TEST(CudaBackend, RelposTrainingOpsAreOnTheGpu) {
  STOKE_REQUIRE_GPU(backend);
  try {
    backend->ops().attention_relpos_train(TensorView{}, TensorView{}, TensorView{}, TensorView{}, 0, 0, TensorView{},
                                          Ops::AttentionDropout{});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(e.code(), Errc::unsupported) << e.what();
  }
}

// After a sticky fault every later CUDA case fails, naming the fault and
// the op it followed, instead of skipping as if there were no GPU (the hook
// injects one: no GPU needed, so CI runs this too).
void require_gpu_for_a_case() { STOKE_REQUIRE_GPU(backend); }

TEST(CudaBackend, CasesAfterAStickyFaultFailNamingIt) {
  cuda::note_sticky_fault({cuda::cuda_code::illegal_address, "cudaErrorIllegalAddress", "cudaEventSynchronize",
                           "attention_backward"});
  EXPECT_FATAL_FAILURE(require_gpu_for_a_case(),
                       "cudaErrorIllegalAddress (700), reported by cudaEventSynchronize after the op attention_backward");
  const std::string why = cuda::unavailable_reason();
  cuda::clear_sticky_fault_for_tests();
  EXPECT_NE(why.find("error state"), std::string::npos) << why;
  EXPECT_EQ(why.find("rebuild"), std::string::npos) << why;
}

}  // namespace
}  // namespace stoke
