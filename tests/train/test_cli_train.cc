// `stoke train` end to end: the Hugging Face training goldens through the CLI
// (both fixture models, two AdamW steps, checkpoint after the first), the host
// sync bound over an epoch, exact resume after kill -9 between and during
// saves and past a corrupted checkpoint (RELIABILITY 9), the output folder's
// layout, and the errors a user can cause.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <regex>
#include <set>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "core/file_util.h"
#include "io/safetensors.h"
#include "support/fixtures.h"
#include "support/goldens.h"
#include "support/train_run_files.h"
#include "train/loss_scaler.h"

namespace stoke {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using namespace test::goldens;
using test::expect_models_close;
using test::log_lines;
using test::results_of;

const int kGoldenLabels[16] = {0, 1, 2, 0, 1, 2, 0, 1, 2, 1, 0, 2, 1, 0, 2, 1};

// Texts 0..15 of the goldens with the golden labels: the two training batches.
fs::path golden_train_file() {
  const fs::path p = test::scratch_dir("cli-train-golden-data") / "train.jsonl";
  std::ifstream in(test::fixture("golden/texts.jsonl"));
  std::ofstream out(p);
  std::string line;
  for (int i = 0; i < 16 && std::getline(in, line); ++i)
    out << json{{"text", json::parse(line)["text"]}, {"label", kGoldenLabels[i]}}.dump() << "\n";
  return p;
}

// n corpus records as language-labelled examples, spread evenly over the
// corpus from record `first` on (it is grouped by language; the stride mixes them).
fs::path corpus_file(const std::string& name, size_t first, size_t n) {
  const fs::path p = test::scratch_dir("cli-train-data-" + name) / "data.jsonl";
  std::ifstream in(test::fixture("corpus/fortunes-multilingual.jsonl"));
  std::ofstream out(p);
  std::string line;
  size_t written = 0;
  const size_t stride = std::max<size_t>(1, 24000 / n);
  for (size_t i = 0; written < n && std::getline(in, line); ++i) {
    if (i < first || (i - first) % stride != 0) continue;
    const json r = json::parse(line);
    out << json{{"text", r["text"]}, {"label", r["lang"]}}.dump() << "\n";
    ++written;
  }
  return p;
}

std::string model(const std::string& name) { return test::fixture("models/" + name).string(); }

// tiny-bert as a one-output regression model (labels {0: LABEL_0}, the
// classifier left out: initialised afresh) and n corpus texts with numeric
// targets 3..7. The MSE gradient grows with the error (unlike cross-entropy's,
// below 1/B), so with the largest f32 as the loss scale the f32 backward
// really overflows: f16 training's skip path without an injected fault.
fs::path regression_model() {
  const fs::path dir = test::scratch_dir("cli-train-regression-model");
  const fs::path base = test::fixture("models/tiny-bert");
  for (const auto& e : fs::directory_iterator(base)) {
    const std::string name = e.path().filename().string();
    if (name != "config.json" && name != "model.safetensors")
      fs::copy(e.path(), dir / name, fs::copy_options::recursive | fs::copy_options::overwrite_existing);
  }
  json config = json::parse(read_file(base / "config.json"));
  config["id2label"] = {{"0", "LABEL_0"}};
  config["label2id"] = {{"LABEL_0", 0}};
  std::ofstream(dir / "config.json") << config.dump(1);
  auto weights = SafetensorsFile::open(base / "model.safetensors");
  std::vector<TensorToWrite> kept;
  for (const StoredTensor& t : weights->tensors())
    if (t.name.rfind("classifier.", 0) != 0) kept.push_back({t.name, t.dtype, t.shape, t.data});
  write_safetensors(dir / "model.safetensors", kept);
  return dir;
}

fs::path regression_file(const std::string& name, size_t n) {
  const fs::path p = test::scratch_dir("cli-train-regression-" + name) / "data.jsonl";
  std::ifstream in(test::fixture("corpus/fortunes-multilingual.jsonl"));
  std::ofstream out(p);
  std::string line;
  size_t written = 0;
  for (size_t i = 0; written < n && std::getline(in, line); ++i) {
    if (i % 250 != 0) continue;
    const std::string text = json::parse(line)["text"];
    out << json{{"text", text}, {"label", 3.0 + static_cast<double>(text.size() % 5)}}.dump() << "\n";
    ++written;
  }
  return p;
}

const char* kGoldenFlags =
    " --batch-size 8 --lr 1e-3 --weight-decay 0.01 --decay-all --schedule constant --warmup-steps 0 --dropout 0"
    " --no-shuffle --max-grad-norm 0 --max-steps 2 --max-length 128 --precision f32 --log-every 1";

void expect_model_matches(const Fixture& fx, const fs::path& safetensors, const std::string& prefix) {
  auto file = SafetensorsFile::open(safetensors);
  size_t compared = 0;
  for (const StoredTensor& t : file->tensors()) {
    const auto want = golden(*fx.golden, prefix + t.name);
    std::vector<float> got(static_cast<size_t>(t.numel()));
    std::memcpy(got.data(), t.data.data(), got.size() * 4);
    ASSERT_EQ(got.size(), want.size()) << t.name;
    if (t.name.find("attention.self.key.bias") != std::string::npos) {
      for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-3) << t.name;
    } else {
      EXPECT_LE(relative_error(got, want), 1e-5) << prefix << t.name;
    }
    ++compared;
  }
  // Every trained parameter of the golden is in the file.
  size_t golden_params = 0;
  for (const StoredTensor& t : fx.golden->tensors())
    if (t.name.rfind(prefix, 0) == 0) ++golden_params;
  EXPECT_EQ(compared, golden_params);
}



