// PyTorch checkpoints (`pytorch_model.bin`, `*.pt`: torch.save's zip format,
// PyTorch >= 1.6) read as a state dict, zero-copy and without running code.
//
// Layout: a zip (io/torch_zip.h) whose entries share one top folder, the
// archive name (any name: "archive/", the file's stem, ...):
//   <archive>/data.pkl      the pickled state dict (io/torch_pickle.h, restricted)
//   <archive>/data/<key>    one record per storage, raw little-endian elements
//   <archive>/byteorder     "little" (absent in files older than PyTorch 1.10)
//   <archive>/version, .format_version, .storage_alignment, .data/serialization_id: not needed
//
// The top-level object must be a flat dict (or OrderedDict) of name -> tensor,
// as torch.save(model.state_dict()) writes it; a training checkpoint such as
// {"state_dict": {...}, "epoch": 3} is refused naming what was found.
// Every tensor is checked before any is handed out: a dtype stoke has a DType
// for; non-negative dims whose element count fits 64 bits; row-major contiguous
// strides (a state dict's tensors are; a view with a storage offset is fine);
// storage_offset + numel inside its storage; a storage record whose size is its
// element count times the element size. Tensors may share a storage. Names are
// unique, non-empty and free of NUL bytes.
//
// CRCs: data.pkl and byteorder are checked (small, and a damaged pickle
// should say so rather than fail somewhere in the middle); storage records are
// not — that would read every page of a multi-GB file at open, which `stoke
// inspect` and the shape checks do not need, and a flipped bit in a weight
// cannot make the reader misbehave (safetensors has no checksum at all).
#pragma once

#include <cstddef>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "io/mapped_file.h"
#include "io/safetensors.h"  // StoredTensor: the model loader takes either format's views
#include "io/torch_checkpoint_error.h"

namespace stoke {

// The DType of a typed storage as torch names it in a persistent id
// ("torch.FloatStorage"), and of a dtype global ("torch.uint16", beside an
// UntypedStorage); nullopt for types stoke has no DType for (complex,
// quantized, float8, ...).
std::optional<DType> dtype_of_torch_storage(std::string_view storage_type);
std::optional<DType> dtype_of_torch_dtype(std::string_view dtype);

class TorchCheckpoint {
 public:
  // Maps and validates; throws TorchCheckpointError (kind says which check failed).
  static std::shared_ptr<TorchCheckpoint> open(const std::filesystem::path& path);
  // Validates an in-memory image (tests and fuzzers); the bytes are copied.
  static std::shared_ptr<TorchCheckpoint> from_bytes(std::span<const std::byte> bytes, std::string label = "<memory>");
  TorchCheckpoint(const TorchCheckpoint&) = delete;
  TorchCheckpoint& operator=(const TorchCheckpoint&) = delete;

  const std::filesystem::path& path() const { return path_; }
  // In the state dict's order; data spans point into the file's mapping.
  const std::vector<StoredTensor>& tensors() const { return tensors_; }
  const StoredTensor* find(std::string_view name) const;  // nullptr when absent
  // The archive's top folder ("archive", "pytorch_model", ...).
  const std::string& archive_name() const { return archive_; }
  uint64_t file_size() const { return bytes_.size(); }

 private:
  TorchCheckpoint() = default;
  void parse(const std::string& label);

  std::filesystem::path path_;
  std::unique_ptr<MappedFile> mapping_;  // open()
  std::vector<std::byte> owned_;         // from_bytes()
  std::span<const std::byte> bytes_;
  std::string archive_;
  std::vector<StoredTensor> tensors_;
  std::map<std::string, size_t, std::less<>> index_;
};

}  // namespace stoke
