#include "jobs/train_embedding.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "core/error.h"
#include "core/thread_pool.h"
#include "io/encoder_layout.h"
#include "io/sentence_transformers.h"
#include "jobs/version.h"
#include "model/encoder_training.h"
#include "model/param_layout.h"

namespace stoke {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

void refuse_classifier_flags(const TrainOptions& o) {
  const TrainOptions defaults;
  const char* objective = train::objective_name(o.objective);
  auto refuse = [&](const char* flag, const char* why) {
    throw Error(Errc::invalid_argument, std::string(flag) + " is for --objective classify; --objective " + objective +
                                            " " + why);
  };
  if (o.num_labels != defaults.num_labels) refuse("--num-labels", "trains no classification head");
  if (o.new_labels) refuse("--new-labels", "trains no classification head");
  if (o.label_smoothing != defaults.label_smoothing) refuse("--label-smoothing", "has no class labels");
  if (o.label_field != defaults.label_field) refuse("--label-field", "reads --score-field for scored pairs");
  if (o.batch_size_auto)
    throw Error(Errc::invalid_argument,
                std::string("--batch-size auto: the contrastive batch of --objective ") + objective +
                    " is a choice of the loss (every other positive in it is a negative): give a number; what is in "
                    "memory at once is --mini-batch-tokens, planned from the device's free memory when unset");
  if (o.metric == train::EvalMetric::accuracy || o.metric == train::EvalMetric::macro_f1)
    throw Error(Errc::invalid_argument, std::string("--metric ") + train::eval_metric_name(o.metric) +
                                            " is a classifier's; an embedding model's evaluation gives eval_cosine_*@k"
                                            " (retrieval) or eval_spearman_cosine / eval_pearson_cosine (scored pairs)");
}

}  // namespace

EmbeddingTrainingData read_embedding_training_data(const TrainOptions& o, const ModelTokenizer& mt,
                                                   TrainSummary& sum) {
  refuse_classifier_flags(o);
  const SentenceTransformersConfig& st = mt.folder.st;
  // The objectives train one pooled vector per text; a ColBERT model's Dense
  // modules run on every token, so its training would be another loss.
  if (st.colbert)
    throw Error(Errc::unsupported, std::string("--objective ") + train::objective_name(o.objective) + ": " + mt.folder.dir.string() +
                                       " is a ColBERT model (per-token vectors, no pooling); stoke trains single-vector "
                                       "embedding models — start from its base encoder instead");
  if (!o.matryoshka_weights.empty() && o.matryoshka_weights.size() != o.matryoshka_dims.size())
    throw Error(Errc::invalid_argument, "--matryoshka-weights has " + std::to_string(o.matryoshka_weights.size()) +
                                            " weights for " + std::to_string(o.matryoshka_dims.size()) +
                                            " --matryoshka-dims: one each");
  // The embedding is the last Dense module's output where there is one.
  const int64_t width = st.dense.empty() ? mt.folder.config.hidden_size : st.dense.back().out_features;
  for (int64_t d : o.matryoshka_dims)
    if (d > width)
      throw Error(Errc::invalid_argument, "--matryoshka-dims " + std::to_string(d) + ": the model's embedding has " +
                                              std::to_string(width) + " dimensions");
  EmbeddingTrainingData d;
  if (st.pooling) {
    d.pooling = *st.pooling;
    d.pooling_name = std::string(pooling_name(*st.pooling));
  }
  d.normalize = st.present && st.normalize;
  RecordReaderOptions reader = record_reader_options(CommonOptions{o.common});
  reader.path = o.train;
  reader.id_field.clear();
  reader.pair_field.clear();
  if (reader.format == InputFormat::text)
    throw Error(Errc::invalid_argument, "--train: an embedding objective reads named columns: use JSONL or CSV");
  d.train = train::read_contrastive_dataset(reader, o.columns, o.objective, o.skip_bad_records);
  ThreadPool pool(o.common.workers > 0 ? static_cast<size_t>(o.common.workers) : 0);
  EncodeOptions encode;
  encode.max_length = static_cast<size_t>(mt.max_length);
  d.texts = train::tokenize_texts(d.train.texts, *mt.tokenizer, encode, &pool, &d.stats);
  if (!o.eval.empty()) {
    train::EvalSetOptions eo;
    if (!o.common.input_format.empty()) eo.format = input_format_from_name(o.common.input_format);
    if (!o.columns.anchor.empty()) eo.anchor_field = eo.sentence1_field = o.columns.anchor;
    if (!o.columns.positive.empty()) eo.positive_field = eo.sentence2_field = o.columns.positive;
    if (!o.columns.score.empty()) eo.score_field = o.columns.score;
    eo.negative_fields = o.columns.negatives;
    d.eval = train::read_eval_set(o.eval, eo);
    d.eval_texts = train::tokenize_texts(train::eval_set_texts(*d.eval), *mt.tokenizer, encode, &pool, nullptr);
    const bool scored = d.eval->kind == train::EvalSetKind::scored_pairs;
    sum.eval_examples = scored ? d.eval->pairs.scores.size() : d.eval->retrieval.queries.size();
    if (train::is_embedding_metric(o.metric)) {
      const bool pair_metric =
          o.metric == train::EvalMetric::spearman_cosine || o.metric == train::EvalMetric::pearson_cosine;
      if (pair_metric != scored)
        throw Error(Errc::invalid_argument,
                    std::string("--metric ") + train::eval_metric_name(o.metric) + ": --eval " + o.eval + " is " +
                        (scored ? "a set of scored pairs (eval_spearman_cosine, eval_pearson_cosine)"
                                : "a retrieval set (eval_cosine_ndcg@10, eval_cosine_mrr@10, eval_cosine_map@100, "
                                  "eval_cosine_recall@10, eval_cosine_accuracy@1)"));
    }
    sum.notes.push_back("evaluation: " + std::string(train::eval_set_kind_name(d.eval->kind)) + " " + o.eval + " (" +
                        (scored ? std::to_string(d.eval->pairs.scores.size()) + " pairs"
                                : std::to_string(d.eval->retrieval.queries.size()) + " queries, " +
                                      std::to_string(d.eval->retrieval.corpus.size()) + " documents") +
                        ")");
  }

  sum.examples = d.train.examples.size();
  
  sum.truncated = d.stats.truncated;
  if (d.stats.truncated > 0)
    sum.notes.push_back(std::to_string(d.stats.truncated) + " of " + std::to_string(d.texts.size()) +
                        " distinct training texts are longer than " + std::to_string(mt.max_length) +
                        " tokens and were truncated (--max-length)");
  if (!d.train.bad.empty())
    sum.notes.push_back(std::to_string(d.train.bad.size()) + " bad training records skipped (--on-error skip)");
  std::string cols;
  for (const std::string& c : d.train.columns) cols += (cols.empty() ? "" : ", ") + c;
  sum.notes.push_back(std::string("objective ") + train::objective_name(o.objective) + " on " + cols +
                      (d.train.score_column.empty() ? "" : " scored by " + d.train.score_column) + " (" +
                      std::to_string(d.train.examples.size()) + " examples, " + std::to_string(d.texts.size()) +
                      " distinct texts); pooling " + d.pooling_name + (d.normalize ? " + Normalize" : ""));
  return d;
}

