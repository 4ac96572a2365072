// `--precision int8` end to end on the fixture models: embed writes vectors
// close to f32's and records the precision (resume refuses to mix) and its
// measured agreement with f32 (the manifest's "quality", kept by a resume),
// classify gives f32's labels and says how close it came, and the places
// int8 does not run (CUDA, train) refuse in one line.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/file_util.h"
#include "io/atomic_file.h"
#include "io/safetensors.h"
#include "support/fixtures.h"

namespace stoke {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

int run(const std::string& args, std::string* err = nullptr, const std::string& env = "") {
  const test::RunResult r = test::run_stoke(args, "/dev/null", env);
  if (err) *err = r.err;
  return r.status;
}
std::string model(const std::string& name) { return test::fixture("models/" + name).string(); }
std::string texts() { return test::fixture("golden/texts.jsonl").string(); }

std::vector<double> golden(const std::string& model, const std::string& name) {
  auto f = SafetensorsFile::open(test::fixture("golden/" + model + ".safetensors"));
  const StoredTensor* t = f->find(name);
  EXPECT_NE(t, nullptr) << name;
  std::vector<double> out(static_cast<size_t>(t->numel()));
  for (size_t i = 0; i < out.size(); ++i) std::memcpy(&out[i], t->data.data() + i * 8, 8);  // the .f64 goldens
  return out;
}

// Rows of a stoke f32 .npy shard (v1 header, '<f4').
std::vector<float> read_f32_npy(const fs::path& path) {
  const std::string bytes = read_file(path);
  const size_t hlen = static_cast<uint8_t>(bytes[8]) | (static_cast<size_t>(static_cast<uint8_t>(bytes[9])) << 8);
  std::vector<float> out((bytes.size() - 10 - hlen) / 4);
  std::memcpy(out.data(), bytes.data() + 10 + hlen, out.size() * 4);
  return out;
}

TEST(CliInt8, EmbedIsCloseToF32AndRecordsThePrecision) {
  const fs::path out = test::scratch_dir("embed-int8");
  const std::string base = "embed --quiet --model " + model("tiny-bert") + " --input " + texts() + " --output " +
                           out.string() + " --no-normalize";
  std::string err;
  ASSERT_EQ(run(base + " --precision int8", &err), 0) << err;
  const std::vector<float> got = read_f32_npy(out / "embeddings-00000.npy");
  const std::vector<double> want = golden("tiny-bert", "mean_pooled.f64");
  ASSERT_EQ(got.size(), want.size());
  const size_t H = 64, rows = want.size() / H;
  double worst = 1;
  for (size_t r = 0; r < rows; ++r) {
    double dot = 0, ng = 0, nw = 0;
    for (size_t k = 0; k < H; ++k) {
      dot += got[r * H + k] * want[r * H + k];
      ng += double(got[r * H + k]) * got[r * H + k];
      nw += want[r * H + k] * want[r * H + k];
    }
    worst = std::min(worst, dot / std::sqrt(ng * nw));
  }
  EXPECT_GE(worst, 0.999) << "raw cosine to the f32 goldens";
  const json m = json::parse(read_file(out / "manifest.json"));
  EXPECT_EQ(m["precision"], "int8");
  // The precision is part of the vector space: resuming in f32 is refused.
  EXPECT_EQ(run(base + " --resume --precision f32", &err), 1);
  EXPECT_NE(err.find("precision"), std::string::npos) << err;
}

// The manifest's "quality": int8 against f32 on the first texts (16 of the
// 66 here: a small job samples a 64th of its records, at least 16), within
// the golden tests' bounds; verify accepts it; a resume keeps the first run's
// object as it was; the summary says it. Shards of 10 rows commit before the
// sample's 16 rows are all out, so this run measures both sides beforehand.
TEST(CliInt8, EmbedRecordsItsMeasuredQuality) {
  const fs::path out = test::scratch_dir("embed-int8-quality");
  const std::string base = "embed --model " + model("tiny-bert") + " --input " + texts() + " --output " +
                           out.string() + " --precision int8 --shard-size 10";
  std::string err;
  // Killed right after the first commit: its manifest already carries the measurement.
  EXPECT_NE(run(base + " --quiet", &err, "STOKE_CRASH_AT=after-manifest:1"), 0) << err;
  json m = json::parse(read_file(out / "manifest.json"));
  ASSERT_FALSE(m["complete"].get<bool>());
  ASSERT_TRUE(m.contains("quality")) << m.dump();
  json q = m["quality"];
  EXPECT_EQ(q["reference_precision"], "f32");
  EXPECT_EQ(q["metric"], "centered_cosine");
  EXPECT_EQ(q["sample_texts"], 16);
  EXPECT_GE(q["mean"].get<double>(), 0.98);
  EXPECT_LE(q["mean"].get<double>(), 1.0 + 1e-9);
  EXPECT_GE(q["min"].get<double>(), 0.98);
  EXPECT_LE(q["min"].get<double>(), q["mean"].get<double>());
  EXPECT_GE(q["raw_cosine_min"].get<double>(), 0.99);
  EXPECT_EQ(q["threshold"], 0.99);
  EXPECT_GT(q["seconds"].get<double>(), 0);
  // The resume keeps what the first run measured: marked here, it comes back marked.
  m["quality"]["seconds"] = 12345.0;
  write_file_atomic(out / "manifest.json", std::string_view(m.dump(2)));
  ASSERT_EQ(run(base + " --resume", &err), 0) << err;
  EXPECT_NE(err.find("int8 vs f32 on the first 16 texts: centered cosine mean"), std::string::npos) << err;
  EXPECT_NE(err.find("(measured by the first run)"), std::string::npos) << err;
  m = json::parse(read_file(out / "manifest.json"));
  EXPECT_TRUE(m["complete"].get<bool>());
  q["seconds"] = 12345.0;
  EXPECT_EQ(m["quality"], q);
  EXPECT_EQ(run("verify " + out.string(), &err), 0) << err;
  // Below --min-centered-cosine: one plain line, and the run goes on.
  const fs::path strict = test::scratch_dir("embed-int8-strict");
  ASSERT_EQ(run("embed --quiet --model " + model("tiny-bert") + " --input " + texts() + " --output " + strict.string() +
                    " --precision int8 --min-centered-cosine 1",
                &err),
            0)
      << err;
  EXPECT_NE(err.find("stoke: --precision int8: the mean centered cosine to f32 on the first 16 texts is 0.9"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("below --min-centered-cosine 1: these vectors lose more than that allows here; --precision f32 "
                     "keeps them\n"),
            std::string::npos)
      << err;
  EXPECT_EQ(json::parse(read_file(strict / "manifest.json"))["quality"]["threshold"], 1.0);
}

// With shards that hold the sample (the default), the int8 side is the job's
// own rows (jobs/int8_sample_tee.h): killed right after its first commit (its
// only shard here), the manifest carries the measurement, the same as a run
// that measures both sides beforehand would (shards of 10 rows; the two
// passes differ only in which batches the sample's int8 rows come from).
TEST(CliInt8, EmbedMeasuresItsOwnRowsWhereTheSampleComesFirst) {
  const fs::path own = test::scratch_dir("embed-int8-own-rows");
  const fs::path apart = test::scratch_dir("embed-int8-apart");
  const std::string base = "embed --quiet --model " + model("tiny-bert") + " --input " + texts() + " --precision int8";
  std::string err;
  EXPECT_NE(run(base + " --output " + own.string(), &err, "STOKE_CRASH_AT=after-manifest:1"), 0) << err;
  const json m = json::parse(read_file(own / "manifest.json"));
  ASSERT_TRUE(m.contains("quality")) << m.dump();
  ASSERT_EQ(run(base + " --output " + apart.string() + " --shard-size 10", &err), 0) << err;
  const json a = json::parse(read_file(apart / "manifest.json"));
  EXPECT_EQ(m["quality"]["sample_texts"], 16);
  EXPECT_EQ(a["quality"]["sample_texts"], 16);
  for (const char* key : {"mean", "min", "raw_cosine_min"})
    EXPECT_NEAR(m["quality"][key].get<double>(), a["quality"][key].get<double>(), 1e-4) << key;
  EXPECT_GT(m["quality"]["seconds"].get<double>(), 0);
}

TEST(CliInt8, OtherPrecisionsRecordNoQuality) {
  for (const std::string precision : {"f32", "bf16"}) {
    const fs::path out = test::scratch_dir("embed-quality-" + precision);
    std::string err;
    ASSERT_EQ(run("embed --quiet --model " + model("tiny-bert") + " --input " + texts() + " --output " + out.string() +
                      " --precision " + precision,
                  &err),
              0)
        << err;
    EXPECT_FALSE(json::parse(read_file(out / "manifest.json")).contains("quality")) << precision;
  }
}

TEST(CliInt8, ClassifyGivesF32Labels) {
  for (const std::string name : {"tiny-bert", "tiny-xlmr"}) {
    const fs::path out = test::scratch_dir("classify-int8-" + name);
    std::string err;
    ASSERT_EQ(run("classify --precision int8 --model " + model(name) + " --input " + texts() + " --output " +
                      (out / "c.jsonl").string(),
                  &err),
              0)
        << err;
    // The summary's measurement: the first texts (all 66) classified by f32 too.
    EXPECT_NE(err.find("int8 vs f32 on the first 66 texts: the same label(s) on 66 of 66, logits differ by at most"),
              std::string::npos)
        << err;
    const std::vector<double> logits = golden(name, "logits.f64");
    std::istringstream in(read_file(out / "c.jsonl"));
    std::string line;
    size_t row = 0;
    while (std::getline(in, line)) {
      const json r = json::parse(line);
      const auto want = logits.begin() + static_cast<long>(row * 3);
      EXPECT_EQ(r["label"], "LABEL_" + std::to_string(std::max_element(want, want + 3) - want)) << name << " " << row;
      ++row;
    }
    EXPECT_EQ(row, 66u);
  }
}

TEST(CliInt8, RefusedWhereItDoesNotRunInOneLine) {
  std::string err;
  const fs::path out = test::scratch_dir("embed-int8-cuda");
  EXPECT_EQ(run("embed --quiet --precision int8 --device cuda --model " + model("tiny-bert") + " --input " + texts() +
                    " --output " + out.string(),
                &err),
            1);
  EXPECT_NE(err.find("CPU only"), std::string::npos) << err;
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
  const fs::path tout = test::scratch_dir("train-int8");
  EXPECT_EQ(run("train --quiet --precision int8 --model " + model("tiny-bert") + " --train " +
                    test::fixture("golden/texts.jsonl").string() + " --output " + tout.string(),
                &err),
            1);
  EXPECT_NE(err.find("int8"), std::string::npos) << err;
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
}

}  // namespace
}  // namespace stoke