class TrainGoldenCli : public ::testing::TestWithParam<const char*> {};

TEST_P(TrainGoldenCli, TwoAdamWStepsMatchTransformers) {
  const std::string name = GetParam();
  const Fixture fx = open_fixture(name);
  const fs::path out = test::scratch_dir("cli-train-golden-" + name) / "run";
  const auto r = test::run_stoke("train --model " + model(name) + " --train " + golden_train_file().string() +
                                 " --output " + out.string() + kGoldenFlags + " --save-every 1");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find(" of 16 training texts are longer than 128 tokens and were truncated"), std::string::npos)
      << r.err;
  expect_model_matches(fx, out / "checkpoint-1" / "model.safetensors", "after_step.");
  expect_model_matches(fx, out / "model.safetensors", "after_step2.");
  const auto lines = log_lines(out);
  ASSERT_EQ(lines.size(), 2u);
  const double want[2] = {best_golden(*fx.golden, "loss")[0], best_golden(*fx.golden, "loss_step2")[0]};
  for (int i = 0; i < 2; ++i) EXPECT_NEAR(lines[i]["loss"].get<double>(), want[i], 1e-5 * want[i]) << i;
  // HF layout: config with the labels and the architecture, tokenizer files, checksums.
  const json config = json::parse(read_file(out / "config.json"));
  EXPECT_EQ(config["id2label"].size(), 3u);
  EXPECT_EQ(config["label2id"].size(), 3u);
  EXPECT_NE(config["architectures"][0].get<std::string>().find("ForSequenceClassification"), std::string::npos);
  EXPECT_TRUE(fs::exists(out / "tokenizer_config.json"));
  EXPECT_TRUE(fs::exists(out / (name == "tiny-bert" ? "vocab.txt" : "sentencepiece.bpe.model")));
  EXPECT_TRUE(fs::exists(out / "checksums.json"));
  EXPECT_TRUE(fs::exists(out / "checkpoint-1" / "optimizer.safetensors"));
  EXPECT_TRUE(fs::exists(out / "checkpoint-1" / "trainer_state.json"));
  // The saved model classifies with stoke like any HF folder.
  const auto c = test::run_stoke("classify --model " + out.string() + " --input " + golden_train_file().string() +
                                 " --output - --quiet");
  EXPECT_EQ(c.status, 0) << c.err;
}

INSTANTIATE_TEST_SUITE_P(Models, TrainGoldenCli, ::testing::Values("tiny-bert", "tiny-xlmr"),
                         [](const auto& info) { return std::string(info.param) == "tiny-bert" ? "bert" : "xlmr"; });

// The added architectures (tests/golden), each with its own tokenizer: two
// AdamW steps through the CLI against the goldens, and the checkpoint's
// tensor names are exactly transformers' state_dict keys for the
// architecture's *ForSequenceClassification (no missing key).
class TrainGoldenCliArch : public ::testing::TestWithParam<const char*> {};

TEST_P(TrainGoldenCliArch, TwoAdamWStepsAndTransformersNames) {
  const std::string name = GetParam();
  const Fixture fx = open_fixture(name);
  const json info = json::parse(read_file(repo_golden_dir() / (name + ".json")));
  const fs::path out = test::scratch_dir("cli-train-golden-" + name) / "run";
  // Texts 0..15 with this golden's labels (taken modulo its label count).
  const fs::path data = test::scratch_dir("cli-train-golden-data-" + name) / "train.jsonl";
  {
    std::ifstream in(test::fixture("golden/texts.jsonl"));
    std::ofstream o(data);
    std::vector<double> labels = golden(*fx.golden, "train.labels");
    for (double l : golden(*fx.golden, "train2.labels")) labels.push_back(l);
    std::string line;
    for (size_t i = 0; i < labels.size() && std::getline(in, line); ++i)
      o << json{{"text", json::parse(line)["text"]}, {"label", static_cast<int>(labels[i])}}.dump() << "\n";
  }
  const std::string flags = std::regex_replace(std::string(kGoldenFlags), std::regex("--max-length 128"),
                                               "--max-length " + std::to_string(info["tokenization"]["max_length"].get<int>()));
  const auto r = test::run_stoke("train --model " + (repo_golden_dir() / "models" / name).string() + " --train " +
                                 data.string() + " --output " + out.string() + flags + " --num-labels " +
                                 std::to_string(fx.folder.config.num_labels()));
  ASSERT_EQ(r.status, 0) << r.err;
  const auto lines = log_lines(out);
  ASSERT_EQ(lines.size(), 2u);
  const double want[2] = {golden(*fx.golden, "loss")[0], golden(*fx.golden, "loss_step2")[0]};
  for (int i = 0; i < 2; ++i) EXPECT_NEAR(lines[i]["loss"].get<double>(), want[i], 1e-5 * want[i]) << i;

  auto file = SafetensorsFile::open(out / "model.safetensors");
  std::set<std::string> names, keys;
  // GTE, NomicBERT: transformers 5 saves (and loads) the hub's fused names, not its module names.
  const bool fused_names = name == "tiny-gte" || name == "tiny-nomic";
  for (const auto& k : info[fused_names ? "safetensors_keys" : "state_dict_keys"]) keys.insert(k.get<std::string>());
  const auto rows = golden(*fx.golden, "train.word_embedding_rows");
  for (const StoredTensor& t : file->tensors()) {
    names.insert(t.name);
    std::vector<float> got(static_cast<size_t>(t.numel()));
    std::memcpy(got.data(), t.data.data(), got.size() * 4);
    std::vector<double> expect, first_grad;
    if (fx.golden->find("after_step2_rows." + t.name)) {  // the word embeddings: the trained rows
      expect = golden(*fx.golden, "after_step2_rows." + t.name);
      first_grad = golden(*fx.golden, "grad_rows." + t.name);
      std::vector<float> cut;
      const size_t width = static_cast<size_t>(t.shape[1]);
      for (double row : rows)
        cut.insert(cut.end(), got.begin() + static_cast<int64_t>(static_cast<size_t>(row) * width),
                   got.begin() + static_cast<int64_t>((static_cast<size_t>(row) + 1) * width));
      got = cut;
    } else {
      expect = golden(*fx.golden, "after_step2." + t.name);
      if (fx.golden->find("grad." + t.name)) first_grad = golden(*fx.golden, "grad." + t.name);
    }
    const bool key_bias = t.name.find("attention.self.key.bias") != std::string::npos ||
                          t.name.find("attention.k_lin.bias") != std::string::npos ||
                          t.name.find("attention.attn.k.bias") != std::string::npos;
    if (key_bias) {
      for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], expect[i], 1e-3) << t.name;
    } else {
      expect_stepped_param_matches(got, expect, first_grad, 1e-5, t.name);
    }
  }
  EXPECT_EQ(names, keys);
  const json config = json::parse(read_file(out / "config.json"));
  EXPECT_EQ(config["architectures"][0], info["architecture"]);
  EXPECT_EQ(config["model_type"], fx.folder.config.model_type_name);
  const auto c = test::run_stoke("classify --model " + out.string() + " --input " + data.string() + " --output - --quiet");
  EXPECT_EQ(c.status, 0) << c.err;
}

