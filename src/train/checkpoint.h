// Training checkpoints: a folder a Hugging Face user can load as it is
// (model.safetensors with the *ForSequenceClassification parameter names, f32;
// config.json with id2label / label2id; the tokenizer files), plus what an
// exact resume needs (optimizer.safetensors with both AdamW moments;
// trainer_state.json with the step, data position, micro-step counter for the
// dropout masks, unlogged metrics, the settings) and checksums.json, the
// commit record: SHA-256 of every other file, written last.
//
// A checkpoint folder is written under a temporary name and renamed into place
// (then its parent fsync'd), so `checkpoint-N` exists complete or not at all;
// a kill mid-save leaves a temporary folder that resume removes, and the
// previous checkpoint is the one resumed. A file whose checksum does not match
// makes the checkpoint unreadable (Error format, naming the file).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>
#include <nlohmann/json.hpp>

#include "io/safetensors.h"
#include "model/param_layout.h"

namespace stoke::train {

struct CheckpointContents {
  const ParamLayout* layout = nullptr;
  const float* params = nullptr;           // host copy of the master parameters (layout order)
  const float* exp_avg = nullptr;          // host copies of the moments (nullptr: no optimizer file)
  const float* exp_avg_sq = nullptr;
  std::string config_json;                 // config.json text
  std::vector<std::filesystem::path> tokenizer_files;  // copied as they are
  // Further files copied as they are, by their name inside the folder (which
  // may name a subfolder: "1_Pooling/config.json") — the base model's
  // sentence-transformers files, so `stoke embed` on a trained folder keeps
  // its pooling and normalization.
  std::vector<std::pair<std::string, std::filesystem::path>> extra_files;
  // Files written from text, by their name inside the folder (an embedding
  // model's sentence-transformers files when its base had none).
  std::vector<std::pair<std::string, std::string>> text_files;
  nlohmann::json state;                    // trainer_state.json (nullptr: none)
  // Tensors no loss reaches, written beside the parameters as they are (an
  // embedding model's pooler: sentence-transformers' AutoModel has one and
  // expects it in the file). The caller keeps their data alive.
  std::vector<TensorToWrite> frozen;
};

// Where a parameter is saved: the folder's model.safetensors under its
// layout name, or (a sentence-transformers Dense module's) the module
// folder's "<path>/model.safetensors" as "linear.weight" / "linear.bias",
// sentence-transformers' own layout.
struct StoredParam {
  std::string file;  // relative to the folder
  std::string name;  // inside that file
};
StoredParam stored_param(const ParamLayout& layout, const ParamSlot& slot);

// "checkpoint-<step>" inside `output`.
std::filesystem::path checkpoint_path(const std::filesystem::path& output, int64_t step);

// Writes output/checkpoint-<step> atomically (see above).
void write_checkpoint(const std::filesystem::path& output, int64_t step, const CheckpointContents& contents);

// Writes the same files into an existing folder (the final model goes to the
// output folder itself), each atomically, checksums.json last.
void write_model_files(const std::filesystem::path& folder, const CheckpointContents& contents);

// Checks checksums.json against every file it lists; throws Error(format)
// naming the folder and the first file that differs or is missing.
void verify_checkpoint(const std::filesystem::path& folder);

// The checkpoint-N folders of `output`, by N ascending (temporary folders and
// other names are not listed).
std::vector<std::pair<int64_t, std::filesystem::path>> list_checkpoints(const std::filesystem::path& output);

// Removes temporary checkpoint folders a killed save left behind.
void remove_partial_checkpoints(const std::filesystem::path& output);

// Keeps the newest `keep` checkpoints (and `protect`, the best one, if set);
// removes the others. keep <= 0 keeps all.
void prune_checkpoints(const std::filesystem::path& output, int64_t keep, const std::filesystem::path& protect);

// Reads optimizer.safetensors: both moments, refused unless written for a
// layout with this fingerprint.
void read_optimizer_state(const std::filesystem::path& folder, const ParamLayout& layout, std::vector<float>& exp_avg,
                          std::vector<float>& exp_avg_sq);

// The folder's trainer_state.json.
nlohmann::json read_trainer_state(const std::filesystem::path& folder);

}  // namespace stoke::train
