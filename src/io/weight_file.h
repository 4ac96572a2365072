// One file of a model folder's weights, whatever its format: the loader, the
// shape checks and embed's manifest (sha256 per file) need only its path and
// its validated tensors, so model.safetensors and a restricted-read
// pytorch_model.bin (io/torch_checkpoint.h) stand behind one interface.
#pragma once

#include <filesystem>
#include <memory>
#include <string_view>
#include <vector>

#include "io/safetensors.h"

namespace stoke {

class WeightFile {
 public:
  virtual ~WeightFile() = default;
  virtual const std::filesystem::path& path() const = 0;
  // Views into the file's mapping, valid while the WeightFile lives.
  virtual const std::vector<StoredTensor>& tensors() const = 0;
  // "safetensors" or "torch" (torch.save's zip): for reports.
  virtual std::string_view format() const = 0;
};

// Each opens and validates, throwing its reader's typed error
// (SafetensorsError / TorchCheckpointError).
std::shared_ptr<WeightFile> open_safetensors_weights(const std::filesystem::path& path);
std::shared_ptr<WeightFile> open_torch_weights(const std::filesystem::path& path);

}  // namespace stoke
