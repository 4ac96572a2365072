// The encoder forward against the Hugging Face goldens, on any backend: the
// checks the CPU model tests and the CUDA tests share.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "backend/backend.h"
#include "model/encoder.h"
#include "support/goldens.h"

namespace stoke::test::goldens {

// last_hidden_state [n, width, H] at the positions where the mask is 1 (the
// added architectures' goldens hold the first 16 texts only: n = 16).
inline std::vector<double> golden_hidden_packed(const Fixture& fx) {
  const auto hs = golden(*fx.golden, "last_hidden_state");
  const auto mask = golden(*fx.golden, "attention_mask");
  const StoredTensor* t = fx.golden->find("last_hidden_state");
  const size_t rows = static_cast<size_t>(t->shape[0]), width = static_cast<size_t>(t->shape[1]),
               H = static_cast<size_t>(t->shape[2]);
  std::vector<double> out;
  for (size_t r = 0; r < rows; ++r)
    for (size_t c = 0; c < width; ++c)
      if (mask[r * width + c] != 0)
        out.insert(out.end(), hs.begin() + (r * width + c) * H, hs.begin() + (r * width + c + 1) * H);
  return out;
}

// How a check runs the encoder: its workspace gets `extra_tokens` of room
// above the batch (a graph bucket's padding), and graphs on or off.
struct RunnerSetup {
  int64_t extra_tokens = 0;
  bool graphs = false;
};

// Last hidden state, mean/cls pooled (normalized and not), pooler output or
// classification-head hidden, logits, and (BERT) sentence pairs, each within
// `tol` of the goldens (relative error over the whole tensor).
inline void expect_encoder_matches_goldens(Backend& backend, const std::string& model, DType dtype, double tol,
                                           RunnerSetup setup = {}) {
  const Fixture fx = open_fixture(model);
  const HfConfig& c = fx.folder.config;
  EncoderLoadOptions load;
  load.dtype = dtype;
  // A head whose activation no op computes yet (DistilBERT's ReLU) is
  // refused by name; the encoder and pooling are still checked.
  bool head = true;
  try {
    head_activation(*c.arch);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::unsupported);
    head = false;
  }
  load.need_classifier = head;
  if (!head) {
    load.need_classifier = true;
    EXPECT_THROW(load_encoder(c, open_model_folder_weights(fx.folder), backend, load), Error);
    load.need_classifier = false;
  }
  const LoadedEncoder enc = load_encoder(c, open_model_folder_weights(fx.folder), backend, load);

  const PackedBatch batch = pack_golden(fx, "");
  const size_t B = static_cast<size_t>(batch.sequences()), T = static_cast<size_t>(batch.tokens());
  const size_t H = static_cast<size_t>(c.hidden_size), C = static_cast<size_t>(c.num_labels());
  EncoderRunner runner(enc, backend, static_cast<int64_t>(T) + setup.extra_tokens, static_cast<int64_t>(B));
  runner.set_graphs(setup.graphs);

