// THE OP LIST: every op of the op table, declared once, with its contract.
// Everything else that repeats an op's signature is generated from this list:
// the Ops interface (backend/ops.h), the "not supported on this backend"
// defaults (backend/unsupported_ops.h), the CPU kernel table filled by name
// and the ref/fast kernel declarations (cpu/kernels.h), the CPU backend's
// forwarding onto its executor (cpu/cpu_backend.cc), and the op test table's
// "every op has a case" check (tests/ops/test_op_table.cc). Adding an op:
// docs/ops.md.
//
// An X-macro list: the includer defines
//   STOKE_OP(name, (parameters), (arguments))
// includes this file, and undefines it. No include guard on purpose: it is
// expanded once per use. Parameter types are written as they read in
// namespace stoke (Ops::AttentionDropout, Ops::DropoutStep, Ops::AdamWStep, Ops::EmbeddingLoss, Ops::SpladePool are declared in
// backend/ops.h before any expansion).
//
// A backend's ops are ENQUEUED on its stream: a call returns at once and the
// work runs in order with the backend's copies and events. The model code
// calls only these, so it runs unchanged on any backend.
//
// Conventions for all ops:
// - activations are f32, bf16 or f16 (all of one call's activations share a
//   dtype); weights and biases are f32 or the activation dtype; GEMM
//   accumulation and softmax statistics are at least f32; LayerNorm rows and
//   statistics, pooling sums and the sums over attention keys keep more
//   where f32 loses digits on a trained model's activations (means in the
//   hundreds, runs of one token: double, or f32 in short blocks; tests/ops
//   "activations of trained models");
// - token-wise tensors are packed: [T, ...] with T = total real tokens of the
//   batch, sequence b owning rows [cu_seqlens[b], cu_seqlens[b+1]); no padding;
// - index tensors (ids, positions, type ids, cu_seqlens, rows) are int32.
#ifndef STOKE_OP
#error "define STOKE_OP(name, params, args) before including backend/op_list.h"
#endif

// --- inference

// out[M,N] = act(a[M,K] · w[N,K]^T + bias[N]); w in nn.Linear layout
// ([out_features, in_features]); bias may be empty. out is in a's dtype or
// f32 (a low-precision GEMM writing into the f32 residual stream).
// acc = Accumulate::yes adds instead: out[M,N] += a·w^T + bias, the residual
// add folded into the GEMM (out holds the residual stream before the call).
// Only for an f32 out and Activation::none (the residual stream is f32 and
// a residual branch ends without an activation; cuBLASLt's epilogue would
// apply an activation after the add); anything else is refused.
STOKE_OP(linear,
         (const TensorView& out, const TensorView& a, const TensorView& w, const TensorView& bias, Activation act,
          Accumulate acc),
         (out, a, w, bias, act, acc))

// The int8 linear (--precision int8 on the CPU): out[M,N] (f32) =
// act(dequant(q(a) · wq^T) + bias[N]). a[M,K] f32; wq[N,K] i8, quantized per
// output channel n with scale wq_meta[0,n]; wq_meta[2,N] f32 holds those
// scales (row 0) and the exact row sums of wq (row 1, sum_k wq[n,k]); bias
// f32 or empty. Each row m of a is quantized dynamically, asymmetrically,
// in f32 arithmetic (cpu/int8_rows.h): lo = min(0, min_k a), hi = max(0,
// max_k a), inv = L / (hi - lo), scale s = (hi - lo) / L, zero point z =
// round(-lo * inv), q = clamp(round(a * inv) + z, 0, L) as u8 (rounding to
// nearest even; a zero row has s = 0, z = 0, q = 0). The products sum
// exactly in int32, acc = sum_k q wq, and out = act(s * wq_meta[0,n] *
// (acc - z * wq_meta[1,n]) + bias[n]). L is the CPU's activation code
// (cpu::cpu_int8_activation_code): 255 with VNNI or AMX; 127 without —
// 7-bit activations, so the u8 x s8 pair sums of the non-VNNI instruction
// (vpmaddubsw) stay below 2^15 and never saturate. K * 255 * 127 must fit in
// int32 (K < 66000).
STOKE_OP(linear_int8,
         (const TensorView& out, const TensorView& a, const TensorView& wq, const TensorView& wq_meta,
          const TensorView& bias, Activation act),
         (out, a, wq, wq_meta, bias, act))

