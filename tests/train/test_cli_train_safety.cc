// `stoke train` keeps what is not its own (RELIABILITY 14, DESIGN "Safety
// rules" and "Labels"), against the real binary: --output may not be (or lie
// inside) --model; --overwrite removes only what an earlier stoke run wrote
// and names anything else; a fine-tuned model's label names are not replaced
// by an unknown training label unless --new-labels says so; the head notice
// is not repeated on --resume; a trained folder keeps the base folder's
// sentence-transformers files, so embed on it still normalizes.
#include <gtest/gtest.h>
#include <signal.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/file_util.h"
#include "core/sha256.h"
#include "io/npy.h"
#include "io/folder_lock.h"
#include "support/background_stoke.h"
#include "support/fixtures.h"

namespace stoke {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string model(const std::string& name) { return test::fixture("models/" + name).string(); }

// n corpus records labelled by language, spread over the corpus (it is grouped
// by language), with `extra` appended as one more record's label when given.
fs::path language_data(const std::string& name, size_t n, const std::string& extra = "") {
  const fs::path p = test::scratch_dir("cli-train-safety-data-" + name) / "data.jsonl";
  std::ifstream in(test::fixture("corpus/fortunes-multilingual.jsonl"));
  std::ofstream out(p);
  std::string line;
  size_t written = 0;
  for (size_t i = 0; written < n && std::getline(in, line); ++i) {
    if (i % (24000 / n) != 0) continue;
    const json r = json::parse(line);
    out << json{{"text", r["text"]}, {"label", r["lang"]}}.dump() << "\n";
    ++written;
  }
  if (!extra.empty()) out << json{{"text", "one more text"}, {"label", extra}}.dump() << "\n";
  return p;
}

// A writable copy of a fixture model.
fs::path model_copy(const std::string& name, const fs::path& where) {
  fs::copy(test::fixture("models/" + name), where, fs::copy_options::recursive);
  for (const auto& e : fs::recursive_directory_iterator(where))
    fs::permissions(e.path(), fs::perms::owner_write, fs::perm_options::add);
  fs::permissions(where, fs::perms::owner_write, fs::perm_options::add);
  return where;
}

const char* kQuick = " --quiet --max-steps 2 --batch-size 8";

TEST(TrainSafety, OutputIsNeverTheModel) {
  const fs::path root = test::scratch_dir("cli-train-own-input");
  const fs::path m = model_copy("tiny-bert", root / "model");
  const std::string weights = sha256_file(m / "model.safetensors");
  const std::string base = "train --train " + language_data("own", 16).string() + kQuick;
  for (const std::string& out : {m.string(), m.string() + "/", (root / "." / "model").string()}) {
    const auto r = test::run_stoke(base + " --model " + m.string() + " --output " + out + " --overwrite");
    EXPECT_EQ(r.status, 1) << out;
    EXPECT_NE(r.err.find("is --model"), std::string::npos) << r.err;
  }
  auto inside = test::run_stoke(base + " --model " + m.string() + " --output " + (m / "trained").string());
  EXPECT_EQ(inside.status, 1);
  EXPECT_NE(inside.err.find("is inside --model"), std::string::npos) << inside.err;
  EXPECT_FALSE(fs::exists(m / "trained"));
  // The model being trained, inside the folder --overwrite would clear.
  auto around = test::run_stoke(base + " --model " + m.string() + " --output " + root.string() + " --overwrite");
  EXPECT_EQ(around.status, 1);
  EXPECT_NE(around.err.find("inside --output"), std::string::npos) << around.err;
  ASSERT_TRUE(fs::exists(m / "model.safetensors"));
  EXPECT_EQ(sha256_file(m / "model.safetensors"), weights);
}

TEST(TrainSafety, OverwriteRemovesOnlyARunsOwnFiles) {
  const fs::path root = test::scratch_dir("cli-train-overwrite");
  const fs::path out = root / "run";
  const std::string base = "train --model " + model("tiny-bert") + " --train " + language_data("ow", 16).string() +
                           kQuick + " --save-every 1";
  ASSERT_EQ(test::run_stoke(base + " --output " + out.string()).status, 0);
  ASSERT_TRUE(fs::exists(out / "checkpoint-1"));
  std::ofstream(out / "notes.txt") << "mine";
  auto r = test::run_stoke(base + " --output " + out.string() + " --overwrite");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("notes.txt"), std::string::npos) << r.err;
  EXPECT_EQ(read_file(out / "notes.txt"), "mine");
  EXPECT_TRUE(fs::exists(out / "model.safetensors"));  // refused before anything went
  EXPECT_TRUE(fs::exists(out / "checkpoint-1"));
  fs::remove(out / "notes.txt");
  // A kill during the final save: its files are there, its checksums.json not
  // yet; the run's checkpoints name them.
  fs::remove(out / "checksums.json");
  r = test::run_stoke(base + " --output " + out.string() + " --overwrite");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(fs::exists(out / "model.safetensors"));

