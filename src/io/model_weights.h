// The weights of a Hugging Face model folder, in transformers' order of
// preference: model.safetensors, the shards named by
// model.safetensors.index.json, pytorch_model.bin, the shards named by
// pytorch_model.bin.index.json. torch.save's files are read by the restricted
// reader (io/torch_checkpoint.h: no code runs, globals allowed by name only)
// behind the same checks as safetensors. Files are mapped, not copied; the
// views stay valid as long as the ModelWeights (or a copy) lives.
//
// Refused (ModelFolderError, each naming the offending file / tensor):
//   shard names that are absolute, contain "..", or resolve outside the folder
//   (symlinks included, model.safetensors too)      -> shard_path_escapes
//   a shard the index names that does not exist     -> shard_missing
//   a tensor held by two shard files                -> tensor_in_two_shards
//   a weight_map entry its shard does not hold      -> tensor_not_in_shard
//   a malformed index, or a shard of the other format -> bad_index
//   only pickle files under other names (model.pt, *.pth, training_args.bin, ...)
//                                                   -> pickle_only (never opened)
//   nothing at all                                  -> no_weights
// A malformed weight file throws its reader's error: SafetensorsError or
// TorchCheckpointError (the kind says which check).
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "io/model_folder_error.h"
#include "io/safetensors.h"
#include "io/weight_file.h"

namespace stoke {

class ModelWeights {
 public:
  struct Entry {
    const StoredTensor* view;   // points into files()[file]
    size_t file;              // index into files()
  };

  const std::filesystem::path& folder() const { return folder_; }
  // One file for model.safetensors / pytorch_model.bin; the shards in index order otherwise.
  const std::vector<std::shared_ptr<WeightFile>>& files() const { return files_; }
  bool sharded() const { return sharded_; }
  // Every tensor of every file, by name (the union; no name is in two files).
  const std::map<std::string, Entry, std::less<>>& tensors() const { return tensors_; }
  const StoredTensor* find(std::string_view name) const;           // nullptr when absent
  // The file holding `name` ("" when absent), for messages.
  std::string file_of(std::string_view name) const;
  size_t size() const { return tensors_.size(); }

 private:
  friend ModelWeights open_model_weights(const std::filesystem::path& folder);
  std::filesystem::path folder_;
  std::vector<std::shared_ptr<WeightFile>> files_;
  std::map<std::string, Entry, std::less<>> tensors_;
  bool sharded_ = false;
};

// Opens the weights of `folder` (see the refusals above). The first of
// model.safetensors, model.safetensors.index.json, pytorch_model.bin and
// pytorch_model.bin.index.json that exists wins, as in transformers.
ModelWeights open_model_weights(const std::filesystem::path& folder);

}  // namespace stoke
