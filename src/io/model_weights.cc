#include "io/model_weights.h"

#include <algorithm>
#include <set>

#include <nlohmann/json.hpp>

namespace stoke {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

constexpr const char* kSingle = "model.safetensors";
constexpr const char* kIndex = "model.safetensors.index.json";
constexpr const char* kTorchSingle = "pytorch_model.bin";
constexpr const char* kTorchIndex = "pytorch_model.bin.index.json";
constexpr const char* kPickleMessage =
    "stoke reads pytorch_model.bin (or its sharded index) with a restricted reader that runs no code, but no other "
    "pickle file names; rename it pytorch_model.bin if it holds this model's state dict, or convert it to safetensors";

// The two families of weight files transformers loads, in its order of preference.
struct WeightFormat {
  const char* single;        // model.safetensors / pytorch_model.bin
  const char* index;         // its sharded index
  const char* shard_suffix;  // what the index's shards must be
  std::shared_ptr<WeightFile> (*open)(const fs::path&);
};
constexpr WeightFormat kSafetensors{kSingle, kIndex, ".safetensors", open_safetensors_weights};
constexpr WeightFormat kTorch{kTorchSingle, kTorchIndex, ".bin", open_torch_weights};

bool exists_or_dangling(const fs::path& p) {
  std::error_code ec;
  return fs::exists(fs::symlink_status(p, ec));
}

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// Files torch.save writes under names transformers does not load: listed in the refusal, never opened.
bool is_pickle_name(std::string_view name) {
  return ends_with(name, ".bin") || ends_with(name, ".pt") || ends_with(name, ".pth") || ends_with(name, ".ckpt");
}

[[noreturn]] void fail(ModelFolderErrc kind, const std::string& message) {
  throw ModelFolderError(kind, message);
}

// Opens one weight file after checking that its name stays inside the folder.
std::shared_ptr<WeightFile> open_inside(const fs::path& folder, const std::string& name, const std::string& named_by,
                                        const WeightFormat& format) {
  if (std::string why = folder_path_problem(folder, name); !why.empty()) {
    fail(ModelFolderErrc::shard_path_escapes, named_by + ": weight file \"" + name + "\" " + why);
  }
  const fs::path path = folder / name;
  std::error_code ec;
  if (!fs::exists(path, ec)) {
    fail(ModelFolderErrc::shard_missing, named_by + ": weight file \"" + name + "\" does not exist in " +
                                             folder.string());
  }
  if (!fs::is_regular_file(path, ec)) {
    fail(ModelFolderErrc::shard_missing, named_by + ": weight file \"" + name + "\" is not a regular file");
  }
  return format.open(path);
}

}  // namespace

const StoredTensor* ModelWeights::find(std::string_view name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : it->second.view;
}

std::string ModelWeights::file_of(std::string_view name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) return "";
  return files_[it->second.file]->path().filename().string();
}