INSTANTIATE_TEST_SUITE_P(Models, TrainGoldenCliArch,
                         ::testing::Values("tiny-electra", "tiny-distilbert", "tiny-mpnet", "tiny-roberta", "tiny-camembert",
                                           "tiny-xlmr5", "tiny-modernbert", "tiny-gte", "tiny-nomic"),
                         [](const auto& info) { return std::string(info.param).substr(5); });

TEST(TrainCli, HostSyncsOverAnEpochStayWithinTheBound) {
  const fs::path data = corpus_file("syncs", 0, 96), eval = corpus_file("syncs-eval", 50, 24);
  const fs::path out = test::scratch_dir("cli-train-syncs") / "run";
  // 96 examples / 8 = 12 steps; logs at 5, 10 (+ the last); evals at 4, 8, 12; a checkpoint at 6; the final model.
  const auto r = test::run_stoke("train --model " + model("tiny-bert") + " --train " + data.string() + " --eval " +
                                 eval.string() + " --output " + out.string() +
                                 " --batch-size 8 --epochs 1 --log-every 5 --eval-every 4 --save-every 6 --quiet");
  ASSERT_EQ(r.status, 0) << r.err;
  const json run = json::parse(read_file(out / "run.json"));
  const int64_t steps = run["steps"], log_every = 5, evals = 3, saves = 2;  // checkpoint-6 and the final model
  EXPECT_EQ(steps, 12);
  EXPECT_LE(run["host_syncs"].get<int64_t>(), 1 + steps / log_every + evals + saves) << run.dump(2);
  EXPECT_EQ(run["host_sync_reads"]["eval"], evals);
  EXPECT_EQ(run["host_sync_reads"]["save"], 1);
  EXPECT_TRUE(fs::exists(out / "checkpoint-6"));
  const auto lines = log_lines(out);
  int eval_lines = 0;
  for (const json& l : lines) eval_lines += l.contains("eval_accuracy") ? 1 : 0;
  EXPECT_EQ(eval_lines, 3);
  EXPECT_GT(run["throughput"]["samples_per_s"].get<double>(), 0);
  for (const char* key : {"batch_size", "lr", "base_lr", "precision", "workers", "threads", "device", "seed"})
    EXPECT_TRUE(run["settings"].contains(key)) << key;
  // The CPU captures no graphs: every micro-batch eager, none padded.
  EXPECT_EQ(run["graphs"]["used"], false) << run.dump(2);
  EXPECT_EQ(run["graphs"]["enabled"], true);
  EXPECT_EQ(run["graphs"]["buckets_captured"], 0);
  EXPECT_EQ(run["graphs"]["micro_batches_eager"], 12);
  EXPECT_EQ(run["graphs"]["padding_fraction"], 0.0);
  EXPECT_EQ(run["graphs"]["graphed"], json::array());
  EXPECT_EQ(run["graphs"]["optimizer_steps_replayed"], 0);
  EXPECT_EQ(run["graphs"]["optimizer_steps_eager"], steps);
}

