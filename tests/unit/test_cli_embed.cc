// `stoke embed` and `stoke classify` end to end on the fixture models: the
// default embed reproduces each model's sentence-transformers output, classify
// gives the goldens' logits, and the output contract holds.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/file_util.h"
#include "io/safetensors.h"
#include "support/fixtures.h"

namespace stoke {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

int run(const std::string& args, std::string* err = nullptr) {
  const test::RunResult r = test::run_stoke(args);
  if (err) *err = r.err;
  return r.status;
}

struct Npy {
  std::string descr;
  int64_t rows = 0, cols = 0;
  std::vector<float> data;
};

// Reads what write_npy writes (and checks the header the way numpy does).
Npy read_npy(const fs::path& path) {
  const std::string bytes = read_file(path);
  EXPECT_EQ(bytes.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
  const size_t hlen = static_cast<uint8_t>(bytes[8]) | (static_cast<size_t>(static_cast<uint8_t>(bytes[9])) << 8);
  EXPECT_EQ((10 + hlen) % 64, 0u);
  const std::string header = bytes.substr(10, hlen);
  Npy n;
  n.descr = header.substr(header.find("'descr': '") + 10, 3);
  EXPECT_NE(header.find("'fortran_order': False"), std::string::npos);
  std::sscanf(header.c_str() + header.find("'shape': (") + 10, "%lld, %lld", reinterpret_cast<long long*>(&n.rows),
              reinterpret_cast<long long*>(&n.cols));
  const char* p = bytes.data() + 10 + hlen;
  const size_t count = static_cast<size_t>(n.rows * n.cols);
  n.data.resize(count);
  if (n.descr == "<f4") {
    EXPECT_EQ(bytes.size(), 10 + hlen + count * 4);
    std::memcpy(n.data.data(), p, count * 4);
  } else {
    EXPECT_EQ(bytes.size(), 10 + hlen + count * 2);
    for (size_t i = 0; i < count; ++i) {  // IEEE half -> float
      uint16_t h;
      std::memcpy(&h, p + 2 * i, 2);
      const int e = (h >> 10) & 31, m = h & 1023;
      const float v = e == 0 ? std::ldexp(static_cast<float>(m), -24) : std::ldexp(static_cast<float>(m + 1024), e - 25);
      n.data[i] = (h & 0x8000) ? -v : v;
    }
  }
  return n;
}

std::vector<double> golden(const std::string& model, const std::string& name) {
  auto f = SafetensorsFile::open(test::fixture("golden/" + model + ".safetensors"));
  const StoredTensor* t = f->find(name);
  EXPECT_NE(t, nullptr) << name;
  std::vector<double> out(static_cast<size_t>(t->numel()));
  for (size_t i = 0; i < out.size(); ++i) {
    if (t->dtype == DType::f64) {
      std::memcpy(&out[i], t->data.data() + i * 8, 8);
    } else {
      float v;
      std::memcpy(&v, t->data.data() + i * 4, 4);
      out[i] = v;
    }
  }
  return out;
}

double relative_error(const std::vector<float>& got, const std::vector<double>& want, size_t cols_got = 0,
                      size_t cols_want = 0) {
  // Optionally compare only the first cols_got columns of each row of `want`.
  double num = 0, den = 0;
  const size_t rows = cols_got ? got.size() / cols_got : 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const size_t j = cols_got ? (i / cols_got) * cols_want + i % cols_got : i;
    num += (got[i] - want[j]) * (got[i] - want[j]);
    den += want[j] * want[j];
  }
  (void)rows;
  return std::sqrt(num / den);
}

std::string model(const std::string& name) { return test::fixture("models/" + name).string(); }
std::string texts() { return test::fixture("golden/texts.jsonl").string(); }

TEST(CliEmbed, DefaultEmbedReproducesSentenceTransformers) {
  // tiny-bert: mean pooling + Normalize; tiny-xlmr: CLS pooling + Normalize.
  for (const auto& [name, golden_name] : {std::pair{"tiny-bert", "mean_pooled_normalized.f64"},
                                          std::pair{"tiny-xlmr", "cls_pooled_normalized.f64"}}) {
    const fs::path out = test::scratch_dir(std::string("embed-") + name);
    std::string err;
    ASSERT_EQ(run("embed --model " + model(name) + " --input " + texts() + " --output " + out.string(), &err), 0) << err;
    EXPECT_NE(err.find("embedded 66 texts"), std::string::npos) << err;
    const Npy npy = read_npy(out / "embeddings-00000.npy");
    EXPECT_EQ(npy.descr, "<f4");
    EXPECT_EQ(npy.rows, 66);
    EXPECT_EQ(npy.cols, 64);
    EXPECT_LE(relative_error(npy.data, golden(name, golden_name)), 1e-5) << name;
    // ids: the record number of every row, in input order.
    std::istringstream ids(read_file(out / "ids-00000.jsonl"));
    std::string line;
    for (int i = 0; i < 66; ++i) {
      ASSERT_TRUE(std::getline(ids, line));
      EXPECT_EQ(line, std::to_string(i));
    }
    const json m = json::parse(read_file(out / "manifest.json"));
    EXPECT_EQ(m["counts"]["texts"], 66);
    EXPECT_EQ(m["max_length"], 128);
    EXPECT_EQ(m["normalize"], true);
    EXPECT_EQ(m["pooling"], std::string(name) == "tiny-bert" ? "mean" : "cls");
    EXPECT_EQ(m["dimensions"], 64);
    EXPECT_GT(m["counts"]["truncated"].get<int>(), 0);  // the long golden text
    EXPECT_EQ(m["shards"][0]["rows"], 66);
    // Nothing else ending in .npy, and no temp files.
    int npys = 0;
    for (const auto& e : fs::directory_iterator(out)) {
      npys += e.path().extension() == ".npy";
      EXPECT_EQ(e.path().filename().string().find("tmp"), std::string::npos);
    }
    EXPECT_EQ(npys, 1);
  }
}

TEST(CliEmbed, OverridesDimensionsDtypeAndOverwrite) {
  const fs::path out = test::scratch_dir("embed-overrides");
  const std::string base = "embed --quiet --model " + model("tiny-bert") + " --input " + texts() + " --output " + out.string();
  std::string err;
  ASSERT_EQ(run(base, &err), 0) << err;
  // Existing output is refused without --overwrite, in one line.
  EXPECT_EQ(run(base, &err), 1);
  EXPECT_NE(err.find("--overwrite"), std::string::npos) << err;
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1);
  // Matryoshka: the first 16 dimensions of the normalized vector, not renormalized.
  ASSERT_EQ(run(base + " --overwrite --dimensions 16", &err), 0) << err;
  Npy npy = read_npy(out / "embeddings-00000.npy");
  EXPECT_EQ(npy.cols, 16);
  EXPECT_LE(relative_error(npy.data, golden("tiny-bert", "mean_pooled_normalized.f64"), 16, 64), 1e-5);
  // Explicit pooling and no normalization; float16 output.
  ASSERT_EQ(run(base + " --overwrite --pooling cls --no-normalize --output-dtype f16", &err), 0) << err;
  npy = read_npy(out / "embeddings-00000.npy");
  EXPECT_EQ(npy.descr, "<f2");
  EXPECT_LE(relative_error(npy.data, golden("tiny-bert", "cls_pooled.f64")), 1e-3);
  // bf16 compute stays within the bf16 tolerance.
  ASSERT_EQ(run(base + " --overwrite --precision bf16", &err), 0) << err;
  npy = read_npy(out / "embeddings-00000.npy");
  EXPECT_LE(relative_error(npy.data, golden("tiny-bert", "mean_pooled_normalized.f64")), 2e-2);
  // Bad values are one clear line.
  for (const char* bad : {" --overwrite --pooling weighted", " --overwrite --dimensions 65", " --overwrite --device cuda",
                          " --overwrite --prompt-name query", " --overwrite --output-dtype f64"}) {
    EXPECT_EQ(run(base + bad, &err), 1) << bad;
    EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << bad << ": " << err;
  }
}

