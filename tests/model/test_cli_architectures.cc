// `stoke embed` and `stoke classify` end to end on the added architectures
// (ELECTRA, DistilBERT, MPNet, RoBERTa with its byte-level BPE, CamemBERT and
// XLM-R with Unigram tokenizer.json) and the sentence-transformers Dense
// module, against the goldens of tests/golden (all 66 texts, each folder's
// own tokenizer, max length, pooling and modules).
#include <algorithm>
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/file_util.h"
#include "support/fixtures.h"
#include "support/goldens.h"
#include "support/jsonl.h"

namespace stoke {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace test::goldens;

std::string folder(const std::string& name) { return (repo_golden_dir() / "models" / name).string(); }
std::string texts() { return test::fixture("golden/texts.jsonl").string(); }

// The rows of a float32 .npy file written by stoke embed (header, then data).
std::vector<float> npy_rows(const fs::path& path, int64_t* cols) {
  const std::string bytes = read_file(path);
  uint16_t header_len = 0;
  std::memcpy(&header_len, bytes.data() + 8, 2);
  const std::string header = bytes.substr(10, header_len);
  const size_t comma = header.find(',', header.find("'shape': ("));
  *cols = std::stoll(header.substr(comma + 1));
  std::vector<float> out((bytes.size() - 10 - header_len) / 4);
  std::memcpy(out.data(), bytes.data() + 10 + header_len, out.size() * 4);
  return out;
}

TEST(CliArchitectures, EmbedReproducesSentenceTransformers) {
  // The folder's modules decide: ELECTRA and DistilBERT mean pooling; bert-dense
  // CLS pooling -> Dense(64 -> 24, tanh) -> Normalize.
  for (const auto& [name, golden_name, width] : {std::tuple{"tiny-electra", "st_embeddings", 48},
                                                 std::tuple{"tiny-distilbert", "st_embeddings", 40},
                                                 std::tuple{"tiny-mpnet", "st_embeddings", 32},
                                                 std::tuple{"tiny-gte", "st_embeddings", 54},
                                                 std::tuple{"tiny-nomic", "st_embeddings", 40},
                                                 std::tuple{"tiny-roberta", "st_embeddings", 48},
                                                 std::tuple{"tiny-camembert", "st_embeddings", 40},
                                                 std::tuple{"tiny-xlmr5", "st_embeddings", 24},
                                                 std::tuple{"tiny-modernbert", "st_embeddings", 60},
                                                 std::tuple{"tiny-bert-dense", "st_embeddings.f64", 24},
                                                 std::tuple{"tiny-qwen3", "st_embeddings", 40},
                                                 std::tuple{"tiny-qwen2", "st_embeddings", 48}}) {
    const Fixture fx = open_fixture(name);
    const fs::path out = test::scratch_dir(std::string("arch-embed-") + name);
    const auto r = test::run_stoke("embed --model " + folder(name) + " --input " + texts() + " --output " +
                                   out.string() + " --device cpu --overwrite");
    ASSERT_EQ(r.status, 0) << r.err;
    int64_t cols = 0;
    const std::vector<float> got = npy_rows(out / "embeddings-00000.npy", &cols);
    EXPECT_EQ(cols, width) << name;
    EXPECT_EQ(got.size(), static_cast<size_t>(66 * width)) << name;
    const double e = relative_error(got, golden(*fx.golden, golden_name));
    EXPECT_LE(e, 1e-5) << name;
    std::printf("%s: embed vs %s relative error %.3g\n", name, golden_name, e);
    const json m = json::parse(read_file(out / "manifest.json"));
    EXPECT_EQ(m["dimensions"], width) << name;
  }
}

TEST(CliArchitectures, ClassifyReproducesTransformers) {
  // ELECTRA: dense -> GELU -> out_proj; DistilBERT: pre_classifier -> ReLU -> classifier.
  for (const std::string name :
       {"tiny-electra", "tiny-distilbert", "tiny-mpnet", "tiny-roberta", "tiny-camembert", "tiny-xlmr5", "tiny-qwen3",
        "tiny-modernbert", "tiny-gte", "tiny-nomic"}) {
    const Fixture fx = open_fixture(name);
    const auto r = test::run_stoke("classify --quiet --model " + folder(name) + " --input " + texts() +
                                   " --output - --device cpu");
    ASSERT_EQ(r.status, 0) << r.err;
    std::istringstream in(r.out);
    std::vector<float> logits;
    std::string line;
    while (std::getline(in, line)) {
      const auto l = json::parse(line)["logits"].get<std::vector<float>>();
      ASSERT_EQ(static_cast<int64_t>(l.size()), fx.folder.config.num_labels());
      logits.insert(logits.end(), l.begin(), l.end());
    }
    EXPECT_EQ(logits.size(), 66u * static_cast<size_t>(fx.folder.config.num_labels()));
    const double e = relative_error(logits, best_golden(*fx.golden, "logits"));
    EXPECT_LE(e, 1e-5) << name;
    std::printf("%s: classify logits relative error %.3g\n", name.c_str(), e);
  }
}

// Qwen3-Embedding's instruction prompt: `--prompt-name query` puts the folder's
// "Instruct: ...\nQuery:" before each text, as SentenceTransformer.encode(prompt_name=) does.
TEST(CliArchitectures, DecoderPromptNameMatchesSentenceTransformers) {
  const Fixture fx = open_fixture("tiny-qwen3");
  const fs::path dir = test::scratch_dir("arch-qwen3-prompt");
  {
    std::ifstream in(texts());
    std::ofstream first8(dir / "texts8.jsonl");
    std::string line;
    for (int i = 0; i < 8 && std::getline(in, line); ++i) first8 << line << '\n';
  }
  const auto r = test::run_stoke("embed --model " + folder("tiny-qwen3") + " --input " + (dir / "texts8.jsonl").string() +
                                 " --output " + (dir / "out").string() + " --prompt-name query --device cpu --overwrite");
  ASSERT_EQ(r.status, 0) << r.err;
  int64_t cols = 0;
  const std::vector<float> got = npy_rows(dir / "out" / "embeddings-00000.npy", &cols);
  const double e = relative_error(got, golden(*fx.golden, "st_query_embeddings"));
  EXPECT_LE(e, 1e-5);
  std::printf("tiny-qwen3: embed --prompt-name query vs st_query_embeddings relative error %.3g\n", e);
}

// A decoder is not fine-tuned: `stoke train` says so in one line.
TEST(CliArchitectures, TrainRefusesDecoders) {
  const fs::path dir = test::scratch_dir("arch-qwen3-train");
  {
    std::ofstream data(dir / "train.jsonl");
    data << "{\"text\": \"a\", \"label\": 0}\n{\"text\": \"b\", \"label\": 1}\n";
  }
  const auto r = test::run_stoke("train --model " + folder("tiny-qwen3") + " --train " + (dir / "train.jsonl").string() +
                                 " --output " + (dir / "out").string() + " --device cpu --max-steps 1");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("fine-tuning decoders is not supported"), std::string::npos) << r.err;
}