// RELIABILITY 9: N steps + kill -9 + resume + N steps == 2N straight, bitwise,
// with dropout and shuffling on; a kill during a save falls back to the
// previous checkpoint; a corrupted checkpoint is detected and skipped.
TEST(TrainCli, ResumeAfterKillIsBitwiseExact) {
  const fs::path data = corpus_file("resume", 20, 72);
  const std::string base = "train --model " + model("tiny-bert") + " --train " + data.string() +
                           " --batch-size 8 --max-steps 9 --save-every 3 --log-every 2 --dropout 0.1 --quiet";
  const std::string env = "OMP_NUM_THREADS=1";
  const fs::path root = test::scratch_dir("cli-train-resume");
  const auto straight = test::run_stoke(base + " --output " + (root / "straight").string(), "/dev/null", env);
  ASSERT_EQ(straight.status, 0) << straight.err;
  const std::string want = read_file(root / "straight" / "model.safetensors");

  struct Kill {
    const char* name;
    const char* crash_at;  // STOKE_CRASH_AT of the first run
  };
  for (const Kill k : {Kill{"after-save", "checkpoint_saved:1"}, Kill{"during-save-files", "checkpoint_files:2"},
                       Kill{"during-save-rename", "checkpoint_rename:2"}, Kill{"after-second-save", "checkpoint_saved:2"}}) {
    const fs::path out = root / k.name;
    const auto first = test::run_stoke(base + " --output " + out.string(), "/dev/null",
                                       env + " STOKE_CRASH_AT=" + k.crash_at);
    ASSERT_NE(first.status, 0) << k.name << ": the crash point was not reached";
    const auto resumed = test::run_stoke(base + " --output " + out.string() + " --resume", "/dev/null", env);
    ASSERT_EQ(resumed.status, 0) << k.name << ": " << resumed.err;
    EXPECT_EQ(read_file(out / "model.safetensors"), want) << k.name;
    EXPECT_EQ(results_of(log_lines(out)), results_of(log_lines(root / "straight"))) << k.name;
    for (const auto& e : fs::directory_iterator(out))
      EXPECT_EQ(e.path().filename().string().find("partial"), std::string::npos) << e.path();
  }

  // A corrupted newest checkpoint: detected by its checksum, skipped, the one before resumed.
  const fs::path out = root / "corrupt";
  ASSERT_NE(test::run_stoke(base + " --output " + out.string(), "/dev/null", env + " STOKE_CRASH_AT=checkpoint_saved:2")
                .status,
            0);
  {
    std::fstream f(out / "checkpoint-6" / "model.safetensors", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-5, std::ios::end);
    f.put('\x7f');
  }
  const auto resumed = test::run_stoke(base + " --output " + out.string() + " --resume", "/dev/null", env);
  ASSERT_EQ(resumed.status, 0) << resumed.err;
  EXPECT_NE(resumed.err.find("checkpoint-6: model.safetensors does not match its checksum"), std::string::npos)
      << resumed.err;
  EXPECT_EQ(read_file(out / "model.safetensors"), want);
}

// kill -9 at random moments (loading, stepping, saving), resume each time:
// the final model equals the uninterrupted run's, byte for byte.
// STOKE_TRAIN_KILL_TEST_KILLS raises the count for the long run.
TEST(TrainCli, RandomKillsResumeBitwise) {
  const char* env = std::getenv("STOKE_TRAIN_KILL_TEST_KILLS");
  const int kills = env ? std::atoi(env) : 6;
  const fs::path data = corpus_file("kills", 5, 96);
  const fs::path root = test::scratch_dir("cli-train-kills");
  const std::string args = "train --model " + model("tiny-bert") + " --train " + data.string() +
                           " --batch-size 8 --max-steps 36 --save-every 2 --log-every 5 --dropout 0.1 --quiet";
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_EQ(test::run_stoke(args + " --output " + (root / "straight").string(), "/dev/null", "OMP_NUM_THREADS=1").status, 0);
  const double full = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const std::string want = read_file(root / "straight" / "model.safetensors");
  const fs::path out = root / "killed";
  const std::string cmd = "OMP_NUM_THREADS=1 exec " + test::stoke_binary().string() + " " + args + " --output " +
                          out.string() + " --resume >/dev/null 2>&1";
  std::mt19937 rng(4242);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  double bound = full * 0.6;
  int killed = 0;
  for (int attempt = 0; killed < kills && attempt < 4 * kills; ++attempt) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      ::execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    std::this_thread::sleep_for(std::chrono::duration<double>(bound * unit(rng)));
    ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
    if (WIFSIGNALED(status)) {
      ++killed;
      bound *= 1.05;
    } else {
      ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "a resumed run failed";
      EXPECT_EQ(read_file(out / "model.safetensors"), want) << "after " << killed << " kills";
      fs::remove_all(out);  // start over so later kills land mid-run
      bound *= 0.7;
    }
  }
  EXPECT_EQ(killed, kills);
  const auto last = test::run_stoke(args + " --output " + out.string() + " --resume", "/dev/null", "OMP_NUM_THREADS=1");
  ASSERT_EQ(last.status, 0) << last.err;
  EXPECT_EQ(read_file(out / "model.safetensors"), want);
}

