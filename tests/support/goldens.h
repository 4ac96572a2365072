// The Hugging Face goldens of ../shared/fixtures/golden (tiny-bert, tiny-xlmr)
// and of tests/golden (the added architectures, same format) as tests read them:
// tensors as doubles, relative errors, and golden token rows packed without
// padding (the mask's zeros dropped), for the model and training tests.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "io/model_folder.h"
#include "io/safetensors.h"
#include "model/packed_batch.h"
#include "support/fixtures.h"

namespace stoke::test::goldens {

// A golden tensor as doubles (F32, F64 or I64).
inline std::vector<double> golden(const SafetensorsFile& f, const std::string& name) {
  const StoredTensor* t = f.find(name);
  if (!t) throw std::runtime_error("golden tensor missing: " + name);
  std::vector<double> out(static_cast<size_t>(t->numel()));
  const auto* p = reinterpret_cast<const unsigned char*>(t->data.data());
  for (size_t i = 0; i < out.size(); ++i) {
    if (t->dtype == DType::f32) {
      float v;
      std::memcpy(&v, p + i * 4, 4);
      out[i] = v;
    } else if (t->dtype == DType::f64) {
      std::memcpy(&out[i], p + i * 8, 8);
    } else {
      int64_t v;
      std::memcpy(&v, p + i * 8, 8);
      out[i] = static_cast<double>(v);
    }
  }
  return out;
}

// The .f64 golden where one exists (tighter), else the float32 one.
inline std::vector<double> best_golden(const SafetensorsFile& f, const std::string& name) {
  return f.find(name + ".f64") ? golden(f, name + ".f64") : golden(f, name);
}

// ||got - want|| / ||want|| of one row of n values (a zero row's error is its
// distance from zero).
inline double row_error(const float* got, const double* want, size_t n) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; ++i) {
    num += (got[i] - want[i]) * (got[i] - want[i]);
    den += want[i] * want[i];
  }
  return std::sqrt(num / std::max(den, 1e-300));
}

inline double relative_error(const std::vector<float>& got, const std::vector<double>& want) {
  EXPECT_EQ(got.size(), want.size());
  double num = 0, den = 0;
  for (size_t i = 0; i < std::min(got.size(), want.size()); ++i) {
    num += (got[i] - want[i]) * (got[i] - want[i]);
    den += want[i] * want[i];
  }
  return std::sqrt(num / std::max(den, 1e-300));
}

// A parameter after AdamW steps against its golden. Where the golden's first
// gradient is within 10 eps of zero (|g| < 1e-7) — rounding noise around a
// gradient that is mathematically ~0 — the first step lr * g / (|g| + eps)
// is that noise scaled up to as much as lr, in any implementation; those
// elements are compared absolutely at lr (1e-3, as the key biases are), the
// rest by relative error. first_grad empty: every element relatively.
inline void expect_stepped_param_matches(const std::vector<float>& got, const std::vector<double>& want,
                                         const std::vector<double>& first_grad, double rel_tol,
                                         const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  std::vector<float> strict_got;
  std::vector<double> strict_want;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!first_grad.empty() && std::abs(first_grad[i]) < 1e-7) {
      EXPECT_NEAR(got[i], want[i], 1e-3) << what << " element " << i << " (first gradient " << first_grad[i] << ")";
      continue;
    }
    strict_got.push_back(got[i]);
    strict_want.push_back(want[i]);
  }
  EXPECT_LE(relative_error(strict_got, strict_want), rel_tol) << what;
}

struct Fixture {
  ModelFolder folder;
  std::shared_ptr<SafetensorsFile> golden;
};

// The repository's own goldens (tests/golden/<model>.safetensors and
// tests/golden/models/<model>/) where they exist, else the shared fixtures'.
inline std::filesystem::path repo_golden_dir() { return test::source_dir() / "tests" / "golden"; }

inline Fixture open_fixture(const std::string& model) {
  const std::filesystem::path own = repo_golden_dir() / (model + ".safetensors");
  if (std::filesystem::exists(own))
    return Fixture{open_model_folder(repo_golden_dir() / "models" / model), SafetensorsFile::open(own)};
  return Fixture{open_model_folder(test::fixture("models/" + model)),
                 SafetensorsFile::open(test::fixture("golden/" + model + ".safetensors"))};
}

// The golden name of the classification head's hidden layer: BERT's
// pooler_output, DistilBERT's pre_classifier_hidden, the others' cls_head_hidden.
inline std::string head_golden_name(const Fixture& fx) {
  for (const char* n : {"pooler_output", "pre_classifier_hidden", "cls_head_hidden", "pooled_head_hidden"})
    if (fx.golden->find(n)) return n;
  throw std::runtime_error("golden file has no head hidden state");
}

// The golden rows (ids, mask, type ids) packed without padding.
inline PackedBatch pack_golden(const Fixture& fx, const std::string& prefix, std::vector<size_t>* lengths = nullptr) {
  const auto ids = golden(*fx.golden, prefix + "input_ids");
  const auto mask = golden(*fx.golden, prefix + "attention_mask");
  const bool has_types = fx.golden->find(prefix + "token_type_ids") != nullptr;
  const auto types = has_types ? golden(*fx.golden, prefix + "token_type_ids") : std::vector<double>();
  const StoredTensor* t = fx.golden->find(prefix + "input_ids");
  const size_t rows = static_cast<size_t>(t->shape[0]), width = static_cast<size_t>(t->shape[1]);
  PackedBatch batch;
  batch.clear();
  for (size_t r = 0; r < rows; ++r) {
    std::vector<int32_t> seq, seq_types;
    for (size_t c = 0; c < width; ++c) {
      if (mask[r * width + c] == 0) continue;
      seq.push_back(static_cast<int32_t>(ids[r * width + c]));
      seq_types.push_back(has_types ? static_cast<int32_t>(types[r * width + c]) : 0);
    }
    if (lengths) lengths->push_back(seq.size());
    batch.add(seq, seq_types, fx.folder.config);
  }
  return batch;
}

}  // namespace stoke::test::goldens
