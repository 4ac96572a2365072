// Hugging Face model folders (RELIABILITY.md item 2): config.json, single and
// sharded safetensors weights with their folder checks, the BERT / XLM-R
// parameter layout, and the sentence-transformers layout.
//
// The two fixture folders must load with the values their README states; every
// refusal is made on a copy of a fixture with exactly one thing broken, and
// checked by its specific kind, not just "some error".
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "io/encoder_layout.h"
#include "io/hf_config.h"
#include "io/model_folder.h"
#include "io/model_weights.h"
#include "io/safetensors.h"
#include "io/sentence_transformers.h"
#include "support/fixtures.h"

namespace stoke {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

// ---- helpers ----------------------------------------------------------------

// A writable copy of a folder (the fixtures are read-only, and a plain
// fs::copy would copy that read-only mode onto the new folders too).
void copy_tree(const fs::path& from, const fs::path& to) {
  fs::create_directories(to);
  for (const auto& e : fs::recursive_directory_iterator(from)) {
    const fs::path target = to / fs::relative(e.path(), from);
    if (e.is_directory()) {
      fs::create_directories(target);
    } else {
      fs::copy_file(e.path(), target);
      fs::permissions(target, fs::perms::owner_read | fs::perms::owner_write, fs::perm_options::add);
    }
  }
}

fs::path copy_fixture(const std::string& model, const std::string& scratch) {
  const fs::path dir = test::scratch_dir(scratch) / model;
  copy_tree(test::fixture("models/" + model), dir);
  return dir;
}

void write_text(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  ASSERT_TRUE(out.good()) << path;
}

json read_json(const fs::path& path) {
  std::ifstream in(path);
  return json::parse(in);
}

void edit_json(const fs::path& path, const std::function<void(json&)>& edit) {
  json j = read_json(path);
  edit(j);
  write_text(path, j.dump(2));
}

// The tensors of a safetensors file, optionally renamed / filtered: returning ""
// from `rename` drops the tensor. The source file must outlive the write.
std::vector<TensorToWrite> tensors_of(const SafetensorsFile& f,
                                      const std::function<std::string(const std::string&)>& rename = {}) {
  std::vector<TensorToWrite> out;
  for (const StoredTensor& t : f.tensors()) {
    std::string name = rename ? rename(t.name) : t.name;
    if (name.empty()) continue;
    out.push_back({name, t.dtype, t.shape, t.data});
  }
  return out;
}

// Rewrites <dir>/model.safetensors through `rename` (see tensors_of).
void rewrite_weights(const fs::path& dir, const std::function<std::string(const std::string&)>& rename) {
  auto src = SafetensorsFile::open(dir / "model.safetensors");
  auto tensors = tensors_of(*src, rename);
  const fs::path tmp = dir / "rewritten.safetensors.new";
  write_safetensors(tmp, tensors);
  src.reset();
  fs::rename(tmp, dir / "model.safetensors");
}

std::string error_kind_name(ModelFolderErrc k) { return model_folder_errc_name(k); }

// Runs f, expects a ModelFolderError of `kind`; returns its message.
std::string expect_folder_error(ModelFolderErrc kind, const std::function<void()>& f) {
  try {
    f();
  } catch (const ModelFolderError& e) {
    EXPECT_EQ(error_kind_name(e.kind()), error_kind_name(kind)) << e.what();
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected ModelFolderError " << error_kind_name(kind) << ", got: " << e.what();
    return "";
  }
  ADD_FAILURE() << "expected ModelFolderError " << error_kind_name(kind) << ", nothing thrown";
  return "";
}

// Runs f, expects a stoke::Error with `code`; returns its message.
std::string expect_error(Errc code, const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(std::string(errc_name(e.code())), std::string(errc_name(code))) << e.what();
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected Error(" << errc_name(code) << "), got: " << e.what();
    return "";
  }
  ADD_FAILURE() << "expected Error(" << errc_name(code) << "), nothing thrown";
  return "";
}

#define EXPECT_CONTAINS(haystack, needle) \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << "in: " << (haystack)

json fixture_config(const std::string& model) { return read_json(test::fixture("models/" + model + "/config.json")); }

HfConfig parse(const json& j) { return parse_hf_config(j.dump(), "config.json"); }

// ---- the fixtures -------------------------------------------------------------

TEST(ModelFolder, TinyBertLoads) {
  const ModelFolder mf = open_model_folder(test::fixture("models/tiny-bert"));
  const HfConfig& c = mf.config;
  EXPECT_EQ(c.model_type, ModelType::bert);
  EXPECT_EQ(c.model_type_name, "bert");
  EXPECT_EQ(c.vocab_size, 3000);
  EXPECT_EQ(c.hidden_size, 64);
  EXPECT_EQ(c.num_hidden_layers, 2);
  EXPECT_EQ(c.num_attention_heads, 4);
  EXPECT_EQ(c.head_dim(), 16);
  EXPECT_EQ(c.intermediate_size, 128);
  EXPECT_EQ(c.max_position_embeddings, 128);
  EXPECT_EQ(c.usable_positions(), 128);
  EXPECT_EQ(c.type_vocab_size, 2);
  EXPECT_DOUBLE_EQ(c.layer_norm_eps, 1e-12);
  EXPECT_EQ(c.pad_token_id, 0);
  EXPECT_EQ(c.hidden_act, "gelu");
  EXPECT_EQ(c.position_embedding_type, "absolute");
  EXPECT_EQ(c.problem_type, ProblemType::unspecified);
  EXPECT_EQ(c.num_labels(), 3);
  EXPECT_EQ(c.id2label, (std::vector<std::string>{"LABEL_0", "LABEL_1", "LABEL_2"}));
  EXPECT_EQ(c.label2id.at("LABEL_2"), 2);
  EXPECT_EQ(c.architectures, std::vector<std::string>{"BertForSequenceClassification"});
  EXPECT_EQ(mf.model_dir, mf.dir);

  const SentenceTransformersConfig& st = mf.st;
  EXPECT_TRUE(st.present);
  ASSERT_TRUE(st.pooling.has_value());
  EXPECT_EQ(*st.pooling, Pooling::mean);
  EXPECT_TRUE(st.normalize);  // from modules.json: the fixture has no 2_Normalize folder
  EXPECT_FALSE(fs::exists(test::fixture("models/tiny-bert/2_Normalize")));
  EXPECT_EQ(st.max_seq_length, 128);
  EXPECT_EQ(st.do_lower_case, false);
  EXPECT_EQ(st.word_embedding_dimension, 64);
  EXPECT_TRUE(st.include_prompt);
  EXPECT_TRUE(st.prompts.empty());
  EXPECT_EQ(st.module_types, (std::vector<std::string>{"Transformer", "Pooling", "Normalize"}));

  const ModelWeights w = open_model_folder_weights(mf);
  EXPECT_FALSE(w.sharded());
  ASSERT_EQ(w.files().size(), 1u);
  ASSERT_NE(w.find("bert.embeddings.position_ids"), nullptr);  // the int64 buffer: present, ignored
  const auto resolved = resolve_encoder_tensors(c, w, /*need_pooler=*/true, /*need_classifier=*/true);
  // 5 embedding tensors + 16 per layer + pooler 2 + classifier 2.
  EXPECT_EQ(resolved.size(), 5u + 16u * 2 + 2 + 2);
  for (const auto& r : resolved) {
    ASSERT_NE(r.view, nullptr) << r.expected.name;
    EXPECT_EQ(r.view->shape, r.expected.shape) << r.expected.name;
    EXPECT_EQ(r.view->dtype, DType::f32);
    EXPECT_EQ(r.stored_name, r.expected.part == ExpectedTensor::classifier ? r.expected.name
                                                                            : "bert." + r.expected.name);
  }
  // Every float tensor of the checkpoint is one the layout expects (nothing silently unused).
  std::set<std::string> used;
  for (const auto& r : resolved) used.insert(r.stored_name);
  for (const auto& [name, entry] : w.tensors()) {
    if (name == "bert.embeddings.position_ids") continue;
    EXPECT_TRUE(used.count(name)) << name;
  }
}

TEST(ModelFolder, TinyXlmrLoads) {
  const ModelFolder mf = open_model_folder(test::fixture("models/tiny-xlmr"));
  const HfConfig& c = mf.config;
  EXPECT_EQ(c.model_type, ModelType::xlm_roberta);
  EXPECT_EQ(c.model_type_name, "xlm-roberta");
  EXPECT_EQ(c.vocab_size, 4002);
  EXPECT_EQ(c.max_position_embeddings, 130);
  EXPECT_EQ(c.pad_token_id, 1);
  EXPECT_EQ(c.usable_positions(), 130 - 1 - 1);
  EXPECT_EQ(c.type_vocab_size, 1);
  EXPECT_DOUBLE_EQ(c.layer_norm_eps, 1e-5);
  EXPECT_EQ(c.num_labels(), 3);
  EXPECT_EQ(c.checkpoint_prefix(), "roberta.");

  ASSERT_TRUE(mf.st.pooling.has_value());
  EXPECT_EQ(*mf.st.pooling, Pooling::cls);
  EXPECT_TRUE(mf.st.normalize);
  EXPECT_EQ(mf.st.max_seq_length, 128);

  const ModelWeights w = open_model_folder_weights(mf);
  // XLMRobertaForSequenceClassification has no pooler: fine unless asked for.
  const auto resolved = resolve_encoder_tensors(c, w, /*need_pooler=*/false, /*need_classifier=*/true);
  size_t absent = 0;
  for (const auto& r : resolved) {
    if (r.expected.part == ExpectedTensor::pooler) {
      EXPECT_EQ(r.view, nullptr);
      ++absent;
    } else {
      ASSERT_NE(r.view, nullptr) << r.expected.name;
    }
  }
  EXPECT_EQ(absent, 2u);
  const auto* out_proj = w.find("classifier.out_proj.weight");
  ASSERT_NE(out_proj, nullptr);
  EXPECT_EQ(out_proj->shape, (std::vector<int64_t>{3, 64}));
  const std::string msg = expect_folder_error(ModelFolderErrc::missing_tensor, [&] {
    resolve_encoder_tensors(c, w, /*need_pooler=*/true, /*need_classifier=*/true);
  });
  EXPECT_CONTAINS(msg, "roberta.pooler.dense.weight");
}

// ---- config.json ------------------------------------------------------------

TEST(HfConfigParse, UnsupportedModelTypesAreRefusedByName) {
  for (const char* type : {"deberta-v2", "xlm_roberta", "jina_bert"}) {
    json j = fixture_config("tiny-bert");
    j["model_type"] = type;
    const std::string msg = expect_error(Errc::unsupported, [&] { parse(j); });
    EXPECT_CONTAINS(msg, std::string("\"") + type + "\"");
    EXPECT_CONTAINS(msg, "bert, roberta, xlm-roberta");
    EXPECT_CONTAINS(msg, "config.json");
  }
}

TEST(HfConfigParse, MissingModelType) {
  json j = fixture_config("tiny-bert");
  j.erase("model_type");
  const std::string msg = expect_error(Errc::not_found, [&] { parse(j); });
  EXPECT_CONTAINS(msg, "\"model_type\" is missing");
}