TEST(TrainCli, UserErrorsSayWhatAndWhere) {
  const fs::path root = test::scratch_dir("cli-train-errors");
  const fs::path data = corpus_file("errors", 0, 16);
  const std::string base = "train --model " + model("tiny-bert") + " --train " + data.string() + " --quiet";
  ASSERT_EQ(test::run_stoke(base + " --output " + (root / "a").string() + " --max-steps 1").status, 0);
  auto again = test::run_stoke(base + " --output " + (root / "a").string() + " --max-steps 1");
  EXPECT_EQ(again.status, 1);
  EXPECT_NE(again.err.find("already holds a training run"), std::string::npos) << again.err;
  EXPECT_EQ(test::run_stoke(base + " --output " + (root / "a").string() + " --max-steps 1 --overwrite").status, 0);
  // Resuming with another learning rate is refused, naming it.
  ASSERT_EQ(test::run_stoke(base + " --output " + (root / "b").string() + " --max-steps 2 --save-every 1").status, 0);
  auto other = test::run_stoke(base + " --output " + (root / "b").string() + " --max-steps 2 --save-every 1 --resume --lr 1e-3");
  EXPECT_EQ(other.status, 1);
  EXPECT_NE(other.err.find("lr was"), std::string::npos) << other.err;

  const fs::path bad = root / "bad.jsonl";
  std::ofstream(bad) << "{\"text\": \"a\", \"label\": 0}\n{\"text\": \"b\"}\n";
  auto missing = test::run_stoke("train --model " + model("tiny-bert") + " --train " + bad.string() + " --output " +
                                 (root / "c").string());
  EXPECT_EQ(missing.status, 1);
  EXPECT_NE(missing.err.find("bad.jsonl:2"), std::string::npos) << missing.err;
  EXPECT_NE(missing.err.find("\"label\""), std::string::npos) << missing.err;
  const fs::path range = root / "range.jsonl";
  std::ofstream(range) << "{\"text\": \"a\", \"label\": 0}\n{\"text\": \"b\", \"label\": 7}\n";
  auto out_of_range = test::run_stoke("train --model " + model("tiny-bert") + " --train " + range.string() +
                                      " --output " + (root / "d").string());
  EXPECT_EQ(out_of_range.status, 1);
  EXPECT_NE(out_of_range.err.find("range.jsonl:2: label 7 is outside [0, 3)"), std::string::npos) << out_of_range.err;
  EXPECT_NE(out_of_range.err.find("--num-labels"), std::string::npos);
  // The loss scale's flags mean something in f16 only.
  auto scale_flag = test::run_stoke(base + " --output " + (root / "e").string() + " --max-steps 1 --precision bf16" +
                                    " --loss-scale-init 1024");
  EXPECT_EQ(scale_flag.status, 1);
  EXPECT_NE(scale_flag.err.find("--precision f16 only"), std::string::npos) << scale_flag.err;
}

// --precision f16: the dynamic loss scale (torch GradScaler) on the device.
// A default run reports its scale and skipped steps in every log line and
// run.json, and syncs with the host exactly as often as the same bf16 run (no
// read in the step). Cross-entropy's f32 gradients never overflow, even at
// the largest f32 scale; a regression head's do (regression_model): those
// steps are skipped, the scale backs off and (growth every 2 clean steps)
// grows back; the logged scale and skip count follow update_loss_scaler
// driven by the logged skips step by step, and the run still learns.
TEST(TrainCli, F16TrainsWithTheDeviceLossScaler) {
  const fs::path data = corpus_file("f16", 0, 96);
  const fs::path root = test::scratch_dir("cli-train-f16");
  const std::string base = "train --model " + model("tiny-bert") + " --train " + data.string() +
                           " --batch-size 8 --epochs 1 --log-every 1 --lr 2e-3 --save-every 5";
  const auto bf16 = test::run_stoke(base + " --quiet --precision bf16 --output " + (root / "bf16").string());
  ASSERT_EQ(bf16.status, 0) << bf16.err;
  const auto f16 = test::run_stoke(base + " --precision f16 --output " + (root / "f16").string());
  ASSERT_EQ(f16.status, 0) << f16.err;
  const json run = json::parse(read_file(root / "f16" / "run.json"));
  const json run_bf16 = json::parse(read_file(root / "bf16" / "run.json"));
  EXPECT_EQ(run["host_syncs"], run_bf16["host_syncs"]) << "f16 read the device more often than bf16";
  EXPECT_EQ(run["settings"]["precision"], "f16");
  EXPECT_EQ(run["loss_scaler"]["scale"], 65536.0);
  EXPECT_EQ(run["loss_scaler"]["skipped_steps"], 0);
  EXPECT_EQ(run["loss_scaler"]["optimizer_steps"], 12);
  EXPECT_EQ(run["loss_scaler"]["growth_interval"], 2000);
  EXPECT_NE(f16.err.find("loss scale 65536, 0 steps skipped"), std::string::npos) << f16.err;
  const json state = json::parse(read_file(root / "f16" / "checkpoint-5" / "trainer_state.json"));
  EXPECT_EQ(state["loss_scaler"]["optimizer_steps"], 5);
  EXPECT_EQ(state["loss_scaler"]["growth_tracker"], 5);
  for (const json& l : log_lines(root / "f16")) {
    EXPECT_EQ(l["loss_scale"], 65536.0) << l.dump();
    EXPECT_EQ(l["skipped_steps"], 0) << l.dump();
  }

  // Overflow: a regression head (MSE) and the largest f32 as the first scale.
  const std::string reg = "train --model " + regression_model().string() + " --train " +
                          regression_file("f16", 96).string() +
                          " --batch-size 8 --epochs 3 --log-every 1 --lr 1e-2 --save-every 0 --quiet --precision f16"
                          " --loss-scale-init 3.4e38 --loss-scale-growth-interval 2 --output ";
  const auto big = test::run_stoke(reg + (root / "overflow").string());
  ASSERT_EQ(big.status, 0) << big.err;
  LossScalerConfig config;
  config.init_scale = 3.4e38f;
  config.growth_interval = 2;
  LossScalerState want = initial_loss_scaler_state(config);
  int64_t grew = 0;
  std::vector<double> losses;
  for (const json& l : log_lines(root / "overflow")) {
    const int64_t skipped = l["skipped_steps"];
    ASSERT_TRUE(skipped == want.skipped_steps || skipped == want.skipped_steps + 1) << l.dump();
    const float before = want.scale;
    update_loss_scaler(want, skipped > want.skipped_steps, config);
    grew += want.scale > before ? 1 : 0;
    EXPECT_EQ(l["loss_scale"].get<float>(), want.scale) << l.dump();
    EXPECT_EQ(l["skipped_steps"], want.skipped_steps) << l.dump();
    losses.push_back(l["loss"]);
  }
  ASSERT_EQ(losses.size(), 36u);
  EXPECT_GE(want.skipped_steps, 3) << "the largest f32 as the scale overflowed less than expected";
  EXPECT_GE(grew, 2) << "the scale never grew back";
  const json over = json::parse(read_file(root / "overflow" / "run.json"));
  EXPECT_EQ(over["loss_scaler"]["skipped_steps"], want.skipped_steps);
  EXPECT_EQ(over["loss_scaler"]["optimizer_steps"], 36 - want.skipped_steps);
  EXPECT_EQ(over["loss_scaler"]["scale"].get<float>(), want.scale);
  // It learns through the skips: from ~25 (targets 3..7, a fresh head) to
  // about their variance (2), the loss of predicting their mean.
  double last = 0;
  for (size_t i = losses.size() - 6; i < losses.size(); ++i) last += losses[i] / 6;
  EXPECT_LT(last, losses.front() / 4) << "f16 with skipped steps did not learn";
}

