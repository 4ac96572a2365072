// Loading a SPLADE folder (io/sentence_transformers.h, model/splade_head.h):
// each refusal is one line naming the file and the field or tensor — a
// pooling strategy or activation SpladePooling does not have, a key it does
// not take, SpladePooling without masked-LM logits and MLM logits without
// SpladePooling, a module after SpladePooling, an embedding_dimension that is
// not the vocabulary, a missing MLM-head tensor, an untied decoder that is not
// stored, an architecture whose MLM head stoke does not run. And the layouts
// it reads: sentence-transformers 6's module names, 5's
// (sentence_transformers.sparse_encoder.models.*, word_embedding_dimension),
// and 5.4+'s Transformer with transformer_task "fill-mask".
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "core/error.h"
#include "core/file_util.h"
#include "cpu/cpu_backend.h"
#include "io/model_folder.h"
#include "io/safetensors.h"
#include "model/splade_head.h"
#include "support/fixtures.h"
#include "support/splade_goldens.h"

namespace stoke {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

fs::path copy_model(const std::string& name) {
  const fs::path dir = test::scratch_dir("splade-head-" + name);
  fs::remove_all(dir);
  fs::copy(test::splade::model_dir(), dir, fs::copy_options::recursive);
  return dir;
}

void write_json(const fs::path& file, const json& j) { std::ofstream(file, std::ios::trunc) << j.dump(2); }

// Opens the folder and loads the head; "" when it loads, else the error.
std::string load_error(const fs::path& folder) {
  try {
    cpu::CpuBackend backend(cpu::reference_kernels());
    const ModelFolder f = open_model_folder(folder);
    LoadedEncoder enc = load_encoder(f.config, open_model_folder_weights(f), backend, {});
    if (!f.st.splade) return "not a SPLADE folder";
    load_splade_head(enc, f, backend);
    return enc.splade.present() ? "" : "no head";
  } catch (const Error& e) {
    return e.what();
  }
}

// model.safetensors again without the tensors `drop` names.
void drop_tensors(const fs::path& folder, const std::vector<std::string>& drop) {
  const std::string bytes = read_file(folder / "model.safetensors");
  const fs::path kept = folder / "original.safetensors.bin";
  std::ofstream(kept, std::ios::binary) << bytes;
  const auto file = SafetensorsFile::open(kept);
  std::vector<TensorToWrite> out;
  for (const StoredTensor& t : file->tensors())
    if (std::find(drop.begin(), drop.end(), t.name) == drop.end())
      out.push_back({t.name, t.dtype, t.shape, t.data});
  write_safetensors(folder / "model.safetensors", out);
}

TEST(SpladeHead, TheSavedFolderLoads) {
  EXPECT_EQ(load_error(test::splade::model_dir()), "");
  const ModelFolder f = open_model_folder(test::splade::model_dir());
  ASSERT_TRUE(f.st.splade);
  EXPECT_TRUE(f.st.masked_lm);
  EXPECT_EQ(f.st.splade->strategy, SpladeModule::Strategy::max);
  EXPECT_EQ(f.st.splade->log1p_count, 1);
  EXPECT_EQ(f.st.splade->path, "1_SpladePooling");
}

TEST(SpladeHead, SentenceTransformers5AndFillMaskLayoutsLoad) {
  const fs::path v5 = copy_model("v5");
  write_json(v5 / "modules.json",
             json::array({{{"idx", 0}, {"name", "0"}, {"path", ""},
                           {"type", "sentence_transformers.sparse_encoder.models.MLMTransformer"}},
                          {{"idx", 1}, {"name", "1"}, {"path", "1_SpladePooling"},
                           {"type", "sentence_transformers.sparse_encoder.models.SpladePooling"}}}));
  write_json(v5 / "1_SpladePooling" / "config.json",
             {{"pooling_strategy", "sum"}, {"activation_function", "relu"}, {"word_embedding_dimension", 3000}});
  write_json(v5 / "sentence_bert_config.json", {{"max_seq_length", 128}, {"do_lower_case", false}});
  EXPECT_EQ(load_error(v5), "");
  EXPECT_EQ(open_model_folder(v5).st.splade->strategy, SpladeModule::Strategy::sum);

  const fs::path task = copy_model("fill-mask");
  write_json(task / "modules.json",
             json::array({{{"idx", 0}, {"name", "0"}, {"path", ""},
                           {"type", "sentence_transformers.base.modules.transformer.Transformer"}},
                          {{"idx", 1}, {"name", "1"}, {"path", "1_SpladePooling"},
                           {"type", "sentence_transformers.sparse_encoder.modules.splade_pooling.SpladePooling"}}}));
  EXPECT_EQ(load_error(task), "");  // its sentence_bert_config.json says "transformer_task": "fill-mask"
}

TEST(SpladeHead, PoolingSettingsSpladePoolingLacksAreRefusedNamingTheField) {
  struct Case {
    json config;
    std::string want;
  };
  const Case cases[] = {
      {{{"pooling_strategy", "mean"}}, "field \"pooling_strategy\": expected \"max\" or \"sum\""},
      {{{"activation_function", "gelu"}}, "field \"activation_function\": expected \"relu\" or \"log1p_relu\""},
      {{{"pooling_strategy", 3}}, "field \"pooling_strategy\""},
      {{{"temperature", 0.5}}, "field \"temperature\" is not a SpladePooling setting"},
      {{{"embedding_dimension", 30522}}, "embedding_dimension 30522 contradicts config.json vocab_size 3000"},
  };
  for (const Case& c : cases) {
    const fs::path dir = copy_model("pooling");
    write_json(dir / "1_SpladePooling" / "config.json", c.config);
    const std::string err = load_error(dir);
    EXPECT_NE(err.find(c.want), std::string::npos) << err;
    EXPECT_NE(err.find("1_SpladePooling/config.json"), std::string::npos) << err;
  }
}

TEST(SpladeHead, ChainsStokeDoesNotRunAreRefusedByName) {
  const json mlm = {{"idx", 0}, {"name", "0"}, {"path", ""},
                    {"type", "sentence_transformers.sparse_encoder.modules.mlm_transformer.MLMTransformer"}};
  const json splade = {{"idx", 1}, {"name", "1"}, {"path", "1_SpladePooling"},
                       {"type", "sentence_transformers.sparse_encoder.modules.splade_pooling.SpladePooling"}};
  const json plain = {{"idx", 0}, {"name", "0"}, {"path", ""}, {"type", "sentence_transformers.models.Transformer"}};
  const json normalize = {{"idx", 2}, {"name", "2"}, {"path", "2_Normalize"},
                          {"type", "sentence_transformers.models.Normalize"}};
  struct Case {
    json modules;
    bool fill_mask;  // sentence_bert_config.json's transformer_task
    std::string want;
  };
  const Case cases[] = {
      {json::array({mlm}), false, "no SpladePooling module follows it"},
      {json::array({plain, splade}), false, "SpladePooling needs the Transformer's masked-LM logits"},
      {json::array({mlm, splade, normalize}), false, "stoke runs nothing after SpladePooling"},
      {json::array({mlm, {{"idx", 1}, {"name", "1"}, {"path", "1_SpladePooling"},
                          {"type", "sentence_transformers.sparse_encoder.modules.sparse_auto_encoder.SparseAutoEncoder"}}}),
       false, "SparseAutoEncoder"},
  };
  for (const Case& c : cases) {
    const fs::path dir = copy_model("chain");
    write_json(dir / "modules.json", c.modules);
    write_json(dir / "sentence_bert_config.json", json{{"max_seq_length", 128}});
    const std::string err = load_error(dir);
    EXPECT_NE(err.find(c.want), std::string::npos) << err;
  }
  const fs::path task = copy_model("task");
  write_json(task / "sentence_bert_config.json", json{{"transformer_task", "text-generation"}});
  EXPECT_NE(load_error(task).find("\"transformer_task\": \"text-generation\" is not supported"), std::string::npos)
      << load_error(task);
}

TEST(SpladeHead, AMissingHeadTensorIsRefusedNamingIt) {
  for (const std::string name : {"cls.predictions.bias", "cls.predictions.transform.dense.weight",
                                 "cls.predictions.transform.LayerNorm.weight"}) {
    const fs::path dir = copy_model("missing");
    drop_tensors(dir, {name});
    const std::string err = load_error(dir);
    EXPECT_NE(err.find("tensor \"" + name + "\" is missing"), std::string::npos) << err;
    EXPECT_NE(err.find("BertForMaskedLM's masked-LM head"), std::string::npos) << err;
  }
}

TEST(SpladeHead, AnUntiedDecoderMustBeStored) {
  const fs::path dir = copy_model("untied");
  json cfg = json::parse(read_file(dir / "config.json"));
  cfg["tie_word_embeddings"] = false;
  write_json(dir / "config.json", cfg);
  const std::string err = load_error(dir);
  EXPECT_NE(err.find("tensor \"cls.predictions.decoder.weight\" is missing"), std::string::npos) << err;
}

TEST(SpladeHead, AnotherArchitecturesMlmHeadIsRefusedByName) {
  const fs::path dir = test::scratch_dir("splade-head-xlmr");
  fs::remove_all(dir);
  fs::copy(test::fixture("models/tiny-xlmr"), dir, fs::copy_options::recursive);
  fs::remove_all(dir / "1_Pooling");
  fs::create_directories(dir / "1_SpladePooling");
  write_json(dir / "1_SpladePooling" / "config.json", json{{"pooling_strategy", "max"}});
  write_json(dir / "modules.json",
             json::array({{{"idx", 0}, {"name", "0"}, {"path", ""},
                           {"type", "sentence_transformers.sparse_encoder.modules.mlm_transformer.MLMTransformer"}},
                          {{"idx", 1}, {"name", "1"}, {"path", "1_SpladePooling"},
                           {"type", "sentence_transformers.sparse_encoder.modules.splade_pooling.SpladePooling"}}}));
  const std::string err = load_error(dir);
  EXPECT_NE(err.find("a SPLADE model over XLM-RoBERTa is not supported"), std::string::npos) << err;
}

fs::path copy_router(const std::string& name) {
  const fs::path dir = test::scratch_dir("splade-router-" + name);
  fs::remove_all(dir);
  fs::copy(test::splade::data_dir() / "inference_free", dir, fs::copy_options::recursive);
  return dir;
}

TEST(SpladeHead, AnInferenceFreeRouterLoadsItsQueryWeights) {
  const ModelFolder f = open_model_folder(test::splade::data_dir() / "inference_free");
  ASSERT_TRUE(f.st.splade);
  EXPECT_EQ(f.st.splade->static_query_path, "query_0_SparseStaticEmbedding");
  EXPECT_EQ(f.st.transformer_path, "document_0_MLMTransformer");
  EXPECT_EQ(f.model_dir, f.dir / "document_0_MLMTransformer");
  EXPECT_EQ(load_error(f.dir), "");
}

TEST(SpladeHead, RoutersStokeDoesNotRunAreRefusedNamingWhy) {
  {
    const fs::path dir = copy_router("mappings");
    json cfg = json::parse(read_file(dir / "router_config.json"));
    cfg["parameters"]["route_mappings"] = {{"x", "query"}};
    write_json(dir / "router_config.json", cfg);
    EXPECT_NE(load_error(dir).find("field \"route_mappings\" is not supported"), std::string::npos) << load_error(dir);
  }
  {
    const fs::path dir = copy_router("swapped");
    json cfg = json::parse(read_file(dir / "router_config.json"));
    std::swap(cfg["structure"]["query"], cfg["structure"]["document"]);
    write_json(dir / "router_config.json", cfg);
    EXPECT_NE(load_error(dir).find("the \"query\" route: stoke runs one SparseStaticEmbedding"), std::string::npos)
        << load_error(dir);
  }
  {
    const fs::path dir = copy_router("tokenizer");
    std::ofstream(dir / "query_0_SparseStaticEmbedding" / "tokenizer_config.json", std::ios::app) << " ";
    EXPECT_NE(load_error(dir).find("stoke runs one tokenizer for both routes"), std::string::npos) << load_error(dir);
  }
  {
    const fs::path dir = copy_router("weight");
    const std::vector<float> w(10, 1.0f);
    write_safetensors(dir / "query_0_SparseStaticEmbedding" / "model.safetensors",
                      {{"weight", DType::f32, {10}, std::as_bytes(std::span<const float>(w))}});
    EXPECT_NE(load_error(dir).find("tensor \"weight\" has shape [10], expected [3000]"), std::string::npos)
        << load_error(dir);
  }
  {
    const fs::path dir = copy_router("idf-json");
    write_json(dir / "query_0_SparseStaticEmbedding" / "config.json", json{{"frozen", true}, {"path", "idf.json"}});
    EXPECT_NE(load_error(dir).find("field \"path\" is not supported"), std::string::npos) << load_error(dir);
  }
}

}  // namespace
}  // namespace stoke
