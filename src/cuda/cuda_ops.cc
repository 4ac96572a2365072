// The op table on CUDA: every op checks its call with the shared op checks
// (index values are on the device: the host validated them before copying,
// see check_packed_batch), then enqueues on the compute stream. GEMMs go to
// cuBLASLt with the bias in its epilogue where offered; everything else is
// our own kernels (kernels.h).
//
// Training ops are not on the GPU yet: UnsupportedOps says so with one clear
// line.
#include "cuda/cuda_ops.h"

#include <string>

#include "backend/unsupported_ops.h"
#include "core/error.h"
#include "cpu/ref/op_checks.h"
#include "cpu/ref/relpos_checks.h"
#include "cuda/cuda_internal.h"
#include "cuda/gemm.h"
#include "cuda/kernels.h"

namespace stoke::cuda {

namespace {

using cpu::IndexData;
using Launch = CudaBackend::Impl::Launch;  // an op's launches, timed when tracing

// The ops not here (training) throw from UnsupportedOps, generated from the
// op list: "<op>: not supported on the cuda backend; training does not run on
// the GPU yet; train with --device cpu".
class CudaOps final : public UnsupportedOps {
 public:
  explicit CudaOps(CudaBackend& b)
      : UnsupportedOps("cuda", "training does not run on the GPU yet; train with --device cpu"),
        s_(b.impl()), gemm_(b.impl().lt, b.impl().gemm_workspace, b.impl().gemm_workspace_bytes) {}

  void linear(const TensorView& out, const TensorView& a, const TensorView& w, const TensorView& bias,
              Activation act) const override {
    cpu::check_linear(out, a, w, bias);
    if (w.dtype != a.dtype)
      throw Error(Errc::unsupported, "linear: on CUDA the weight must be in the activation dtype (" +
                                         std::string(dtype_name(a.dtype)) + "), not " +
                                         std::string(dtype_name(w.dtype)));
    Launch op(s_, "linear");
    const bool bias_done = gemm_.run(op.stream, out, a, w, bias);
    const TensorView left = bias_done ? TensorView{} : bias;
    if (!left.empty() || act != Activation::none) launch_bias_act(op.stream, out, left, act);
  }
  void embed_layernorm(const TensorView& out, const TensorView& ids, const TensorView& positions,
                       const TensorView& type_ids, const TensorView& word, const TensorView& pos,
                       const TensorView& type, const TensorView& gamma, const TensorView& beta, float eps,
                       const TensorView& out_low) const override {
    cpu::check_embed_layernorm(out, ids, positions, type_ids, word, pos, type, gamma, beta, eps, IndexData::device);
    cpu::check_layernorm_copy("embed_layernorm", out, out_low, {&word, &pos, &type, &gamma, &beta});
    Launch op(s_, "embed_layernorm");
    launch_embed_layernorm(op.stream, out, ids, positions, type_ids, word, pos, type, gamma, beta, eps, out_low);
  }
  void residual_layernorm(const TensorView& out, const TensorView& x, const TensorView& residual,
                          const TensorView& gamma, const TensorView& beta, float eps,
                          const TensorView& out_low) const override {
    cpu::check_residual_layernorm(out, x, residual, gamma, beta, eps);
    cpu::check_layernorm_copy("residual_layernorm", out, out_low, {&x, &residual, &gamma, &beta});
    Launch op(s_, "residual_layernorm");
    launch_residual_layernorm(op.stream, out, x, residual, gamma, beta, eps, out_low);
  }
  void bias_gelu(const TensorView& x, const TensorView& bias) const override {
    cpu::check_bias_gelu(x, bias);
    Launch op(s_, "bias_gelu");
    launch_bias_act(op.stream, x, bias, Activation::gelu_erf);
  }
  void attention(const TensorView& out, const TensorView& qkv, const TensorView& cu_seqlens, int heads,
                 int max_seqlen) const override {
    cpu::check_attention(out, qkv, cu_seqlens, heads, max_seqlen, IndexData::device);
    Launch op(s_, "attention");
    launch_attention(op.stream, out, qkv, cu_seqlens, heads, max_seqlen);
  }
  void attention_relpos(const TensorView& out, const TensorView& qkv, const TensorView& cu_seqlens, int heads,
                        int max_seqlen, const TensorView& rel) const override {
    cpu::check_attention_relpos(out, qkv, cu_seqlens, heads, max_seqlen, rel, IndexData::device);
    Launch op(s_, "attention_relpos");
    launch_attention_relpos(op.stream, out, qkv, cu_seqlens, heads, max_seqlen, rel);
  }
  void pool(const TensorView& out, const TensorView& h, const TensorView& cu_seqlens,
            PoolingMode mode) const override {
    cpu::check_pool(out, h, cu_seqlens, IndexData::device);
    Launch op(s_, "pool");
    launch_pool(op.stream, out, h, cu_seqlens, mode);
  }
  void l2_normalize(const TensorView& x) const override {
    cpu::check_l2_normalize(x);
    Launch op(s_, "l2_normalize");
    launch_l2_normalize(op.stream, x);
  }
  void gather_rows(const TensorView& out, const TensorView& h, const TensorView& rows) const override {
    cpu::check_gather_rows(out, h, rows, IndexData::device);
    Launch op(s_, "gather_rows");
    launch_gather_rows(op.stream, out, h, rows);
  }
  void slice_columns(const TensorView& out, const TensorView& in) const override {
    cpu::check_slice_columns(out, in);
    Launch op(s_, "slice_columns");
    launch_slice_columns(op.stream, out, in);
  }
  void convert(const TensorView& out, const TensorView& in) const override {
    cpu::check_convert(out, in);
    Launch op(s_, "convert");
    launch_convert(op.stream, out, in);
  }

 private:
  CudaBackend::Impl& s_;
  mutable Gemm gemm_;
};

}  // namespace

std::unique_ptr<Ops> make_cuda_ops(CudaBackend& backend) {
  attention_setup();
  return std::make_unique<CudaOps>(backend);
}

}  // namespace stoke::cuda