TEST(HfConfigParse, ErrorsNameFileFieldAndValue) {
  json j = fixture_config("tiny-bert");
  j["hidden_size"] = -3;
  EXPECT_EQ(expect_error(Errc::format, [&] { parse(j); }),
            "config.json: field \"hidden_size\": expected a positive integer, found -3");

  j = fixture_config("tiny-bert");
  j["num_hidden_layers"] = "2";
  EXPECT_CONTAINS(expect_error(Errc::format, [&] { parse(j); }), "field \"num_hidden_layers\"");

  j = fixture_config("tiny-bert");
  j["intermediate_size"] = 12.5;
  EXPECT_CONTAINS(expect_error(Errc::format, [&] { parse(j); }), "field \"intermediate_size\"");

  j = fixture_config("tiny-bert");
  j["vocab_size"] = 1ll << 40;
  EXPECT_CONTAINS(expect_error(Errc::format, [&] { parse(j); }), "field \"vocab_size\"");

  j = fixture_config("tiny-bert");
  j["hidden_size"] = 66;  // 4 heads
  EXPECT_CONTAINS(expect_error(Errc::format, [&] { parse(j); }), "num_attention_heads");

  j = fixture_config("tiny-bert");
  j["layer_norm_eps"] = 0;
  EXPECT_CONTAINS(expect_error(Errc::format, [&] { parse(j); }), "field \"layer_norm_eps\"");

  j = fixture_config("tiny-bert");
  j["pad_token_id"] = 3000;
  EXPECT_CONTAINS(expect_error(Errc::format, [&] { parse(j); }), "field \"pad_token_id\"");

  j = fixture_config("tiny-xlmr");
  j["max_position_embeddings"] = 2;  // positions start at pad + 1 = 2: none left
  EXPECT_CONTAINS(expect_error(Errc::format, [&] { parse(j); }), "field \"max_position_embeddings\"");

  EXPECT_CONTAINS(expect_error(Errc::format, [&] { parse_hf_config("{\"model_type\": \"bert\",", "x/config.json"); }),
                  "x/config.json: not valid JSON");
  EXPECT_CONTAINS(expect_error(Errc::format, [&] { parse_hf_config("[1, 2]", "config.json"); }),
                  "expected a JSON object");
  // nlohmann would keep the second value silently.
  EXPECT_CONTAINS(expect_error(Errc::format,
                               [&] {
                                 parse_hf_config(R"({"model_type": "bert", "hidden_size": 64, "hidden_size": 32})",
                                                 "config.json");
                               }),
                  "\"hidden_size\" appears twice");
}

TEST(HfConfigParse, ActivationAndPositionEmbeddingsStokeDoesNotRun) {
  for (const char* act : {"gelu_new", "relu", "gelu_fast", "silu"}) {
    json j = fixture_config("tiny-bert");
    j["hidden_act"] = act;
    const std::string msg = expect_error(Errc::unsupported, [&] { parse(j); });
    EXPECT_CONTAINS(msg, std::string("\"") + act + "\"");
    EXPECT_CONTAINS(msg, "erf");
  }
  json j = fixture_config("tiny-bert");
  j["hidden_act"] = "gelu_python";  // the same erf formula, written in Python
  EXPECT_EQ(parse(j).hidden_act, "gelu_python");

  j = fixture_config("tiny-bert");
  j["position_embedding_type"] = "relative_key_query";
  EXPECT_CONTAINS(expect_error(Errc::unsupported, [&] { parse(j); }),
                  "config.json: field \"position_embedding_type\": \"relative_key_query\" is not supported; runs: "
                  "\"absolute\"");

  j = fixture_config("tiny-bert");
  j["is_decoder"] = true;
  EXPECT_CONTAINS(expect_error(Errc::unsupported, [&] { parse(j); }), "is_decoder");
}

TEST(HfConfigParse, DefaultsFollowTransformers) {
  const HfConfig b = parse_hf_config(R"({"model_type": "bert"})", "config.json");
  EXPECT_EQ(b.vocab_size, 30522);
  EXPECT_EQ(b.hidden_size, 768);
  EXPECT_EQ(b.num_hidden_layers, 12);
  EXPECT_EQ(b.num_attention_heads, 12);
  EXPECT_EQ(b.intermediate_size, 3072);
  EXPECT_EQ(b.max_position_embeddings, 512);
  EXPECT_EQ(b.type_vocab_size, 2);
  EXPECT_DOUBLE_EQ(b.layer_norm_eps, 1e-12);
  EXPECT_EQ(b.pad_token_id, 0);
  EXPECT_EQ(b.hidden_act, "gelu");
  EXPECT_EQ(b.position_embedding_type, "absolute");
  EXPECT_EQ(b.usable_positions(), 512);
  EXPECT_EQ(b.num_labels(), 2);  // PretrainedConfig's default
  EXPECT_EQ(b.id2label, (std::vector<std::string>{"LABEL_0", "LABEL_1"}));
  EXPECT_EQ(b.label2id.at("LABEL_1"), 1);

  const HfConfig r = parse_hf_config(R"({"model_type": "roberta", "pad_token_id": null})", "config.json");
  EXPECT_EQ(r.model_type, ModelType::roberta);
  EXPECT_EQ(r.vocab_size, 50265);
  EXPECT_EQ(r.pad_token_id, 1);
  EXPECT_EQ(r.usable_positions(), 510);

  const HfConfig x = parse_hf_config(R"({"model_type": "xlm-roberta", "num_labels": 5})", "config.json");
  EXPECT_EQ(x.model_type, ModelType::xlm_roberta);
  EXPECT_EQ(x.pad_token_id, 1);
  EXPECT_EQ(x.num_labels(), 5);
  EXPECT_EQ(x.id2label[4], "LABEL_4");
}

// The added architectures read their own field names and transformers'
// defaults (DistilBertConfig, ElectraConfig, CamembertConfig).
TEST(HfConfigParse, ArchitecturesReadTheirOwnFieldsAndDefaults) {
  const HfConfig d = parse_hf_config(
      R"({"model_type": "distilbert", "dim": 40, "n_layers": 3, "n_heads": 5, "hidden_dim": 88,
          "activation": "gelu", "dropout": 0.2, "attention_dropout": 0.3})",
      "config.json");
  EXPECT_EQ(d.model_type, ModelType::distilbert);
  EXPECT_EQ(d.hidden_size, 40);
  EXPECT_EQ(d.num_hidden_layers, 3);
  EXPECT_EQ(d.num_attention_heads, 5);
  EXPECT_EQ(d.intermediate_size, 88);
  EXPECT_EQ(d.type_vocab_size, 0);          // no token types
  EXPECT_DOUBLE_EQ(d.layer_norm_eps, 1e-12);  // fixed in modeling_distilbert
  EXPECT_DOUBLE_EQ(d.hidden_dropout, 0.2);
  EXPECT_DOUBLE_EQ(d.attention_dropout, 0.3);
  EXPECT_DOUBLE_EQ(d.classifier_dropout, 0.2);  // seq_classif_dropout's default
  EXPECT_EQ(d.checkpoint_prefix(), "distilbert.");
  EXPECT_EQ(d.usable_positions(), 512);
  const HfConfig dd = parse_hf_config(R"({"model_type": "distilbert"})", "config.json");
  EXPECT_EQ(dd.hidden_size, 768);
  EXPECT_EQ(dd.num_hidden_layers, 6);

  const HfConfig e = parse_hf_config(R"({"model_type": "electra"})", "config.json");
  EXPECT_EQ(e.hidden_size, 256);
  EXPECT_EQ(e.embedding_size, 128);
  EXPECT_EQ(e.num_attention_heads, 4);
  EXPECT_EQ(e.intermediate_size, 1024);
  EXPECT_EQ(e.checkpoint_prefix(), "electra.");
  const auto et = expected_tensors(e);
  bool project = false;
  for (const auto& t : et)
    if (t.name == "embeddings_project.weight") {
      project = true;
      EXPECT_EQ(t.shape, (std::vector<int64_t>{256, 128}));
    }
  EXPECT_TRUE(project);
  // Equal sizes: ElectraModel has no embeddings_project.
  for (const auto& t : expected_tensors(parse_hf_config(R"({"model_type": "electra", "embedding_size": 256})", "c.json")))
    EXPECT_EQ(t.name.find("embeddings_project"), std::string::npos);

  const HfConfig c = parse_hf_config(R"({"model_type": "camembert"})", "config.json");
  EXPECT_EQ(c.pad_token_id, 1);
  EXPECT_EQ(c.usable_positions(), 510);
  EXPECT_EQ(c.checkpoint_prefix(), "roberta.");
}

TEST(HfConfigParse, WhatStokeCannotComputeIsRefusedInOneLine) {
  EXPECT_EQ(expect_error(Errc::unsupported,
                         [&] {
                           parse_hf_config(R"({"model_type": "distilbert", "sinusoidal_pos_embds": true})",
                                           "m/config.json");
                         }),
            "m/config.json: field \"sinusoidal_pos_embds\": true is not supported; runs: false (learned position "
            "embeddings)");
  EXPECT_CONTAINS(expect_error(Errc::unsupported,
                               [&] {
                                 parse_hf_config(R"({"model_type": "distilbert", "activation": "relu"})",
                                                 "m/config.json");
                               }),
                  "field \"activation\": \"relu\" is not supported");
  EXPECT_CONTAINS(expect_error(Errc::unsupported,
                               [&] {
                                 parse_hf_config(R"({"model_type": "electra", "position_embedding_type": "relative_key"})",
                                                 "m/config.json");
                               }),
                  "field \"position_embedding_type\": \"relative_key\" is not supported");
}

// ---- decoders: Qwen3 and Qwen2 --------------------------------------------------

