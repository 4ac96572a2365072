#include "jobs/model_session.h"

#include "core/error.h"
#include "cpu/cpu_backend.h"
#include "cpu/kernels.h"
#ifdef STOKE_HAVE_CUDA
#include "cuda/cuda_backend.h"
#include "cuda/device.h"
#endif

namespace stoke {

DType parse_precision(const std::string& text) {
  if (text == "f32") return DType::f32;
  if (text == "bf16") return DType::bf16;
  if (text == "f16") return DType::f16;
  throw Error(Errc::invalid_argument, "--precision \"" + text + "\": expected f32, bf16 or f16");
}

bool device_has_native_bf16(const std::string& device_name) {
  if (device_name == "cpu") return cpu::cpu_has_native_bf16();
  return device_name.rfind("cuda", 0) == 0;
}

std::unique_ptr<Backend> open_backend(const DeviceSpec& device, BackendUse use) {
  if (device.kind == DeviceSpec::Kind::cuda) {
#ifdef STOKE_HAVE_CUDA
    cuda::require_device(device.index);  // one clear line when there is no such GPU
    // Training: every op the trainer enqueues for BERT-family encoders is on
    // the GPU (MPNet's relative-position attention training forms refuse in
    // one line); the step runs eagerly. --device auto still trains on the CPU
    // until a GPU run has checked this path (docs/cuda.md).
    return std::make_unique<cuda::CudaBackend>(device.index);
#else
    throw Error(Errc::unsupported, "--device cuda: this stoke was built without the CUDA backend; use --device cpu");
#endif
  }
#ifdef STOKE_HAVE_CUDA
  // auto: the first GPU when one is usable (and the job runs there), else the CPU.
  if (device.kind == DeviceSpec::Kind::automatic && use == BackendUse::inference &&
      cuda::unavailable_reason().empty())
    return std::make_unique<cuda::CudaBackend>(0);
#endif
  return std::make_unique<cpu::CpuBackend>(cpu::fast_kernels());
}

ModelSession open_model_session(const CommonOptions& options, bool need_classifier) {
  validate_common_options(options);
  ModelSession s;
  s.precision = parse_precision(options.precision);
  s.text = open_model_tokenizer(options.model, options.max_length);
  s.backend = open_backend(parse_device(options.device), BackendUse::inference);
  s.device_name = s.backend->name();
  EncoderLoadOptions load;
  load.dtype = s.precision;
  load.need_classifier = need_classifier;
  s.encoder = load_encoder(s.text.folder.config, open_model_folder_weights(s.text.folder), *s.backend, load);
  // sentence-transformers Dense modules shape the sentence vectors (embed); classify reads logits.
  if (!need_classifier) load_dense_modules(s.encoder, s.text.folder.dir, s.text.folder.st.dense, *s.backend);
  return s;
}

}  // namespace stoke