train::EmbeddingTaskOptions embedding_task_options(const TrainOptions& o, const EmbeddingTrainingData& d,
                                                   int64_t batch, const DropoutRates& dropout,
                                                   dist::Communicator* comm, int64_t mini_batch_tokens) {
  train::EmbeddingTaskOptions t;
  t.objective = o.objective;
  t.scale = static_cast<float>(o.scale);
  t.cosine = !o.dot_similarity;
  t.model_normalizes = d.normalize;
  t.matryoshka_dims = o.matryoshka_dims;
  for (double w : o.matryoshka_weights) t.matryoshka_weights.push_back(static_cast<float>(w));
  t.pooling = d.pooling;
  t.batch_size = batch;
  t.mini_batch_tokens = mini_batch_tokens;
  t.shuffle = !o.no_shuffle;
  t.seed = o.seed;
  t.dropout = dropout;
  t.comm = comm;
  return t;
}

json embedding_identity(const TrainOptions& o, const EmbeddingTrainingData& d) {
  return {{"objective", train::objective_name(o.objective)},
          {"columns", d.train.columns},
          {"score_column", d.train.score_column},
          {"scale", o.scale},
          {"similarity", o.dot_similarity ? "dot" : "cosine"},
          {"matryoshka_dims", o.matryoshka_dims},
          {"matryoshka_weights", o.matryoshka_weights},
          {"mini_batch_tokens", o.mini_batch_tokens},
          {"pooling", d.pooling_name}};
}

