#include "model/encoder_params.h"
#include "model/int8_weights.h"

#include <exception>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <map>

#include "core/error.h"
#include "core/half.h"
#include "io/encoder_layout.h"
#include "io/model_folder_error.h"
#include "io/safetensors.h"
#include "model/family_params.h"
#include "model/rotary_frequencies.h"

namespace stoke {

namespace {

TensorView shaped(void* data, DType dtype, const std::vector<int64_t>& shape) {
  TensorView v;
  v.data = data;
  v.dtype = dtype;
  for (int64_t d : shape) v.dims[static_cast<size_t>(v.rank++)] = d;
  return v;
}

// Element i of a stored tensor as float (safetensors data may be unaligned).
float stored_at(const StoredTensor& src, size_t i) {
  const auto* p = reinterpret_cast<const unsigned char*>(src.data.data());
  switch (src.dtype) {
    case DType::f32: {
      float f;
      std::memcpy(&f, p + i * 4, 4);
      return f;
    }
    case DType::f64: {
      double d;
      std::memcpy(&d, p + i * 8, 8);
      return static_cast<float>(d);
    }
    case DType::bf16: {
      bf16 h;
      std::memcpy(&h.bits, p + i * 2, 2);
      return to_float(h);
    }
    case DType::f16: {
      f16 h;
      std::memcpy(&h.bits, p + i * 2, 2);
      return to_float(h);
    }
    default:
      throw Error(Errc::internal, "weight of non-float dtype reached the loader");
  }
}

void store_at(void* dst, DType dtype, size_t i, float v) {
  auto* p = static_cast<unsigned char*>(dst);
  switch (dtype) {
    case DType::f32: std::memcpy(p + i * 4, &v, 4); break;
    case DType::bf16: { const bf16 h = to_bf16(v); std::memcpy(p + i * 2, &h.bits, 2); break; }
    case DType::f16: { const f16 h = to_f16(v); std::memcpy(p + i * 2, &h.bits, 2); break; }
    default: throw Error(Errc::internal, "unsupported compute dtype");
  }
}

// The mapped file pages wholly inside a tensor that was copied (converted or
// stacked) are handed back to the kernel: nothing reads them again (a second
// read would fault them in from the file, unchanged), and kept they would
// count twice in the resident set — the copy and its source. With it a
// bf16 checkpoint whose q/k/v and gate/up are stacked stays near one copy of
// the weights (an 8B decoder in bf16 within 24 GiB). Only for file mappings:
// ModelWeights holds nothing else (open_model_weights maps every file), and
// MADV_DONTNEED on a private file mapping drops pages, never data.
void release_source(const StoredTensor& t) {
  const long page = ::sysconf(_SC_PAGESIZE);
  if (page <= 0 || t.data.empty()) return;
  const uintptr_t begin = reinterpret_cast<uintptr_t>(t.data.data()), end = begin + t.data.size();
  const uintptr_t first = (begin + static_cast<uintptr_t>(page) - 1) / static_cast<uintptr_t>(page) * static_cast<uintptr_t>(page);
  const uintptr_t last = end / static_cast<uintptr_t>(page) * static_cast<uintptr_t>(page);
  if (last > first) ::madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);  // advice: failure is harmless
}

class Placer {
 public:
  Placer(Backend& backend, DType dtype, LoadedEncoder& out) : backend_(backend), dtype_(dtype), out_(out) {}

  // Places with another dtype (the heads stay f32 whatever the precision).
  TensorView place_as(DType dtype, const std::vector<const StoredTensor*>& parts, const std::vector<int64_t>& shape) {
    const DType saved = dtype_;
    dtype_ = dtype;
    TensorView v = place(parts, shape);
    dtype_ = saved;
    return v;
  }

