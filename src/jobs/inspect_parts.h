// The pieces of `stoke inspect` (jobs/inspect_job.h), one per kind of path it
// describes; run_inspect picks one. Each prints its report to `out` and throws
// Error with one line for the first problem it finds.
#pragma once

#include <cstdint>
#include <filesystem>
#include <ostream>
#include <string>
#include <vector>

namespace stoke::inspect {

// A model folder: config.json, tokenizer, sentence-transformers modules,
// weights checked against the config, and whether it embeds or classifies
// (inspect_model.cc).
void model_folder(const std::filesystem::path& dir, std::ostream& out);
// One .safetensors file, validated as the loader validates it (inspect_model.cc).
void safetensors_file(const std::filesystem::path& path, std::ostream& out);
// One .npy file: dtype, shape, and whether the file holds the bytes its header
// promises (inspect_npy.cc).
void npy_file(const std::filesystem::path& path, std::ostream& out);
// A `stoke embed` output folder, from its manifest (inspect_output_folder.cc).
void embed_output_folder(const std::filesystem::path& dir, std::ostream& out);
// A `stoke train` output folder: run.json and checkpoint-*/ (inspect_output_folder.cc).
// `final_model` says whether the folder also holds the final model (then the
// model's report came first and this adds a few lines).
void train_output_folder(const std::filesystem::path& dir, bool final_model, std::ostream& out);
bool looks_like_train_output(const std::filesystem::path& dir);

// "1,234,567".
std::string with_commas(uint64_t n);
// "[3000, 64]".
std::string shape_text(const std::vector<int64_t>& shape);

}  // namespace stoke::inspect
