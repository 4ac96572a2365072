#include "model/trainable_encoder.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <deque>
#include <map>

#include "core/error.h"
#include "core/philox.h"
#include "io/encoder_layout.h"
#include "model/family_params.h"
#include "model/rotary_frequencies.h"

namespace stoke {

namespace {

// Philox "step" word reserved for parameter initialisation, so init draws
// never coincide with a dropout mask (dropout steps count micro-batches from 0).
constexpr uint32_t kInitStep = 0xFFFFFFFFu;

// N(0, std) by Box-Muller on two Philox uniforms per element (u1 in (0, 1]).
void draw_normal(float* dst, int64_t n, double std, uint64_t seed, uint32_t tensor_id) {
  for (int64_t i = 0; i < n; ++i) {
    uint32_t w[4];
    philox::block_bits(seed, kInitStep, tensor_id, static_cast<uint64_t>(i), w);
    const double u1 = (static_cast<double>(w[0] >> 8) + 1.0) * 0x1.0p-24;
    const double u2 = static_cast<double>(w[1] >> 8) * 0x1.0p-24;
    dst[i] = static_cast<float>(std * std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2));
  }
}

// The layers' weight matrices: the GEMMs that run in the compute dtype.
bool is_gemm_weight(TensorRole r) {
  return r == TensorRole::query_weight || r == TensorRole::key_weight || r == TensorRole::value_weight ||
         r == TensorRole::attn_out_weight || r == TensorRole::ffn_in_weight || r == TensorRole::ffn_out_weight ||
         r == TensorRole::qkv_weight || r == TensorRole::ffn_up_gate_weight || r == TensorRole::ffn_gate_weight;
}

TensorView flat(void* data, int64_t n) {
  TensorView v;
  v.data = data;
  v.dtype = DType::f32;
  v.rank = 1;
  v.dims[0] = n;
  return v;
}

}  // namespace

TensorView TrainableEncoder::master_flat() const { return flat(master_buffer->data(), layout.numel()); }
TensorView TrainableEncoder::grad_flat() const { return flat(grad_buffer->data(), layout.numel()); }

void TrainableEncoder::refresh_compute_weights(const Ops& ops) const {
  if (dtype == DType::f32) return;
  for (size_t l = 0; l < master.layers.size(); ++l) {
    const EncoderLayerParams& m = master.layers[l];
    const EncoderLayerParams& c = compute.layers[l];
    ops.convert(c.qkv_w, m.qkv_w);
    ops.convert(c.attn_out_w, m.attn_out_w);
    ops.convert(c.ffn_in_w, m.ffn_in_w);
    ops.convert(c.ffn_out_w, m.ffn_out_w);
  }
}

LoadedEncoder TrainableEncoder::inference_view() const {
  LoadedEncoder e;
  e.config = config;
  e.params = compute;
  e.dtype = dtype;
  e.dense = dense_master;
  return e;
}

void refuse_decoder_training(const Architecture& arch) {
  throw Error(Errc::unsupported, std::string(arch.display_name) +
                                     " is a decoder: fine-tuning decoders is not supported (embed and classify run it)");
}