  // One or more stored tensors stacked along dim 0 into one device tensor.
  TensorView place(const std::vector<const StoredTensor*>& parts, const std::vector<int64_t>& shape) {
    const bool single = parts.size() == 1;
    const StoredTensor& first = *parts[0];
    void* first_data = const_cast<std::byte*>(first.data.data());  // weights are never written
    // Zero-copy: the backend reads host memory, the dtype matches, and the
    // data is aligned for its element type.
    if (single && backend_.device_is_host() && first.dtype == dtype_ &&
        reinterpret_cast<uintptr_t>(first_data) % dtype_size(dtype_) == 0) {
      return shaped(first_data, dtype_, shape);
    }
    size_t numel = 1;
    for (int64_t d : shape) numel *= static_cast<size_t>(d);
    std::vector<unsigned char> host(numel * dtype_size(dtype_));
    size_t at = 0;
    for (const StoredTensor* part : parts) {
      const size_t n = static_cast<size_t>(part->numel());
      if (part->dtype == dtype_) {
        std::memcpy(host.data() + at * dtype_size(dtype_), part->data.data(), n * dtype_size(dtype_));
      } else {
        for (size_t i = 0; i < n; ++i) store_at(host.data(), dtype_, at + i, stored_at(*part, i));
      }
      at += n;
    }
    auto buffer = backend_.allocate(host.size());
    backend_.copy_to_device(buffer->data(), host.data(), host.size());
    TensorView v = shaped(buffer->data(), dtype_, shape);
    out_.buffers.push_back(std::move(buffer));
    pending_.push_back(std::move(host));  // the copy reads it later, on the stream
    for (const StoredTensor* part : parts) release_source(*part);
    return v;
  }

  // Host floats (computed, not stored: rotary frequencies, zero rows) placed as f32.
  TensorView place_floats(const std::vector<float>& values, const std::vector<int64_t>& shape) {
    std::vector<unsigned char> host(values.size() * 4);
    std::memcpy(host.data(), values.data(), host.size());
    auto buffer = backend_.allocate(std::max<size_t>(host.size(), 4));  // never a zero-byte allocation
    backend_.copy_to_device(buffer->data(), host.data(), host.size());
    TensorView v = shaped(buffer->data(), DType::f32, shape);
    out_.buffers.push_back(std::move(buffer));
    pending_.push_back(std::move(host));  // the copy reads it later, on the stream (a move keeps the data)
    return v;
  }

  // One wait for all the copies, at the end of loading.
  void finish() {
    backend_.synchronize();
    pending_.clear();
  }

 private:
  Backend& backend_;
  DType dtype_;
  LoadedEncoder& out_;
  std::vector<std::vector<unsigned char>> pending_;
};

}  // namespace

void copy_stored_as_f32(const StoredTensor& src, float* dst) {
  const size_t n = static_cast<size_t>(src.numel());
  if (src.dtype == DType::f32) {
    std::memcpy(dst, src.data.data(), n * 4);
    return;
  }
  for (size_t i = 0; i < n; ++i) dst[i] = stored_at(src, i);
}

RotaryTables rotary_tables(const HfConfig& c) {
  RotaryTables t;
  if (c.arch->positions != PositionScheme::rotary) return t;
  t.inv_freq = default_rope_inv_freq(c.rotary_dim, c.rope_theta);
  t.zero_row.assign(static_cast<size_t>(c.embedding_size), 0.0f);
  return t;
}

Activation head_activation(const Architecture& a) {
  switch (a.head_activation) {
    case HeadActivation::tanh: return Activation::tanh;
    case HeadActivation::gelu: return Activation::gelu_erf;
    case HeadActivation::relu: return Activation::relu;
  }
  throw Error(Errc::unsupported, std::string(a.display_name) + "'s classification head uses " +
                                     std::string(head_activation_name(a.head_activation)) +
                                     ", which stoke does not compute");
}

