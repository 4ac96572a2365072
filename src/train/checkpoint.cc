#include "train/checkpoint.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <span>

#include "core/crash_point.h"
#include "core/error.h"
#include "core/file_util.h"
#include "core/sha256.h"
#include "io/atomic_file.h"
#include "io/safetensors.h"

namespace stoke::train {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr const char* kTempMarker = ".stoke-partial-";

std::span<const std::byte> bytes_of(const float* p, int64_t n) {
  return {reinterpret_cast<const std::byte*>(p), static_cast<size_t>(n) * 4};
}

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) throw Error(Errc::io, p.string() + ": cannot open");
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Writes every file of a checkpoint into `folder`, each atomically; returns
// the checksums (name -> sha256) of what it wrote.
json write_files(const fs::path& folder, const CheckpointContents& c) {
  json sums = json::object();
  auto put = [&](const std::string& name, std::span<const std::byte> bytes) {
    write_file_atomic(folder / name, bytes);
    sums[name] = sha256_hex(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
  };
  auto put_text = [&](const std::string& name, const std::string& text) {
    put(name, {reinterpret_cast<const std::byte*>(text.data()), text.size()});
  };
  auto make_parent = [&](const std::string& name) {
    std::error_code ec;
    fs::create_directories((folder / name).parent_path(), ec);
    if (ec) throw Error(Errc::io, (folder / name).parent_path().string() + ": cannot create: " + ec.message());
  };
  // model.safetensors first (with the frozen tensors), then each Dense module's file.
  std::vector<std::pair<std::string, std::vector<TensorToWrite>>> files{{"model.safetensors", {}}};
  for (const ParamSlot& s : c.layout->slots()) {
    const StoredParam where = stored_param(*c.layout, s);
    auto it = std::find_if(files.begin(), files.end(), [&](const auto& f) { return f.first == where.file; });
    if (it == files.end()) it = files.insert(files.end(), {where.file, {}});
    it->second.push_back({where.name, DType::f32, s.shape, bytes_of(c.params + s.offset, s.numel)});
  }
  files.front().second.insert(files.front().second.end(), c.frozen.begin(), c.frozen.end());
  for (const auto& [name, tensors] : files) {
    make_parent(name);
    put(name, serialize_safetensors(tensors, {{"format", "pt"}}));
  }
  if (c.exp_avg && c.exp_avg_sq) {
    const int64_t n = c.layout->numel();
    put("optimizer.safetensors",
        serialize_safetensors({{"exp_avg", DType::f32, {n}, bytes_of(c.exp_avg, n)},
                               {"exp_avg_sq", DType::f32, {n}, bytes_of(c.exp_avg_sq, n)}},
                              {{"layout", c.layout->fingerprint()}, {"optimizer", "adamw"}}));
  }
  put_text("config.json", c.config_json);
  for (const fs::path& f : c.tokenizer_files) put_text(f.filename().string(), read_text(f));
  for (const auto& [name, text] : c.text_files) {
    make_parent(name);
    put_text(name, text);
  }
  for (const auto& [name, source] : c.extra_files) {
    make_parent(name);
    put_text(name, read_text(source));
  }
  if (!c.state.is_null()) put_text("trainer_state.json", c.state.dump(2) + "\n");
  crash_point("checkpoint_files");
  // The commit record, last.
  write_file_atomic(folder / "checksums.json", json{{"sha256", sums}}.dump(2) + "\n");
  return sums;
}

}  // namespace

StoredParam stored_param(const ParamLayout& layout, const ParamSlot& slot) {
  if (slot.dense < 0) return {"model.safetensors", slot.name};
  const std::string& path = layout.dense()[static_cast<size_t>(slot.dense)].path;
  return {path + "/model.safetensors", slot.shape.size() == 2 ? "linear.weight" : "linear.bias"};
}

fs::path checkpoint_path(const fs::path& output, int64_t step) {
  return output / ("checkpoint-" + std::to_string(step));
}

void write_checkpoint(const fs::path& output, int64_t step, const CheckpointContents& c) {
  const fs::path final_dir = checkpoint_path(output, step);
  const fs::path tmp = output / ("checkpoint-" + std::to_string(step) + kTempMarker + std::to_string(::getpid()));
  std::error_code ec;
  fs::remove_all(tmp, ec);
  fs::create_directories(tmp, ec);
  if (ec) throw Error(Errc::io, tmp.string() + ": cannot create the checkpoint folder: " + ec.message());
  try {
    write_files(tmp, c);
    fsync_directory(tmp);
    crash_point("checkpoint_rename");
    if (fs::exists(final_dir)) fs::remove_all(final_dir);  // a stale one of the same step (a run resumed before it)
    fs::rename(tmp, final_dir, ec);
    if (ec) throw Error(Errc::io, final_dir.string() + ": cannot rename the checkpoint into place: " + ec.message());
    fsync_directory(output);
  } catch (...) {
    fs::remove_all(tmp, ec);
    throw;
  }
}

