// One training micro-batch of a sequence classifier, enqueued on a backend:
// the encoder forward keeping what the backward needs, dropout at every site
// transformers has one, the loss (cross-entropy, or MSE for a one-logit
// regression head) with its metrics added to a device buffer, and the backward
// into the encoder's gradient buffer. Nothing here reads from the device: the
// caller decides when (if ever) to look at the metrics. The runner stages the
// inputs, pads graph-shaped micro-batches, captures and replays the graphs and
// orders the phases; the math of each phase and the activations it keeps are
// the layer family's unit (model/family_trainer.h), picked once, here.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "model/family_trainer.h"
#include "model/packed_batch.h"
#include "model/train_buckets.h"
#include "model/trainable_encoder.h"

namespace stoke {

class EncoderTrainingRunner {
 public:
  // Workspace for up to max_tokens tokens and max_sequences sequences per
  // micro-batch, allocated once. `staging_slots` micro-batches can be
  // enqueued before a slot's inputs are overwritten (the host throttles on
  // the oldest one's copy then: Backend::throttle, not a host sync).
  EncoderTrainingRunner(const TrainableEncoder& encoder, Backend& backend, int64_t max_tokens, int64_t max_sequences,
                        size_t staging_slots = 3);
  ~EncoderTrainingRunner();  // drains the backend
  EncoderTrainingRunner(const EncoderTrainingRunner&) = delete;
  EncoderTrainingRunner& operator=(const EncoderTrainingRunner&) = delete;

  // Forward, loss and backward of one micro-batch; parameter gradients ADD to
  // encoder.grad. labels: one per sequence (class ids, or targets as floats
  // for regression — `targets`). metrics: f64 [3] device buffer, see
  // Ops::cross_entropy.
  void enqueue(const PackedBatch& batch, std::span<const int32_t> labels, std::span<const float> targets,
               const MicroBatchKnobs& knobs, const TensorView& metrics);

  // ---- Embedding models (stoke train --objective mnrl, ...): no
  // classification head; what is trained is the pooled last hidden state.
  // The encoder forward of one micro-batch keeping what the backward reads,
  // then the sentence-transformers pooling of the last hidden state (the
  // final norm's output for pre-norm encoders) into out[B, H] (f32). Always
  // eager and unpadded. The activations stay until the next enqueue of any
  // kind; knobs' dropout (layers only: there is no head) and offsets key the
  // masks as for the classifier, so a forward run twice draws the same masks.
  void enqueue_embedding_forward(const PackedBatch& batch, const MicroBatchKnobs& knobs, Pooling pooling,
                                 const TensorView& out);
  // The backward of the last enqueue_embedding_forward — called with the
  // same batch, knobs and pooling — from d_out[B, H] (f32): the pooling's
  // backward, then the encoder's. Parameter gradients ADD to encoder.grad;
  // the backward hook is called as for enqueue.
  void enqueue_embedding_backward(const PackedBatch& batch, const MicroBatchKnobs& knobs, Pooling pooling,
                                  const TensorView& d_out);

  // Called while backward() enqueues, after each layer's backward (layers run
  // from the last down) and once more with -1 after the whole backward: the
  // gradients of layer l are then final for this micro-batch (data-parallel
  // training hands them to the all-reduce). Empty: nothing is called.
  void set_backward_hook(std::function<void(int64_t layer)> hook) { backward_hook_ = std::move(hook); }