// out[T,H] = LayerNorm(word[ids[t]] + pos[positions[t]] + type[type_ids[t]]) * gamma + beta.
// type_ids may be empty (all zero). out_low (may be empty): a second copy
// of out in another activation dtype, exactly convert(out_low, out) — the
// next GEMM's input written in the same pass (no convert pass).
STOKE_OP(embed_layernorm,
         (const TensorView& out, const TensorView& ids, const TensorView& positions, const TensorView& type_ids,
          const TensorView& word, const TensorView& pos, const TensorView& type, const TensorView& gamma,
          const TensorView& beta, float eps, const TensorView& out_low),
         (out, ids, positions, type_ids, word, pos, type, gamma, beta, eps, out_low))

// out[T,H] = LayerNorm(x + residual) * gamma + beta; out may alias x or
// residual. residual may be empty (out = LayerNorm(x) * gamma + beta: x
// already holds the sum, added by an accumulating linear). out_low (may be
// empty) as for embed_layernorm.
STOKE_OP(residual_layernorm,
         (const TensorView& out, const TensorView& x, const TensorView& residual, const TensorView& gamma,
          const TensorView& beta, float eps, const TensorView& out_low),
         (out, x, residual, gamma, beta, eps, out_low))

// x[T,N] = GELU_erf(x + bias[N]), in place (for GEMMs without a fused epilogue).
STOKE_OP(bias_gelu, (const TensorView& x, const TensorView& bias), (x, bias))

// Variable-length multi-head self-attention over packed sequences.
// qkv[T, 3*heads*d] holds [q | k | v] per token (heads of d columns each);
// out[T, heads*d] = softmax(q·k^T / sqrt(d)) · v within each sequence.
// window: 0 = every query sees its whole sequence (global); w > 0 = query i
// sees only keys j of its sequence with |i - j| <= w (a sliding-window local
// layer: ModernBERT's local_attention = 2w, i.e. 128 -> w = 64). Positions are
// within the sequence, so packing never changes what a token sees.
STOKE_OP(attention,
         (const TensorView& out, const TensorView& qkv, const TensorView& cu_seqlens, int heads, int max_seqlen,
          int window),
         (out, qkv, cu_seqlens, heads, max_seqlen, window))

// attention in which a sequence's first tokens alone are keys: query i of
// sequence b (every token of it is a query) sees the keys j < key_lens[b] of
// its sequence (and |i - j| <= window with a window). key_lens[B] i32 with
// 1 <= key_lens[b] <= len_b (0 for an empty sequence), and with a window
// every query sees a key (i - window < key_lens[b]); checked where the
// lengths are host data. key_lens[b] = len_b gives attention's result.
// PyLate's ColBERT queries (model/colbert_model.h): the [MASK] expansion
// tokens past a query's text are queries, never keys.
STOKE_OP(attention_keys,
         (const TensorView& out, const TensorView& qkv, const TensorView& cu_seqlens, const TensorView& key_lens,
          int heads, int max_seqlen, int window),
         (out, qkv, cu_seqlens, key_lens, heads, max_seqlen, window))

// out[B,H] (f32) pooled from h[T,H] per sequence: cls (first token), mean,
// max, mean_sqrt_len (sum / sqrt(len)), lasttoken.
STOKE_OP(pool, (const TensorView& out, const TensorView& h, const TensorView& cu_seqlens, Pooling mode),
         (out, h, cu_seqlens, mode))

// SPLADE's pooling (sentence-transformers' SpladePooling) of a block of MLM
// logits: logits[R,V] f32 holds token rows [p.first_row, p.first_row + R) of
// the batch whose sequences cu_seqlens[B+1] delimits; with
// w(t,v) = log1p(relu(logits[t - first_row, v])) (log1p applied
// p.log1p_count times: 1 or 2), out[B,V] (f32) gets, per sequence b, the max
// (p.sum: the sum) of w(t,v) over b's tokens in the block. p.acc no: every
// row of out is written (0 where b has no token in the block: w >= 0, so 0 is
// the max's identity too); yes: out[b,v] = max(out[b,v], block max) or
// out[b,v] + block sum (block sums in double, added once). Rows of the block
// past cu_seqlens[B] belong to no sequence and are not read.
STOKE_OP(splade_pool,
         (const TensorView& out, const TensorView& logits, const TensorView& cu_seqlens, const Ops::SpladePool& p),
         (out, logits, cu_seqlens, p))

// x[B,D] (f32) rows scaled to unit L2 norm: x / max(||x||, 1e-12).
STOKE_OP(l2_normalize, (const TensorView& x), (x))

// out[B,H] = h[rows[b]] (e.g. the first token of every sequence).
STOKE_OP(gather_rows, (const TensorView& out, const TensorView& h, const TensorView& rows), (out, h, rows))