  // A model folder someone else wrote (no stoke checksums): not a training run's.
  const fs::path foreign = model_copy("tiny-xlmr", root / "foreign");
  r = test::run_stoke(base + " --output " + foreign.string() + " --overwrite");
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_NE(r.err.find("no earlier stoke training run wrote"), std::string::npos) << r.err;
  EXPECT_TRUE(fs::exists(foreign / "model.safetensors"));
  EXPECT_TRUE(fs::exists(foreign / "sentencepiece.bpe.model"));
}

TEST(TrainSafety, FineTunedLabelsAreKeptUnlessNewLabelsIsGiven) {
  const fs::path root = test::scratch_dir("cli-train-keep-labels");
  // A fine-tuned model: real label names (the languages).
  const fs::path tuned = root / "tuned";
  ASSERT_EQ(test::run_stoke("train --model " + model("tiny-bert") + " --train " +
                            language_data("tuned", 21).string() + kQuick + " --output " + tuned.string())
                .status,
            0);
  const json labels = json::parse(read_file(tuned / "config.json"))["id2label"];
  ASSERT_EQ(labels["0"], "de");
  // Its own labels again: trained further, no new head.
  auto same = test::run_stoke("train --model " + tuned.string() + " --train " + language_data("same", 14).string() +
                              kQuick + " --output " + (root / "same").string());
  EXPECT_EQ(same.status, 0) << same.err;
  EXPECT_EQ(same.err.find("initialised afresh"), std::string::npos) << same.err;
  // A label the model does not know: an error naming file, line and label.
  const fs::path data = language_data("typo", 14, "englsh");
  auto typo = test::run_stoke("train --model " + tuned.string() + " --train " + data.string() + kQuick +
                              " --output " + (root / "typo").string());
  EXPECT_EQ(typo.status, 1);
  EXPECT_NE(typo.err.find(data.string() + ":15"), std::string::npos) << typo.err;
  EXPECT_NE(typo.err.find("\"englsh\""), std::string::npos) << typo.err;
  EXPECT_NE(typo.err.find("--new-labels"), std::string::npos) << typo.err;
  // Asked for: a new mapping and head, said loudly.
  auto asked = test::run_stoke("train --model " + tuned.string() + " --train " + data.string() + kQuick +
                               " --new-labels --output " + (root / "asked").string());
  EXPECT_EQ(asked.status, 0) << asked.err;
  EXPECT_NE(asked.err.find("WARNING: --new-labels"), std::string::npos) << asked.err;
  EXPECT_EQ(json::parse(read_file(root / "asked" / "config.json"))["id2label"].size(), 8u);
}

