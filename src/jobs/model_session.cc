#include "jobs/model_session.h"

#include <cstdio>

#include "core/error.h"
#include "model/colbert_model.h"
#include "cpu/cpu_backend.h"
#include "cpu/kernels.h"
#ifdef STOKE_HAVE_CUDA
#include "cuda/cuda_backend.h"
#include "cuda/device.h"
#endif

namespace stoke {

bool device_has_native_bf16(const std::string& device_name) {
  if (device_name == "cpu") return cpu::cpu_has_native_bf16();
  return device_name.rfind("cuda", 0) == 0;
}

std::string precision_speed_warning(Precision precision, const std::string& device_name) {
  if (device_name != "cpu") return "";
  if (precision == Precision::bf16 && !cpu::cpu_has_native_bf16())
    return "--precision bf16: this CPU has no native bf16 (no AVX512-BF16, no AMX-BF16), so every GEMM widens bf16 "
           "to f32 and the run is slower than --precision f32 here";
  if (precision == Precision::int8 && !cpu::cpu_has_int8_dot())
    return "--precision int8: this CPU has no VNNI or AMX-INT8, so the int8 GEMMs take oneDNN's 16-bit pair sums "
           "with 7-bit activations — exact, less accurate, and not faster than --precision f32 here";
  return "";
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
  s.int8 = options.precision == Precision::int8;
  s.precision = precision_dtype(options.precision);
  DeviceSpec device = options.device;
  if (s.int8 && device.kind == DeviceSpec::Kind::cuda)
    throw Error(Errc::unsupported, "--precision int8 runs on the CPU only (the CUDA backend has no int8 GEMM); "
                                   "use --device cpu, or --precision f32|bf16 on the GPU");
  if (s.int8) device.kind = DeviceSpec::Kind::cpu;  // auto: int8 is a CPU feature
  s.text = open_model_tokenizer(options.model, options.max_length);
  s.backend = open_backend(device, BackendUse::inference);
  s.device_name = s.backend->name();
  if (const std::string w = precision_speed_warning(options.precision, s.device_name); !w.empty())
    std::fprintf(stderr, "stoke: %s\n", w.c_str());
  EncoderLoadOptions load;
  load.dtype = s.precision;
  load.int8_linears = s.int8;
  load.need_classifier = need_classifier;
  s.encoder = load_encoder(s.text.folder.config, open_model_folder_weights(s.text.folder), *s.backend, load);
  // sentence-transformers Dense modules shape the sentence vectors (embed); classify reads logits.
  if (!need_classifier) load_sentence_modules(s.encoder, s.text.folder, *s.backend);
  return s;
}

void load_sentence_modules(LoadedEncoder& encoder, const ModelFolder& folder, Backend& backend) {
  // A ColBERT model's Dense modules run on every token instead (model/colbert_model.h).
  if (folder.st.colbert)
    load_colbert_modules(encoder, folder, backend);
  else
    load_dense_modules(encoder, folder.dir, folder.st.dense, backend);
}

LoadedEncoder load_f32_reference(const ModelSession& s, bool need_classifier) {
  EncoderLoadOptions load;
  load.dtype = DType::f32;
  load.need_classifier = need_classifier;
  LoadedEncoder e = load_encoder(s.text.folder.config, open_model_folder_weights(s.text.folder), *s.backend, load);
  if (!need_classifier) load_sentence_modules(e, s.text.folder, *s.backend);
  return e;
}

}  // namespace stoke