// out[B,D] = in[B, 0:D] (Matryoshka truncation of pooled vectors).
STOKE_OP(slice_columns, (const TensorView& out, const TensorView& in), (out, in))

// out = in converted element-wise between f32, bf16 and f16 (same shape).
STOKE_OP(convert, (const TensorView& out, const TensorView& in), (out, in))

// MaxSim, ColBERT's late-interaction score of one query against N documents:
// scores[n] (f32) = sum_i max_j q_i · d_j over the query's vectors q[Tq, D]
// and document n's, rows [offsets[n], offsets[n + 1]) of docs[Td, D]
// (offsets[N + 1] i32, from 0, ascending, ending at Td). q and docs f32; dot
// products and the sum over i in f32 or wider. A document without vectors
// scores 0. PyLate's colbert_scores with a documents mask (model/maxsim.h).
STOKE_OP(maxsim,
         (const TensorView& scores, const TensorView& q, const TensorView& docs, const TensorView& offsets),
         (scores, q, docs, offsets))

// --- rotary position embedding (RoPE: GTE, NomicBERT, ModernBERT, Qwen)
// x[T, C] rotated in place: the first rope.heads blocks of rope.head_dim
// columns of every row (q then k heads of a packed qkv; the v columns after
// them are not touched), by the token's position within its sequence,
// p = t - cu_seqlens[b] (restarting at 0 for every sequence). inv_freq[R/2]
// (f32) holds the frequencies, every scaling type already applied by the
// caller (model/rotary_frequencies.h); the first R columns of each head are
// rotated, the rest pass through (partial rotary; R <= head_dim, even). For
// pair i: angle = fl32(inv_freq[i] * fl32(p)) (the f32 product, as HF forms
// it), c = cos(angle) * rope.scale, s = sin(angle) * rope.scale, and the
// pair (a, b) becomes (a c - b s, b c + a s); the pair is (i, i + R/2)
// (NeoX rotate-half, HF's layout) or (2i, 2i + 1) with rope.interleaved
// (GPT-J). Computed in f32 or wider, rounded once to x's dtype.
STOKE_OP(rotary,
         (const TensorView& x, const TensorView& cu_seqlens, const TensorView& inv_freq, const Ops::Rotary& rope),
         (x, cu_seqlens, inv_freq, rope))
// Backward of rotary (the rotation is orthogonal): dx rotated in place by
// -angle, (da, db) -> (da c + db s, db c - da s), same arguments as the
// forward. Columns it does not rotate pass the gradient through unchanged.
STOKE_OP(rotary_backward,
         (const TensorView& dx, const TensorView& cu_seqlens, const TensorView& inv_freq, const Ops::Rotary& rope),
         (dx, cu_seqlens, inv_freq, rope))

// --- gated MLPs (GLU: SwiGLU, GeGLU) on the fused gate/up GEMM output
// out[T, N] = act(g) * u from x[T, 2N], the two halves side by side:
// glu.act_on_second = false reads g = x[:, 0:N], u = x[:, N:2N] (ModernBERT's
// Wi); true reads u = x[:, 0:N], g = x[:, N:2N] (GTE's up_gate_proj). act:
// silu (SwiGLU, silu(g) = g / (1 + e^-g)) or gelu_erf (GeGLU). out and x are
// activations of one dtype; computed in f32 or wider, rounded once.
STOKE_OP(glu, (const TensorView& out, const TensorView& x, const Ops::Glu& glu), (out, x, glu))
// Backward of glu: dx[T, 2N] WRITTEN in x's layout (x's dtype or f32; dx may
// be x itself) from dout[T, N] (x's dtype or f32: a trainer's f32 gradient
// of a bf16 forward) and the forward's x: dg = dout * u * act'(g),
// du = dout * act(g); silu' = s (1 + g (1 - s)) with s = sigmoid(g),
// GELU_erf' = Phi(g) + g phi(g).
STOKE_OP(glu_backward, (const TensorView& dx, const TensorView& dout, const TensorView& x, const Ops::Glu& glu),
         (dx, dout, x, glu))

// --- training: forward variants that keep what backward needs, and backward ops
// Gradients are named d<thing> after the tensor they are the gradient of.
// - Activation gradients (dx, da, dqkv, dh) are WRITTEN (=), in the dtype of
//   their tensor or f32; gather_rows_backward adds (+=, see there), and so
//   do linear_backward's da and layernorm_backward's dx when asked
//   (Accumulate::yes).
// - Parameter gradients (dw, db, dbias, dgamma, dbeta, dword, dpos, dtype)
//   are f32 and ACCUMULATED (+=), so micro-batches of one optimizer step add
//   up in place; the trainer zeroes them once per step. Any of them may be
//   empty when that parameter is frozen or absent.
// - No atomics, no float races: a backward pass is bitwise reproducible
//   run to run (at a fixed thread count; the CPU's column sums and
//   embedding scatter-adds do not depend on it at all, its GEMMs may).
// - Saved statistics (mean, rstd, lse) are f32.