// Both config schemas: what transformers 5 writes (rope_parameters, layer_types)
// and what hub folders carry (rope_theta, rope_scaling, no head_dim for Qwen2).
TEST(HfConfigParse, Qwen3TransformersFiveSchema) {
  const HfConfig c = parse_hf_config(R"({"model_type": "qwen3", "vocab_size": 300, "hidden_size": 40,
      "intermediate_size": 56, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
      "head_dim": 18, "hidden_act": "silu", "max_position_embeddings": 128, "rms_norm_eps": 1e-06,
      "tie_word_embeddings": true, "rope_parameters": {"rope_theta": 1000000.0, "rope_type": "default"},
      "attention_bias": false, "use_sliding_window": false, "sliding_window": null, "max_window_layers": 28,
      "layer_types": ["full_attention", "full_attention"], "attention_dropout": 0.0, "pad_token_id": null})",
                                     "config.json");
  EXPECT_EQ(c.arch->family, LayerFamily::decoder);
  EXPECT_EQ(c.num_key_value_heads, 2);
  EXPECT_EQ(c.head_dim(), 18);  // not hidden / heads
  EXPECT_EQ(c.rope_theta, 1e6);
  EXPECT_DOUBLE_EQ(c.layer_norm_eps, 1e-6);
  EXPECT_EQ(c.pad_token_id, -1);
  EXPECT_TRUE(c.causal);
  EXPECT_FALSE(c.attention_bias);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.type_vocab_size, 0);
  // The tensors: q 4 x 18 rows, k and v 2 x 18, no biases, the q/k norms, gate/up/down, final norm.
  std::map<std::string, std::vector<int64_t>> shapes;
  for (const auto& t : expected_tensors(c)) shapes[t.name] = t.shape;
  EXPECT_EQ(shapes.at("embed_tokens.weight"), (std::vector<int64_t>{300, 40}));
  EXPECT_EQ(shapes.at("layers.1.self_attn.q_proj.weight"), (std::vector<int64_t>{72, 40}));
  EXPECT_EQ(shapes.at("layers.1.self_attn.k_proj.weight"), (std::vector<int64_t>{36, 40}));
  EXPECT_EQ(shapes.at("layers.0.self_attn.o_proj.weight"), (std::vector<int64_t>{40, 72}));
  EXPECT_EQ(shapes.at("layers.0.self_attn.q_norm.weight"), (std::vector<int64_t>{18}));
  EXPECT_EQ(shapes.at("layers.0.mlp.gate_proj.weight"), (std::vector<int64_t>{56, 40}));
  EXPECT_EQ(shapes.at("layers.0.mlp.down_proj.weight"), (std::vector<int64_t>{40, 56}));
  EXPECT_EQ(shapes.at("norm.weight"), (std::vector<int64_t>{40}));
  EXPECT_EQ(shapes.at("score.weight"), (std::vector<int64_t>{2, 40}));
  EXPECT_EQ(shapes.count("layers.0.self_attn.q_proj.bias"), 0u);
  EXPECT_EQ(shapes.count("layers.0.self_attn.o_proj.bias"), 0u);
  EXPECT_EQ(shapes.size(), 1u + 2u * 11u + 2u);
  EXPECT_EQ(std::string(c.checkpoint_prefix()), "model.");
}

TEST(HfConfigParse, Qwen2HubSchema) {
  // As Qwen2 / gte-Qwen2 folders write it: top-level rope_theta, rope_scaling null, no head_dim.
  const HfConfig c = parse_hf_config(R"({"model_type": "qwen2", "hidden_size": 48, "num_attention_heads": 4,
      "num_key_value_heads": 2, "intermediate_size": 64, "num_hidden_layers": 1, "vocab_size": 100,
      "rope_theta": 1000000.0, "rope_scaling": null, "rms_norm_eps": 1e-05, "is_causal": false})",
                                     "config.json");
  EXPECT_EQ(c.head_dim(), 12);
  EXPECT_EQ(c.rope_theta, 1e6);
  EXPECT_TRUE(c.attention_bias);  // Qwen2: q/k/v biases always, o none
  EXPECT_FALSE(c.causal);
  std::map<std::string, std::vector<int64_t>> shapes;
  for (const auto& t : expected_tensors(c)) shapes[t.name] = t.shape;
  EXPECT_EQ(shapes.at("layers.0.self_attn.k_proj.bias"), (std::vector<int64_t>{24}));
  EXPECT_EQ(shapes.count("layers.0.self_attn.o_proj.bias"), 0u);
  EXPECT_EQ(shapes.count("layers.0.self_attn.q_norm.weight"), 0u);
  // transformers' defaults: Qwen3's head_dim is 128 whatever the hidden size; Qwen2's hidden / heads.
  EXPECT_EQ(parse_hf_config(R"({"model_type": "qwen3"})", "c.json").head_dim(), 128);
  EXPECT_EQ(parse_hf_config(R"({"model_type": "qwen2"})", "c.json").head_dim(), 128);
  EXPECT_EQ(parse_hf_config(R"({"model_type": "qwen3", "rope_theta": 5.0})", "c.json").rope_theta, 5.0);
  EXPECT_EQ(parse_hf_config(R"({"model_type": "qwen3"})", "c.json").rope_theta, 10000.0);
}

TEST(HfConfigParse, QwenFeaturesStokeDoesNotRunAreRefusedByName) {
  struct Case {
    const char* json;
    Errc code;
    const char* field;
    const char* what;
  };
  const Case cases[] = {
      {R"({"model_type": "qwen3", "rope_parameters": {"rope_type": "yarn", "factor": 4.0, "rope_theta": 1e6}})",
       Errc::unsupported, "\"rope_parameters\"", "\"yarn\""},
      {R"({"model_type": "qwen2", "rope_scaling": {"type": "dynamic", "factor": 2.0}})", Errc::unsupported,
       "\"rope_scaling\"", "\"dynamic\""},
      {R"({"model_type": "qwen2", "use_sliding_window": true})", Errc::unsupported, "\"use_sliding_window\"", "true"},
      {R"({"model_type": "qwen3", "layer_types": ["full_attention", "sliding_attention"]})", Errc::unsupported,
       "\"layer_types\"", "sliding_attention"},
      {R"({"model_type": "qwen3", "hidden_act": "gelu"})", Errc::unsupported, "\"hidden_act\"", "silu"},
      {R"({"model_type": "qwen3", "num_attention_heads": 6, "num_key_value_heads": 4})", Errc::format,
       "\"num_key_value_heads\"", "does not divide"},
      {R"({"model_type": "qwen2", "auto_map": {"AutoModel": "modeling_qwen.Qwen2Model"}})", Errc::unsupported,
       "\"auto_map\"", "modeling_qwen.Qwen2Model"},
      {R"({"model_type": "qwen3", "rope_parameters": {"rope_type": "default", "partial_rotary_factor": 0.5}})",
       Errc::unsupported, "\"rope_parameters\"", "partial_rotary_factor"},
  };
  for (const Case& c : cases) {
    const std::string msg = expect_error(c.code, [&] { parse_hf_config(c.json, "config.json"); });
    EXPECT_CONTAINS(msg, std::string("config.json: field ") + c.field);
    EXPECT_CONTAINS(msg, c.what);
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  }
  // Remote code whose attention is stated is read from its fields (never run).
  const HfConfig gte = parse_hf_config(
      R"({"model_type": "qwen2", "auto_map": {"AutoModel": "modeling_qwen.Qwen2Model"}, "is_causal": false})",
      "config.json");
  EXPECT_EQ(gte.remote_code, "modeling_qwen.Qwen2Model");
  EXPECT_FALSE(gte.causal);
}

// GTE in both schemas: the hub's "new" (gte-multilingual-base's fields:
// rope_theta, rope_scaling null, NewConfig's switches, remote code named in
// auto_map and never run) and transformers 5's "gte" (rope_parameters). Both
// read the same tensor names: transformers 5 saves the hub's.
TEST(HfConfigParse, GteHubSchema) {
  const HfConfig c = parse_hf_config(R"({"model_type": "new", "architectures": ["NewForTokenClassification"],
      "auto_map": {"AutoConfig": "Alibaba-NLP/new-impl--configuration.NewConfig",
                   "AutoModel": "Alibaba-NLP/new-impl--modeling.NewModel"},
      "attention_probs_dropout_prob": 0.0, "classifier_dropout": 0.0, "hidden_act": "gelu",
      "hidden_dropout_prob": 0.1, "hidden_size": 48, "intermediate_size": 80, "layer_norm_eps": 1e-12,
      "layer_norm_type": "layer_norm", "logn_attention_clip1": false, "logn_attention_scale": false,
      "max_position_embeddings": 8192, "num_attention_heads": 4, "num_hidden_layers": 2, "pack_qkv": true,
      "pad_token_id": 1, "position_embedding_type": "rope", "rope_scaling": null, "rope_theta": 160000,
      "type_vocab_size": 1, "unpad_inputs": true, "use_memory_efficient_attention": true, "vocab_size": 250})",
                                     "config.json");
  EXPECT_EQ(std::string(c.arch->display_name), "GTE");
  EXPECT_EQ(c.arch->positions, PositionScheme::rotary);
  EXPECT_TRUE(c.arch->gated_ffn);
  EXPECT_EQ(c.rope_theta, 160000.0);
  EXPECT_EQ(c.rotary_dim, 12);
  EXPECT_EQ(c.remote_code, "Alibaba-NLP/new-impl--modeling.NewModel");
  EXPECT_EQ(c.usable_positions(), 8192);
  EXPECT_EQ(std::string(c.checkpoint_prefix()), "new.");
  std::map<std::string, std::vector<int64_t>> shapes;
  for (const auto& t : expected_tensors(c)) shapes[t.name] = t.shape;
  EXPECT_EQ(shapes.at("encoder.layer.1.attention.qkv_proj.weight"), (std::vector<int64_t>{144, 48}));
  EXPECT_EQ(shapes.at("encoder.layer.1.attention.qkv_proj.bias"), (std::vector<int64_t>{144}));
  EXPECT_EQ(shapes.at("encoder.layer.0.mlp.up_gate_proj.weight"), (std::vector<int64_t>{160, 48}));
  EXPECT_EQ(shapes.at("encoder.layer.0.mlp.down_proj.weight"), (std::vector<int64_t>{48, 80}));
  EXPECT_EQ(shapes.at("embeddings.token_type_embeddings.weight"), (std::vector<int64_t>{1, 48}));
  EXPECT_EQ(shapes.count("embeddings.position_embeddings.weight"), 0u);
  EXPECT_EQ(shapes.count("encoder.layer.0.mlp.up_gate_proj.bias"), 0u);
  // gte-base-en-v1.5 has no token type table.
  const HfConfig base = parse_hf_config(R"({"model_type": "new", "type_vocab_size": 0})", "c.json");
  EXPECT_EQ(base.type_vocab_size, 0);
  for (const auto& t : expected_tensors(base)) EXPECT_NE(t.role, TensorRole::token_type_embeddings);
  // NewConfig's and GteConfig's defaults.
  EXPECT_EQ(base.rope_theta, 10000.0);
  EXPECT_EQ(parse_hf_config(R"({"model_type": "gte"})", "c.json").rope_theta, 160000.0);
}

TEST(HfConfigParse, GteTransformersFiveSchema) {
  const HfConfig c = parse_hf_config(R"({"model_type": "gte", "architectures": ["GteForSequenceClassification"],
      "hidden_size": 54, "num_attention_heads": 3, "intermediate_size": 70, "num_hidden_layers": 2,
      "vocab_size": 300, "max_position_embeddings": 128, "type_vocab_size": 2, "pad_token_id": 0,
      "rope_parameters": {"rope_theta": 5000.0, "rope_type": "default"}, "tie_word_embeddings": true})",
                                     "config.json");
  EXPECT_EQ(c.rope_theta, 5000.0);
  EXPECT_EQ(c.rotary_dim, 18);
  EXPECT_FALSE(c.rotary_interleaved);
  EXPECT_EQ(c.hidden_act, "gelu");
  EXPECT_EQ(std::string(c.checkpoint_prefix()), "gte.");
  EXPECT_EQ(c.remote_code, "");
}