TEST(CliClassify, LogitsLabelsAndPairsMatchTheGoldens) {
  for (const std::string name : {"tiny-bert", "tiny-xlmr"}) {
    const fs::path out = test::scratch_dir("classify-" + name);
    std::string err;
    ASSERT_EQ(run("classify --quiet --model " + model(name) + " --input " + texts() + " --output " +
                      (out / "c.jsonl").string(),
                  &err),
              0)
        << err;
    std::istringstream in(read_file(out / "c.jsonl"));
    std::vector<float> logits;
    std::string line;
    int rows = 0;
    while (std::getline(in, line)) {
      const json r = json::parse(line);
      const auto l = r["logits"].get<std::vector<float>>();
      ASSERT_EQ(l.size(), 3u);
      logits.insert(logits.end(), l.begin(), l.end());
      const size_t best = static_cast<size_t>(std::max_element(l.begin(), l.end()) - l.begin());
      EXPECT_EQ(r["label"], "LABEL_" + std::to_string(best));
      double sum = 0;
      for (float v : l) sum += std::exp(v - l[best]);
      EXPECT_NEAR(r["score"].get<double>(), 1.0 / sum, 1e-6);
      ++rows;
    }
    EXPECT_EQ(rows, 66);
    EXPECT_LE(relative_error(logits, golden(name, "logits.f64")), 1e-5) << name;
  }
  // Pairs (cross-encoder use): the golden pairs through --pair-field.
  const json meta = json::parse(read_file(test::fixture("golden/tiny-bert.json")));
  std::vector<std::string> all;
  {
    std::istringstream in(read_file(texts()));
    std::string line;
    while (std::getline(in, line)) all.push_back(json::parse(line)["text"]);
  }
  const fs::path dir = test::scratch_dir("classify-pairs");
  {
    std::ofstream pairs(dir / "pairs.jsonl");
    for (const auto& p : meta["pairs"])
      pairs << json{{"q", all[p["a_index"].get<size_t>()]}, {"d", all[p["b_index"].get<size_t>()]}}.dump() << "\n";
  }
  std::string err;
  ASSERT_EQ(run("classify --quiet --model " + model("tiny-bert") + " --input " + (dir / "pairs.jsonl").string() +
                    " --text-field q --pair-field d --output " + (dir / "out.jsonl").string(),
                &err),
            0)
      << err;
  std::istringstream in(read_file(dir / "out.jsonl"));
  std::vector<float> logits;
  std::string line;
  while (std::getline(in, line)) {
    const auto l = json::parse(line)["logits"].get<std::vector<float>>();
    logits.insert(logits.end(), l.begin(), l.end());
  }
  EXPECT_LE(relative_error(logits, golden("tiny-bert", "pair.logits.f64")), 1e-5);
}

}  // namespace
}  // namespace stoke