// Given dy[M,N] and the forward's a[M,K], w[N,K] (out = a·w^T + bias):
// da[M,K] = dy·w (da may be empty: the first layer's input needs none),
// dw[N,K] += dy^T·a, db[N] += column sums of dy. The forward's activation
// is not undone here: pass dy already multiplied by its derivative
// (bias_gelu_backward, tanh_backward, relu_backward).
// da_acc = Accumulate::yes: da[M,K] += dy·w instead, for an f32 da only
// (the gradient of a tensor that also reached the residual path: da holds
// that path's gradient before the call); anything else is refused.
STOKE_OP(linear_backward,
         (const TensorView& da, const TensorView& dw, const TensorView& db, const TensorView& dy, const TensorView& a,
          const TensorView& w, Accumulate da_acc),
         (da, dw, db, dy, a, w, da_acc))

// residual_layernorm that also writes mean[T] and rstd[T] (f32) of the row
// x + residual (rstd = 1 / sqrt(biased variance + eps)).
STOKE_OP(residual_layernorm_train,
         (const TensorView& out, const TensorView& mean, const TensorView& rstd, const TensorView& x,
          const TensorView& residual, const TensorView& gamma, const TensorView& beta, float eps),
         (out, mean, rstd, x, residual, gamma, beta, eps))

// Backward of out = LayerNorm(s) * gamma + beta with s = x + residual
// (residual may be empty: s = x), from the forward's mean and rstd:
// dx[T,H] = ds (the gradient of x and of residual alike; dx may alias dy),
// dgamma[H] += sum_t dy * s_hat, dbeta[H] += sum_t dy.
// dx_acc = Accumulate::yes: dx[T,H] += ds instead (the residual add of a
// pre-norm backward folded in: dx holds the gradient that reached s's
// tensor along the residual path), ds rounded to f32 and then added as the
// add op does. Only for an f32 dx that does not overlap dy (dy is read
// after dx is written); anything else is refused.
STOKE_OP(layernorm_backward,
         (const TensorView& dx, const TensorView& dgamma, const TensorView& dbeta, const TensorView& dy,
          const TensorView& x, const TensorView& residual, const TensorView& mean, const TensorView& rstd,
          const TensorView& gamma, Accumulate dx_acc),
         (dx, dgamma, dbeta, dy, x, residual, mean, rstd, gamma, dx_acc))

// embed_layernorm that also writes mean[T] and rstd[T] (f32).
STOKE_OP(embed_layernorm_train,
         (const TensorView& out, const TensorView& mean, const TensorView& rstd, const TensorView& ids,
          const TensorView& positions, const TensorView& type_ids, const TensorView& word, const TensorView& pos,
          const TensorView& type, const TensorView& gamma, const TensorView& beta, float eps),
         (out, mean, rstd, ids, positions, type_ids, word, pos, type, gamma, beta, eps))

// Backward of embed_layernorm_train: the LayerNorm part as layernorm_backward
// (the summed embedding row is recomputed from the tables), then the row
// gradient is scatter-added: dword[ids[t]] += dx[t], dpos[positions[t]] +=
// dx[t], dtype[type_ids[t] or 0] += dx[t] (all f32, any may be empty).
// Tokens that share a row are summed in token order (CUDA: so too for the
// word and position tables; a type table of at most 4 rows in fixed chunks
// of tokens — deterministic either way; kernels_embedding_backward.cu).
STOKE_OP(embed_layernorm_backward,
         (const TensorView& dword, const TensorView& dpos, const TensorView& dtype, const TensorView& dgamma,
          const TensorView& dbeta, const TensorView& dy, const TensorView& ids, const TensorView& positions,
          const TensorView& type_ids, const TensorView& word, const TensorView& pos, const TensorView& type,
          const TensorView& mean, const TensorView& rstd, const TensorView& gamma),
         (dword, dpos, dtype, dgamma, dbeta, dy, ids, positions, type_ids, word, pos, type, mean, rstd, gamma))

// bias_gelu that keeps the pre-activation: pre[T,N] = x + bias (bias may be
// empty), then x = GELU_erf(pre) in place. pre has x's dtype or f32.
STOKE_OP(bias_gelu_train, (const TensorView& x, const TensorView& pre, const TensorView& bias), (x, pre, bias))