TEST(HfConfigParse, GteFeaturesStokeDoesNotRunAreRefusedByName) {
  struct Case {
    const char* json;
    const char* field;
    const char* what;
  };
  const Case cases[] = {
      // gte-base-en-v1.5 / gte-large-en-v1.5: transformers has no "ntk" RoPE to check one against.
      {R"({"model_type": "new", "rope_scaling": {"type": "ntk", "factor": 2.0}})", "\"rope_scaling\"", "\"ntk\""},
      {R"({"model_type": "gte", "rope_parameters": {"rope_type": "linear", "factor": 2.0}})", "\"rope_parameters\"",
       "\"linear\""},
      {R"({"model_type": "new", "layer_norm_type": "rms_norm"})", "\"layer_norm_type\"", "rms_norm"},
      {R"({"model_type": "new", "logn_attention_scale": true})", "\"logn_attention_scale\"", "true"},
      {R"({"model_type": "new", "pack_qkv": false})", "\"pack_qkv\"", "false"},
      {R"({"model_type": "new", "position_embedding_type": "absolute"})", "\"position_embedding_type\"", "\"rope\""},
      {R"({"model_type": "gte", "hidden_act": "gelu_new"})", "\"hidden_act\"", "gelu_new"},
  };
  for (const Case& c : cases) {
    const std::string msg = expect_error(Errc::unsupported, [&] { parse_hf_config(c.json, "config.json"); });
    EXPECT_CONTAINS(msg, std::string("config.json: field ") + c.field);
    EXPECT_CONTAINS(msg, c.what);
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  }
  const std::string odd = expect_error(Errc::format, [&] {
    parse_hf_config(R"({"model_type": "gte", "hidden_size": 30, "num_attention_heads": 2})", "config.json");
  });
  EXPECT_CONTAINS(odd, "odd");
}

// NomicBERT in both schemas: the hub's (nomic-embed-text-v1.5's GPT-2-style
// names, "swiglu", rotary_emb_*, the bias switches) and transformers 5's.
TEST(HfConfigParse, NomicBertHubSchema) {
  const HfConfig c = parse_hf_config(R"({"model_type": "nomic_bert", "activation_function": "swiglu",
      "auto_map": {"AutoModel": "nomic-ai/nomic-bert-2048--modeling_hf_nomic_bert.NomicBertModel"},
      "attn_pdrop": 0.0, "causal": false, "embd_pdrop": 0.0, "resid_pdrop": 0.0, "layer_norm_epsilon": 1e-12,
      "mlp_fc1_bias": false, "mlp_fc2_bias": false, "qkv_proj_bias": false, "n_embd": 48, "n_head": 4,
      "n_inner": 80, "n_layer": 2, "n_positions": 8192, "prenorm": false, "rotary_emb_base": 1000,
      "rotary_emb_fraction": 1.0, "rotary_emb_interleaved": false, "rotary_emb_scale_base": null,
      "rotary_scaling_factor": null, "scale_attn_by_inverse_layer_idx": false, "scale_attn_weights": true,
      "type_vocab_size": 2, "use_rms_norm": false, "vocab_size": 128, "use_flash_attn": true})",
                                     "config.json");
  EXPECT_EQ(std::string(c.arch->display_name), "NomicBERT");
  EXPECT_EQ(c.hidden_size, 48);
  EXPECT_EQ(c.num_attention_heads, 4);
  EXPECT_EQ(c.intermediate_size, 80);
  EXPECT_EQ(c.num_hidden_layers, 2);
  EXPECT_EQ(c.max_position_embeddings, 8192);
  EXPECT_EQ(c.hidden_act, "silu");
  EXPECT_EQ(c.rope_theta, 1000.0);
  EXPECT_EQ(c.rotary_dim, 12);
  EXPECT_EQ(c.remote_code, "nomic-ai/nomic-bert-2048--modeling_hf_nomic_bert.NomicBertModel");
  std::map<std::string, std::vector<int64_t>> shapes;
  for (const auto& t : expected_tensors(c)) shapes[t.name] = t.shape;
  EXPECT_EQ(shapes.at("encoder.layers.1.attn.Wqkv.weight"), (std::vector<int64_t>{144, 48}));
  EXPECT_EQ(shapes.at("encoder.layers.0.mlp.fc11.weight"), (std::vector<int64_t>{80, 48}));
  EXPECT_EQ(shapes.at("encoder.layers.0.mlp.fc12.weight"), (std::vector<int64_t>{80, 48}));
  EXPECT_EQ(shapes.at("encoder.layers.0.mlp.fc2.weight"), (std::vector<int64_t>{48, 80}));
  EXPECT_EQ(shapes.at("emb_ln.weight"), (std::vector<int64_t>{48}));
  EXPECT_EQ(shapes.count("encoder.layers.0.attn.Wqkv.bias"), 0u);
  EXPECT_EQ(shapes.count("encoder.layers.0.attn.out_proj.bias"), 0u);
  EXPECT_EQ(std::string(c.checkpoint_prefix()), "nomic_bert.");
}

TEST(HfConfigParse, NomicBertTransformersFiveSchema) {
  const HfConfig c = parse_hf_config(R"({"model_type": "nomic_bert", "hidden_size": 40, "num_attention_heads": 4,
      "intermediate_size": 52, "num_hidden_layers": 2, "head_dim": 10, "vocab_size": 300,
      "rope_parameters": {"rope_theta": 2000.0, "rope_type": "default"}})",
                                     "config.json");
  EXPECT_EQ(c.rope_theta, 2000.0);
  EXPECT_EQ(c.rotary_dim, 10);
  EXPECT_EQ(c.hidden_act, "silu");  // NomicBertConfig's default
  // Its defaults: nomic-embed-text's sizes, theta 1000.
  const HfConfig d = parse_hf_config(R"({"model_type": "nomic_bert"})", "c.json");
  EXPECT_EQ(d.hidden_size, 768);
  EXPECT_EQ(d.vocab_size, 30528);
  EXPECT_EQ(d.rope_theta, 1000.0);
  EXPECT_EQ(d.max_position_embeddings, 2048);
}

TEST(HfConfigParse, NomicBertFeaturesStokeDoesNotRunAreRefusedByName) {
  struct Case {
    const char* json;
    const char* field;
    const char* what;
  };
  const Case cases[] = {
      {R"({"model_type": "nomic_bert", "rotary_emb_fraction": 0.5})", "\"rotary_emb_fraction\"", "0.5"},
      {R"({"model_type": "nomic_bert", "rotary_emb_interleaved": true})", "\"rotary_emb_interleaved\"", "true"},
      {R"({"model_type": "nomic_bert", "qkv_proj_bias": true})", "\"qkv_proj_bias\"", "true"},
      {R"({"model_type": "nomic_bert", "mlp_fc1_bias": true})", "\"mlp_fc1_bias\"", "true"},
      {R"({"model_type": "nomic_bert", "prenorm": true})", "\"prenorm\"", "true"},
      {R"({"model_type": "nomic_bert", "rotary_scaling_factor": 2.0})", "\"rotary_scaling_factor\"", "2.0"},
      {R"({"model_type": "nomic_bert", "activation_function": "gelu"})", "\"activation_function\"", "swiglu"},
      {R"({"model_type": "nomic_bert", "head_dim": 32})", "\"head_dim\"", "64"},
      {R"({"model_type": "nomic_bert", "moe_every_n_layers": 2, "num_experts": 8})", "\"moe_every_n_layers\"",
       "mixture-of-experts"},
  };
  for (const Case& c : cases) {
    const std::string msg = expect_error(Errc::unsupported, [&] { parse_hf_config(c.json, "config.json"); });
    EXPECT_CONTAINS(msg, std::string("config.json: field ") + c.field);
    EXPECT_CONTAINS(msg, c.what);
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  }
}

// ---- ModernBERT: both config schemas, what it refuses -------------------------------

// The hub's schema (answerdotai/ModernBERT-base's config.json: global_attn_every_n_layers,
// global/local_rope_theta) and transformers 5's (layer_types, rope_parameters per layer type)
// read to the same layers; the tensors follow Wqkv, Wi = 2I rows, no attn_norm in layer 0.
TEST(HfConfigParse, ModernBertHubSchema) {
  const HfConfig c = parse_hf_config(R"({"model_type": "modernbert", "vocab_size": 300, "hidden_size": 60,
      "intermediate_size": 44, "num_hidden_layers": 4, "num_attention_heads": 3, "hidden_activation": "gelu",
      "norm_eps": 1e-05, "norm_bias": false, "attention_bias": false, "mlp_bias": false, "classifier_bias": false,
      "global_attn_every_n_layers": 3, "global_rope_theta": 160000.0, "local_rope_theta": 10000.0,
      "local_attention": 128, "classifier_pooling": "mean", "classifier_activation": "gelu",
      "max_position_embeddings": 8192, "pad_token_id": 299, "position_embedding_type": "absolute",
      "reference_compile": true, "deterministic_flash_attn": false, "sparse_prediction": false})",
                                     "config.json");
  EXPECT_EQ(c.arch->family, LayerFamily::prenorm_encoder);
  EXPECT_EQ(c.attention_window, (std::vector<int>{0, 64, 64, 0}));
  EXPECT_EQ(c.rope_theta, 160000.0);
  EXPECT_EQ(c.local_rope_theta, 10000.0);
  EXPECT_TRUE(c.classifier_mean_pooling);
  EXPECT_DOUBLE_EQ(c.layer_norm_eps, 1e-5);
  EXPECT_EQ(c.type_vocab_size, 0);
  std::map<std::string, std::vector<int64_t>> shapes;
  for (const auto& t : expected_tensors(c)) shapes[t.name] = t.shape;
  EXPECT_EQ(shapes.at("embeddings.tok_embeddings.weight"), (std::vector<int64_t>{300, 60}));
  EXPECT_EQ(shapes.at("layers.0.attn.Wqkv.weight"), (std::vector<int64_t>{180, 60}));
  EXPECT_EQ(shapes.at("layers.3.mlp.Wi.weight"), (std::vector<int64_t>{88, 60}));
  EXPECT_EQ(shapes.at("layers.3.mlp.Wo.weight"), (std::vector<int64_t>{60, 44}));
  EXPECT_EQ(shapes.count("layers.0.attn_norm.weight"), 0u);  // nn.Identity in layer 0
  EXPECT_EQ(shapes.at("layers.1.attn_norm.weight"), (std::vector<int64_t>{60}));
  EXPECT_EQ(shapes.at("head.norm.weight"), (std::vector<int64_t>{60}));
  EXPECT_EQ(shapes.at("classifier.bias"), (std::vector<int64_t>{2}));
  EXPECT_EQ(shapes.count("embeddings.norm.bias"), 0u);
  // embeddings (2) + final norm + 4 layers x 6 - layer 0's attn_norm + head dense, norm, classifier w, b
  EXPECT_EQ(shapes.size(), 2u + 1u + 4u * 6u - 1u + 4u);
  // transformers' defaults: every third layer global from layer 0, window 128 (+-64), thetas 160k / 10k, cls.
  const HfConfig d = parse_hf_config(R"({"model_type": "modernbert", "num_hidden_layers": 5})", "c.json");
  EXPECT_EQ(d.attention_window, (std::vector<int>{0, 64, 64, 0, 64}));
  EXPECT_EQ(d.rope_theta, 160000.0);
  EXPECT_EQ(d.local_rope_theta, 10000.0);
  EXPECT_FALSE(d.classifier_mean_pooling);
  EXPECT_EQ(d.pad_token_id, 50283);
}