  std::vector<float> hidden(T * H), head_hidden(B * H), logits(B * C);
  std::map<std::string, std::vector<float>> pooled;
  for (const auto& [name, mode, norm] : {std::tuple{"mean_pooled", Pooling::mean, false},
                                         std::tuple{"mean_pooled_normalized", Pooling::mean, true},
                                         std::tuple{"cls_pooled", Pooling::cls, false},
                                         std::tuple{"cls_pooled_normalized", Pooling::cls, true}}) {
    EncoderOutputs out;
    pooled[name].resize(B * H);
    out.pooled = pooled[name].data();
    out.pooling = mode;
    out.normalize = norm;
    if (std::string(name) == "mean_pooled") {
      out.hidden = hidden.data();
      out.head_hidden = head ? head_hidden.data() : nullptr;
      out.logits = head ? logits.data() : nullptr;
    }
    backend.wait(*runner.run(batch, out));
  }
  if (setup.graphs) {
    EXPECT_GT(runner.graphs_captured(), 0u) << "the golden batch fits a graph bucket";
  }
  const std::vector<double> want_hidden = golden_hidden_packed(fx);  // maybe only the first texts'
  hidden.resize(std::min(hidden.size(), want_hidden.size()));
  const double hidden_error = relative_error(hidden, want_hidden);
  EXPECT_LE(hidden_error, tol) << "last_hidden_state";
  for (const auto& [name, values] : pooled) EXPECT_LE(relative_error(values, best_golden(*fx.golden, name)), tol) << name;
  const std::string head_name = head_golden_name(fx);
  if (!head) {
    std::printf("%s %s: last_hidden_state relative error %.3g (no head)\n", model.c_str(),
                std::string(dtype_name(dtype)).c_str(), hidden_error);
    return;
  }
  EXPECT_LE(relative_error(head_hidden, best_golden(*fx.golden, head_name)), tol) << head_name;
  const double logits_error = relative_error(logits, best_golden(*fx.golden, "logits"));
  EXPECT_LE(logits_error, tol) << "logits";
  std::printf("%s %s: last_hidden_state relative error %.3g, logits %.3g\n", model.c_str(),
              std::string(dtype_name(dtype)).c_str(), hidden_error, logits_error);

  if (fx.golden->find("pair.input_ids")) {  // sentence pairs (BERT, ELECTRA: token type ids 1 on the second text)
    const PackedBatch pairs = pack_golden(fx, "pair.");
    EncoderRunner pair_runner(enc, backend, pairs.tokens() + setup.extra_tokens, pairs.sequences());
    pair_runner.set_graphs(setup.graphs);
    std::vector<float> pair_head(static_cast<size_t>(pairs.sequences()) * H),
        pair_logits(static_cast<size_t>(pairs.sequences()) * C);
    EncoderOutputs out;
    out.head_hidden = pair_head.data();
    out.logits = pair_logits.data();
    backend.wait(*pair_runner.run(pairs, out));
    EXPECT_LE(relative_error(pair_head, best_golden(*fx.golden, "pair." + head_name)), tol) << "pair." + head_name;
    EXPECT_LE(relative_error(pair_logits, best_golden(*fx.golden, "pair.logits")), tol) << "pair.logits";
  }
}

// A decoder (Qwen2, Qwen3) against its goldens: the last hidden state,
// last-token pooling (normalized and not) and, with a classifier, the logits
// (score of the last non-pad token).
inline void expect_decoder_matches_goldens(Backend& backend, const std::string& model, DType dtype, double tol,
                                           RunnerSetup setup = {}) {
  const Fixture fx = open_fixture(model);
  const HfConfig& c = fx.folder.config;
  ASSERT_EQ(c.arch->family, LayerFamily::decoder) << model;
  EncoderLoadOptions load;
  load.dtype = dtype;
  const bool head = fx.golden->find("logits") != nullptr;
  load.need_classifier = head;
  const LoadedEncoder enc = load_encoder(c, open_model_folder_weights(fx.folder), backend, load);
  const PackedBatch batch = pack_golden(fx, "");
  const size_t B = static_cast<size_t>(batch.sequences()), T = static_cast<size_t>(batch.tokens());
  const size_t H = static_cast<size_t>(c.hidden_size), C = static_cast<size_t>(c.num_labels());
  EncoderRunner runner(enc, backend, static_cast<int64_t>(T) + setup.extra_tokens, static_cast<int64_t>(B));
  runner.set_graphs(setup.graphs);
  std::vector<float> hidden(T * H), logits(B * C), pooled(B * H), normalized(B * H);
  EncoderOutputs out;
  out.hidden = hidden.data();
  out.pooled = pooled.data();
  out.pooling = Pooling::lasttoken;
  out.logits = head ? logits.data() : nullptr;
  backend.wait(*runner.run(batch, out));
  EncoderOutputs norm;
  norm.pooled = normalized.data();
  norm.pooling = Pooling::lasttoken;
  norm.normalize = true;
  backend.wait(*runner.run(batch, norm));
  const std::vector<double> want_hidden = golden_hidden_packed(fx);
  hidden.resize(std::min(hidden.size(), want_hidden.size()));
  const double hidden_error = relative_error(hidden, want_hidden);
  EXPECT_LE(hidden_error, tol) << "last_hidden_state";
  const double pooled_error = relative_error(pooled, best_golden(*fx.golden, "lasttoken_pooled"));
  EXPECT_LE(pooled_error, tol) << "lasttoken_pooled";
  EXPECT_LE(relative_error(normalized, best_golden(*fx.golden, "lasttoken_pooled_normalized")), tol);
  double logits_error = 0;
  if (head) {
    logits_error = relative_error(logits, best_golden(*fx.golden, "logits"));
    EXPECT_LE(logits_error, tol) << "logits";
  }
  std::printf("%s %s: last_hidden_state relative error %.3g, lasttoken_pooled %.3g, logits %.3g\n", model.c_str(),
              std::string(dtype_name(dtype)).c_str(), hidden_error, pooled_error, logits_error);
}