// dx[T,N] = dy * GELU_erf'(pre), GELU'(u) = Phi(u) + u phi(u);
// dbias[N] += column sums of dx (dbias may be empty). dx may alias dy.
STOKE_OP(bias_gelu_backward,
         (const TensorView& dx, const TensorView& dbias, const TensorView& dy, const TensorView& pre),
         (dx, dbias, dy, pre))

// dx = dy * (1 - y^2) for y = tanh(u), given the output y (the pooler's and
// the classification head's activation). dx may alias dy.
STOKE_OP(tanh_backward, (const TensorView& dx, const TensorView& dy, const TensorView& y), (dx, dy, y))

// dx = dy where y > 0, else 0, for y = max(u, 0), given the output y
// (DistilBERT's classification head; torch's ReLU backward, which passes no
// gradient at u = 0). dx may alias dy.
STOKE_OP(relu_backward, (const TensorView& dx, const TensorView& dy, const TensorView& y), (dx, dy, y))

// attention that also writes lse[T, heads] (f32): per token and head, the
// log of the softmax denominator, log sum_j exp(q·k_j / sqrt(d)) (before
// dropout, which does not change the denominator). Dropout on the attention
// probabilities: Ops::AttentionDropout (backend/ops.h). window as for
// attention (the sum runs over the keys the query sees).
STOKE_OP(attention_train,
         (const TensorView& out, const TensorView& lse, const TensorView& qkv, const TensorView& cu_seqlens,
          int heads, int max_seqlen, int window, const Ops::AttentionDropout& dropout),
         (out, lse, qkv, cu_seqlens, heads, max_seqlen, window, dropout))

// Backward of attention: dqkv[T, 3*heads*d] from dout[T, heads*d] and the
// forward's qkv, out and lse. P is recomputed as exp(q·k/sqrt(d) - lse);
// dV = P^T dout, dP = dout V^T, dS = P * (dP - rowsum(dout * out)),
// dQ = dS K / sqrt(d), dK = dS^T Q / sqrt(d); per sequence and head. With
// dropout (the forward's key), dV = Pd^T dout and dP = (dout V^T) * mask / (1 - p)
// for Pd = P * mask / (1 - p); rowsum(dout * out) is unchanged. window: the
// forward's (P_ij = 0 for keys outside it).
STOKE_OP(attention_backward,
         (const TensorView& dqkv, const TensorView& dout, const TensorView& qkv, const TensorView& out,
          const TensorView& lse, const TensorView& cu_seqlens, int heads, int max_seqlen, int window,
          const Ops::AttentionDropout& dropout),
         (dqkv, dout, qkv, out, lse, cu_seqlens, heads, max_seqlen, window, dropout))

// --- attention with a relative-position bias (MPNet)
// As attention / attention_train / attention_backward, with a per-head bias
// added to every score by the key's position relative to the query within
// its sequence: s_ij = q_i·k_j / sqrt(d) + rel[(j - i) + max_seqlen - 1, h].
// rel[2*max_seqlen - 1, heads] is f32 (the model gathers it from its bucket
// table: gather_rows). The backward WRITES drel (=, f32, same shape): the sum
// of the score gradients dS_ij over every (sequence, i, j) at each relative
// distance, per head; the caller scatters it into the bucket table
// (gather_rows_backward).
STOKE_OP(attention_relpos,
         (const TensorView& out, const TensorView& qkv, const TensorView& cu_seqlens, int heads, int max_seqlen,
          const TensorView& rel),
         (out, qkv, cu_seqlens, heads, max_seqlen, rel))
STOKE_OP(attention_relpos_train,
         (const TensorView& out, const TensorView& lse, const TensorView& qkv, const TensorView& cu_seqlens,
          int heads, int max_seqlen, const TensorView& rel, const Ops::AttentionDropout& dropout),
         (out, lse, qkv, cu_seqlens, heads, max_seqlen, rel, dropout))
STOKE_OP(attention_relpos_backward,
         (const TensorView& dqkv, const TensorView& drel, const TensorView& dout, const TensorView& qkv,
          const TensorView& out, const TensorView& lse, const TensorView& cu_seqlens, int heads, int max_seqlen,
          const TensorView& rel, const Ops::AttentionDropout& dropout),
         (dqkv, drel, dout, qkv, out, lse, cu_seqlens, heads, max_seqlen, rel, dropout))

// Backward of gather_rows: dh[rows[b]] += dout[b]. ADDS: the caller zeroes
// dh (or passes the gradient the rest of the graph already wrote there).
// Repeated rows add up in b order.
STOKE_OP(gather_rows_backward, (const TensorView& dh, const TensorView& dout, const TensorView& rows),
         (dh, dout, rows))