namespace {

// 1_Pooling/config.json in sentence-transformers' keys.
std::string pooling_config(const EmbeddingTrainingData& d, int64_t width, bool include_prompt) {
  // json is a sorted map: the file reads the same whatever order the keys go in.
  json p = {{"word_embedding_dimension", width},
            {"pooling_mode_weightedmean_tokens", false},  // a mode stoke does not run
            {"include_prompt", include_prompt}};
  for (Pooling m : kPoolings) p["pooling_mode_" + std::string(pooling_flag_name(m))] = d.pooling == m;
  return p.dump(2) + "\n";
}

std::string model_card(const TrainOptions& o, const ModelTokenizer& mt, const EmbeddingTrainingData& d) {
  std::string loss;
  switch (o.objective) {
    case train::Objective::mnrl: loss = "MultipleNegativesRankingLoss"; break;
    case train::Objective::mnrl_symmetric: loss = "MultipleNegativesRankingLoss (query_to_doc + doc_to_query)"; break;
    case train::Objective::cosent: loss = "CoSENTLoss"; break;
    case train::Objective::cosine_mse: loss = "CosineSimilarityLoss"; break;
    case train::Objective::classify: break;
  }
  if (!o.matryoshka_dims.empty()) loss = "MatryoshkaLoss over " + loss;
  std::string dims;
  for (int64_t m : o.matryoshka_dims) dims += (dims.empty() ? "" : ", ") + std::to_string(m);
  std::string s = "---\nlibrary_name: sentence-transformers\npipeline_tag: sentence-similarity\ntags:\n"
                  "- sentence-transformers\n- sentence-similarity\n- feature-extraction\n- stoke\n---\n\n";
  s += "# " + fs::path(o.output).filename().string() + "\n\n";
  s += "A sentence-transformers model fine-tuned by stoke " + std::string(stoke_version()) + " (`stoke train --objective " +
       train::objective_name(o.objective) + "`) from `" + mt.folder.dir.filename().string() + "`.\n\n";
  s += "- Loss: " + loss + (o.objective == train::Objective::cosine_mse ? "" : ", scale " + std::to_string(o.scale)) +
       (dims.empty() ? "" : "; Matryoshka dimensions " + dims) + "\n";
  const std::vector<DenseModule>& dense = mt.folder.st.dense;
  s += "- Pooling: " + d.pooling_name + (dense.empty() ? "" : ", then " + std::to_string(dense.size()) + " Dense") +
       (d.normalize ? ", then Normalize" : "") + "; " +
       std::to_string(dense.empty() ? mt.folder.config.hidden_size : dense.back().out_features) +
       " dimensions; max sequence length " +
       std::to_string(mt.max_length) + "\n";
  s += "- Training data: " + std::to_string(d.train.examples.size()) + " examples of " +
       fs::path(o.train).filename().string() + "\n\n";
  s += "```python\nfrom sentence_transformers import SentenceTransformer\nmodel = SentenceTransformer(\"" +
       fs::path(o.output).filename().string() + "\")\nembeddings = model.encode([\"a sentence\"])\n```\n";
  return s;
}

}  // namespace

void add_embedding_model_files(train::SaveContext& save, const TrainOptions& o, const ModelTokenizer& mt,
                               const EmbeddingTrainingData& d, const ModelWeights& base, const json& config_raw) {
  const SentenceTransformersConfig& st = mt.folder.st;
  // config.json names the bare encoder AutoModel builds (BertModel, ...):
  // the folder holds no classification head, and a config that said
  // *ForSequenceClassification would promise one. A base that already named
  // another class (a remote-code model's own) keeps it.
  json config = config_raw;
  json arch = json::array();
  bool classifier = !config.contains("architectures") || !config["architectures"].is_array();
  if (!classifier)
    for (const json& a : config["architectures"])
      classifier = classifier || (a.is_string() && a.get<std::string>().find("ForSequenceClassification") != std::string::npos);
  if (classifier) {
    std::string name(mt.folder.config.arch->sequence_classifier);
    const size_t at = name.find("ForSequenceClassification");
    if (at != std::string::npos) name.replace(at, std::string("ForSequenceClassification").size(), "Model");
    config["architectures"] = json::array({name});
    for (const char* k : {"id2label", "label2id", "num_labels", "problem_type"}) config.erase(k);
  }
  save.config_json = config.dump(2) + "\n";
  const int64_t H = mt.folder.config.hidden_size;
  // The modules as sentence-transformers lays them out today: the encoder in
  // the folder itself (an older save's 0_Transformer folder would hold the
  // untrained weights), Pooling, the base's Dense modules (trained: their
  // model.safetensors is written from the parameters, checkpoint.h
  // stored_param; their config.json copied), Normalize if the base had it.
  json modules = json::array();
  modules.push_back({{"idx", 0}, {"name", "0"}, {"path", ""}, {"type", "sentence_transformers.models.Transformer"}});
  modules.push_back(
      {{"idx", 1}, {"name", "1"}, {"path", "1_Pooling"}, {"type", "sentence_transformers.models.Pooling"}});
  save.extra_files.clear();
  for (const DenseModule& m : st.dense) {
    const int idx = static_cast<int>(modules.size());
    modules.push_back({{"idx", idx}, {"name", std::to_string(idx)}, {"path", m.path},
                       {"type", "sentence_transformers.models.Dense"}});
    save.extra_files.push_back({m.path + "/config.json", mt.folder.dir / m.path / "config.json"});
  }
  if (d.normalize) {
    const int idx = static_cast<int>(modules.size());
    modules.push_back({{"idx", idx}, {"name", std::to_string(idx)}, {"path", std::to_string(idx) + "_Normalize"},
                       {"type", "sentence_transformers.models.Normalize"}});
  }
  save.text_files.push_back({"modules.json", modules.dump(2) + "\n"});
  save.text_files.push_back({"1_Pooling/config.json", pooling_config(d, H, st.include_prompt)});
  json sbert = {{"max_seq_length", mt.max_length}, {"do_lower_case", st.do_lower_case.value_or(false)}};
  save.text_files.push_back({"sentence_bert_config.json", sbert.dump(2) + "\n"});
  const fs::path prompts = mt.folder.dir / "config_sentence_transformers.json";
  std::error_code ec;
  if (fs::is_regular_file(prompts, ec)) save.extra_files.push_back({"config_sentence_transformers.json", prompts});
  save.text_files.push_back({"README.md", model_card(o, mt, d)});
  // The pooler the loss never reaches, as the base had it.
  for (const ResolvedTensor& r : resolve_encoder_tensors(mt.folder.config, base, false, false)) {
    if (r.expected.part != ExpectedTensor::pooler || !r.view) continue;
    train::SaveContext::Frozen f;
    f.name = r.expected.name;
    f.shape = r.view->shape;
    int64_t n = 1;
    for (int64_t x : f.shape) n *= x;
    f.values.resize(static_cast<size_t>(n));
    copy_stored_as_f32(*r.view, f.values.data());
    save.frozen.push_back(std::move(f));
  }
}