LoadedEncoder load_encoder(const HfConfig& config, ModelWeights weights, Backend& backend,
                           const EncoderLoadOptions& options) {
  if (options.dtype != DType::f32 && options.dtype != DType::bf16 && options.dtype != DType::f16)
    throw Error(Errc::invalid_argument, "encoder dtype must be f32, bf16 or f16");
  if (options.int8_linears && options.dtype != DType::f32)
    throw Error(Errc::invalid_argument, "int8 linears take f32 activations");
  if (options.int8_linears && !backend.device_is_host())  // before reading any weight
    throw Error(Errc::unsupported, "--precision int8 runs on the CPU only; use --device cpu (or --precision f32|bf16)");
  const Architecture& arch = *config.arch;
  check_family_load(config, options);  // what the layer family cannot run
  if (options.need_classifier && arch.head_has_dense()) head_activation(arch);  // refuse before reading any weight
  LoadedEncoder enc;
  enc.config = config;
  enc.dtype = options.dtype;
  const bool need_pooler = options.need_pooler || (options.need_classifier && arch.head_on_pooler);
  const auto resolved = resolve_encoder_tensors(config, weights, need_pooler, options.need_classifier);
  std::map<std::pair<TensorRole, int64_t>, const ResolvedTensor*> by_role;
  for (const auto& r : resolved) by_role[{r.expected.role, r.expected.layer}] = &r;
  auto view = [&](TensorRole role, int64_t layer = -1) -> const StoredTensor* {
    auto it = by_role.find({role, layer});
    return it == by_role.end() ? nullptr : it->second->view;
  };
  auto shape_of = [&](TensorRole role, int64_t layer) { return by_role.at({role, layer})->expected.shape; };

  Placer placer(backend, options.dtype, enc);
  auto place = [&](TensorRole role, int64_t layer) -> TensorView {
    const StoredTensor* v = view(role, layer);
    return v ? placer.place({v}, shape_of(role, layer)) : TensorView{};
  };

  // Mixed precision: only the layers' GEMM weight matrices take the compute
  // dtype. Embedding tables, LayerNorm parameters, biases and the heads stay
  // f32 (the residual stream is f32; the heads are a few B x H x H products).
  auto place_f32 = [&](TensorRole role, int64_t layer = -1) -> TensorView {
    const StoredTensor* v = view(role, layer);
    return v ? placer.place_as(DType::f32, {v}, shape_of(role, layer)) : TensorView{};
  };
  using R = TensorRole;
  EncoderParams& p = enc.params;
  for (const EncoderParamField& f : kEmbeddingParamFields) p.*f.member = place_f32(f.role);
  const int64_t H = config.hidden_size;
  if (arch.positions == PositionScheme::rotary) {
    RotaryTables rt = rotary_tables(config);
    const int64_t half = static_cast<int64_t>(rt.inv_freq.size());
    p.rope_inv_freq = placer.place_floats(rt.inv_freq, {half});
    p.position_embeddings = placer.place_floats(rt.zero_row, {1, config.embedding_size});
  }
  // Gated feed-forwards: both GLU halves in one (2I, H) matrix (fused in the file, or stacked here).
  const bool gated = arch.gated_ffn;
  for (int64_t l = 0; l < config.num_hidden_layers; ++l) {
    EncoderLayerParams layer;
    const bool fused_qkv = arch.has(R::qkv_weight);  // GTE, NomicBERT, ModernBERT
    // The rows of q, k and v stacked, as the layout expects them (a
    // decoder's grouped-query k and v are narrower than q).
    const int64_t qkv_rows = fused_qkv ? shape_of(R::qkv_weight, l)[0]
                                       : shape_of(R::query_weight, l)[0] + shape_of(R::key_weight, l)[0] +
                                             shape_of(R::value_weight, l)[0];
    layer.qkv_w = fused_qkv ? placer.place({view(R::qkv_weight, l)}, {qkv_rows, H})
                            : placer.place({view(R::query_weight, l), view(R::key_weight, l), view(R::value_weight, l)},
                                           {qkv_rows, H});
    // The q/k/v GEMM writes the compute dtype. On a GPU its bias goes in that
    // dtype too, so cuBLASLt adds it in the GEMM's epilogue (documented for a
    // bias of the output's dtype) instead of a pass of ours over T x 3H; the
    // CPU keeps it f32 (its kernels add either in the same pass).
    const DType qkv_bias_dtype = backend.device_is_host() ? DType::f32 : options.dtype;
    if (fused_qkv && view(R::qkv_bias, l))
      layer.qkv_b = placer.place_as(qkv_bias_dtype, {view(R::qkv_bias, l)}, {qkv_rows});
    else if (view(R::query_bias, l))
      layer.qkv_b = placer.place_as(qkv_bias_dtype, {view(R::query_bias, l), view(R::key_bias, l), view(R::value_bias, l)},
                                    {qkv_rows});
    for (const LayerParamField& f : kLayerParamFields) {
      if (gated && (f.role == R::ffn_in_weight || f.role == R::ffn_gate_weight)) continue;  // stacked below
      layer.*f.member = f.gemm_weight ? place(f.role, l) : place_f32(f.role, l);
    }
    if (gated) {
      const int64_t I2 = 2 * config.intermediate_size;
      if (arch.has(R::ffn_up_gate_weight))
        layer.ffn_in_w = placer.place({view(R::ffn_up_gate_weight, l)}, {I2, H});
      else if (arch.glu_act_on_second)  // [up | gate]
        layer.ffn_in_w = placer.place({view(R::ffn_in_weight, l), view(R::ffn_gate_weight, l)}, {I2, H});
      else
        layer.ffn_in_w = placer.place({view(R::ffn_gate_weight, l), view(R::ffn_in_weight, l)}, {I2, H});
    }
    p.layers.push_back(layer);
  }
  // The head's hidden layer is the pooler (BERT) or the head's own dense.
  p.head_dense_w = place_f32(arch.head_on_pooler ? R::pooler_weight : R::head_dense_weight);
  p.head_dense_b = place_f32(arch.head_on_pooler ? R::pooler_bias : R::head_dense_bias);
  p.head_out_w = place_f32(R::head_out_weight);
  p.head_out_b = place_f32(R::head_out_bias);
  p.head_norm = place_f32(R::head_norm_weight);  // ModernBERT's head LayerNorm; empty elsewhere
  place_family_fixed(config,
                     [&](const std::vector<float>& values, const std::vector<int64_t>& shape) {
                       return placer.place_floats(values, shape);
                     },
                     p);
  placer.finish();
  if (options.int8_linears) quantize_layer_weights(enc, backend);
  enc.weights = std::move(weights);
  return enc;
}

