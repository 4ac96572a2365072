// `stoke inspect PATH`: which kind of path this is — decided by what is in a
// folder and by a file's first bytes, never by its name alone — and the
// report for that kind (jobs/inspect_parts.h). Anything else gets one line
// naming what it is and what inspect reads.
#include "jobs/inspect_job.h"

#include <algorithm>
#include <filesystem>

#include "core/error.h"
#include "io/file_kind.h"
#include "jobs/inspect_parts.h"

namespace stoke {

namespace fs = std::filesystem;

namespace {

constexpr const char* kWhatInspectReads =
    "inspect reads a model folder, a .safetensors file, a .npy file, or an embed or train output folder";

// Files of a model folder or an output folder given alone: say which folder to give.
std::string folder_hint(const fs::path& path, FileKind kind) {
  if (kind != FileKind::json) return "";
  const std::string name = path.filename().string();
  const std::string parent = path.parent_path().empty() ? "." : path.parent_path().string();
  static const char* kModelFiles[] = {"config.json", "tokenizer.json", "tokenizer_config.json", "modules.json",
                                      "sentence_bert_config.json", "special_tokens_map.json",
                                      "config_sentence_transformers.json", "model.safetensors.index.json"};
  for (const char* f : kModelFiles)
    if (name == f) return " (" + name + " belongs to a model folder: stoke inspect " + parent + ")";
  if (name == "manifest.json") return " (an embed output folder's manifest: stoke inspect " + parent + ")";
  if (name == "run.json" || name == "trainer_state.json" || name == "checksums.json")
    return " (" + name + " belongs to a train output folder: stoke inspect " + parent + ")";
  return "";
}

std::string special_file_kind(fs::file_type t) {
  switch (t) {
    case fs::file_type::fifo: return "a FIFO";
    case fs::file_type::socket: return "a socket";
    case fs::file_type::character: return "a character device";
    case fs::file_type::block: return "a block device";
    default: return "not a regular file";
  }
}

// Names in a folder inspect does not recognise, for its one line.
std::string some_entries(const fs::path& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    names.push_back(e.path().filename().string() + (e.is_directory(ec) ? "/" : ""));
    if (names.size() > 64) break;  // a huge folder: a sample is enough
  }
  if (names.empty()) return "it is empty";
  std::sort(names.begin(), names.end());
  std::string s = "it holds ";
  for (size_t i = 0; i < names.size() && i < 4; ++i) s += (i ? ", " : "") + names[i];
  if (names.size() > 4) s += ", ...";
  return s;
}

void inspect_folder(const fs::path& dir, std::ostream& out) {
  std::error_code ec;
  auto has = [&](const char* name) { return fs::exists(dir / name, ec); };
  const bool model = has("config.json") || has("modules.json");  // older sentence-transformers saves: 0_BERT/config.json
  if (has("manifest.json") && !model) return inspect::embed_output_folder(dir, out);
  const bool train = inspect::looks_like_train_output(dir);
  if (model) {
    inspect::model_folder(dir, out);
    if (train) inspect::train_output_folder(dir, true, out);
    return;
  }
  if (train) return inspect::train_output_folder(dir, false, out);
  // Weights or tokenizer files without a config: the model folder's own error names what is missing.
  for (const char* f : {"model.safetensors", "model.safetensors.index.json", "pytorch_model.bin", "tokenizer.json",
                        "vocab.txt", "sentencepiece.bpe.model"})
    if (has(f)) return inspect::model_folder(dir, out);
  throw Error(Errc::not_found, dir.string() + ": a folder with no config.json (a model folder), manifest.json (an "
                                              "embed output folder) or checkpoint-*/ (a train output folder); " +
                                   some_entries(dir) + "; " + kWhatInspectReads);
}

}  // namespace

void run_inspect(const std::string& path, std::ostream& out) {
  std::error_code ec;
  const fs::path p(path);
  const fs::file_status st = fs::status(p, ec);
  if (ec || !fs::exists(st)) throw Error(Errc::not_found, path + ": no such file or folder");
  if (fs::is_directory(st)) return inspect_folder(p, out);
  // Reading a FIFO or a device could block or never end.
  if (!fs::is_regular_file(st))
    throw Error(Errc::invalid_argument, path + ": " + special_file_kind(st.type()) + "; " + kWhatInspectReads);
  const FileSniff kind = sniff_file(p);
  if (kind.kind == FileKind::safetensors) return inspect::safetensors_file(p, out);
  if (kind.kind == FileKind::npy) return inspect::npy_file(p, out);
  throw Error(Errc::unsupported, path + ": " + kind.description + folder_hint(p, kind.kind) + "; " + kWhatInspectReads);
}

namespace inspect {

std::string with_commas(uint64_t n) {
  std::string digits = std::to_string(n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0) out.push_back(',');
    out.push_back(digits[i]);
  }
  return out;
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

}  // namespace inspect

}  // namespace stoke