TEST(TrainSafety, ResumeOfALiveRunFailsAtOnceAndTheRunCompletes) {
  const fs::path root = test::scratch_dir("cli-train-live");
  const fs::path out = root / "run";
  const std::string args = "train --model " + model("tiny-bert") + " --train " + language_data("live", 16).string() +
                           " --quiet --batch-size 4 --max-steps 4 --save-every 1 --output " + out.string();
  // The first run stops itself just after its first checkpoint.
  const pid_t first = test::spawn_stoke(args, root / "first.err", {"STOKE_STOP_AT=checkpoint_saved:1"});
  ASSERT_TRUE(test::wait_stopped(first)) << read_file(root / "first.err");
  for (const std::string flag : {" --resume", " --overwrite", ""}) {
    const auto second = test::run_stoke(args + flag);
    EXPECT_EQ(second.status, 1) << flag;
    EXPECT_NE(second.err.find("is in use by stoke train, pid " + std::to_string(first)), std::string::npos)
        << second.err;
  }
  EXPECT_TRUE(fs::exists(out / "checkpoint-1" / "checksums.json"));
  ::kill(first, SIGCONT);
  EXPECT_EQ(test::wait_exit(first), 0) << read_file(root / "first.err");
  EXPECT_TRUE(fs::exists(out / "model.safetensors"));
  EXPECT_FALSE(fs::exists(out / kFolderLockName));
}

TEST(TrainSafety, HeadNoticeIsNotRepeatedOnResume) {
  const fs::path root = test::scratch_dir("cli-train-notice");
  const std::string base = "train --model " + model("tiny-bert") + " --train " + language_data("notice", 21).string() +
                           " --batch-size 8 --max-steps 3 --save-every 1 --output ";
  // A base model with default labels meeting names: a new mapping and head, said once.
  const auto straight = test::run_stoke(base + (root / "straight").string());
  ASSERT_EQ(straight.status, 0) << straight.err;
  EXPECT_NE(straight.err.find("initialised afresh"), std::string::npos) << straight.err;
  const std::string args = base + (root / "run").string();
  ASSERT_NE(test::run_stoke(args, "/dev/null", "STOKE_CRASH_AT=checkpoint_saved:1").status, 0);
  const auto resumed = test::run_stoke(args + " --resume");
  ASSERT_EQ(resumed.status, 0) << resumed.err;
  EXPECT_EQ(resumed.err.find("initialised afresh"), std::string::npos) << resumed.err;
  EXPECT_EQ(resumed.err.find("labels:"), std::string::npos) << resumed.err;
}

TEST(TrainSafety, TrainedFolderKeepsSentenceTransformersFiles) {
  const fs::path root = test::scratch_dir("cli-train-st");
  const fs::path out = root / "run";
  ASSERT_EQ(test::run_stoke("train --model " + model("tiny-bert") + " --train " + language_data("st", 16).string() +
                            kQuick + " --save-every 1 --output " + out.string())
                .status,
            0);
  for (const char* f : {"modules.json", "sentence_bert_config.json", "1_Pooling/config.json"}) {
    EXPECT_EQ(read_file(out / f), read_file(test::fixture("models/tiny-bert") / f)) << f;
    EXPECT_TRUE(fs::exists(out / "checkpoint-1" / f)) << f;
  }
  // The base says Normalize (modules.json): embed on the trained folder gives unit vectors.
  const fs::path texts = root / "texts.txt";
  std::ofstream(texts) << "first text\nsecond, longer text here\n";
  const auto e = test::run_stoke("embed --quiet --model " + out.string() + " --input " + texts.string() +
                                 " --output " + (root / "emb").string());
  ASSERT_EQ(e.status, 0) << e.err;
  EXPECT_EQ(json::parse(read_file(root / "emb" / "manifest.json"))["normalize"], true);
  const fs::path npy = root / "emb" / "embeddings-00000.npy";
  const NpyHeader h = read_npy_header(npy);
  ASSERT_EQ(h.shape.size(), 2u);
  const std::string bytes = read_file(npy);
  for (int64_t row = 0; row < h.shape[0]; ++row) {
    double sum = 0;
    for (int64_t c = 0; c < h.shape[1]; ++c) {
      float v;
      std::memcpy(&v, bytes.data() + h.data_offset + static_cast<size_t>(row * h.shape[1] + c) * 4, 4);
      sum += static_cast<double>(v) * v;
    }
    EXPECT_NEAR(std::sqrt(sum), 1.0, 1e-5) << "row " << row;
  }
}

}  // namespace
}  // namespace stoke
