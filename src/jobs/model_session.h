// What embed and classify share: the device chosen from --device, the
// precision from --precision, the tokenizer and the encoder loaded on it.
#pragma once

#include <memory>
#include <string>

#include "backend/backend.h"
#include "core/dtype.h"
#include "jobs/common_options.h"
#include "jobs/model_tokenizer.h"
#include "model/encoder_params.h"

namespace stoke {

struct ModelSession {
  ModelTokenizer text;
  std::unique_ptr<Backend> backend;  // declared before the encoder: outlives its buffers
  LoadedEncoder encoder;
  DType precision = DType::f32;  // the activation dtype (f32 under --precision int8)
  bool int8 = false;             // --precision int8: the layers' GEMMs are linear_int8
  std::string device_name;
};

// Throws Error with one clear line: a device that is not there (cuda without a
// GPU), a precision not offered.
ModelSession open_model_session(const CommonOptions& options, bool need_classifier);

// The folder's sentence-transformers modules after the encoder: the Dense
// modules after pooling, or a ColBERT model's per-token ones. Every opener
// of an embedding model calls this one (embed, serve, Python).
void load_sentence_modules(LoadedEncoder& encoder, const ModelFolder& folder, Backend& backend);

// The session's model again in f32 on the session's backend (the Dense
// modules too, for embed): the reference an int8 run measures itself against
// (jobs/int8_quality.h). f32 weights in host memory are used where they lie.
LoadedEncoder load_f32_reference(const ModelSession& session, bool need_classifier);

// Whether the device a backend names ("cpu", "cuda:N") multiplies bf16 at
// full speed: the CPU with AVX512-BF16 or AMX; every GPU stoke builds for
// (sm_80 and later).
bool device_has_native_bf16(const std::string& device_name);
// The one line a job prints when its precision will not be fast on this
// device, else "": bf16 on a CPU without native bf16 (widened to f32, slower
// than f32), int8 on a CPU without VNNI or AMX-INT8 (7-bit activations, not
// faster than f32).
std::string precision_speed_warning(Precision precision, const std::string& device_name);
enum class BackendUse { inference, training };
// The backend --device names. auto: the first GPU when one is usable and the
// job runs on the CUDA backend (inference), else the CPU. Throws Error with
// one clear line for a GPU that is not there or a job it cannot run.
std::unique_ptr<Backend> open_backend(const DeviceSpec& device, BackendUse use);

}  // namespace stoke