// Backward of pool: dh[T,H] WRITTEN in full (tokens the pooling did not read
// get 0) from dout[B,H] (f32). h is read by max only (the gradient goes to
// the first token holding the maximum, per column); it may be empty for
// the other modes.
STOKE_OP(pool_backward,
         (const TensorView& dh, const TensorView& dout, const TensorView& h, const TensorView& cu_seqlens,
          Pooling mode),
         (dh, dout, h, cu_seqlens, mode))

// y += x element-wise (same shape; activations of any dtype, added in f32,
// rounded once to y's dtype): where a gradient reaches one tensor along two
// paths — the residual and the branch of a post-LN block.
STOKE_OP(add, (const TensorView& y, const TensorView& x), (y, x))

// --- training: dropout, loss, optimizer
// All of these run on the stream without a host read: losses and metrics
// accumulate in device buffers, and gradient clipping reads its scale from
// device memory. Parameters, gradients and optimizer state are f32.

// out = x * mask / (1 - p) element-wise (x, out: activations of one dtype,
// same shape; out may be x). mask[i] = (uniform_i >= p), uniform_i drawn by
// Philox4x32-10 from (seed, step, tensor_id, row_offset * W + i) in the
// layout of core/philox.h (i the flat index, W = numel / dim(0) the elements
// of one row), so every backend draws the same mask. row_offset: the rows
// that precede x in the whole batch's tensor — a batch split by rows (data
// parallelism: each rank a slice) draws the whole batch's mask with each
// part's first row as its offset; 0 for a whole batch. The product is one
// f32 multiply by the f32 scale 1 / (1 - p), rounded once to out's dtype.
// p in [0, 1]: p = 0 copies x; p = 1 writes zeros. step: Ops::DropoutStep
// (a host value, or a u32 [1] the op reads from device memory when it runs).
STOKE_OP(dropout,
         (const TensorView& out, const TensorView& x, float p, uint64_t seed, const Ops::DropoutStep& step,
          uint32_t tensor_id, uint64_t row_offset),
         (out, x, p, seed, step, tensor_id, row_offset))

// dx = dy * mask / (1 - p) with the mask of the forward call with the same
// (p, seed, step, tensor_id, row_offset) and shape, recomputed (no mask is stored).
STOKE_OP(dropout_backward,
         (const TensorView& dx, const TensorView& dy, float p, uint64_t seed, const Ops::DropoutStep& step,
          uint32_t tensor_id, uint64_t row_offset),
         (dx, dy, p, seed, step, tensor_id, row_offset))

// Softmax cross-entropy, forward and backward in one pass, as
// torch.nn.functional.cross_entropy(logits, labels, label_smoothing=eps):
//   loss_b = (1 - eps) * -log p[b, labels[b]] + eps * mean_c(-log p[b, c])
//   dlogits[b, c] = scale * (p[b, c] - (1 - eps) * [c == labels[b]] - eps / C)
// logits[B,C] f32, labels[B] i32 in [0, C), dlogits[B,C] f32 (written; may be
// logits itself, or empty for evaluation). scale is the loss's weight: 1/B
// for torch's mean, 1/(K*B) for K accumulated micro-batches of B.
// metrics[3] f64 (may be empty) ACCUMULATES {sum_b loss_b (unscaled), number
// of rows whose argmax (first maximum) is the label, B}; the host reads it
// at logging steps only. f64 keeps the counts exact and the sums precise
// over a whole epoch.
STOKE_OP(cross_entropy,
         (const TensorView& dlogits, const TensorView& metrics, const TensorView& logits, const TensorView& labels,
          float label_smoothing, float scale),
         (dlogits, metrics, logits, labels, label_smoothing, scale))

// Regression (num_labels == 1), torch's MSELoss: loss_b = (pred[b] -
// target[b])^2, dpred[b] = scale * 2 * (pred[b] - target[b]). pred[B,1] f32,
// target[B] f32, dpred[B,1] f32 (may be pred, or empty). metrics[3] f64 (may
// be empty) accumulates {sum_b loss_b, 0, B}.
STOKE_OP(mse_loss,
         (const TensorView& dpred, const TensorView& metrics, const TensorView& pred, const TensorView& target,
          float scale),
         (dpred, metrics, pred, target, scale))