// RELIABILITY 9 in f16: the loss scaler's state (scale, growth tracker,
// skipped and taken steps) is in the checkpoint and restored, so a kill after
// a save and a resume give the uninterrupted run's weights byte for byte —
// with a scale that backs off and grows during the run, so a resume that
// started the scaler afresh would train another model.
TEST(TrainCli, F16ResumeAfterKillIsBitwiseExact) {
  const std::string base = "train --model " + regression_model().string() + " --train " +
                           regression_file("resume-f16", 72).string() +
                           " --batch-size 8 --max-steps 9 --save-every 3 --log-every 1 --dropout 0.1 --lr 1e-2 --quiet"
                           " --precision f16 --loss-scale-init 3.4e38 --loss-scale-growth-interval 2";
  const std::string env = "OMP_NUM_THREADS=1";
  const fs::path root = test::scratch_dir("cli-train-resume-f16");
  const auto straight = test::run_stoke(base + " --output " + (root / "straight").string(), "/dev/null", env);
  ASSERT_EQ(straight.status, 0) << straight.err;
  const std::string want = read_file(root / "straight" / "model.safetensors");
  const json saved = json::parse(read_file(root / "straight" / "checkpoint-6" / "trainer_state.json"))["loss_scaler"];
  EXPECT_GE(saved["skipped_steps"].get<int64_t>(), 1) << saved.dump();
  const fs::path out = root / "killed";
  const auto first =
      test::run_stoke(base + " --output " + out.string(), "/dev/null", env + " STOKE_CRASH_AT=checkpoint_saved:2");
  ASSERT_NE(first.status, 0) << "the crash point was not reached";
  const auto resumed = test::run_stoke(base + " --output " + out.string() + " --resume", "/dev/null", env);
  ASSERT_EQ(resumed.status, 0) << resumed.err;
  EXPECT_EQ(read_file(out / "model.safetensors"), want);
  EXPECT_EQ(results_of(log_lines(out)), results_of(log_lines(root / "straight")));
  EXPECT_EQ(json::parse(read_file(out / "run.json"))["loss_scaler"],
            json::parse(read_file(root / "straight" / "run.json"))["loss_scaler"]);
}

// K micro-batches of B accumulate to the gradient of one batch of K x B (the
// loss is the mean over the optimizer step's examples either way).
TEST(TrainCli, GradientAccumulationEqualsTheLargerBatch) {
  const fs::path data = corpus_file("accum", 0, 24);
  const fs::path root = test::scratch_dir("cli-train-accum");
  const std::string base = "train --model " + model("tiny-bert") + " --train " + data.string() +
                           " --max-steps 3 --no-shuffle --dropout 0 --lr 1e-3 --quiet";
  ASSERT_EQ(test::run_stoke(base + " --batch-size 8 --output " + (root / "big").string()).status, 0);
  // --no-graphs: accepted, and the same step (the CPU never captures).
  ASSERT_EQ(test::run_stoke(base + " --batch-size 4 --grad-accum 2 --no-graphs --output " + (root / "accum").string())
                .status,
            0);
  auto big = SafetensorsFile::open(root / "big" / "model.safetensors");
  auto accum = SafetensorsFile::open(root / "accum" / "model.safetensors");
  for (const StoredTensor& t : big->tensors()) {
    const StoredTensor* u = accum->find(t.name);
    ASSERT_NE(u, nullptr) << t.name;
    std::vector<float> a(static_cast<size_t>(t.numel())), b(a.size());
    std::memcpy(a.data(), t.data.data(), a.size() * 4);
    std::memcpy(b.data(), u->data.data(), b.size() * 4);
    std::vector<double> want(a.begin(), a.end());
    if (t.name.find("attention.self.key.bias") != std::string::npos) {
      // Its gradient is zero up to rounding noise, which AdamW scales up to
      // lr-sized steps: different summation orders give different noise.
      for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(b[i], a[i], 3e-3) << t.name;
      continue;
    }
    EXPECT_LE(relative_error(b, want), 1e-5) << t.name;
  }
  const json run = json::parse(read_file(root / "accum" / "run.json"));
  EXPECT_EQ(run["settings"]["effective_batch"], 8);
  EXPECT_EQ(run["graphs"]["enabled"], false);
}