// Either of the above, as the model folder's architecture says.
inline void expect_matches_goldens(Backend& backend, const std::string& model, DType dtype, double tol,
                                   RunnerSetup setup = {}) {
  if (open_fixture(model).folder.config.arch->family == LayerFamily::decoder)
    expect_decoder_matches_goldens(backend, model, dtype, tol, setup);
  else
    expect_encoder_matches_goldens(backend, model, dtype, tol, setup);
}

// A text embedded alone gives the same vector (f32) as inside the golden
// mixed-length batch, within `tol`.
inline void expect_text_alone_equals_batch(Backend& backend, const std::string& model, double tol,
                                           RunnerSetup setup = {}) {
  const Fixture fx = open_fixture(model);
  const HfConfig& c = fx.folder.config;
  const LoadedEncoder enc = load_encoder(c, open_model_folder_weights(fx.folder), backend, {});
  std::vector<size_t> lengths;
  const PackedBatch all = pack_golden(fx, "", &lengths);
  const size_t H = static_cast<size_t>(c.hidden_size);
  EncoderRunner runner(enc, backend, all.tokens() + setup.extra_tokens, all.sequences());
  runner.set_graphs(setup.graphs);
  std::vector<float> batched(static_cast<size_t>(all.sequences()) * H);
  EncoderOutputs out;
  out.pooled = batched.data();
  backend.wait(*runner.run(all, out));
  for (size_t b : {size_t{0}, size_t{7}, size_t{40}, size_t{49}, size_t{65}}) {
    PackedBatch one;
    one.clear();
    const auto begin = all.ids.begin() + all.cu_seqlens[b], end = all.ids.begin() + all.cu_seqlens[b + 1];
    const auto tbegin = all.type_ids.begin() + all.cu_seqlens[b];
    one.add(std::vector<int32_t>(begin, end), std::vector<int32_t>(tbegin, tbegin + (end - begin)), c);
    std::vector<float> alone(H);
    out.pooled = alone.data();
    backend.wait(*runner.run(one, out));
    double num = 0, den = 0;
    for (size_t i = 0; i < H; ++i) {
      num += (alone[i] - batched[b * H + i]) * (alone[i] - batched[b * H + i]);
      den += alone[i] * alone[i];
    }
    // A decoder's text of only the pad token (the empty text: `<|endoftext|>`)
    // has a zero embedding row, so its vector is exactly zero (as in
    // transformers): then both must be zero.
    if (den == 0)
      EXPECT_EQ(num, 0) << model << " text " << b;
    else
      EXPECT_LE(std::sqrt(num / den), tol) << model << " text " << b;
  }
}

}  // namespace stoke::test::goldens