  // Graphs (docs/training.md "Graphs"). Where the backend can capture, a
  // micro-batch of at most TrainBucketPlan::kGraphMaxTokens tokens is padded
  // to its bucket (model/train_buckets.h) and its encoder forward and its
  // encoder backward each replay a graph captured on the bucket's first
  // micro-batch; the classification head, the loss and the head's backward
  // run eagerly between the two on the real sequences only, so padding never
  // enters the loss, the metrics or the loss weight. Padding tokens form
  // sequences of their own (at most the bucket's longest), get gradient 0 and
  // change no parameter gradient. The layers' dropout step comes from device
  // memory a copy writes before each replay (Ops::DropoutStep). A failed
  // capture runs that micro-batch eagerly and every later one unpadded.
  // Every layer sequence: post-LN, pre-norm (ModernBERT: the final norm is
  // in the backward graph, the head pools the real rows only) and MPNet (its
  // relative bias table is the bucket's: 2 max_seqlen - 1 rows; distances
  // only padding sequences reach get gradient 0). Not used with a backward
  // hook (data parallelism: docs/training.md says why).
  // On by default where the backend can capture.
  void set_graphs(bool on);
  // Tests: the graph-shaped micro-batch (padded, device-side dropout step)
  // enqueued eagerly, on any backend — the CPU cannot capture, so this is how
  // it proves the padded step equals the unpadded one.
  void set_padding_without_capture(bool on) { pad_without_capture_ = on; }
  struct GraphStats {
    bool on = false;              // graphs enabled (and the backend can capture)
    bool capture_failed = false;  // a capture failed: eager, unpadded since
    int64_t buckets = 0;          // buckets captured (two graphs each)
    int64_t replayed = 0, eager = 0;  // micro-batches through graphs / eagerly
    int64_t real_tokens = 0, padded_tokens = 0;  // of the graph-shaped micro-batches
  };
  const GraphStats& graph_stats() const { return stats_; }

  // Device bytes of the workspace per token and per sequence (auto batch size).
  static int64_t bytes_per_token(const HfConfig& config, DType dtype);
  static int64_t bytes_per_sequence(const HfConfig& config);

 private:
  struct Staging {
    std::unique_ptr<Buffer> host;
    std::shared_ptr<Event> done;
  };
  // The phases of enqueue, in order: copy the inputs into a staging slot and
  // on to the device, cut the step's views; then the family's phases
  // (family_trainer.h).
  void stage(const PackedBatch& batch, std::span<const int32_t> labels, std::span<const float> targets,
             bool regression, const std::optional<TrainBucket>& bucket, uint32_t step);
  TrainStep step_views(const PackedBatch& batch, const MicroBatchKnobs& k,
                       const std::optional<TrainBucket>& bucket) const;
  // The encoder backward and the hook's last call (-1).
  void backward(const TrainStep& st) const;
  // The checks every micro-batch passes before anything is enqueued.
  void check_micro_batch(const PackedBatch& batch, const MicroBatchKnobs& k) const;
  // Graphs: what a captured graph bakes in besides its bucket's shapes.
  struct GraphKey {
    TrainBucket bucket;
    float hidden = 0, attention = 0;
    uint64_t seed = 0, token_offset = 0;
    auto operator<=>(const GraphKey&) const = default;
  };
  std::optional<TrainBucket> graph_bucket(const PackedBatch& batch, const MicroBatchKnobs& k) const;
  // Replays phase 0 (forward) or 1 (backward) of the key's graphs, capturing
  // it first; eagerly when graphs are off or a capture failed.
  void run_phase(const GraphKey& key, int phase, const std::function<void()>& enqueue_phase);
  const TrainableEncoder& enc_;
  Backend& backend_;
  int64_t max_tokens_, max_sequences_;
  std::vector<std::unique_ptr<Buffer>> owned_;
  std::vector<Staging> staging_;
  size_t next_slot_ = 0;
  // Device input views (sized for the maximum; re-shaped per batch).
  void* ids_ = nullptr;
  void* types_ = nullptr;
  void* positions_ = nullptr;
  void* cu_ = nullptr;
  void* rows_ = nullptr;
  void* labels_ = nullptr;
  void* cu_head_ = nullptr;  // B + 1 i32
  void* step_ = nullptr;     // u32 [1]: the device dropout step of graph-shaped micro-batches
  TrainBucketPlan plan_;
  int64_t max_slots_ = 0;    // sequence slots of the largest bucket (the offsets' size)
  bool graphs_on_ = false, pad_without_capture_ = false;
  std::map<GraphKey, std::unique_ptr<Graph>> graphs_[2];  // forward, backward
  GraphStats stats_;
  // The layer family's unit: its workspace and the math of every phase.
  std::unique_ptr<FamilyTrainer> family_;
  std::function<void(int64_t)> backward_hook_;
};

}  // namespace stoke