DenseModuleValues read_dense_module(const std::filesystem::path& folder, const DenseModule& m, int64_t width) {
  const std::filesystem::path file = folder / m.path / "model.safetensors";
  const std::string label = file.string();
  if (m.in_features != width)
    throw Error(Errc::format, (folder / m.path / "config.json").string() + ": field \"in_features\": " +
                                  std::to_string(m.in_features) + " does not match the " + std::to_string(width) +
                                  " values it receives");
  const auto weights = SafetensorsFile::open(file);
  auto read = [&](const char* name, std::vector<int64_t> shape) {
    const StoredTensor* t = weights->find(name);
    if (!t) throw Error(Errc::format, label + ": tensor \"" + std::string(name) + "\" is missing");
    if (!dtype_is_float(t->dtype))
      throw Error(Errc::format, label + ": tensor \"" + std::string(name) + "\" has dtype " +
                                    std::string(dtype_name(t->dtype)) + "; weights must be F32, F16, BF16 or F64");
    if (t->shape != shape)
      throw Error(Errc::format, label + ": tensor \"" + std::string(name) + "\" has shape " + shape_string(t->shape) +
                                    ", expected " + shape_string(shape) + " from config.json (out_features, in_features)");
    std::vector<float> host(static_cast<size_t>(t->numel()));
    copy_stored_as_f32(*t, host.data());
    return host;
  };
  DenseModuleValues v;
  v.weight = read("linear.weight", {m.out_features, m.in_features});
  if (m.bias) v.bias = read("linear.bias", {m.out_features});
  return v;
}

void load_dense_modules(LoadedEncoder& enc, const std::filesystem::path& folder, const std::vector<DenseModule>& modules,
                        Backend& backend) {
  int64_t width = enc.config.hidden_size;
  std::vector<std::vector<float>> pending;
  // A refused later module: the earlier ones' copies are still queued and
  // read `pending`, which goes with this frame — wait for them first.
  struct WaitOnThrow {
    Backend& backend;
    ~WaitOnThrow() {
      if (std::uncaught_exceptions() == 0) return;
      try {
        backend.synchronize();
      } catch (...) {  // the refusal in flight is the error to report
      }
    }
  } wait_on_throw{backend};
  for (const DenseModule& m : modules) {
    DenseModuleValues values = read_dense_module(folder, m, width);
    DenseLayerParams layer;
    layer.act = m.activation == DenseModule::Activation::tanh ? Activation::tanh : Activation::none;
    auto place = [&](std::vector<float> host, std::vector<int64_t> shape) -> TensorView {
      auto buffer = backend.allocate(host.size() * 4);
      backend.copy_to_device(buffer->data(), host.data(), host.size() * 4);
      TensorView v = shaped(buffer->data(), DType::f32, shape);
      enc.buffers.push_back(std::move(buffer));
      pending.push_back(std::move(host));  // the copy reads it later, on the stream
      return v;
    };
    layer.w = place(std::move(values.weight), {m.out_features, m.in_features});
    if (m.bias) layer.b = place(std::move(values.bias), {m.out_features});
    enc.dense.push_back(layer);
    width = m.out_features;
  }
  backend.synchronize();  // one wait for the copies, at load time
}

}  // namespace stoke