// --batch-size auto picks the largest power of two whose workspace fits the
// budget; --lr-scale-from applies the linear scaling rule to it.
TEST(TrainCli, AutoBatchSizeFitsTheBudgetAndScalesTheLearningRate) {
  const fs::path data = corpus_file("auto", 0, 64);
  const fs::path root = test::scratch_dir("cli-train-auto");
  const std::string base = "train --model " + model("tiny-bert") + " --train " + data.string() +
                           " --max-steps 1 --batch-size auto --max-batch-size 32 --lr-scale-from 8 --lr 1e-4";
  auto batch_for = [&](const std::string& budget, const std::string& name) {
    const auto r = test::run_stoke(base + " --memory-budget " + budget + " --output " + (root / name).string());
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.err.find("--batch-size auto: "), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("learning rate"), std::string::npos) << r.err;
    const json run = json::parse(read_file(root / name / "run.json"));
    const int64_t b = run["settings"]["batch_size"];
    EXPECT_NEAR(run["settings"]["lr"].get<double>(), 1e-4 * static_cast<double>(b) / 8.0, 1e-12);
    EXPECT_EQ(b & (b - 1), 0) << b;  // a power of two
    return b;
  };
  const int64_t roomy = batch_for("4G", "roomy"), tight = batch_for("12M", "tight");
  EXPECT_EQ(roomy, 32);  // capped by --max-batch-size
  EXPECT_LT(tight, roomy);
  const auto none = test::run_stoke(base + " --memory-budget 1K --output " + (root / "none").string());
  EXPECT_EQ(none.status, 1);
  EXPECT_NE(none.err.find("not even one example"), std::string::npos) << none.err;
  // A budget that is no number of bytes is refused in one line, not converted.
  for (const std::string bad : {"nan", "inf", "1e30G", "-1G"}) {
    const auto r = test::run_stoke(base + " --memory-budget " + bad + " --output " + (root / "bad").string());
    EXPECT_EQ(r.status, 1) << bad;
    EXPECT_EQ(r.err.rfind("stoke: error: --memory-budget \"" + bad + "\": expected", 0), 0u) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
}


