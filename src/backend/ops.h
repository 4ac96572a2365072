// The op table: every computation the encoder needs, on device memory
// described by TensorViews. The ops and their contracts are declared once, in
// backend/op_list.h; this interface is generated from that list. A backend
// derives from UnsupportedOps (backend/unsupported_ops.h) to implement only
// the ops it has, or from Ops to implement all of them.
#pragma once

#include <cstdint>

#include "core/pooling.h"
#include "core/tensor.h"

namespace stoke {

enum class Activation { none, gelu_erf, tanh, relu };  // relu: DistilBERT's classification head
// Whether a GEMM op writes its output (no) or adds its result into what the
// output already holds (yes): a residual add folded into the GEMM
// (cuBLASLt's beta = 1, oneDNN's sum post-op) instead of a pass of its own.
enum class Accumulate { no, yes };

class Ops {
 public:
  virtual ~Ops() = default;

  // The Philox step of a dropout mask (dropout, dropout_backward,
  // AttentionDropout): a host value baked into the call, or, with `device`
  // set (u32 [1] in device memory), the value found there when the op runs.
  // A replayed graph (Backend::replay) repeats its ops with the arguments they
  // were captured with, so a training step replayed from one reads its
  // micro-step from memory that a copy wrote before the replay. Either way
  // the masks are the same: only where the number comes from differs.
  struct DropoutStep {
    uint32_t value = 0;   // used when `device` is empty
    TensorView device{};  // u32 [1]; not read on the host by the op checks
    DropoutStep() = default;
    DropoutStep(uint32_t v) : value(v) {}  // NOLINT(google-explicit-constructor): a host step reads as before
    explicit DropoutStep(const TensorView& on_device) : device(on_device) {}
    // The step where device memory is host memory (the CPU backends), read
    // when the op runs (on the executor, in stream order).
    uint32_t host_value() const { return device.empty() ? value : *device.as<const uint32_t>(); }
  };

  // Dropout on the attention probabilities (BERT's attention_probs_dropout),
  // for attention_train and attention_backward:
  // out = (P * mask / (1 - p)) · v, the mask drawn as the dropout op draws
  // (core/philox.h) with element index ((row_offset + t) * heads + h) * 2^32 + j
  // for query row t (packed), head h and key j (0-based within its sequence).
  // The row stride is a constant, not the batch's max_seqlen, so a query's
  // mask does not depend on which other sequences share its batch: a batch
  // split in two (data parallelism) with row_offset = the tokens before each
  // part draws the whole batch's masks.
  // p in [0, 1] (else an error): p = 0 is no dropout; p = 1 gives zero out
  // and gradients.
  struct AttentionDropout {
    float p = 0.0f;
    uint64_t seed = 0;
    DropoutStep step{};
    uint32_t tensor_id = 0;
    uint64_t row_offset = 0;  // query rows (tokens) before this call's first, in the whole batch
    static constexpr int kKeyBits = 32;  // keys of one query row: indices [row << 32, row << 32 + len)
    // The flat mask index of key 0 of packed query row t, head h.
    uint64_t row_index(int64_t t, int64_t h, int64_t heads) const {
      return ((row_offset + static_cast<uint64_t>(t)) * static_cast<uint64_t>(heads) + static_cast<uint64_t>(h))
             << kKeyBits;
    }
  };

  // The hyperparameters of one adamw step. Host doubles, as Python floats are
  // in torch: the derived coefficients (1 - beta1, 1 - lr * weight_decay,
  // lr / (1 - beta1^t), ...) are formed in double and rounded to f32 once, as
  // torch's CPU kernels receive them.
  struct AdamWStep {
    int64_t step = 1;  // t, 1-based: the number of this step (bias corrections 1 - beta^t)
    double lr = 0.0;
    double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
    double weight_decay = 0.0;  // decoupled: p -= lr * weight_decay * p where decay applies
    // The values that change every step, from device memory instead: f64
    // [2] = {t, lr} (kDeviceStep, kDeviceLr), read when the op runs — as
    // DropoutStep's device step. A replayed optimizer-step graph
    // (train/optimizer.h) repeats the arguments it was captured with, so its
    // lr (the schedule's, a host value) and t come from memory a copy wrote
    // before the replay; `step` and `lr` are then not read. The op checks
    // the tensor's shape only: whoever writes the values checks them (t >= 1,
    // lr finite and >= 0). Empty: `step` and `lr` as given.
    TensorView device{};
    static constexpr int kDeviceStep = 0, kDeviceLr = 1;
    // t and lr where device memory is host memory (the CPU backends), read
    // when the op runs (on the executor, in stream order).
    int64_t host_step() const {
      return device.empty() ? step : static_cast<int64_t>(device.as<const double>()[kDeviceStep]);
    }
    double host_lr() const { return device.empty() ? lr : device.as<const double>()[kDeviceLr]; }
  };

