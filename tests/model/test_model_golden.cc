// The encoder forward against the Hugging Face goldens of both fixture models
// (../shared/fixtures/golden) and of every added architecture (tests/golden:
// DistilBERT, ELECTRA, RoBERTa, CamemBERT, XLM-R as transformers 5 saves it):
// last hidden state where the mask is 1, pooler / classification-head hidden,
// logits, cls and mean pooling (normalized and not), sentence pairs — with
// the reference kernels and the fast ones, in
// f32 (relative error <= 1e-5) and bf16 (<= 2e-2). And batch invariance: a text
// alone equals the same text inside a mixed-length batch.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <utility>
#include <cstring>
#include <fstream>
#include <map>
#include <tuple>
#include <nlohmann/json.hpp>

#include "core/file_util.h"
#include "cpu/cpu_backend.h"
#include "io/model_folder.h"
#include "io/safetensors.h"
#include "model/encoder.h"
#include "support/fixtures.h"
#include "support/encoder_goldens.h"

namespace stoke {
namespace {

using namespace test::goldens;

struct Case {
  const char* model;
  const char* kernels;  // "reference" or "fast"
  DType dtype;
};

class ModelGolden : public ::testing::TestWithParam<Case> {};

TEST_P(ModelGolden, MatchesHuggingFace) {
  const Case& k = GetParam();
  cpu::CpuBackend backend(std::string(k.kernels) == "fast" ? cpu::fast_kernels() : cpu::reference_kernels());
  expect_matches_goldens(backend, k.model, k.dtype, k.dtype == DType::f32 ? 1e-5 : 2e-2);
}

INSTANTIATE_TEST_SUITE_P(All, ModelGolden,
                         ::testing::Values(Case{"tiny-bert", "reference", DType::f32},
                                           Case{"tiny-bert", "fast", DType::f32},
                                           Case{"tiny-bert", "fast", DType::bf16},
                                           Case{"tiny-xlmr", "reference", DType::f32},
                                           Case{"tiny-xlmr", "fast", DType::f32},
                                           Case{"tiny-xlmr", "fast", DType::bf16},
                                           Case{"tiny-distilbert", "reference", DType::f32},
                                           Case{"tiny-distilbert", "fast", DType::f32},
                                           Case{"tiny-distilbert", "fast", DType::bf16},
                                           Case{"tiny-electra", "reference", DType::f32},
                                           Case{"tiny-electra", "fast", DType::f32},
                                           Case{"tiny-electra", "fast", DType::bf16},
                                           Case{"tiny-roberta", "reference", DType::f32},
                                           Case{"tiny-roberta", "fast", DType::f32},
                                           Case{"tiny-roberta", "fast", DType::bf16},
                                           Case{"tiny-camembert", "reference", DType::f32},
                                           Case{"tiny-camembert", "fast", DType::f32},
                                           Case{"tiny-camembert", "fast", DType::bf16},
                                           Case{"tiny-xlmr5", "reference", DType::f32},
                                           Case{"tiny-xlmr5", "fast", DType::f32},
                                           Case{"tiny-xlmr5", "fast", DType::bf16},
                                           Case{"tiny-mpnet", "reference", DType::f32},
                                           Case{"tiny-mpnet", "fast", DType::f32},
                                           Case{"tiny-mpnet", "fast", DType::bf16},
                                           Case{"tiny-modernbert", "reference", DType::f32},
                                           Case{"tiny-modernbert", "fast", DType::f32},
                                           Case{"tiny-modernbert", "fast", DType::bf16},
                                           // decoders: tiny-qwen3 (Qwen3ForSequenceClassification, GQA 4 q / 2 kv
                                           // heads, head_dim 18, q/k norms), tiny-qwen2 (a bare Qwen2Model,
                                           // bidirectional, q/k/v biases, the hub config schema)
                                           Case{"tiny-qwen3", "reference", DType::f32},
                                           Case{"tiny-qwen3", "fast", DType::f32},
                                           Case{"tiny-qwen3", "fast", DType::bf16},
                                           Case{"tiny-qwen2", "reference", DType::f32},
                                           Case{"tiny-qwen2", "fast", DType::f32},
                                           Case{"tiny-qwen2", "fast", DType::bf16},
                                           Case{"tiny-gte", "reference", DType::f32},
                                           Case{"tiny-gte", "fast", DType::f32},
                                           Case{"tiny-gte", "fast", DType::bf16},
                                           Case{"tiny-nomic", "reference", DType::f32},
                                           Case{"tiny-nomic", "fast", DType::f32},
                                           Case{"tiny-nomic", "fast", DType::bf16}),
                         [](const auto& info) {
                           std::string n = std::string(info.param.model) + "_" + info.param.kernels + "_" +
                                           std::string(dtype_name(info.param.dtype));
                           for (auto& ch : n)
                             if (ch == '-') ch = '_';
                           return n;
                         });

// sentence-transformers Dense after pooling (tests/golden/tiny-bert-dense:
// Pooling(cls) -> Dense(64 -> 24, tanh) -> Normalize): with and without
// Normalize, and truncated after it, on both kernel sets.
TEST(ModelGoldenDense, PoolingDenseNormalizeMatchSentenceTransformers) {
  for (const char* kernels : {"reference", "fast"}) {
    cpu::CpuBackend backend(std::string(kernels) == "fast" ? cpu::fast_kernels() : cpu::reference_kernels());
    const Fixture fx = open_fixture("tiny-bert-dense");
    LoadedEncoder enc = load_encoder(fx.folder.config, open_model_folder_weights(fx.folder), backend, {});
    load_dense_modules(enc, fx.folder.dir, fx.folder.st.dense, backend);
    ASSERT_EQ(enc.sentence_width(), 24);
    const PackedBatch batch = pack_golden(fx, "");
    const size_t B = static_cast<size_t>(batch.sequences());
    EncoderRunner runner(enc, backend, batch.tokens(), batch.sequences());
    for (const auto& [name, normalize] : {std::pair{"st_embeddings_unnormalized", false}, std::pair{"st_embeddings", true}}) {
      std::vector<float> got(B * 24);
      EncoderOutputs out;
      out.pooled = got.data();
      out.pooling = Pooling::cls;
      out.normalize = normalize;
      backend.wait(*runner.run(batch, out));
      const double e = relative_error(got, best_golden(*fx.golden, name));
      EXPECT_LE(e, 1e-5) << kernels << " " << name;
      std::printf("tiny-bert-dense %s %s: relative error %.3g\n", kernels, name, e);
    }
    // --dimensions 10: the first 10 columns of the normalized vectors.
    std::vector<float> cut(B * 10);
    EncoderOutputs out;
    out.pooled = cut.data();
    out.pooling = Pooling::cls;
    out.normalize = true;
    out.dims = 10;
    backend.wait(*runner.run(batch, out));
    const auto full = best_golden(*fx.golden, "st_embeddings");
    std::vector<double> want;
    for (size_t b = 0; b < B; ++b) want.insert(want.end(), full.begin() + b * 24, full.begin() + b * 24 + 10);
    EXPECT_LE(relative_error(cut, want), 1e-5) << kernels;
  }
}

// A text embedded alone gives the same vector as inside a mixed-length batch.
TEST(ModelBatching, TextAloneEqualsTextInABatch) {
  cpu::CpuBackend backend(cpu::fast_kernels());
  for (const char* model : {"tiny-bert", "tiny-xlmr", "tiny-distilbert", "tiny-electra", "tiny-roberta",
                            "tiny-camembert", "tiny-xlmr5", "tiny-mpnet", "tiny-qwen3", "tiny-qwen2", "tiny-modernbert",
                            "tiny-gte", "tiny-nomic"})
    expect_text_alone_equals_batch(backend, model, 1e-6);
}

// ModernBERT: the folder read with transformers 5's config schema (layer_types,
// rope_parameters per layer type; tests/golden/tiny-modernbert.transformers5-config.json,
// what save_pretrained wrote) gives the hub schema's logits; classifier_pooling "cls"
// gives transformers' logits_cls_pooling (same weights).
TEST(ModernBertGolden, TransformersFiveSchemaAndClsPooling) {
  namespace fs = std::filesystem;
  const Fixture fx = open_fixture("tiny-modernbert");
  cpu::CpuBackend backend(cpu::fast_kernels());
  const PackedBatch batch = pack_golden(fx, "");
  const size_t B = static_cast<size_t>(batch.sequences()), C = static_cast<size_t>(fx.folder.config.num_labels());
  auto logits_of = [&](const HfConfig& c) {
    EncoderLoadOptions load;
    load.need_classifier = true;
    const LoadedEncoder enc = load_encoder(c, open_model_folder_weights(fx.folder), backend, load);
    EncoderRunner runner(enc, backend, batch.tokens(), batch.sequences());
    std::vector<float> logits(B * C);
    EncoderOutputs out;
    out.logits = logits.data();
    backend.wait(*runner.run(batch, out));
    return logits;
  };
  const fs::path t5 = repo_golden_dir() / "tiny-modernbert.transformers5-config.json";
  const HfConfig five = parse_hf_config(read_file(t5), t5.string());
  EXPECT_EQ(five.attention_window, fx.folder.config.attention_window);
  EXPECT_EQ(five.rope_theta, fx.folder.config.rope_theta);
  EXPECT_EQ(five.local_rope_theta, fx.folder.config.local_rope_theta);
  EXPECT_EQ(five.attention_window, (std::vector<int>{0, 8, 0}));
  EXPECT_LE(relative_error(logits_of(five), best_golden(*fx.golden, "logits")), 1e-5);
  HfConfig cls = fx.folder.config;
  ASSERT_TRUE(cls.classifier_mean_pooling);
  cls.classifier_mean_pooling = false;
  const double e = relative_error(logits_of(cls), best_golden(*fx.golden, "logits_cls_pooling"));
  EXPECT_LE(e, 1e-5);
  std::printf("tiny-modernbert classifier_pooling cls: logits relative error %.3g\n", e);
}

// GTE as a hub folder writes it (model_type "new", rope_theta, NewConfig's
// switches, remote code in auto_map — never run — and the "new." prefix)
// runs exactly as the transformers 5 folder of the same weights: the same
// logits and pooled vectors, bit for bit, and the goldens.
TEST(ModelGoldenGte, HubSchemaFolderRunsAsTheTransformersFolder) {
  const Fixture fx = open_fixture("tiny-gte");
  const std::filesystem::path src = repo_golden_dir() / "models" / "tiny-gte";
  const std::filesystem::path hub = test::scratch_dir("gte-hub-schema");
  for (const char* f : {"tokenizer.json", "tokenizer_config.json"})
    std::filesystem::copy_file(src / f, hub / f, std::filesystem::copy_options::overwrite_existing);
  const HfConfig& c = fx.folder.config;
  nlohmann::json cfg = {{"model_type", "new"}, {"architectures", {"NewForSequenceClassification"}},
                        {"auto_map", {{"AutoConfig", "Alibaba-NLP/new-impl--configuration.NewConfig"},
                                      {"AutoModel", "Alibaba-NLP/new-impl--modeling.NewModel"}}},
                        {"vocab_size", c.vocab_size}, {"hidden_size", c.hidden_size},
                        {"num_hidden_layers", c.num_hidden_layers}, {"num_attention_heads", c.num_attention_heads},
                        {"intermediate_size", c.intermediate_size}, {"hidden_act", "gelu"},
                        {"max_position_embeddings", c.max_position_embeddings}, {"type_vocab_size", c.type_vocab_size},
                        {"layer_norm_eps", c.layer_norm_eps}, {"pad_token_id", c.pad_token_id},
                        {"position_embedding_type", "rope"}, {"rope_theta", c.rope_theta}, {"rope_scaling", nullptr},
                        {"layer_norm_type", "layer_norm"}, {"logn_attention_scale", false},
                        {"logn_attention_clip1", false}, {"pack_qkv", true}, {"unpad_inputs", true},
                        {"use_memory_efficient_attention", false}, {"id2label", {{"0", "a"}, {"1", "b"}, {"2", "c"}}}};
  std::ofstream(hub / "config.json") << cfg.dump(2);
  const auto file = SafetensorsFile::open(src / "model.safetensors");
  std::vector<TensorToWrite> renamed;
  for (const StoredTensor& t : file->tensors()) {
    const std::string n = t.name.rfind("gte.", 0) == 0 ? "new." + t.name.substr(4) : t.name;
    renamed.push_back({n, t.dtype, t.shape, t.data});
  }
  write_safetensors(hub / "model.safetensors", renamed);

  const ModelFolder hub_folder = open_model_folder(hub);
  EXPECT_EQ(hub_folder.config.model_type_name, "new");
  EXPECT_EQ(hub_folder.config.rope_theta, c.rope_theta);
  cpu::CpuBackend backend(cpu::fast_kernels());
  EncoderLoadOptions load;
  load.need_classifier = true;
  const PackedBatch batch = pack_golden(fx, "");
  const int64_t B = batch.sequences(), T = batch.tokens(), C = c.num_labels(), H = c.hidden_size;
  auto run = [&](const ModelFolder& folder) {
    const LoadedEncoder enc = load_encoder(folder.config, open_model_folder_weights(folder), backend, load);
    EncoderRunner runner(enc, backend, T, B);
    std::vector<float> logits(static_cast<size_t>(B * C)), pooled(static_cast<size_t>(B * H));
    EncoderOutputs out;
    out.logits = logits.data();
    out.pooled = pooled.data();
    out.pooling = Pooling::cls;
    backend.wait(*runner.run(batch, out));
    logits.insert(logits.end(), pooled.begin(), pooled.end());
    return logits;
  };
  const std::vector<float> a = run(fx.folder), b = run(hub_folder);
  EXPECT_EQ(a, b);
  const std::vector<float> hub_logits(b.begin(), b.begin() + B * C);
  EXPECT_LE(relative_error(hub_logits, best_golden(*fx.golden, "logits")), 1e-5);
}

// Token ids, positions and type ids are checked on the host before any kernel.
TEST(ModelBatching, OutOfRangeInputsAreRefusedBeforeRunning) {
  const Fixture fx = open_fixture("tiny-bert");
  cpu::CpuBackend backend(cpu::reference_kernels());
  const LoadedEncoder enc = load_encoder(fx.folder.config, open_model_folder_weights(fx.folder), backend, {});
  const uint64_t syncs_after_load = backend.host_syncs();
  EncoderRunner runner(enc, backend, 256, 4);
  EncoderOutputs out;
  std::vector<float> pooled(64);
  out.pooled = pooled.data();
  PackedBatch bad;
  bad.clear();
  bad.add(std::vector<int32_t>{2, 3000, 3}, {}, fx.folder.config);
  EXPECT_THROW(runner.run(bad, out), Error);
  bad.clear();
  bad.add(std::vector<int32_t>(129, 5), {}, fx.folder.config);  // position 128 is past the table
  EXPECT_THROW(runner.run(bad, out), Error);
  bad.clear();
  bad.add(std::vector<int32_t>{2, 5, 3}, std::vector<int32_t>{0, 2, 0}, fx.folder.config);
  EXPECT_THROW(runner.run(bad, out), Error);
  EXPECT_EQ(backend.host_syncs(), syncs_after_load);  // refused before anything was enqueued
}

}  // namespace
}  // namespace stoke