ModelWeights open_model_weights(const fs::path& folder) {
  std::error_code ec;
  if (!fs::is_directory(folder, ec)) {
    throw Error(fs::exists(folder, ec) ? Errc::invalid_argument : Errc::not_found,
                folder.string() + ": not a folder; expected a Hugging Face model folder");
  }
  ModelWeights w;
  w.folder_ = folder;

  auto add_file = [&](std::shared_ptr<WeightFile> file) {
    const size_t index = w.files_.size();
    w.files_.push_back(std::move(file));
    const WeightFile& f = *w.files_.back();
    for (const StoredTensor& t : f.tensors()) {
      auto [it, inserted] = w.tensors_.emplace(t.name, ModelWeights::Entry{&t, index});
      if (!inserted) {
        fail(ModelFolderErrc::tensor_in_two_shards,
             folder.string() + ": tensor \"" + t.name + "\" is in two weight files, " +
                 w.files_[it->second.file]->path().filename().string() + " and " +
                 f.path().filename().string() + " (which one is meant?)");
      }
    }
  };

  // A sharded index (model.safetensors.index.json or pytorch_model.bin.index.json):
  // its weight_map names each tensor's shard, and every shard must hold what it is said to.
  auto load_index = [&](const WeightFormat& format) {
    const fs::path index_path = folder / format.index;
    const std::string label = index_path.string();
    if (std::string why = folder_path_problem(folder, format.index); !why.empty()) {
      fail(ModelFolderErrc::shard_path_escapes, label + " " + why);
    }
    json root;
    try {
      root = parse_json_strict(read_json_text(index_path), label);
    } catch (const ModelFolderError&) {
      throw;
    } catch (const Error& e) {
      if (e.code() != Errc::format) throw;
      fail(ModelFolderErrc::bad_index, e.what());
    }
    if (!root.is_object()) fail(ModelFolderErrc::bad_index, label + ": expected a JSON object");
    auto wm = root.find("weight_map");
    if (wm == root.end() || !wm->is_object()) {
      fail(ModelFolderErrc::bad_index, label + ": field \"weight_map\": expected an object of tensor name -> "
                                               "shard file");
    }
    if (wm->empty()) fail(ModelFolderErrc::bad_index, label + ": field \"weight_map\" names no tensors");

    // Shards in order of first mention; two spellings of one file ("a", "./a") are one shard.
    std::vector<std::string> shard_names;
    std::map<std::string, size_t> shard_by_name;       // as written -> shard index
    std::map<fs::path, size_t> shard_by_resolved;      // canonical path -> shard index
    std::vector<std::pair<std::string, size_t>> expected;  // tensor -> shard index
    for (const auto& [tensor, shard] : wm->items()) {
      if (tensor.empty() || tensor.find('\0') != std::string::npos) {
        fail(ModelFolderErrc::bad_index, label + ": weight_map has an empty tensor name or one with a NUL byte");
      }
      if (!shard.is_string()) {
        fail(ModelFolderErrc::bad_index, label + ": weight_map[\"" + tensor + "\"]: expected a file name");
      }
      const std::string name = shard.get<std::string>();
      auto known = shard_by_name.find(name);
      if (known == shard_by_name.end()) {
        if (!ends_with(name, format.shard_suffix)) {
          fail(ModelFolderErrc::bad_index, label + ": shard \"" + name + "\" (tensor \"" + tensor +
                                               "\"): expected a " + format.shard_suffix + " file, as " +
                                               format.index + " names");
        }
        if (std::string why = folder_path_problem(folder, name); !why.empty()) {
          fail(ModelFolderErrc::shard_path_escapes,
               label + ": shard \"" + name + "\" (tensor \"" + tensor + "\") " + why);
        }
        const fs::path resolved = fs::weakly_canonical(folder / name, ec);
        auto same = shard_by_resolved.find(resolved);
        size_t index;
        if (same != shard_by_resolved.end()) {
          index = same->second;
        } else {
          index = shard_names.size();
          shard_names.push_back(name);
          shard_by_resolved.emplace(resolved, index);
        }
        known = shard_by_name.emplace(name, index).first;
      }
      expected.emplace_back(tensor, known->second);
    }

    w.sharded_ = true;
    for (const std::string& name : shard_names) add_file(open_inside(folder, name, label, format));
    for (const auto& [tensor, shard] : expected) {
      auto it = w.tensors_.find(tensor);
      if (it == w.tensors_.end() || it->second.file != shard) {
        std::string where = it == w.tensors_.end()
                                ? "no shard holds it"
                                : "it is in " + w.files_[it->second.file]->path().filename().string();
        fail(ModelFolderErrc::tensor_not_in_shard, label + ": weight_map puts tensor \"" + tensor + "\" in " +
                                                       shard_names[shard] + ", which does not hold it (" +
                                                       where + ")");
      }
    }
  };

  // transformers' order: safetensors first, then torch.save's zip (read without running code).
  for (const WeightFormat* format : {&kSafetensors, &kTorch}) {
    if (exists_or_dangling(folder / format->single)) {
      add_file(open_inside(folder, format->single, folder.string(), *format));
      return w;
    }
    if (exists_or_dangling(folder / format->index)) {
      load_index(*format);
      return w;
    }
  }

  // No weights under a name transformers loads: say why precisely, and open nothing.
  std::vector<std::string> pickles, others;
  for (fs::directory_iterator it(folder, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (is_pickle_name(name)) pickles.push_back(name);
    if (name == "tf_model.h5" || name == "flax_model.msgpack" || ends_with(name, ".onnx") ||
        ends_with(name, ".gguf")) {
      others.push_back(name);
    }
  }
  std::sort(pickles.begin(), pickles.end());
  std::sort(others.begin(), others.end());
  if (!pickles.empty()) {
    std::string list;
    for (const auto& p : pickles) list += (list.empty() ? "" : ", ") + p;
    fail(ModelFolderErrc::pickle_only, folder.string() + ": weights only in pickle files under other names (" + list +
                                           "): " + kPickleMessage);
  }
  std::string message = folder.string() + ": no weights: none of " + kSingle + ", " + kIndex + ", " + kTorchSingle +
                        " or " + kTorchIndex;
  if (!others.empty()) {
    message += " (found";
    for (const auto& o : others) message += " " + o;
    message += ", which stoke does not read; convert to safetensors)";
  }
  fail(ModelFolderErrc::no_weights, message);
}

}  // namespace stoke
