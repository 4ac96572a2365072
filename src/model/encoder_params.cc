#include "model/encoder_params.h"

#include <cstring>
#include <map>

#include "core/error.h"
#include "core/half.h"
#include "io/encoder_layout.h"

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

LoadedEncoder load_encoder(const HfConfig& config, ModelWeights weights, Backend& backend,
                           const EncoderLoadOptions& options) {
  if (options.dtype != DType::f32 && options.dtype != DType::bf16 && options.dtype != DType::f16)
    throw Error(Errc::invalid_argument, "encoder dtype must be f32, bf16 or f16");
  LoadedEncoder enc;
  enc.config = config;
  enc.dtype = options.dtype;
  const auto resolved = resolve_encoder_tensors(config, weights, options.need_pooler, options.need_classifier);
  std::map<std::string, const ResolvedTensor*> by_name;
  for (const auto& r : resolved) by_name[r.expected.name] = &r;
  auto view = [&](const std::string& name) -> const StoredTensor* {
    auto it = by_name.find(name);
    return it == by_name.end() ? nullptr : it->second->view;
  };
  auto shape_of = [&](const std::string& name) { return by_name.at(name)->expected.shape; };

  Placer placer(backend, options.dtype, enc);
  auto place = [&](const std::string& name) -> TensorView {
    const StoredTensor* v = view(name);
    return v ? placer.place({v}, shape_of(name)) : TensorView{};
  };

  // Mixed precision: only the layers' GEMM weight matrices take the compute
  // dtype. Embedding tables, LayerNorm parameters, biases and the heads stay
  // f32 (the residual stream is f32; the heads are a few B x H x H products).
  auto place_f32 = [&](const std::string& name) -> TensorView {
    const StoredTensor* v = view(name);
    return v ? placer.place_as(DType::f32, {v}, shape_of(name)) : TensorView{};
  };
  EncoderParams& p = enc.params;
  p.word_embeddings = place_f32("embeddings.word_embeddings.weight");
  p.position_embeddings = place_f32("embeddings.position_embeddings.weight");
  p.token_type_embeddings = place_f32("embeddings.token_type_embeddings.weight");
  p.emb_ln_gamma = place_f32("embeddings.LayerNorm.weight");
  p.emb_ln_beta = place_f32("embeddings.LayerNorm.bias");
  const int64_t H = config.hidden_size;
  for (int64_t l = 0; l < config.num_hidden_layers; ++l) {
    const std::string pre = "encoder.layer." + std::to_string(l) + ".";
    EncoderLayerParams layer;
    layer.qkv_w = placer.place({view(pre + "attention.self.query.weight"), view(pre + "attention.self.key.weight"),
                                view(pre + "attention.self.value.weight")},
                               {3 * H, H});
    // The q/k/v GEMM writes the compute dtype. On a GPU its bias goes in that
    // dtype too, so cuBLASLt adds it in the GEMM's epilogue (documented for a
    // bias of the output's dtype) instead of a pass of ours over T x 3H; the
    // CPU keeps it f32 (its kernels add either in the same pass).
    const DType qkv_bias_dtype = backend.device_is_host() ? DType::f32 : options.dtype;
    layer.qkv_b = placer.place_as(qkv_bias_dtype, {view(pre + "attention.self.query.bias"), view(pre + "attention.self.key.bias"),
                                view(pre + "attention.self.value.bias")},
                               {3 * H});
    layer.attn_out_w = place(pre + "attention.output.dense.weight");
    layer.attn_out_b = place_f32(pre + "attention.output.dense.bias");
    layer.attn_ln_gamma = place_f32(pre + "attention.output.LayerNorm.weight");
    layer.attn_ln_beta = place_f32(pre + "attention.output.LayerNorm.bias");
    layer.ffn_in_w = place(pre + "intermediate.dense.weight");
    layer.ffn_in_b = place_f32(pre + "intermediate.dense.bias");
    layer.ffn_out_w = place(pre + "output.dense.weight");
    layer.ffn_out_b = place_f32(pre + "output.dense.bias");
    layer.ffn_ln_gamma = place_f32(pre + "output.LayerNorm.weight");
    layer.ffn_ln_beta = place_f32(pre + "output.LayerNorm.bias");
    p.layers.push_back(layer);
  }
  p.pooler_w = place_f32("pooler.dense.weight");
  p.pooler_b = place_f32("pooler.dense.bias");
  if (config.model_type == ModelType::bert) {
    p.head_out_w = place_f32("classifier.weight");
    p.head_out_b = place_f32("classifier.bias");
  } else {
    p.head_dense_w = place_f32("classifier.dense.weight");
    p.head_dense_b = place_f32("classifier.dense.bias");
    p.head_out_w = place_f32("classifier.out_proj.weight");
    p.head_out_b = place_f32("classifier.out_proj.bias");
  }
  placer.finish();
  enc.weights = std::move(weights);
  return enc;
}

}  // namespace stoke