TEST(HfConfigParse, ModernBertTransformersFiveSchema) {
  const HfConfig c = parse_hf_config(R"({"model_type": "modernbert", "hidden_size": 60, "num_attention_heads": 3,
      "num_hidden_layers": 3, "local_attention": 16, "vocab_size": 2005, "pad_token_id": 2003,
      "layer_types": ["full_attention", "sliding_attention", "full_attention"],
      "rope_parameters": {"full_attention": {"rope_theta": 20000.0, "rope_type": "default"},
                          "sliding_attention": {"rope_theta": 5000.0, "rope_type": "default"}}})",
                                     "config.json");
  EXPECT_EQ(c.attention_window, (std::vector<int>{0, 8, 0}));
  EXPECT_EQ(c.rope_theta, 20000.0);
  EXPECT_EQ(c.local_rope_theta, 5000.0);
}

TEST(HfConfigParse, ModernBertFeaturesStokeDoesNotRunAreRefusedByName) {
  struct Case {
    const char* json;
    Errc code;
    const char* field;
    const char* what;
  };
  const Case cases[] = {
      {R"({"model_type": "modernbert", "norm_bias": true})", Errc::unsupported, "\"norm_bias\"", "true"},
      {R"({"model_type": "modernbert", "attention_bias": true})", Errc::unsupported, "\"attention_bias\"", "true"},
      {R"({"model_type": "modernbert", "mlp_bias": true})", Errc::unsupported, "\"mlp_bias\"", "true"},
      {R"({"model_type": "modernbert", "classifier_bias": true})", Errc::unsupported, "\"classifier_bias\"", "true"},
      {R"({"model_type": "modernbert", "classifier_activation": "silu"})", Errc::unsupported,
       "\"classifier_activation\"", "\"silu\""},
      {R"({"model_type": "modernbert", "classifier_pooling": "max"})", Errc::unsupported, "\"classifier_pooling\"",
       "\"max\""},
      {R"({"model_type": "modernbert", "hidden_activation": "silu"})", Errc::unsupported, "\"hidden_activation\"",
       "gelu"},
      {R"({"model_type": "modernbert", "rope_scaling": {"rope_type": "linear", "factor": 2.0}})", Errc::unsupported,
       "\"rope_scaling\"", "linear"},
      {R"({"model_type": "modernbert", "rope_parameters": {"sliding_attention": {"rope_type": "yarn"}}})",
       Errc::unsupported, "\"rope_parameters\"", "\"yarn\""},
      {R"({"model_type": "modernbert", "num_hidden_layers": 2, "layer_types": ["full_attention", "chunked"]})",
       Errc::unsupported, "\"layer_types\"", "chunked"},
      {R"({"model_type": "modernbert", "num_hidden_layers": 2, "layer_types": ["full_attention"]})", Errc::format,
       "\"layer_types\"", "num_hidden_layers = 2"},
      {R"({"model_type": "modernbert", "local_attention": 1})", Errc::unsupported, "\"local_attention\"", "1"},
      {R"({"model_type": "modernbert", "hidden_size": 63, "num_attention_heads": 7})", Errc::format,
       "\"hidden_size\"", "odd"},
  };
  for (const Case& c : cases) {
    const std::string msg = expect_error(c.code, [&] { parse_hf_config(c.json, "config.json"); });
    EXPECT_CONTAINS(msg, std::string("config.json: field ") + c.field);
    EXPECT_CONTAINS(msg, c.what);
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  }
}

TEST(HfConfigParse, LabelsAndProblemType) {
  json j = fixture_config("tiny-bert");
  j["id2label"] = {{"1", "pos"}, {"0", "neg"}};
  j["label2id"] = {{"neg", 0}, {"pos", 1}};
  j["problem_type"] = "multi_label_classification";
  HfConfig c = parse(j);
  EXPECT_EQ(c.id2label, (std::vector<std::string>{"neg", "pos"}));
  EXPECT_EQ(c.problem_type, ProblemType::multi_label_classification);

  j["problem_type"] = "regression";
  EXPECT_EQ(parse(j).problem_type, ProblemType::regression);
  j["problem_type"] = "single_label_classification";
  EXPECT_EQ(parse(j).problem_type, ProblemType::single_label_classification);
  j["problem_type"] = nullptr;
  EXPECT_EQ(parse(j).problem_type, ProblemType::unspecified);
  j["problem_type"] = "ranking";
  EXPECT_CONTAINS(expect_error(Errc::format, [&] { parse(j); }), "field \"problem_type\"");

  // Keys must be exactly 0..n-1.
  j = fixture_config("tiny-bert");
  j["id2label"] = {{"0", "a"}, {"2", "c"}};
  j.erase("label2id");
  EXPECT_CONTAINS(expect_error(Errc::format, [&] { parse(j); }), "key \"2\"");
  j["id2label"] = {{"0", "a"}, {"x", "c"}};
  EXPECT_CONTAINS(expect_error(Errc::format, [&] { parse(j); }), "key \"x\"");
  j["id2label"] = {{"0", "a"}, {"01", "c"}};
  EXPECT_CONTAINS(expect_error(Errc::format, [&] { parse(j); }), "key \"01\"");
  j["id2label"] = json::object();
  EXPECT_CONTAINS(expect_error(Errc::format, [&] { parse(j); }), "field \"id2label\"");

  // num_labels contradicting id2label.
  j = fixture_config("tiny-bert");
  j["num_labels"] = 5;
  EXPECT_CONTAINS(expect_error(Errc::format, [&] { parse(j); }), "field \"num_labels\"");

  // label2id pointing past the labels.
  j = fixture_config("tiny-bert");
  j["label2id"]["LABEL_2"] = 7;
  EXPECT_CONTAINS(expect_error(Errc::format, [&] { parse(j); }), "field \"label2id\"");
}

TEST(ModelFolder, MissingConfig) {
  const fs::path dir = copy_fixture("tiny-bert", "no_config");
  fs::remove(dir / "config.json");
  fs::remove(dir / "modules.json");
  EXPECT_CONTAINS(expect_folder_error(ModelFolderErrc::no_config, [&] { open_model_folder(dir); }), "config.json");
  expect_folder_error(ModelFolderErrc::no_config, [&] { load_hf_config(dir); });

  // With modules.json the Transformer module still needs the root config.json.
  const fs::path dir2 = copy_fixture("tiny-bert", "no_config2");
  fs::remove(dir2 / "config.json");
  expect_folder_error(ModelFolderErrc::no_config, [&] { open_model_folder(dir2); });
}

TEST(ModelFolder, NotAFolder) {
  expect_error(Errc::not_found, [&] { open_model_folder(test::scratch_dir("nf") / "absent"); });
  expect_error(Errc::invalid_argument, [&] { open_model_folder(test::fixture("models/tiny-bert/config.json")); });
  expect_error(Errc::invalid_argument, [&] { open_model_weights(test::fixture("models/tiny-bert/vocab.txt")); });
}

TEST(ModelFolder, WordEmbeddingDimensionMustMatchHiddenSize) {
  const fs::path dir = copy_fixture("tiny-bert", "wed");
  edit_json(dir / "1_Pooling/config.json", [](json& j) { j["word_embedding_dimension"] = 32; });
  EXPECT_CONTAINS(expect_folder_error(ModelFolderErrc::shape_mismatch, [&] { open_model_folder(dir); }),
                  "word_embedding_dimension");
}

TEST(ModelFolder, VocabMustCoverTokenizerIds) {
  const HfConfig c = open_model_folder(test::fixture("models/tiny-bert")).config;
  check_vocab_covers(c, 2999, "vocab.txt");
  const std::string msg = expect_folder_error(ModelFolderErrc::vocab_too_small,
                                              [&] { check_vocab_covers(c, 3000, "tokenizer.json: added token \"[X]\""); });
  EXPECT_CONTAINS(msg, "vocab_size is 3000");
  EXPECT_CONTAINS(msg, "[X]");
}

// ---- weights: single file, pickle, nothing ---------------------------------

// pytorch_model.bin itself is read by the restricted reader (test_torch_checkpoint.cc);
// torch.save files under other names are listed, never opened.
TEST(ModelWeights, OtherPickleNamesAreNeverParsed) {
  const fs::path dir = copy_fixture("tiny-bert", "pickle");
  fs::remove(dir / "model.safetensors");
  for (const char* name : {"model.pt", "weights.pth", "training_args.bin"}) {
    // Junk: were it parsed (as a pickle or as safetensors) the error would be another kind.
    write_text(dir / name, std::string("\x80\x02" "junk that is not a pickle" "\xff\xff\xff\xff"));
    const std::string msg = expect_folder_error(ModelFolderErrc::pickle_only, [&] { open_model_weights(dir); });
    EXPECT_CONTAINS(msg, name);
    EXPECT_CONTAINS(msg, "rename it pytorch_model.bin");
    fs::remove(dir / name);
  }
  // The config still loads: `stoke tokenize` works on such a folder.
  write_text(dir / "model.pt", "junk");
  EXPECT_EQ(open_model_folder(dir).config.hidden_size, 64);
}

TEST(ModelWeights, NoWeightsAtAll) {
  const fs::path dir = copy_fixture("tiny-bert", "noweights");
  fs::remove(dir / "model.safetensors");
  EXPECT_CONTAINS(expect_folder_error(ModelFolderErrc::no_weights, [&] { open_model_weights(dir); }),
                  "model.safetensors");
  write_text(dir / "tf_model.h5", "junk");
  EXPECT_CONTAINS(expect_folder_error(ModelFolderErrc::no_weights, [&] { open_model_weights(dir); }), "tf_model.h5");
}

TEST(ModelWeights, SymlinkedSingleFileLeavingTheFolder) {
  const fs::path root = test::scratch_dir("single_symlink");
  const fs::path dir = root / "model";
  fs::create_directories(dir);
  fs::copy_file(test::fixture("models/tiny-bert/config.json"), dir / "config.json");
  fs::copy_file(test::fixture("models/tiny-bert/model.safetensors"), root / "outside.safetensors");
  fs::create_symlink(root / "outside.safetensors", dir / "model.safetensors");
  EXPECT_CONTAINS(expect_folder_error(ModelFolderErrc::shard_path_escapes, [&] { open_model_weights(dir); }),
                  "outside");
  // A symlink that stays inside the folder is fine.
  fs::remove(dir / "model.safetensors");
  fs::copy_file(root / "outside.safetensors", dir / "real.safetensors");
  fs::create_symlink("real.safetensors", dir / "model.safetensors");
  EXPECT_EQ(open_model_weights(dir).find("bert.embeddings.word_embeddings.weight")->shape,
            (std::vector<int64_t>{3000, 64}));
}

// The Hugging Face hub cache links every snapshot file into the repository's
// blobs/ store: that one layout is accepted; links elsewhere still are not.
TEST(ModelWeights, HubCacheSnapshotLinksIntoBlobs) {
  const fs::path repo = test::scratch_dir("hub") / "models--org--tiny-bert";
  const fs::path snap = repo / "snapshots" / "0123abcd";
  fs::create_directories(snap);
  fs::create_directories(repo / "blobs");
  for (const char* name : {"config.json", "model.safetensors", "vocab.txt", "tokenizer_config.json"}) {
    const fs::path blob = repo / "blobs" / (std::string("sha-") + name);
    fs::copy_file(test::fixture(std::string("models/tiny-bert/") + name), blob);
    fs::create_symlink(fs::path("../../blobs") / blob.filename(), snap / name);
  }
  EXPECT_EQ(open_model_weights(snap).find("bert.embeddings.word_embeddings.weight")->shape,
            (std::vector<int64_t>{3000, 64}));
  // Outside blobs/ (here: the repository folder itself) is still an escape.
  fs::copy_file(test::fixture("models/tiny-bert/model.safetensors"), repo / "elsewhere.safetensors");
  fs::remove(snap / "model.safetensors");
  fs::create_symlink("../../elsewhere.safetensors", snap / "model.safetensors");
  expect_folder_error(ModelFolderErrc::shard_path_escapes, [&] { open_model_weights(snap); });
}