// The contrastive losses of sentence embeddings (sentence-transformers 6.2's;
// the choice and its knobs: Ops::EmbeddingLoss, backend/ops.h), forward and
// backward in one call. emb[groups*B, D] f32: B anchors, then B positives,
// then each group of B negatives (B = rows / groups; rows not divisible by
// groups, or B = 0, is refused). u_i = the first d columns of row i (d =
// loss.dims, or D where that is 0), scaled to x / max(||x||, 1e-12) when
// loss.normalize; s(i, j) = u_i . u_j.
//   mnrl: z_bj = scale * s(a_b, cand_j) over the M = (groups - 1) * B
//     candidate rows [B, groups*B) (anchor b's positive is candidate b);
//     L = mean_b (logsumexp_j z_bj - z_bb). groups >= 2.
//   mnrl_symmetric: also d2q_bc = scale * s(positive_b, a_c) over the B
//     anchors c (negatives enter q2d only); L = mean_b ((lse_j z_bj +
//     lse_c d2q_bc) / 2 - z_bb). groups >= 2.
//   cosent: groups == 2; s_b = scale * s(a_b, p_b); L = log(1 + sum over
//     pairs (i, j) with scores[i] < scores[j] of exp(s_i - s_j)).
//   cosine_mse: groups == 2, normalize only; L = mean_b (s(a_b, p_b) - scores[b])^2.
// d_emb[groups*B, D] f32 (may be empty: evaluation, the loss only)
// ACCUMULATES: d_emb += grad_scale * weight * dL/d emb, back through the
// similarity, the normalization and the truncation (columns >= d get
// nothing). scores[B] f32: the pair labels, required for cosent and
// cosine_mse, empty for the mnrl kinds. workspace: f32 of at least
// embedding_loss_workspace_floats(B, groups, d) elements, 8-byte aligned;
// its contents are scratch, before and after. metrics[3] f64 (may be empty)
// ACCUMULATES metrics[0] += weight * L * B and, when loss.count, metrics[1]
// += the anchors whose q2d row z_b. has its first maximum at its own
// positive (mnrl kinds; 0 for cosent and cosine_mse), metrics[2] += B.
// No tensor overlaps another. Softmax statistics and sums are in double
// where f32 would lose digits on trained models' embeddings (large, nearly
// parallel rows).
STOKE_OP(embedding_loss,
         (const TensorView& d_emb, const TensorView& metrics, const TensorView& emb, const TensorView& scores,
          const TensorView& workspace, const Ops::EmbeddingLoss& loss),
         (d_emb, metrics, emb, scores, workspace, loss))

// out[1] (f64 or f32) += sum_i x_i^2 over x of any shape (f32, bf16, f16),
// summed in double in a fixed order (the same for any thread count). Zero
// out first (an enqueued copy) to start a new sum.
STOKE_OP(sum_squares, (const TensorView& out, const TensorView& x), (out, x))

// scale[1] f32 = min(1, max_norm / (sqrt(sumsq[0]) + 1e-6)), torch's
// clip_grad_norm_ coefficient (norm and coefficient in f32 as torch has
// them; a NaN norm gives a NaN scale, as in torch). sumsq[1] f64 or f32.
STOKE_OP(clip_scale, (const TensorView& scale, const TensorView& sumsq, float max_norm), (scale, sumsq, max_norm))

// --- f16 training's dynamic loss scale (torch.amp.GradScaler), on the device.
// scaler[kSlots] f64 is the state (Ops::LossScaler, backend/ops.h: scale,
// growth tracker, found-inf flag, skipped and taken steps). A step: the
// loss gradient times the scale (loss_scale_multiply), backward, [the
// data-parallel gradient sum], loss_scale_unscale, clipping on the unscaled
// gradients, adamw with the scaler (skipped on an inf/NaN), then
// loss_scale_update. No host read anywhere.

// x *= scale element-wise: x (f32, bf16 or f16, any shape) times the f32
// value scaler[kScale], the product in f32 rounded once to x's dtype. The
// loss gradient (dlogits) before backward, so every gradient of the
// backward carries the scale (torch: (loss * scale).backward()).
STOKE_OP(loss_scale_multiply, (const TensorView& x, const TensorView& scaler), (x, scaler))

// torch's _amp_foreach_non_finite_check_and_unscale_ on one tensor: every
// element of g (f32, bf16 or f16, any shape) times inv = f32(1 / double(scale))
// (backend/loss_scale_rule.h inverse_loss_scale), in f32, rounded once to g's
// dtype; scaler[kFoundInf] = 1 when an element was inf or NaN before the
// multiply. The flag is only ever set here, never cleared (calls over
// several tensors OR into it): loss_scale_update clears it.
STOKE_OP(loss_scale_unscale, (const TensorView& g, const TensorView& scaler), (g, scaler))