int64_t planned_mini_batch_tokens(const TrainOptions& o, const HfConfig& config, DType dtype, Backend& backend,
                                  const EmbeddingTrainingData& d, int64_t batch, std::string* note) {
  int64_t longest = 0;
  std::vector<int64_t> lengths;
  for (const train::Example& t : d.texts) lengths.push_back(static_cast<int64_t>(t.ids.size()));
  for (int64_t n : lengths) longest = std::max(longest, n);
  if (o.mini_batch_tokens > 0) {
    if (o.mini_batch_tokens < longest)
      throw Error(Errc::invalid_argument, "--mini-batch-tokens " + std::to_string(o.mini_batch_tokens) +
                                              " is less than the longest training text, " + std::to_string(longest) +
                                              " tokens (after truncation at --max-length): at least that many");
    return o.mini_batch_tokens;
  }
  // The most tokens a step can hold: its batch x groups longest texts.
  std::sort(lengths.begin(), lengths.end(), std::greater<>());
  int64_t step_tokens = 0;
  const size_t share = static_cast<size_t>(batch * static_cast<int64_t>(d.train.columns.size()));
  for (size_t i = 0; i < lengths.size() && i < share; ++i) step_tokens += lengths[i];
  const int64_t per_token = EncoderTrainingRunner::bytes_per_token(config, dtype) +
                            EncoderTrainingRunner::bytes_per_sequence(config);  // a text has at least one token
  const ParamLayout layout(config, ParamHeads::none);
  const int64_t fixed = layout.numel() * 4 * 5;  // parameters, gradients, two moments, the compute copies
  int64_t budget = 0;
  std::string measured;
  if (o.memory_budget) {
    budget = *o.memory_budget;
    measured = "--memory-budget";
  } else {
    const Backend::FreeMemory free = backend.free_memory();
    budget = static_cast<int64_t>(std::min<size_t>(free.bytes, size_t{1} << 62)) * 8 / 10;
    measured = "80% of " + std::to_string(free.bytes >> 20) + " MiB free (" + free.source + ")";
  }
  const int64_t fits = std::max<int64_t>((budget - fixed) / std::max<int64_t>(per_token, 1), 0);
  if (fits >= step_tokens) return 0;  // the whole batch at once: the plain step
  char line[200];
  std::snprintf(line, sizeof line,
                "--mini-batch-tokens %lld: a step of up to %lld tokens does not fit the budget of %.0f MiB (%s); "
                "it runs as GradCache mini-batches",
                static_cast<long long>(fits), static_cast<long long>(step_tokens),
                static_cast<double>(budget) / (1 << 20), measured.c_str());
  *note = line;
  return std::max<int64_t>(fits, longest);  // the smallest there is; out of memory then says so
}

}  // namespace stoke