// ---- sharded weights -----------------------------------------------------

// A folder with the tiny-bert config and its weights split into two shards
// (alternating tensors); returns the weight_map written.
json make_sharded(const fs::path& dir) {
  fs::create_directories(dir);
  fs::copy_file(test::fixture("models/tiny-bert/config.json"), dir / "config.json");
  auto src = SafetensorsFile::open(test::fixture("models/tiny-bert/model.safetensors"));
  std::vector<TensorToWrite> a, b;
  json weight_map = json::object();
  size_t i = 0;
  for (const TensorToWrite& t : tensors_of(*src)) {
    const bool first = (i++ % 2) == 0;
    (first ? a : b).push_back(t);
    weight_map[t.name] = first ? "model-00001-of-00002.safetensors" : "model-00002-of-00002.safetensors";
  }
  write_safetensors(dir / "model-00001-of-00002.safetensors", a);
  write_safetensors(dir / "model-00002-of-00002.safetensors", b);
  json index = {{"metadata", {{"total_size", 1092000}}}, {"weight_map", weight_map}};
  write_text(dir / "model.safetensors.index.json", index.dump(2));
  return weight_map;
}

void write_index(const fs::path& dir, const json& weight_map) {
  write_text(dir / "model.safetensors.index.json", json{{"metadata", json::object()}, {"weight_map", weight_map}}.dump());
}

TEST(ModelWeights, ShardedLoadsAndFindsEveryTensor) {
  const fs::path dir = test::scratch_dir("sharded_good") / "m";
  const json weight_map = make_sharded(dir);
  const ModelWeights w = open_model_weights(dir);
  EXPECT_TRUE(w.sharded());
  EXPECT_EQ(w.files().size(), 2u);

  auto ref = SafetensorsFile::open(test::fixture("models/tiny-bert/model.safetensors"));
  EXPECT_EQ(w.size(), ref->tensors().size());
  for (const StoredTensor& t : ref->tensors()) {
    const StoredTensor* v = w.find(t.name);
    ASSERT_NE(v, nullptr) << t.name;
    EXPECT_EQ(v->shape, t.shape);
    EXPECT_EQ(v->dtype, t.dtype);
    ASSERT_EQ(v->data.size(), t.data.size());
    EXPECT_EQ(std::memcmp(v->data.data(), t.data.data(), t.data.size()), 0) << t.name;
    EXPECT_EQ(w.file_of(t.name), weight_map[t.name].get<std::string>());
  }
  const HfConfig c = load_hf_config(dir);
  for (const auto& r : resolve_encoder_tensors(c, w, true, true)) EXPECT_NE(r.view, nullptr);

  // "./name" and "name" are one shard, not two holding every tensor twice.
  json wm = weight_map;
  wm.begin().value() = "./" + wm.begin().value().get<std::string>();
  write_index(dir, wm);
  EXPECT_EQ(open_model_weights(dir).files().size(), 2u);
}

TEST(ModelWeights, ShardPathsLeavingTheFolder) {
  const fs::path root = test::scratch_dir("sharded_escape");
  const fs::path dir = root / "m";
  const json weight_map = make_sharded(dir);
  // A real safetensors file outside the folder: the refusal is about the path, not a missing file.
  fs::copy_file(dir / "model-00002-of-00002.safetensors", root / "x.safetensors");

  auto with_second_shard = [&](const std::string& name) {
    json wm = weight_map;
    for (auto& [tensor, shard] : wm.items()) {
      if (shard == "model-00002-of-00002.safetensors") shard = name;
    }
    write_index(dir, wm);
  };

  with_second_shard("../x.safetensors");
  EXPECT_CONTAINS(expect_folder_error(ModelFolderErrc::shard_path_escapes, [&] { open_model_weights(dir); }),
                  "\"../x.safetensors\"");

  with_second_shard("sub/../../x.safetensors");
  expect_folder_error(ModelFolderErrc::shard_path_escapes, [&] { open_model_weights(dir); });

  with_second_shard((root / "x.safetensors").string());
  EXPECT_CONTAINS(expect_folder_error(ModelFolderErrc::shard_path_escapes, [&] { open_model_weights(dir); }),
                  "absolute");

  fs::create_symlink(root / "x.safetensors", dir / "link.safetensors");
  with_second_shard("link.safetensors");
  EXPECT_CONTAINS(expect_folder_error(ModelFolderErrc::shard_path_escapes, [&] { open_model_weights(dir); }),
                  "\"link.safetensors\"");

  // A symlinked sub-folder leaving the folder.
  fs::create_directories(root / "elsewhere");
  fs::copy_file(root / "x.safetensors", root / "elsewhere" / "y.safetensors");
  fs::create_directory_symlink(root / "elsewhere", dir / "sub");
  with_second_shard("sub/y.safetensors");
  expect_folder_error(ModelFolderErrc::shard_path_escapes, [&] { open_model_weights(dir); });
}

TEST(ModelWeights, ShardMissing) {
  const fs::path dir = test::scratch_dir("sharded_missing") / "m";
  make_sharded(dir);
  fs::remove(dir / "model-00002-of-00002.safetensors");
  EXPECT_CONTAINS(expect_folder_error(ModelFolderErrc::shard_missing, [&] { open_model_weights(dir); }),
                  "model-00002-of-00002.safetensors");
}

TEST(ModelWeights, TensorInTwoShards) {
  const fs::path dir = test::scratch_dir("sharded_two") / "m";
  make_sharded(dir);
  // Shard 2 gets a copy of shard 1's first tensor too.
  auto s1 = SafetensorsFile::open(dir / "model-00001-of-00002.safetensors");
  auto s2 = SafetensorsFile::open(dir / "model-00002-of-00002.safetensors");
  auto tensors = tensors_of(*s2);
  const std::string dup = s1->tensors().front().name;
  tensors.push_back({dup, s1->tensors().front().dtype, s1->tensors().front().shape, s1->tensors().front().data});
  write_safetensors(dir / "model-00002-of-00002.safetensors.new", tensors);
  s2.reset();
  fs::rename(dir / "model-00002-of-00002.safetensors.new", dir / "model-00002-of-00002.safetensors");
  const std::string msg = expect_folder_error(ModelFolderErrc::tensor_in_two_shards, [&] { open_model_weights(dir); });
  EXPECT_CONTAINS(msg, "\"" + dup + "\"");
  EXPECT_CONTAINS(msg, "model-00001-of-00002.safetensors");
  EXPECT_CONTAINS(msg, "model-00002-of-00002.safetensors");
}

TEST(ModelWeights, WeightMapNamesATensorItsShardLacks) {
  const fs::path dir = test::scratch_dir("sharded_lacks") / "m";
  json wm = make_sharded(dir);
  wm["bert.encoder.layer.7.attention.self.query.weight"] = "model-00001-of-00002.safetensors";
  write_index(dir, wm);
  EXPECT_CONTAINS(expect_folder_error(ModelFolderErrc::tensor_not_in_shard, [&] { open_model_weights(dir); }),
                  "bert.encoder.layer.7.attention.self.query.weight");

  // A tensor the map puts in the wrong shard.
  const fs::path dir2 = test::scratch_dir("sharded_lacks2") / "m";
  wm = make_sharded(dir2);
  const std::string moved = wm.begin().key();
  wm[moved] = wm[moved] == "model-00001-of-00002.safetensors" ? "model-00002-of-00002.safetensors"
                                                               : "model-00001-of-00002.safetensors";
  write_index(dir2, wm);
  EXPECT_CONTAINS(expect_folder_error(ModelFolderErrc::tensor_not_in_shard, [&] { open_model_weights(dir2); }),
                  moved);
}

TEST(ModelWeights, MalformedIndex) {
  const fs::path dir = test::scratch_dir("sharded_bad") / "m";
  json wm = make_sharded(dir);
  const fs::path index = dir / "model.safetensors.index.json";

  write_text(index, R"({"metadata": {}})");
  EXPECT_CONTAINS(expect_folder_error(ModelFolderErrc::bad_index, [&] { open_model_weights(dir); }), "weight_map");
  write_text(index, R"({"weight_map": {}})");
  expect_folder_error(ModelFolderErrc::bad_index, [&] { open_model_weights(dir); });
  write_text(index, R"({"weight_map": {"a": 3}})");
  expect_folder_error(ModelFolderErrc::bad_index, [&] { open_model_weights(dir); });
  write_text(index, "not json");
  expect_folder_error(ModelFolderErrc::bad_index, [&] { open_model_weights(dir); });
  // The same tensor twice in the map, in two shards: the JSON says two things.
  write_text(index, R"({"weight_map": {"bert.pooler.dense.bias": "model-00001-of-00002.safetensors",
                                       "bert.pooler.dense.bias": "model-00002-of-00002.safetensors"}})");
  EXPECT_CONTAINS(expect_folder_error(ModelFolderErrc::bad_index, [&] { open_model_weights(dir); }),
                  "bert.pooler.dense.bias");
  // A safetensors index naming torch.save shards (pytorch_model.bin.index.json names those).
  write_index(dir, json{{"bert.pooler.dense.bias", "pytorch_model-00001-of-00002.bin"}});
  EXPECT_CONTAINS(expect_folder_error(ModelFolderErrc::bad_index, [&] { open_model_weights(dir); }),
                  "expected a .safetensors file");
}

// ---- the encoder layout -----------------------------------------------------

TEST(EncoderLayout, MissingEncoderTensor) {
  const fs::path dir = copy_fixture("tiny-bert", "missing_tensor");
  rewrite_weights(dir, [](const std::string& n) {
    return n == "bert.encoder.layer.1.attention.self.query.weight" ? std::string() : n;
  });
  const ModelFolder mf = open_model_folder(dir);
  const ModelWeights w = open_model_folder_weights(mf);
  const std::string msg = expect_folder_error(ModelFolderErrc::missing_tensor,
                                              [&] { resolve_encoder_tensors(mf.config, w, false, false); });
  EXPECT_CONTAINS(msg, "\"bert.encoder.layer.1.attention.self.query.weight\"");
}

