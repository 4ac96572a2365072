#include "io/weight_file.h"

#include "io/torch_checkpoint.h"

namespace stoke {

namespace {

// Both readers already have path() and tensors(); this only names the format.
template <class File>
class WeightFileOf final : public WeightFile {
 public:
  WeightFileOf(std::shared_ptr<File> file, std::string_view format) : file_(std::move(file)), format_(format) {}
  const std::filesystem::path& path() const override { return file_->path(); }
  const std::vector<StoredTensor>& tensors() const override { return file_->tensors(); }
  std::string_view format() const override { return format_; }

 private:
  std::shared_ptr<File> file_;
  std::string_view format_;
};

}  // namespace

std::shared_ptr<WeightFile> open_safetensors_weights(const std::filesystem::path& path) {
  return std::make_shared<WeightFileOf<SafetensorsFile>>(SafetensorsFile::open(path), "safetensors");
}

std::shared_ptr<WeightFile> open_torch_weights(const std::filesystem::path& path) {
  return std::make_shared<WeightFileOf<TorchCheckpoint>>(TorchCheckpoint::open(path), "torch");
}

}  // namespace stoke
