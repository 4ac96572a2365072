// The flash-style training attention (kernels_attention_flash_train.cu): the
// tensor-core path of attention_train / attention_backward and MPNet's
// attention_relpos_train / _backward for bf16 and f16 with head dim <= 128.
// The exact kernels (kernels_attention_exact.cuh) keep f32, d > 128 and
// other dtype mixes. The launchers in kernels_attention.cu and
// kernels_attention_relpos.cu ask flash_train_takes first.
#pragma once

#include <cuda_runtime.h>

#include <initializer_list>

#include "backend/ops.h"
#include "cuda/kernels.h"

namespace stoke::cuda {

// Once per device (beside attention_setup): the kernels' dynamic shared
// memory attributes, and the largest head dim whose kernels fit.
void attention_train_setup();

// Whether the flash kernels take a call: qkv and out of one 16-bit dtype,
// the gradients given (dout and dqkv for the backward) of that dtype or f32
// (the trainer's), and a head dim the device's shared memory holds (<= 128
// on Hopper/A100).
bool flash_train_takes(const TensorView& qkv, const TensorView& out, int heads,
                       std::initializer_list<const TensorView*> grads = {});

// out (activation dtype), lse[T, heads] (f32): as attention_train; window
// 0 for none; rel: MPNet's bias rel[2 * max_seqlen - 1, heads] (f32), or
// null. A packed batch with B >= 1, T > 0.
void launch_flash_attention_train(cudaStream_t s, const TensorView& out, const TensorView& lse,
                                  const TensorView& qkv, const TensorView& cu_seqlens, int heads, int window,
                                  const float* rel, int max_seqlen, const Ops::AttentionDropout& dropout);

// dqkv written in full (every real row): as attention_backward; dout and
// dqkv in qkv's dtype or f32 (rel as above; MPNet's drel is
// kernels_attention_relpos.cu's, after this). With scratch room for T x heads
// floats, D = dout . out is computed once per (token, head) there, before
// the dK/dV and dQ kernels read it; else where it is used.
void launch_flash_attention_backward(cudaStream_t s, const TensorView& dqkv, const TensorView& dout,
                                     const TensorView& qkv, const TensorView& out, const TensorView& lse,
                                     const TensorView& cu_seqlens, int heads, int window, const float* rel,
                                     int max_seqlen, const Ops::AttentionDropout& dropout,
                                     const Scratch& scratch = {});

}  // namespace stoke::cuda