TEST(EncoderLayout, ShapeContradictingConfig) {
  const fs::path dir = copy_fixture("tiny-bert", "shape");
  const ModelWeights w = open_model_weights(dir);

  edit_json(dir / "config.json", [](json& j) { j["intermediate_size"] = 256; });
  std::string msg = expect_folder_error(ModelFolderErrc::shape_mismatch, [&] {
    resolve_encoder_tensors(load_hf_config(dir), w, false, false);
  });
  EXPECT_CONTAINS(msg, "\"bert.encoder.layer.0.intermediate.dense.weight\"");
  EXPECT_CONTAINS(msg, "[128, 64]");
  EXPECT_CONTAINS(msg, "[256, 64]");
  EXPECT_CONTAINS(msg, "intermediate_size");

  edit_json(dir / "config.json", [](json& j) {
    j["intermediate_size"] = 128;
    j["hidden_size"] = 128;
  });
  msg = expect_folder_error(ModelFolderErrc::shape_mismatch, [&] {
    resolve_encoder_tensors(load_hf_config(dir), w, false, false);
  });
  EXPECT_CONTAINS(msg, "hidden_size");

  edit_json(dir / "config.json", [](json& j) {
    j["hidden_size"] = 64;
    j["num_hidden_layers"] = 3;  // layer 2 does not exist
  });
  EXPECT_CONTAINS(expect_folder_error(ModelFolderErrc::missing_tensor,
                                      [&] { resolve_encoder_tensors(load_hf_config(dir), w, false, false); }),
                  "bert.encoder.layer.2.");

  edit_json(dir / "config.json", [](json& j) {
    j["num_hidden_layers"] = 2;
    j["max_position_embeddings"] = 512;
  });
  EXPECT_CONTAINS(expect_folder_error(ModelFolderErrc::shape_mismatch,
                                      [&] { resolve_encoder_tensors(load_hf_config(dir), w, false, false); }),
                  "max_position_embeddings");
}

TEST(EncoderLayout, WordEmbeddingRowsMustEqualVocabSize) {
  const fs::path dir = copy_fixture("tiny-bert", "vocab_rows");
  edit_json(dir / "config.json", [](json& j) { j["vocab_size"] = 3001; });
  const ModelFolder mf = open_model_folder(dir);
  const ModelWeights w = open_model_folder_weights(mf);
  const std::string msg = expect_folder_error(ModelFolderErrc::shape_mismatch,
                                              [&] { resolve_encoder_tensors(mf.config, w, false, false); });
  EXPECT_CONTAINS(msg, "word_embeddings");
  EXPECT_CONTAINS(msg, "vocab_size = 3001");
}

TEST(EncoderLayout, ClassifierRowsFollowNumLabels) {
  const fs::path dir = copy_fixture("tiny-xlmr", "labels");
  edit_json(dir / "config.json", [](json& j) {
    j["id2label"] = {{"0", "a"}, {"1", "b"}};
    j.erase("label2id");
  });
  const ModelFolder mf = open_model_folder(dir);
  const ModelWeights w = open_model_folder_weights(mf);
  const std::string msg = expect_folder_error(ModelFolderErrc::shape_mismatch,
                                              [&] { resolve_encoder_tensors(mf.config, w, false, false); });
  EXPECT_CONTAINS(msg, "classifier.out_proj.weight");
  EXPECT_CONTAINS(msg, "num_labels");
}

TEST(EncoderLayout, NamesWithoutPrefixLoad) {
  const fs::path dir = copy_fixture("tiny-bert", "noprefix");
  rewrite_weights(dir, [](const std::string& n) { return n.rfind("bert.", 0) == 0 ? n.substr(5) : n; });
  const ModelFolder mf = open_model_folder(dir);
  const ModelWeights w = open_model_folder_weights(mf);
  ASSERT_EQ(w.find("bert.embeddings.word_embeddings.weight"), nullptr);
  const auto resolved = resolve_encoder_tensors(mf.config, w, true, true);
  for (const auto& r : resolved) {
    ASSERT_NE(r.view, nullptr) << r.expected.name;
    EXPECT_EQ(r.stored_name, r.expected.name);
  }
}

TEST(EncoderLayout, MissingPoolerAndClassifierAreFineUnlessNeeded) {
  const fs::path dir = copy_fixture("tiny-bert", "headless");
  // A bare BertModel without pooler, as a sentence-transformers export may be.
  rewrite_weights(dir, [](const std::string& n) {
    if (n.rfind("bert.pooler.", 0) == 0 || n.rfind("classifier.", 0) == 0) return std::string();
    return n.rfind("bert.", 0) == 0 ? n.substr(5) : n;
  });
  const ModelFolder mf = open_model_folder(dir);
  const ModelWeights w = open_model_folder_weights(mf);
  size_t absent = 0;
  for (const auto& r : resolve_encoder_tensors(mf.config, w, false, false)) {
    if (r.expected.part == ExpectedTensor::encoder) {
      EXPECT_NE(r.view, nullptr);
    } else {
      EXPECT_EQ(r.view, nullptr);
      ++absent;
    }
  }
  EXPECT_EQ(absent, 4u);
  EXPECT_CONTAINS(expect_folder_error(ModelFolderErrc::missing_tensor,
                                      [&] { resolve_encoder_tensors(mf.config, w, true, false); }),
                  "pooler.dense.weight");
  EXPECT_CONTAINS(expect_folder_error(ModelFolderErrc::missing_tensor,
                                      [&] { resolve_encoder_tensors(mf.config, w, false, true); }),
                  "classifier.weight");
}

TEST(EncoderLayout, NonFloatWeightRefused) {
  const fs::path dir = copy_fixture("tiny-bert", "int_weight");
  auto src = SafetensorsFile::open(dir / "model.safetensors");
  auto tensors = tensors_of(*src);
  for (auto& t : tensors) {
    if (t.name == "bert.encoder.layer.0.output.dense.bias") t.dtype = DType::i32;  // same byte size as f32
  }
  write_safetensors(dir / "w.new", tensors);
  src.reset();
  fs::rename(dir / "w.new", dir / "model.safetensors");
  const ModelFolder mf = open_model_folder(dir);
  const ModelWeights w = open_model_folder_weights(mf);
  const std::string msg = expect_folder_error(ModelFolderErrc::dtype_unsupported,
                                              [&] { resolve_encoder_tensors(mf.config, w, false, false); });
  EXPECT_CONTAINS(msg, "bert.encoder.layer.0.output.dense.bias");
  EXPECT_CONTAINS(msg, "I32");
}

TEST(EncoderLayout, ExpectedTensorsFollowTheConfigNotTheFixture) {
  HfConfig c = parse_hf_config(
      R"({"model_type": "xlm-roberta", "vocab_size": 77, "hidden_size": 24, "num_attention_heads": 3,
          "num_hidden_layers": 3, "intermediate_size": 40, "max_position_embeddings": 20,
          "type_vocab_size": 1, "num_labels": 5})",
      "config.json");
  const auto t = expected_tensors(c);
  EXPECT_EQ(t.size(), 5u + 16u * 3 + 2 + 4);
  auto shape_of = [&](const std::string& name) {
    for (const auto& e : t)
      if (e.name == name) return e.shape;
    ADD_FAILURE() << name;
    return std::vector<int64_t>{};
  };
  EXPECT_EQ(shape_of("embeddings.word_embeddings.weight"), (std::vector<int64_t>{77, 24}));
  EXPECT_EQ(shape_of("embeddings.position_embeddings.weight"), (std::vector<int64_t>{20, 24}));
  EXPECT_EQ(shape_of("embeddings.token_type_embeddings.weight"), (std::vector<int64_t>{1, 24}));
  EXPECT_EQ(shape_of("encoder.layer.2.intermediate.dense.weight"), (std::vector<int64_t>{40, 24}));
  EXPECT_EQ(shape_of("encoder.layer.2.output.dense.weight"), (std::vector<int64_t>{24, 40}));
  EXPECT_EQ(shape_of("encoder.layer.1.attention.output.LayerNorm.bias"), (std::vector<int64_t>{24}));
  EXPECT_EQ(shape_of("classifier.dense.weight"), (std::vector<int64_t>{24, 24}));
  EXPECT_EQ(shape_of("classifier.out_proj.weight"), (std::vector<int64_t>{5, 24}));
  EXPECT_EQ(shape_of("classifier.out_proj.bias"), (std::vector<int64_t>{5}));
}

// ---- sentence-transformers -------------------------------------------------

TEST(SentenceTransformers, PoolingNames) {
  EXPECT_EQ(pooling_from_name("cls"), Pooling::cls);
  EXPECT_EQ(pooling_from_name("cls_token"), Pooling::cls);
  EXPECT_EQ(pooling_from_name("mean_tokens"), Pooling::mean);
  EXPECT_EQ(pooling_from_name("max_tokens"), Pooling::max);
  EXPECT_EQ(pooling_from_name("mean_sqrt_len_tokens"), Pooling::mean_sqrt_len);
  EXPECT_EQ(pooling_from_name("lasttoken"), Pooling::lasttoken);
  EXPECT_EQ(pooling_from_name("weightedmean"), std::nullopt);
  EXPECT_EQ(pooling_from_name("Mean"), std::nullopt);
  for (Pooling p : {Pooling::cls, Pooling::mean, Pooling::max, Pooling::mean_sqrt_len, Pooling::lasttoken}) {
    EXPECT_EQ(pooling_from_name(pooling_name(p)), p);
  }
}

TEST(SentenceTransformers, NoModulesJsonIsAPlainFolder) {
  const fs::path dir = copy_fixture("tiny-bert", "plain");
  fs::remove(dir / "modules.json");
  const ModelFolder mf = open_model_folder(dir);
  EXPECT_FALSE(mf.st.present);
  EXPECT_FALSE(mf.st.pooling.has_value());
  EXPECT_FALSE(mf.st.normalize);
}

// Dense runs between Pooling and Normalize; after Normalize it is refused.
TEST(SentenceTransformers, DenseAfterNormalizeAndOtherModulesRefusedByName) {
  const fs::path dir = copy_fixture("tiny-bert", "dense");
  edit_json(dir / "modules.json", [](json& j) {
    j.push_back({{"idx", 3}, {"name", "3"}, {"path", "3_Dense"}, {"type", "sentence_transformers.models.Dense"}});
  });
  const std::string msg = expect_error(Errc::unsupported, [&] { load_sentence_transformers(dir); });
  EXPECT_CONTAINS(msg, "sentence_transformers.models.Dense");
  EXPECT_CONTAINS(msg, "3_Dense");

  for (const char* type : {"sentence_transformers.models.LayerNorm", "sentence_transformers.models.WordEmbeddings",
                           "sentence_transformers.models.LSTM", "my_package.Transformer"}) {
    edit_json(dir / "modules.json", [&](json& j) { j.back()["type"] = type; });
    EXPECT_CONTAINS(expect_error(Errc::unsupported, [&] { load_sentence_transformers(dir); }), type);
  }
}

