// A BERT (or XLM-R) model folder with random weights and a fixture's
// tokenizer, at any size: the micro and bert-base-size models of the doctor
// and tune tests (made on the fly, never stored).
#pragma once

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/file_util.h"
#include "io/encoder_layout.h"
#include "io/hf_config.h"
#include "io/safetensors.h"
#include "support/fixtures.h"

namespace stoke::test {

// A copy of the model folder `src`'s config and tokenizer files with
// `overrides` applied to config.json and random encoder weights (the head,
// if any, is left to the loader's seeded init): any architecture at any size.
inline std::filesystem::path make_random_encoder(const std::filesystem::path& dir, const std::filesystem::path& src,
                                                 const nlohmann::json& overrides, uint64_t seed = 1) {
  namespace fs = std::filesystem;
  fs::create_directories(dir);
  for (const char* f : {"vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
                        "sentencepiece.bpe.model"})
    if (fs::exists(src / f)) fs::copy_file(src / f, dir / f, fs::copy_options::overwrite_existing);
  nlohmann::json config = nlohmann::json::parse(read_file(src / "config.json"));
  config.update(overrides);
  std::ofstream(dir / "config.json") << config.dump(2);
  const HfConfig c = parse_hf_config(config.dump(), "config.json");
  std::vector<std::vector<float>> data;
  std::vector<TensorToWrite> tensors;
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (const ExpectedTensor& t : expected_tensors(c)) {
    if (t.part != ExpectedTensor::encoder) continue;
    int64_t n = 1;
    for (int64_t d : t.shape) n *= d;
    std::vector<float> v(static_cast<size_t>(n));
    const bool layer_norm = t.name.find("LayerNorm") != std::string::npos;
    const bool bias = t.name.size() > 5 && t.name.compare(t.name.size() - 5, 5, ".bias") == 0;
    for (float& x : v) {
      if (bias) {
        x = 0;
      } else if (layer_norm) {
        x = 1;
      } else {  // uniform with the standard deviation 0.02 of BERT's init
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        x = static_cast<float>((static_cast<double>(s >> 11) * 0x1.0p-53 - 0.5) * 0.02 * std::sqrt(12.0));
      }
    }
    data.push_back(std::move(v));
    tensors.push_back({t.name, DType::f32, t.shape,
                       {reinterpret_cast<const std::byte*>(data.back().data()), data.back().size() * 4}});
  }
  write_safetensors(dir / "model.safetensors", tensors);
  return dir;
}

// `base` names the fixture whose architecture and tokenizer are kept
// ("tiny-bert": WordPiece, "tiny-xlmr": SentencePiece).
inline std::filesystem::path make_random_bert(const std::filesystem::path& dir, int64_t hidden, int64_t layers,
                                              int64_t heads, int64_t intermediate, uint64_t seed = 1,
                                              const std::string& base = "tiny-bert") {
  return make_random_encoder(dir, fixture("models/" + base),
                             {{"hidden_size", hidden},
                              {"num_hidden_layers", layers},
                              {"num_attention_heads", heads},
                              {"intermediate_size", intermediate}},
                             seed);
}

}  // namespace stoke::test
