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
  DType precision = DType::f32;
  std::string device_name;
};

// Throws Error with one clear line: a device that is not there (cuda without a
// GPU, or before the CUDA backend runs models), a precision not offered.
ModelSession open_model_session(const CommonOptions& options, bool need_classifier);

DType parse_precision(const std::string& text);
// The backend --device names (auto: the CPU until the CUDA backend runs models).
std::unique_ptr<Backend> open_backend(const DeviceSpec& device);

}  // namespace stoke