// tests/golden/models/tiny-bert-dense: written by sentence-transformers 6.2
// (its new module type names, 2_Dense/config.json + model.safetensors).
TEST(SentenceTransformers, DenseModuleLoads) {
  const fs::path golden = fs::path(STOKE_SOURCE_DIR) / "tests/golden/models/tiny-bert-dense";
  const SentenceTransformersConfig st = load_sentence_transformers(golden);
  EXPECT_EQ(st.module_types, (std::vector<std::string>{"Transformer", "Pooling", "Dense", "Normalize"}));
  ASSERT_EQ(st.dense.size(), 1u);
  EXPECT_EQ(st.dense[0].path, "2_Dense");
  EXPECT_EQ(st.dense[0].in_features, 64);
  EXPECT_EQ(st.dense[0].out_features, 24);
  EXPECT_TRUE(st.dense[0].bias);
  EXPECT_EQ(st.dense[0].activation, DenseModule::Activation::tanh);
  EXPECT_TRUE(st.normalize);

  const fs::path dir = test::scratch_dir("dense_act") / "tiny-bert-dense";
  copy_tree(golden, dir);
  edit_json(dir / "2_Dense" / "config.json",
            [](json& j) { j["activation_function"] = "torch.nn.modules.linear.Identity"; });
  EXPECT_EQ(load_sentence_transformers(dir).dense[0].activation, DenseModule::Activation::identity);
  edit_json(dir / "2_Dense" / "config.json",
            [](json& j) { j["activation_function"] = "torch.nn.modules.activation.ReLU"; });
  EXPECT_CONTAINS(expect_error(Errc::unsupported, [&] { load_sentence_transformers(dir); }),
                  "2_Dense/config.json: field \"activation_function\": \"torch.nn.modules.activation.ReLU\" is not "
                  "supported; runs: torch.nn.modules.activation.Tanh, torch.nn.modules.linear.Identity");
  edit_json(dir / "2_Dense" / "config.json",
            [](json& j) { j["activation_function"] = "torch.nn.modules.activation.Tanh"; });
  fs::remove(dir / "2_Dense" / "model.safetensors");
  EXPECT_CONTAINS(expect_error(Errc::not_found, [&] { load_sentence_transformers(dir); }),
                  "no model.safetensors for the Dense module");
}

TEST(SentenceTransformers, ModulePathsStayInside) {
  const fs::path dir = copy_fixture("tiny-bert", "modpaths");
  for (const char* path : {"../1_Pooling", "/etc", "1_Pooling/../../x"}) {
    edit_json(dir / "modules.json", [&](json& j) { j[1]["path"] = path; });
    EXPECT_CONTAINS(expect_error(Errc::refused, [&] { load_sentence_transformers(dir); }), path);
  }
  // A pooling folder that is a symlink leaving the model folder.
  fs::create_directory_symlink(test::fixture("models/tiny-xlmr/1_Pooling"), dir / "linked");
  edit_json(dir / "modules.json", [&](json& j) { j[1]["path"] = "linked"; });
  expect_error(Errc::refused, [&] { load_sentence_transformers(dir); });
}

TEST(SentenceTransformers, TransformerModuleFolder) {
  // Older saves keep the HF model in 0_BERT/; config.json, weights and tokenizer live there.
  const fs::path root = test::scratch_dir("st_subfolder");
  const fs::path dir = root / "m";
  fs::create_directories(dir / "0_BERT");
  const fs::path bert = copy_fixture("tiny-bert", "st_subfolder_src");
  for (const char* f : {"config.json", "model.safetensors", "vocab.txt", "sentence_bert_config.json"}) {
    fs::copy_file(bert / f, dir / "0_BERT" / f);
  }
  copy_tree(bert / "1_Pooling", dir / "1_Pooling");
  json modules = read_json(bert / "modules.json");
  modules[0]["path"] = "0_BERT";
  write_text(dir / "modules.json", modules.dump());
  const ModelFolder mf = open_model_folder(dir);
  EXPECT_EQ(mf.st.transformer_path, "0_BERT");
  EXPECT_EQ(mf.model_dir, dir / "0_BERT");
  EXPECT_EQ(mf.config.hidden_size, 64);
  EXPECT_EQ(mf.st.max_seq_length, 128);
  EXPECT_NE(open_model_folder_weights(mf).find("bert.pooler.dense.weight"), nullptr);

  fs::remove(dir / "0_BERT" / "config.json");
  EXPECT_CONTAINS(expect_error(Errc::not_found, [&] { load_sentence_transformers(dir); }), "0_BERT");
}

TEST(SentenceTransformers, PoolingLegacyAndNewForms) {
  const fs::path dir = copy_fixture("tiny-bert", "pooling");
  const fs::path pooling = dir / "1_Pooling" / "config.json";
  auto pooling_with = [&](const json& cfg) {
    write_text(pooling, cfg.dump());
    return load_sentence_transformers(dir);
  };
  // Legacy flags, one per mode.
  const std::pair<const char*, Pooling> legacy[] = {
      {"pooling_mode_cls_token", Pooling::cls},
      {"pooling_mode_max_tokens", Pooling::max},
      {"pooling_mode_mean_sqrt_len_tokens", Pooling::mean_sqrt_len},
      {"pooling_mode_lasttoken", Pooling::lasttoken},
  };
  for (const auto& [flag, mode] : legacy) {
    json cfg = {{"word_embedding_dimension", 64}, {"pooling_mode_mean_tokens", false}, {flag, true}};
    EXPECT_EQ(pooling_with(cfg).pooling, mode) << flag;
  }
  // sentence-transformers' default: mean is on unless switched off.
  EXPECT_EQ(pooling_with({{"word_embedding_dimension", 64}}).pooling, Pooling::mean);

  // The newer string form, which wins over the flags.
  const std::pair<const char*, Pooling> modern[] = {
      {"mean", Pooling::mean}, {"max", Pooling::max}, {"cls", Pooling::cls},
      {"lasttoken", Pooling::lasttoken}, {"mean_sqrt_len_tokens", Pooling::mean_sqrt_len}, {"CLS", Pooling::cls},
  };
  for (const auto& [name, mode] : modern) {
    json cfg = {{"word_embedding_dimension", 64}, {"pooling_mode", name}, {"pooling_mode_mean_tokens", true}};
    EXPECT_EQ(pooling_with(cfg).pooling, mode) << name;
  }
  EXPECT_EQ(pooling_with({{"pooling_mode", "max"}, {"include_prompt", false}}).include_prompt, false);
  EXPECT_CONTAINS(expect_error(Errc::format, [&] { pooling_with({{"pooling_mode", "median"}}); }), "median");
  EXPECT_CONTAINS(expect_error(Errc::format, [&] { pooling_with({{"pooling_mode_cls_token", "yes"}}); }),
                  "pooling_mode_cls_token");
  expect_error(Errc::format, [&] { pooling_with({{"pooling_mode_mean_tokens", false}}); });
  fs::remove(pooling);
  expect_error(Errc::not_found, [&] { load_sentence_transformers(dir); });
}

TEST(SentenceTransformers, SeveralModesRefused) {
  const fs::path dir = copy_fixture("tiny-bert", "pooling_many");
  edit_json(dir / "1_Pooling/config.json", [](json& j) { j["pooling_mode_cls_token"] = true; });
  const std::string msg = expect_error(Errc::unsupported, [&] { load_sentence_transformers(dir); });
  EXPECT_CONTAINS(msg, "stoke runs one pooling mode; this model concatenates cls+mean");
  // Leaving the mean flag out keeps sentence-transformers' default (on): still two modes.
  write_text(dir / "1_Pooling/config.json", R"({"pooling_mode_cls_token": true})");
  EXPECT_CONTAINS(expect_error(Errc::unsupported, [&] { load_sentence_transformers(dir); }), "cls+mean");
}

TEST(SentenceTransformers, WeightedMeanRefused) {
  const fs::path dir = copy_fixture("tiny-bert", "pooling_weighted");
  edit_json(dir / "1_Pooling/config.json", [](json& j) {
    j["pooling_mode_mean_tokens"] = false;
    j["pooling_mode_weightedmean_tokens"] = true;
  });
  EXPECT_CONTAINS(expect_error(Errc::unsupported, [&] { load_sentence_transformers(dir); }), "weightedmean");
  write_text(dir / "1_Pooling/config.json", R"({"pooling_mode": "weightedmean"})");
  EXPECT_CONTAINS(expect_error(Errc::unsupported, [&] { load_sentence_transformers(dir); }), "weightedmean");
}

TEST(SentenceTransformers, PromptsRead) {
  const fs::path dir = copy_fixture("tiny-xlmr", "prompts");
  write_text(dir / "config_sentence_transformers.json",
             R"({"__version__": {"sentence_transformers": "3.0.1"},
                 "prompts": {"query": "query: ", "passage": "passage: "},
                 "default_prompt_name": "query", "similarity_fn_name": "cosine"})");
  SentenceTransformersConfig st = load_sentence_transformers(dir);
  EXPECT_EQ(st.prompts.size(), 2u);
  EXPECT_EQ(st.prompts.at("query"), "query: ");
  EXPECT_EQ(st.prompts.at("passage"), "passage: ");
  EXPECT_EQ(st.default_prompt_name, "query");

  write_text(dir / "config_sentence_transformers.json", R"({"prompts": {}, "default_prompt_name": null})");
  st = load_sentence_transformers(dir);
  EXPECT_TRUE(st.prompts.empty());
  EXPECT_FALSE(st.default_prompt_name.has_value());

  write_text(dir / "config_sentence_transformers.json", R"({"prompts": {"q": "q: "}, "default_prompt_name": "doc"})");
  EXPECT_CONTAINS(expect_error(Errc::format, [&] { load_sentence_transformers(dir); }), "default_prompt_name");
  write_text(dir / "config_sentence_transformers.json", R"({"prompts": {"q": 3}})");
  EXPECT_CONTAINS(expect_error(Errc::format, [&] { load_sentence_transformers(dir); }), "prompts");
}

TEST(SentenceTransformers, ModuleOrder) {
  const fs::path dir = copy_fixture("tiny-bert", "order");
  edit_json(dir / "modules.json", [](json& j) { std::swap(j[1], j[2]); });  // Normalize before Pooling
  expect_error(Errc::unsupported, [&] { load_sentence_transformers(dir); });
  edit_json(dir / "modules.json", [](json& j) { j = json::array({j[2]}); });  // Pooling without a Transformer
  expect_error(Errc::unsupported, [&] { load_sentence_transformers(dir); });
  write_text(dir / "modules.json", "[]");
  EXPECT_CONTAINS(expect_error(Errc::format, [&] { load_sentence_transformers(dir); }), "Transformer");
  write_text(dir / "modules.json", "{}");
  expect_error(Errc::format, [&] { load_sentence_transformers(dir); });
}

// ---- the path check itself ---------------------------------------------------

TEST(FolderPath, Problems) {
  const fs::path dir = test::scratch_dir("folder_path");
  fs::create_directories(dir / "a");
  EXPECT_EQ(folder_path_problem(dir, "x.safetensors"), "");
  EXPECT_EQ(folder_path_problem(dir, "./x.safetensors"), "");
  EXPECT_EQ(folder_path_problem(dir, "a/x.safetensors"), "");
  EXPECT_EQ(folder_path_problem(dir, "."), "");
  EXPECT_NE(folder_path_problem(dir, ""), "");
  EXPECT_NE(folder_path_problem(dir, ".."), "");
  EXPECT_NE(folder_path_problem(dir, "a/../../x"), "");
  EXPECT_NE(folder_path_problem(dir, "/x"), "");
  EXPECT_NE(folder_path_problem(dir, std::string_view("a\0b", 3)), "");
  // A sibling folder whose name starts with ours is outside.
  fs::create_directories(dir.string() + "-sibling");
  fs::create_directory_symlink(dir.string() + "-sibling", dir / "s");
  EXPECT_NE(folder_path_problem(dir, "s/x"), "");
}

}  // namespace
}  // namespace stoke