// inspect says what the description adds to BERT's shape, and only where it is.
TEST(CliArchitectures, InspectShowsProjectionAndRelativeBias) {
  const auto electra = test::run_stoke("inspect " + folder("tiny-electra"));
  ASSERT_EQ(electra.status, 0) << electra.err;
  EXPECT_NE(electra.out.find("embeddings: 24 wide, projected to hidden 48"), std::string::npos) << electra.out;
  EXPECT_EQ(electra.out.find("relative-position bias"), std::string::npos) << electra.out;
  const auto mpnet = test::run_stoke("inspect " + folder("tiny-mpnet"));
  ASSERT_EQ(mpnet.status, 0) << mpnet.err;
  EXPECT_NE(mpnet.out.find("attention: relative-position bias, 32 buckets"), std::string::npos) << mpnet.out;
  EXPECT_EQ(mpnet.out.find("projected to hidden"), std::string::npos) << mpnet.out;
  const auto gte = test::run_stoke("inspect " + folder("tiny-gte"));
  ASSERT_EQ(gte.status, 0) << gte.err;
  EXPECT_NE(gte.out.find("positions: rotary (theta 5000, 18 of 18 head columns); feed-forward: gated (GeGLU)"),
            std::string::npos) << gte.out;
  const auto modernbert = test::run_stoke("inspect " + folder("tiny-modernbert"));
  ASSERT_EQ(modernbert.status, 0) << modernbert.err;
  EXPECT_NE(modernbert.out.find("attention: global, local +-8, global; rotary theta 20000 global, 5000 local"),
            std::string::npos)
      << modernbert.out;
}

// ModernBERT's tokenizer.json form (ByteLevel BPE, [UNK] [CLS] [SEP] [PAD] [MASK] after the
// vocabulary, TemplateProcessing "[CLS] $A [SEP]"): every text's ids and tokens as transformers gives them.
TEST(CliArchitectures, ModernBertTokenizerMatchesTransformers) {
  const auto r = test::run_stoke("tokenize --quiet --no-truncation --model " + folder("tiny-modernbert") + " --input " +
                                 texts() + " --output -");
  ASSERT_EQ(r.status, 0) << r.err;
  const auto rows = test::jsonl_rows(r.out);
  const auto golden_rows = test::read_jsonl(repo_golden_dir() / "tiny-modernbert.tokens.jsonl");
  ASSERT_EQ(rows.size(), golden_rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(rows[i]["ids"], golden_rows[i]["ids"]) << "text " << i;
    EXPECT_EQ(rows[i]["tokens"], golden_rows[i]["tokens"]) << "text " << i;
  }
}

// ModernBERT trains without dropout in its layers (its hub configs set 0): --dropout above 0 is refused
// in one line.
TEST(CliArchitectures, ModernBertLayerDropoutIsRefusedInOneLine) {
  const fs::path out = test::scratch_dir("arch-modernbert-train");
  const fs::path data = out / "train.jsonl";
  std::ofstream(data) << "{\"text\": \"a b c\", \"label\": 0}\n{\"text\": \"d e\", \"label\": 1}\n";
  const auto r = test::run_stoke("train --model " + folder("tiny-modernbert") + " --train " + data.string() +
                                 " --output " + (out / "ckpt").string() + " --device cpu --max-steps 1 --dropout 0.1");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("ModernBERT trains without dropout in its layers"), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

}  // namespace
}  // namespace stoke