// torch._amp_update_scale_ (backend/loss_scale_rule.h update_loss_scaler) from
// scaler[kFoundInf]: an inf/NaN backs the scale off (scale * backoff_factor,
// tracker 0, skipped_steps + 1); a clean step counts (optimizer_steps + 1)
// and the growth_interval-th clean step in a row grows the scale by
// growth_factor (unless that is not finite) and restarts the tracker. Then
// found_inf = 0 for the next step. growth_factor > 1, backoff_factor in
// (0, 1), growth_interval >= 1.
STOKE_OP(loss_scale_update,
         (const TensorView& scaler, float growth_factor, float backoff_factor, int growth_interval),
         (scaler, growth_factor, backoff_factor, growth_interval))

// One AdamW step of a parameter group, torch.optim.AdamW semantics (the
// hyperparameters: Ops::AdamWStep, backend/ops.h). p, g, m, v: f32 of equal
// element count (flat buffers; any shape). scaler: empty, or f16 training's
// loss-scaler state (above): when its found_inf is 1 the step is skipped —
// nothing is written, p, m and v keep their bits — and otherwise t is
// scaler[kOptimizerSteps] + 1 (the steps taken before this one; hp.step is
// not read), so a skipped step does not advance t, as torch's AdamW whose
// step() the GradScaler did not call. For every element, with
// s = grad_scale[0] (f32 on device; empty = 1):
//   g' = s * g
//   p  = p * (1 - lr * weight_decay)           only where decay applies
//   m  = beta1 * m + (1 - beta1) * g'    (as torch: m + (1 - beta1) * (g' - m))
//   v  = beta2 * v + (1 - beta2) * g'^2
//   p -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
// decay_ranges[R,2] i64: sorted, disjoint [begin, end) element ranges where
// weight decay applies (the per-tensor decay flags of the group, merged); an
// unset view (TensorView{}, rank 0) = decay applies everywhere, R = 0 rows =
// nowhere. g is read, never written. hp.device (f64 [2] = {t, lr}, may be
// empty): t and lr read from device memory when the op runs, in place of
// hp.step and hp.lr (a replayed optimizer-step graph); with a scaler, t is
// still the scaler's. The coefficients are formed from them in double.
STOKE_OP(adamw,
         (const TensorView& p, const TensorView& g, const TensorView& m, const TensorView& v,
          const TensorView& decay_ranges, const TensorView& grad_scale, const TensorView& scaler,
          const Ops::AdamWStep& hp),
         (p, g, m, v, decay_ranges, grad_scale, scaler, hp))

// --- decoder embedders (Qwen2, Qwen3): pre-norm RMSNorm and grouped-query
// attention. Inference only (decoder fine-tuning is out of scope).

// The pre-norm residual step: h[T,H] += x (x may be empty: h as it is), then
// out[T,H] = h / sqrt(mean(h^2) + eps) * gamma[H] (RMSNorm, statistics in
// f32). h, x, out: activations of any dtype each (the residual stream is f32,
// the GEMM inputs may be lower); gamma f32 or out's dtype. out may be h
// itself (same dtype: normalised in place); otherwise no tensor overlaps.
STOKE_OP(residual_rmsnorm,
         (const TensorView& h, const TensorView& out, const TensorView& x, const TensorView& gamma, float eps),
         (h, out, x, gamma, eps))

// RMSNorm of every q and k head in place, over its d columns (Qwen3's q_norm
// and k_norm, before rotary): qkv[T, (heads + 2*kv_heads)*d] as
// attention_gqa reads it; q heads scaled by q_gamma[d], k heads by
// k_gamma[d] (f32 or qkv's dtype); v is not touched.
STOKE_OP(head_rmsnorm,
         (const TensorView& qkv, const TensorView& q_gamma, const TensorView& k_gamma, int heads, int kv_heads,
          float eps),
         (qkv, q_gamma, k_gamma, heads, kv_heads, eps))

// Grouped-query attention over packed sequences. qkv[T, (heads +
// 2*kv_heads)*d] holds [q (heads) | k (kv_heads) | v (kv_heads)] per token,
// heads a multiple of kv_heads; query head h reads k/v head h / (heads /
// kv_heads). out[T, heads*d] = softmax(q·k^T / sqrt(d)) · v within each
// sequence; causal: query i sees keys 0..i of its own sequence only. d need
// not be hidden / heads (Qwen3's head_dim).
STOKE_OP(attention_gqa,
         (const TensorView& out, const TensorView& qkv, const TensorView& cu_seqlens, int heads, int kv_heads,
          bool causal, int max_seqlen),
         (out, qkv, cu_seqlens, heads, kv_heads, causal, max_seqlen))