void write_model_files(const fs::path& folder, const CheckpointContents& c) {
  std::error_code ec;
  fs::create_directories(folder, ec);
  if (ec) throw Error(Errc::io, folder.string() + ": cannot create: " + ec.message());
  write_files(folder, c);
  fsync_directory(folder);
}

void verify_checkpoint(const fs::path& folder) {
  const fs::path sums_path = folder / "checksums.json";
  if (!fs::exists(sums_path))
    throw Error(Errc::format, folder.string() + ": no checksums.json (an incomplete checkpoint)");
  const json sums = json::parse(read_text(sums_path), nullptr, false);
  if (!sums.is_object() || !sums.contains("sha256") || !sums["sha256"].is_object())
    throw Error(Errc::format, sums_path.string() + ": not a checksum list");
  for (const auto& [name, want] : sums["sha256"].items()) {
    const fs::path f = folder / name;
    if (!fs::exists(f)) throw Error(Errc::format, folder.string() + ": " + name + " is missing");
    if (!want.is_string() || sha256_file(f) != want.get<std::string>())
      throw Error(Errc::format, folder.string() + ": " + name + " does not match its checksum (corrupted)");
  }
}

std::vector<std::pair<int64_t, fs::path>> list_checkpoints(const fs::path& output) {
  std::vector<std::pair<int64_t, fs::path>> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(output, ec)) {
    const std::string name = e.path().filename().string();
    if (!e.is_directory() || name.rfind("checkpoint-", 0) != 0) continue;
    const std::string num = name.substr(11);
    if (num.empty() || num.size() > 15 || !std::all_of(num.begin(), num.end(), ::isdigit)) continue;
    out.push_back({std::stoll(num), e.path()});
  }
  std::sort(out.begin(), out.end());
  return out;
}

void remove_partial_checkpoints(const fs::path& output) {
  std::error_code ec;
  std::vector<fs::path> partial;
  for (const auto& e : fs::directory_iterator(output, ec))
    if (e.path().filename().string().find(kTempMarker) != std::string::npos) partial.push_back(e.path());
  for (const auto& p : partial) fs::remove_all(p, ec);
}

void prune_checkpoints(const fs::path& output, int64_t keep, const fs::path& protect) {
  if (keep <= 0) return;
  auto all = list_checkpoints(output);
  int64_t kept = 0;
  for (auto it = all.rbegin(); it != all.rend(); ++it) {
    if (!protect.empty() && fs::equivalent(it->second, protect)) continue;
    if (kept < keep) {
      ++kept;
      continue;
    }
    std::error_code ec;
    fs::remove_all(it->second, ec);
  }
}

void read_optimizer_state(const fs::path& folder, const ParamLayout& layout, std::vector<float>& exp_avg,
                          std::vector<float>& exp_avg_sq) {
  auto file = SafetensorsFile::open(folder / "optimizer.safetensors");
  const auto& meta = file->metadata();
  auto it = meta.find("layout");
  if (it == meta.end() || it->second != layout.fingerprint())
    throw Error(Errc::refused, (folder / "optimizer.safetensors").string() +
                                   ": written for another parameter layout (model or label count changed)");
  for (auto [name, dst] : {std::pair{"exp_avg", &exp_avg}, std::pair{"exp_avg_sq", &exp_avg_sq}}) {
    const StoredTensor* t = file->find(name);
    if (!t || t->dtype != DType::f32 || t->numel() != layout.numel())
      throw Error(Errc::format, (folder / "optimizer.safetensors").string() + ": tensor " + name +
                                    " missing or not f32 [" + std::to_string(layout.numel()) + "]");
    dst->resize(static_cast<size_t>(layout.numel()));
    std::memcpy(dst->data(), t->data.data(), dst->size() * 4);
  }
}

json read_trainer_state(const fs::path& folder) {
  const json state = json::parse(read_text(folder / "trainer_state.json"), nullptr, false);
  if (!state.is_object()) throw Error(Errc::format, (folder / "trainer_state.json").string() + ": not a JSON object");
  return state;
}

}  // namespace stoke::train