// RELIABILITY 10 in training: out of memory in the middle of a step (here
// the second micro-batch of step 1, after the first one's forward, loss and
// backward were enqueued) halves the micro-batch into chunks, redoes the
// step from zeroed gradients without counting its metrics twice, says so,
// and records it. The result is the run that had the halved micro-batch
// from the start, bit for bit (same chunks, same sums in the same order),
// and the unhalved run's to 1e-5 (the gradient of 8 examples summed as
// 4 + 4; so is a run halved at step 4). A kill after the halving resumes,
// with no out-of-memory the second time, to the same bits.
TEST(TrainCli, OutOfMemoryInAStepHalvesTheMicroBatchAndResumesExactly) {
  const fs::path data = corpus_file("oom", 10, 72);
  const fs::path root = test::scratch_dir("cli-train-oom");
  const std::string base = "train --model " + model("tiny-bert") + " --train " + data.string() +
                           " --batch-size 8 --grad-accum 2 --max-steps 8 --save-every 3 --log-every 2 --dropout 0.1"
                           " --quiet";
  const std::string env = "OMP_NUM_THREADS=1";
  auto run = [&](const std::string& name, const std::string& extra_env, bool resume = false) {
    return test::run_stoke(base + " --output " + (root / name).string() + (resume ? " --resume" : ""), "/dev/null",
                           env + " " + extra_env);
  };
  const auto roomy = run("roomy", "");
  ASSERT_EQ(roomy.status, 0) << roomy.err;
  const auto halved = run("halved", "STOKE_OOM_AT=train_workspace:1");  // no room from the start
  ASSERT_EQ(halved.status, 0) << halved.err;
  const auto mid = run("mid-step", "STOKE_OOM_AT=train_micro_batch:2");
  ASSERT_EQ(mid.status, 0) << mid.err;
  const auto late = run("late", "STOKE_OOM_AT=train_micro_batch:7");  // step 4's first micro-batch
  ASSERT_EQ(late.status, 0) << late.err;
  const std::string note = "the device had no room for batch 8: continuing with micro-batches of 4 (halved once)";
  for (const auto* r : {&halved, &mid}) {
    EXPECT_NE(r->err.find(note), std::string::npos) << r->err;
    EXPECT_EQ(r->err.find(note), r->err.rfind(note)) << "said more than once: " << r->err;
  }
  EXPECT_EQ(roomy.err.find("no room"), std::string::npos) << roomy.err;

  const std::string want = read_file(root / "halved" / "model.safetensors");
  EXPECT_TRUE(read_file(root / "mid-step" / "model.safetensors") == want) << "not the halved run's bits";
  // The step that was redone logged the loss of its examples once.
  EXPECT_EQ(results_of(log_lines(root / "mid-step")), results_of(log_lines(root / "halved")));
  expect_models_close(root / "roomy" / "model.safetensors", root / "halved" / "model.safetensors", 1e-5, "halved");
  expect_models_close(root / "roomy" / "model.safetensors", root / "late" / "model.safetensors", 1e-5, "late");
  const auto roomy_log = log_lines(root / "roomy"), mid_log = log_lines(root / "mid-step");
  ASSERT_EQ(roomy_log.size(), mid_log.size());
  for (size_t i = 0; i < roomy_log.size(); ++i)
    EXPECT_NEAR(mid_log[i]["loss"].get<double>(), roomy_log[i]["loss"].get<double>(), 1e-5) << i;

  const json r_roomy = json::parse(read_file(root / "roomy" / "run.json"));
  const json r_mid = json::parse(read_file(root / "mid-step" / "run.json"));
  const json r_halved = json::parse(read_file(root / "halved" / "run.json"));
  EXPECT_EQ(r_roomy["micro_batch"]["examples"], 8);
  EXPECT_EQ(r_roomy["micro_batch"]["memory_halvings"], 0);
  EXPECT_EQ(r_mid["micro_batch"]["examples"], 4);
  EXPECT_EQ(r_mid["micro_batch"]["memory_halvings"], 1);
  EXPECT_EQ(r_mid["settings"]["batch_size"], 8);  // the user's batch stays the run's identity
  EXPECT_EQ(r_mid["host_sync_reads"]["out_of_memory"], 1);
  EXPECT_EQ(r_halved["host_sync_reads"]["out_of_memory"], 0);  // halved before the first step: no work to wait for
  EXPECT_EQ(r_mid["host_syncs"].get<int64_t>(), r_halved["host_syncs"].get<int64_t>() + 1);
  EXPECT_EQ(r_mid["throughput"]["samples"], r_roomy["throughput"]["samples"]);  // the redone step counted once
  EXPECT_EQ(r_mid["steps"], 8);
  const json state = json::parse(read_file(root / "mid-step" / "checkpoint-3" / "trainer_state.json"));
  EXPECT_EQ(state["micro_batch_halvings"], 1);

  // Killed after a checkpoint that follows the halving: the resume (on a
  // device with room now) keeps the halved micro-batch and ends on the same bits.
  for (const char* crash : {"checkpoint_saved:1", "checkpoint_saved:2"}) {
    const std::string name = std::string("killed-") + crash;
    const auto first = run(name, std::string("STOKE_OOM_AT=train_micro_batch:2 STOKE_CRASH_AT=") + crash);
    ASSERT_NE(first.status, 0) << crash << ": the crash point was not reached";
    const auto resumed = run(name, "", true);
    ASSERT_EQ(resumed.status, 0) << crash << ": " << resumed.err;
    EXPECT_NE(resumed.err.find("micro-batches of 4 as in the checkpoint's run"), std::string::npos) << resumed.err;
    EXPECT_TRUE(read_file(root / name / "model.safetensors") == want) << crash << ": not the halved run's bits";
    EXPECT_EQ(results_of(log_lines(root / name)), results_of(log_lines(root / "halved"))) << crash;
    EXPECT_EQ(json::parse(read_file(root / name / "run.json"))["micro_batch"]["examples"], 4);
  }

  // Not even one example fits: said, not halved to nothing.
  const auto none = test::run_stoke("train --model " + model("tiny-bert") + " --train " + data.string() +
                                        " --batch-size 1 --max-steps 1 --quiet --output " + (root / "none").string(),
                                    "/dev/null", "STOKE_OOM_AT=train_workspace:1");
  EXPECT_EQ(none.status, 1);
  EXPECT_NE(none.err.find("not even one training example fits the device"), std::string::npos) << none.err;
}

// --batch-size auto measures the device's free memory (the note names the
// measurement) and tries its choice for real: a workspace the device refuses
// steps the batch down.
TEST(TrainCli, AutoBatchSizeStepsDownWhenTheDeviceRefusesItsChoice) {
  const fs::path data = corpus_file("auto-refused", 0, 64);
  const fs::path root = test::scratch_dir("cli-train-auto-refused");
  const std::string base = "train --model " + model("tiny-bert") + " --train " + data.string() +
                           " --max-steps 1 --batch-size auto --max-batch-size 32 --output ";
  const auto measured = test::run_stoke(base + (root / "measured").string());
  ASSERT_EQ(measured.status, 0) << measured.err;
  EXPECT_NE(measured.err.find("MiB free (host MemAvailable)"), std::string::npos) << measured.err;
  const auto refused = test::run_stoke(base + (root / "refused").string() + " --memory-budget 4G", "/dev/null",
                                       "STOKE_OOM_AT=auto_batch_workspace:1");
  ASSERT_EQ(refused.status, 0) << refused.err;
  EXPECT_NE(refused.err.find("--batch-size auto: 16 (planned 32"), std::string::npos) << refused.err;
  EXPECT_NE(refused.err.find("the device refused its workspace"), std::string::npos) << refused.err;
  EXPECT_EQ(json::parse(read_file(root / "refused" / "run.json"))["settings"]["batch_size"], 16);
}

TEST(TrainCli, NewLabelNamesGetANewHeadAndAreSaved) {
  const fs::path data = corpus_file("labels", 0, 40);
  const fs::path out = test::scratch_dir("cli-train-labels") / "run";
  const auto r = test::run_stoke("train --model " + model("tiny-xlmr") + " --train " + data.string() + " --output " +
                                 out.string() + " --max-steps 2");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("the classification head is initialised afresh"), std::string::npos) << r.err;
  const json config = json::parse(read_file(out / "config.json"));
  EXPECT_EQ(config["id2label"]["0"], "de");  // names sorted
  EXPECT_EQ(config["label2id"].size(), config["id2label"].size());
  EXPECT_GE(config["id2label"].size(), 2u);
}

}  // namespace
}  // namespace stoke
