#include "train/optimizer.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "core/error.h"

namespace stoke::train {

Optimizer::Optimizer(TrainableEncoder& encoder, Backend& backend, const OptimizerOptions& options)
    : enc_(encoder), backend_(backend), options_(options), n_(encoder.layout.numel()) {
  if (options.weight_decay < 0) throw Error(Errc::invalid_argument, "--weight-decay must be >= 0");
  if (options.max_grad_norm < 0) throw Error(Errc::invalid_argument, "--max-grad-norm must be >= 0 (0 disables)");
  const size_t bytes = static_cast<size_t>(n_) * 4;
  m_ = backend_.allocate(bytes);
  v_ = backend_.allocate(bytes);
  // One host page of zeros would do on a GPU (memset); a full-size zero
  // source keeps the Backend interface to copies.
  zeros_host_ = backend_.allocate_host(bytes);
  std::memset(zeros_host_->data(), 0, bytes);
  backend_.copy_to_device(m_->data(), zeros_host_->data(), bytes);
  backend_.copy_to_device(v_->data(), zeros_host_->data(), bytes);
  const std::vector<int64_t> ranges = encoder.layout.decay_ranges(options.decay_all);
  decay_rows_ = static_cast<int64_t>(ranges.size() / 2);
  decay_ = backend_.allocate(std::max<size_t>(ranges.size(), 2) * 8);
  if (!ranges.empty()) {
    auto staging = backend_.allocate_host(ranges.size() * 8);
    std::memcpy(staging->data(), ranges.data(), ranges.size() * 8);
    backend_.copy_to_device(decay_->data(), staging->data(), ranges.size() * 8);
    backend_.throttle(*backend_.record_event());  // `staging` goes now: its copy must have run
  }
  sumsq_ = backend_.allocate(8);
  scale_ = backend_.allocate(4);
  step_values_ = backend_.allocate(2 * sizeof(double));
  staging_.resize(3);
  for (Staging& slot : staging_) slot.host = backend_.allocate_host(2 * sizeof(double));
  graphs_on_ = backend_.can_capture();
  stats_.on = graphs_on_;
  if (options.loss_scaling) {
    scaler_ = backend_.allocate(Ops::LossScaler::kSlots * sizeof(double));
    scaler_host_ = backend_.allocate_host(Ops::LossScaler::kSlots * sizeof(double));
    load_scaler(initial_loss_scaler_state(options.scaler));
  }
}

Optimizer::~Optimizer() { backend_.drain(); }

void Optimizer::zero_grad() {
  backend_.copy_to_device(enc_.grad_data(), zeros_host_->data(), static_cast<size_t>(n_) * 4);
}

TensorView Optimizer::exp_avg() const { return TensorView(m_->data(), DType::f32, {n_}); }
TensorView Optimizer::exp_avg_sq() const { return TensorView(v_->data(), DType::f32, {n_}); }

TensorView Optimizer::loss_scaler() const {
  return scaler_ ? TensorView(scaler_->data(), DType::f64, {Ops::LossScaler::kSlots}) : TensorView{};
}

void Optimizer::copy_scaler_to_host(double* slots) const {
  if (scaler_) backend_.copy_to_host(slots, scaler_->data(), Ops::LossScaler::kSlots * sizeof(double));
}

void Optimizer::load_scaler(const LossScalerState& s) {
  if (!scaler_) return;
  // At construction and on resume only, before any step: the staging buffer
  // is free again once its copy has run (flow control, not a host sync).
  loss_scaler_to_slots(s, false, static_cast<double*>(scaler_host_->data()));
  backend_.copy_to_device(scaler_->data(), scaler_host_->data(), Ops::LossScaler::kSlots * sizeof(double));
  backend_.throttle(*backend_.record_event());
}

void Optimizer::set_graphs(bool on) {
  graphs_on_ = on && backend_.can_capture() && !stats_.capture_failed;
  stats_.on = graphs_on_;
}

void Optimizer::stage_step_values(int64_t t, double lr) {
  // The values are checked here, on the host, where they are made: the op
  // reads them on the device. (A NaN lr fails this test too.)
  if (t < 1) throw Error(Errc::invalid_argument, "optimizer step " + std::to_string(t) + ": steps count from 1");
  if (!(lr >= 0.0) || !std::isfinite(lr))
    throw Error(Errc::invalid_argument, "learning rate " + std::to_string(lr) + ": must be finite and >= 0");
  // A slot's host memory is rewritten only after its previous copy ran:
  // flow control, not a host sync (three steps in flight before it waits).
  Staging& slot = staging_[next_slot_];
  next_slot_ = (next_slot_ + 1) % staging_.size();
  if (slot.done && !backend_.event_done(*slot.done)) backend_.throttle(*slot.done);
  double* host = static_cast<double*>(slot.host->data());
  host[Ops::AdamWStep::kDeviceStep] = static_cast<double>(t);  // exact up to 2^53
  host[Ops::AdamWStep::kDeviceLr] = lr;
  backend_.copy_to_device(step_values_->data(), host, 2 * sizeof(double));
  slot.done = backend_.record_event();
}

void Optimizer::step(int64_t t, double lr) {
  Ops::AdamWStep hp;
  hp.step = t;
  hp.lr = lr;
  hp.beta1 = options_.beta1;
  hp.beta2 = options_.beta2;
  hp.eps = options_.eps;
  hp.weight_decay = options_.weight_decay;
  // The copies first (a graph records no copy): t and lr, the norm's zero.
  if (graphs_on_ || values_on_device_) {
    stage_step_values(t, lr);
    hp.device = TensorView(step_values_->data(), DType::f64, {2});
    // Not read when hp.device is set: a NaN lr makes a kernel that read it
    // anyway show it (the graph-form tests would see NaN parameters).
    hp.step = 0;
    hp.lr = std::numeric_limits<double>::quiet_NaN();
  }
  if (options_.max_grad_norm > 0) backend_.copy_to_device(sumsq_->data(), zeros_host_->data(), 8);
  if (!graphs_on_) {
    ++stats_.eager;
    enqueue_step_ops(hp);
    return;
  }
  if (!graph_) {
    try {
      backend_.begin_capture();
      try {
        enqueue_step_ops(hp);
      } catch (...) {
        backend_.end_capture();  // leaves the stream usable; the recording is dropped
        throw;
      }
      graph_ = backend_.end_capture();
    } catch (const Error&) {
      // Eager for good; this step's values are staged already.
      graphs_on_ = false;
      stats_.on = false;
      stats_.capture_failed = true;
      ++stats_.eager;
      enqueue_step_ops(hp);
      return;
    }
    stats_.captured = true;
  }
  backend_.replay(*graph_);
  ++stats_.replayed;
}

void Optimizer::enqueue_step_ops(const Ops::AdamWStep& hp) const {
  const Ops& ops = backend_.ops();
  const TensorView scaler = loss_scaler();
  // torch's order: unscale_ (after any data-parallel sum: the caller's
  // finish_step), then clipping on the unscaled gradients, then the step.
  if (!scaler.empty()) ops.loss_scale_unscale(enc_.grad_flat(), scaler);
  TensorView scale;
  if (options_.max_grad_norm > 0) {  // sumsq was zeroed by a copy before
    const TensorView sumsq(sumsq_->data(), DType::f64, {1});
    ops.sum_squares(sumsq, enc_.grad_flat());
    scale = TensorView(scale_->data(), DType::f32, {1});
    ops.clip_scale(scale, sumsq, static_cast<float>(options_.max_grad_norm));
  }
  // --decay-all: the unset view means "everywhere"; otherwise the layout's ranges.
  const TensorView ranges =
      options_.decay_all ? TensorView{} : TensorView(decay_->data(), DType::i64, {decay_rows_, 2});
  ops.adamw(enc_.master_flat(), enc_.grad_flat(), exp_avg(), exp_avg_sq(), ranges, scale, scaler, hp);
  enc_.refresh_compute_weights(ops);  // a skipped step re-rounds unchanged masters: the same copies
  if (!scaler.empty())
    ops.loss_scale_update(scaler, options_.scaler.growth_factor, options_.scaler.backoff_factor,
                          options_.scaler.growth_interval);
}

void Optimizer::copy_state_to_host(float* m, float* v) const {
  backend_.copy_to_host(m, m_->data(), static_cast<size_t>(n_) * 4);
  backend_.copy_to_host(v, v_->data(), static_cast<size_t>(n_) * 4);
}

void Optimizer::load_state(const float* m, const float* v) {
  backend_.copy_to_device(m_->data(), m, static_cast<size_t>(n_) * 4);
  backend_.copy_to_device(v_->data(), v, static_cast<size_t>(n_) * 4);
}

}  // namespace stoke::train