  // The state of f16 training's dynamic loss scale (torch.amp.GradScaler),
  // one f64 tensor of kSlots elements in device memory, read and written only
  // by the ops (loss_scale_multiply, loss_scale_unscale, adamw,
  // loss_scale_update), so no step reads it on the host. The scale is an f32
  // value held in f64 (exactly); the others are counts, exact in f64 up to 2^53.
  struct LossScaler {
    static constexpr int kScale = 0;           // the loss's multiplier (f32 value)
    static constexpr int kGrowthTracker = 1;   // clean steps in a row since the scale last changed
    static constexpr int kFoundInf = 2;        // 1 when this step's gradients held an inf or NaN, else 0
    static constexpr int kSkippedSteps = 3;    // optimizer steps skipped for an inf/NaN gradient
    static constexpr int kOptimizerSteps = 4;  // optimizer steps taken (AdamW's t so far)
    static constexpr int kSlots = 5;
  };

  // Which columns the rotary op rotates and how it pairs them (op_list.h:
  // rotary). The frequencies are a tensor argument of the op.
  struct Rotary {
    int heads = 0;             // head_dim-wide column blocks rotated, from column 0 of each row
    int head_dim = 0;          // columns per head; the first 2 * inv_freq.numel() of each are rotated
    bool interleaved = false;  // pairs (2i, 2i + 1) (GPT-J); false: (i, i + R/2), NeoX rotate-half
    float scale = 1.0f;        // cos and sin multiplied by it (HF's attention_scaling; 1 for default RoPE)
  };

  // The gated MLP's activation and which half of the fused gate/up GEMM
  // output it applies to (op_list.h: glu).
  struct Glu {
    enum class Act { silu, gelu_erf };  // SwiGLU, GeGLU (erf GELU)
    Act act = Act::silu;
    bool act_on_second = false;  // false: [g | u] (ModernBERT); true: [u | g] (GTE)
  };

  // SPLADE's pooling of one block of MLM logits (op_list.h: splade_pool):
  // where the block sits in the batch, the reduction and the activation.
  struct SpladePool {
    int64_t first_row = 0;  // the batch token row of logits' row 0 (the forward cuts T into blocks)
    bool sum = false;       // false: the max over a text's tokens (SPLADE v2 and later); true: the sum (v1)
    int log1p_count = 1;    // 1: log1p(relu(x)) ("relu"); 2: log1p(log1p(relu(x))) ("log1p_relu")
    Accumulate acc = Accumulate::no;  // no: out written in full; yes: combined with out (a later block)
  };

  // A contrastive loss of sentence embeddings (op_list.h: embedding_loss):
  // which one, on which columns, with which weights. Kinds follow
  // sentence-transformers: mnrl = MultipleNegativesRankingLoss (directions
  // query_to_doc), mnrl_symmetric = the same with directions (query_to_doc,
  // doc_to_query) and partition_mode per_direction, cosent = CoSENTLoss,
  // cosine_mse = CosineSimilarityLoss (MSE of the cosine against the score).
  struct EmbeddingLoss {
    enum class Kind { mnrl, mnrl_symmetric, cosent, cosine_mse };
    Kind kind = Kind::mnrl;
    int64_t groups = 2;    // emb holds groups x B rows: [anchors | positives | negatives_1 | ... ], B rows each
    int64_t dims = 0;      // the loss reads columns [0, dims) of each row (Matryoshka); 0 = all D
    bool normalize = true; // each row's used prefix is scaled to unit L2 first, x / max(||x||, 1e-12) (cosine
                           // similarity; Matryoshka's shrink); false: plain dot products
    float scale = 20.0f;   // similarities x scale (mnrl, mnrl_symmetric, cosent; cosine_mse ignores it)
    float weight = 1.0f;   // the loss's weight (a Matryoshka dimension's weight): applies to the metric and the
                           // gradient
    float grad_scale = 1.0f;  // the gradient's factor only (e.g. 1 / accumulated micro-batches)
    bool count = true;     // this call counts metrics[1] and metrics[2] (the first call of a Matryoshka sum; the
                           // others add only their loss)
  };

  // Every op of backend/op_list.h (contracts there).
#define STOKE_OP(name, params, args) virtual void name params const = 0;
#include "backend/op_list.h"
#undef STOKE_OP
};

// Floats of scratch embedding_loss needs for B anchors, `groups` groups and
// `dims` columns read (the EmbeddingLoss's dims, or D where that is 0; dims
// >= 1, else an Error): one workspace of the largest dims serves every
// Matryoshka call. The layout: backend/embedding_loss_checks.h.
int64_t embedding_loss_workspace_floats(int64_t B, int64_t groups, int64_t dims);

// The names of the ops, in list order (for tests and messages).
inline constexpr const char* kOpNames[] = {
#define STOKE_OP(name, params, args) #name,
#include "backend/op_list.h"
#undef STOKE_OP
};

}  // namespace stoke