std::unique_ptr<TrainableEncoder> load_trainable_encoder(const HfConfig& config, const HfConfig& stored_config,
                                                         const ModelWeights& weights, Backend& backend, DType dtype,
                                                         const TrainableInit& init, TrainableLoadReport* report) {
  check_family_training(config);  // decoders, and what a family's training form cannot run
  if (dtype != DType::f32 && dtype != DType::bf16 && dtype != DType::f16)
    throw Error(Errc::invalid_argument, "training dtype must be f32, bf16 or f16");
  if (init.heads == ParamHeads::classifier)
    head_activation(*config.arch);  // a head no op computes is refused before anything is read
  auto enc = std::make_unique<TrainableEncoder>(config, init.heads, init.dense);
  enc->dtype = dtype;
  const ParamLayout& layout = enc->layout;
  const size_t bytes = static_cast<size_t>(layout.numel()) * 4;

  // Every stored tensor is checked against the checkpoint's own config; heads
  // may be absent (a bare encoder) and are then drawn fresh.
  const auto resolved = resolve_encoder_tensors(stored_config, weights, false, false);
  std::map<std::pair<TensorRole, int64_t>, const ResolvedTensor*> by_role;
  for (const auto& r : resolved) by_role[{r.expected.role, r.expected.layer}] = &r;

  std::vector<float> host(static_cast<size_t>(layout.numel()));
  // The Dense modules' stored values (each module's folder), checked as inference checks them.
  std::vector<DenseModuleValues> dense_values;
  int64_t width = config.hidden_size;
  for (const DenseModule& m : init.dense) {
    dense_values.push_back(read_dense_module(init.dense_folder, m, width));
    width = m.out_features;
  }
  uint32_t index = 0;
  for (const ParamSlot& s : layout.slots()) {
    float* dst = host.data() + s.offset;
    if (s.dense >= 0) {
      const DenseModuleValues& v = dense_values[static_cast<size_t>(s.dense)];
      const std::vector<float>& src = s.shape.size() == 2 ? v.weight : v.bias;
      std::copy(src.begin(), src.end(), dst);
      ++index;
      continue;
    }
    auto it = by_role.find({s.role, s.layer});
    const StoredTensor* stored = it == by_role.end() ? nullptr : it->second->view;
    const bool same_shape = stored && stored->shape == s.shape;
    if (stored && same_shape) {
      copy_stored_as_f32(*stored, dst);
    } else {
      // transformers' _init_weights for a Linear: weight N(0, range), bias 0;
      // a LayerNorm weight 1 (ModernBERT's head.norm, absent from bare models).
      const bool bias = s.shape.size() == 1;
      if (s.role == TensorRole::head_norm_weight)
        std::fill(dst, dst + s.numel, 1.0f);
      else if (bias)
        std::memset(dst, 0, static_cast<size_t>(s.numel) * 4);
      else
        draw_normal(dst, s.numel, init.initializer_range, init.seed, index);
      if (report) report->initialised.push_back(s.name);
    }
    ++index;
  }

  enc->master_buffer = backend.allocate(bytes);
  enc->grad_buffer = backend.allocate(bytes);
  backend.copy_to_device(enc->master_buffer->data(), host.data(), bytes);
  enc->master = layout.views(enc->master_data());
  enc->grad = layout.views(enc->grad_data());
  enc->dense_master = layout.dense_views(enc->master_data());
  enc->dense_grad = layout.dense_views(enc->grad_data());
  // The layer family's fixed tensors (ModernBERT: zeros for the bias-free
  // LayerNorms' betas and the one-row position table, and the rotary
  // frequencies). Not parameters: no gradient, never saved.
  std::deque<std::vector<float>> fixed_host;  // read by the copies, on the stream
  place_family_fixed(config,
                     [&](const std::vector<float>& values, const std::vector<int64_t>& shape) {
                       const std::vector<float>& v = fixed_host.emplace_back(values);
                       enc->family_fixed.push_back(backend.allocate(std::max<size_t>(v.size() * 4, 4)));
                       TensorView t;
                       t.data = enc->family_fixed.back()->data();
                       t.dtype = DType::f32;
                       for (int64_t d : shape) t.dims[static_cast<size_t>(t.rank++)] = d;
                       backend.copy_to_device(t.data, v.data(), v.size() * 4);
                       return t;
                     },
                     enc->master);
  if (!fixed_host.empty()) backend.synchronize();  // `fixed_host` goes out of scope
  enc->compute = enc->master;
  // Rotary encoders: the fixed frequencies and the zero position table
  // (neither trained nor saved; the gradient has no position table).
  const RotaryTables rt = rotary_tables(config);
  if (!rt.inv_freq.empty()) {
    const size_t fb = rt.inv_freq.size() * 4, zb = rt.zero_row.size() * 4;
    enc->fixed_buffer = backend.allocate(fb + zb);
    char* base = static_cast<char*>(enc->fixed_buffer->data());
    backend.copy_to_device(base, rt.inv_freq.data(), fb);
    backend.copy_to_device(base + fb, rt.zero_row.data(), zb);
    enc->compute.rope_inv_freq = TensorView(base, DType::f32, {static_cast<int64_t>(rt.inv_freq.size())});
    enc->compute.position_embeddings = TensorView(base + fb, DType::f32, {1, config.embedding_size});
    enc->master.rope_inv_freq = enc->compute.rope_inv_freq;
    enc->master.position_embeddings = enc->compute.position_embeddings;
  }
  if (dtype != DType::f32) {
    // The layers' GEMM weights in the compute dtype, one buffer.
    int64_t low = 0;
    for (const ParamSlot& s : layout.slots())
      if (is_gemm_weight(s.role)) low += s.numel;
    enc->low_buffer = backend.allocate(static_cast<size_t>(low) * dtype_size(dtype));
    char* at = static_cast<char*>(enc->low_buffer->data());
    auto place = [&](TensorView& v) {
      v.data = at;
      v.dtype = dtype;
      at += static_cast<size_t>(v.numel()) * dtype_size(dtype);
    };
    for (EncoderLayerParams& l : enc->compute.layers) {
      place(l.qkv_w);
      place(l.attn_out_w);
      place(l.ffn_in_w);
      place(l.ffn_out_w);
    }
    enc->refresh_compute_weights(backend.ops());
  }
  backend.synchronize();  // `host` goes out of scope: its copy must have run
  return enc;
}

}  // namespace stoke
