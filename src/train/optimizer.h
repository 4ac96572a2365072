// The optimizer step of a TrainableEncoder, enqueued without a host read:
// gradient norm and clipping coefficient on the device (when max_grad_norm >
// 0), AdamW over the one flat parameter buffer with the weight-decay ranges of
// the layout, then the compute-dtype weight copies refreshed. Owns the AdamW
// moments.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "backend/backend.h"
#include "model/trainable_encoder.h"
#include "train/loss_scaler.h"

namespace stoke::train {

struct OptimizerOptions {
  double weight_decay = 0.0;
  bool decay_all = false;  // decay biases and LayerNorm weights too (default: not, as the HF Trainer)
  double max_grad_norm = 1.0;  // 0: no clipping
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  // f16 training: the dynamic loss scale (torch.amp.GradScaler) in device
  // memory. A step then unscales and checks the gradients, clips, and takes
  // AdamW's step only when they were finite, all on the device.
  bool loss_scaling = false;
  LossScalerConfig scaler;
};

class Optimizer {
 public:
  Optimizer(TrainableEncoder& encoder, Backend& backend, const OptimizerOptions& options);
  // Drains the backend: enqueued copies may still read or write the moments.
  ~Optimizer();
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // Enqueues gradient = 0 (before the first micro-batch of a step).
  void zero_grad();
  // Enqueues step t (1-based) at learning rate lr. With loss scaling: the
  // gradients unscaled and checked, clipped, AdamW skipped on an inf/NaN
  // (its t is then the scaler's count of steps taken + 1, not `t`), and the
  // scale updated — torch's scaler.unscale_, clip, scaler.step, scaler.update.
  void step(int64_t t, double lr);

  // Graphs (docs/training.md "Graphs"). Where the backend can capture, the
  // step's ops (unscale, gradient norm, clipping coefficient, AdamW, the
  // compute-weight refresh, the scaler update) are captured on the first
  // step and replayed on every later one: their shapes never change. t and
  // lr — the only arguments that change per step — reach AdamW from device
  // memory (Ops::AdamWStep::device) that an enqueued copy writes before each
  // replay, from a ring of host staging slots (a slot is rewritten only once
  // its previous copy has run). A failed capture runs that step and every
  // later one eagerly. On by default where the backend can capture.
  void set_graphs(bool on);
  // Tests: the graph's form (t and lr from device memory, staged as above)
  // enqueued eagerly, on any backend — the CPU cannot capture, so this is
  // how it proves a replayed step equals the eager one.
  void set_step_values_on_device(bool on) { values_on_device_ = on; }
  struct GraphStats {
    bool on = false;              // graphs enabled (and the backend can capture)
    bool capture_failed = false;  // the capture failed: eager since
    bool captured = false;        // the step's graph exists
    int64_t replayed = 0, eager = 0;  // steps through the graph / eagerly
  };
  const GraphStats& graph_stats() const { return stats_; }

  // The loss scaler's device state (Ops::LossScaler), empty without loss
  // scaling: the micro-batches multiply the loss gradient by its scale.
  TensorView loss_scaler() const;
  // An enqueued copy of the scaler's state into slots[Ops::LossScaler::kSlots]
  // (valid once an event recorded after it is done); nothing without loss scaling.
  void copy_scaler_to_host(double* slots) const;
  // Enqueues the state `s` (a checkpoint's) into the device scaler.
  void load_scaler(const LossScalerState& s);

  // Moments as flat f32 device buffers (the encoder's layout).
  TensorView exp_avg() const;
  TensorView exp_avg_sq() const;
  // Enqueued copies of the moments into host memory of layout.numel() floats
  // each; valid once an event recorded after them is done.
  void copy_state_to_host(float* m, float* v) const;
  // Enqueued copies from host memory (kept alive and unchanged until an event
  // recorded after them is done).
  void load_state(const float* m, const float* v);

 private:
  TrainableEncoder& enc_;
  Backend& backend_;
  OptimizerOptions options_;
  int64_t n_;
  std::unique_ptr<Buffer> m_, v_, decay_, sumsq_, scale_, zeros_host_;
  std::unique_ptr<Buffer> scaler_, scaler_host_;  // loss scaling: the device state, the host staging of loads
  int64_t decay_rows_ = 0;
  // The step's ops with hyperparameters `hp` (what a graph records).
  void enqueue_step_ops(const Ops::AdamWStep& hp) const;
  // Copies {t, lr} into step_values_ from the next host staging slot.
  void stage_step_values(int64_t t, double lr);
  struct Staging {
    std::unique_ptr<Buffer> host;  // f64 [2]
    std::shared_ptr<Event> done;   // after its copy
  };
  std::unique_ptr<Buffer> step_values_;  // f64 [2] {t, lr}: Ops::AdamWStep::device
  std::vector<Staging> staging_;
  size_t next_slot_ = 0;
  bool graphs_on_ = false, values_on_device_ = false;
  std::unique_ptr<Graph> graph_;
  GraphStats stats_;
};

}  // namespace stoke::train
