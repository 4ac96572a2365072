// `stoke embed --chunk-tokens` against the real binary: chunk rows with
// their spans in the ids files, shards that hold whole records, kill -9 at
// every commit step and mid-batch resuming to byte-identical files, chunk
// settings as identity fields, and `stoke verify` catching a chunk lost.
#include <gtest/gtest.h>
#include <signal.h>

#include <fstream>
#include <set>
#include <nlohmann/json.hpp>

#include "core/file_util.h"
#include "core/utf8.h"
#include "support/corpus_files.h"
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

const std::vector<std::string>& documents() {
  static const std::vector<std::string> docs = test::long_documents(60, 9);
  return docs;
}

// Small shards and windows: many commits, chunked records crossing shard sizes.
std::string embed_args(const fs::path& input, const fs::path& out, const std::string& extra = "",
                       int chunk_tokens = 40) {
  return "embed --quiet --model " + test::fixture("models/tiny-bert").string() + " --input " + input.string() +
         " --output " + out.string() + " --shard-size 50 --sort-window 16 --batch-tokens 1024 --chunk-tokens " +
         std::to_string(chunk_tokens) + " --chunk-overlap 6 --chunk-boundary sentence " + extra;
}

std::vector<json> ids_lines(const fs::path& dir) {
  std::vector<json> lines;
  const json m = json::parse(read_file(dir / "manifest.json"));
  for (const auto& s : m["shards"]) {
    std::ifstream in(dir / s["ids"].get<std::string>());
    std::string line;
    while (std::getline(in, line)) lines.push_back(json::parse(line));
  }
  return lines;
}

class EmbedChunks : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    input_ = new fs::path(test::texts_file("cli-chunks-input", documents()));
    reference_ = new fs::path(test::scratch_dir("cli-chunks-reference"));
    std::string err;
    ASSERT_EQ(run(embed_args(*input_, *reference_), &err), 0) << err;
  }
  static void TearDownTestSuite() {
    delete input_;
    delete reference_;
  }
  static fs::path* input_;
  static fs::path* reference_;
};
fs::path* EmbedChunks::input_ = nullptr;
fs::path* EmbedChunks::reference_ = nullptr;

TEST_F(EmbedChunks, RowsAreChunksWithSpansAndShardsHoldWholeRecords) {
  const json m = json::parse(read_file(*reference_ / "manifest.json"));
  EXPECT_EQ(m["chunking"], (json{{"tokens", 40}, {"overlap", 6}, {"boundary", "sentence"}, {"late", false},
                                 {"pool", "none"}}));
  EXPECT_TRUE(m["complete"].get<bool>());
  const auto lines = ids_lines(*reference_);
  EXPECT_GT(lines.size(), 3 * documents().size());
  size_t at = 0;
  for (const auto& s : m["shards"]) {
    at += s["rows"].get<size_t>();
    const json& last = lines[at - 1];
    EXPECT_EQ(last["chunk"].get<int>() + 1, last["chunks"].get<int>()) << "shard " << s["index"] << " cuts a record";
  }
  // The spans cut each chunk's text out of the input.
  for (const json& l : lines) {
    const std::string& doc = documents()[l["record"].get<size_t>()];
    const auto b = l["bytes"][0].get<size_t>(), e = l["bytes"][1].get<size_t>();
    ASSERT_LE(e, doc.size());
    EXPECT_LE(l["tokens"][1].get<int>() - l["tokens"][0].get<int>(), 40);
    EXPECT_EQ(l["chars"][1].get<size_t>() - l["chars"][0].get<size_t>(), utf8_length(doc.substr(b, e - b)));
  }
  std::string err;
  EXPECT_EQ(run("verify " + reference_->string(), &err), 0) << err;
}

TEST_F(EmbedChunks, AnyWorkerCountAndSerialGiveTheSameFiles) {
  for (const std::string extra : {"--workers 1", "--workers 3", "--serial"}) {
    const fs::path out = test::scratch_dir("cli-chunks-" + extra.substr(2, 6));
    ASSERT_EQ(run(embed_args(*input_, out, extra)), 0) << extra;
    test::expect_same_output_files(*reference_, out);
  }
}

// Killed at each step of the commit protocol and after a finished batch
// (its rows kept in partial-*.rows), then resumed: the uninterrupted run's files.
TEST_F(EmbedChunks, KilledAnywhereResumesByteIdentically) {
  for (const char* at : {"shard-written:2", "shard-ids-renamed:3", "before-manifest:2", "after-manifest:4",
                         "batch-collected:7", "journal-appended:5"}) {
    const fs::path out = test::scratch_dir(std::string("cli-chunks-crash-") + at);
    const int status = run(embed_args(*input_, out), nullptr, std::string("STOKE_CRASH_AT=") + at);
    EXPECT_EQ(status, 128 + SIGKILL) << at << " did not crash";
    std::string err;
    ASSERT_EQ(run("embed --output " + out.string() + " --resume", &err), 0) << at << ": " << err;
    test::expect_same_output_files(*reference_, out);
    EXPECT_EQ(run("verify " + out.string(), &err), 0) << at << ": " << err;
  }
}

TEST_F(EmbedChunks, ChunkSettingsAreIdentityFields) {
  const fs::path out = test::scratch_dir("cli-chunks-identity");
  ASSERT_EQ(run(embed_args(*input_, out), nullptr, "STOKE_CRASH_AT=after-manifest:2"), 128 + SIGKILL);
  std::string err;
  EXPECT_NE(run(embed_args(*input_, out, "--resume", 30), &err), 0);
  EXPECT_NE(err.find("chunking differs"), std::string::npos) << err;
}

TEST_F(EmbedChunks, VerifyCatchesALostChunk) {
  const fs::path out = test::scratch_dir("cli-chunks-damaged");
  fs::copy(*reference_, out, fs::copy_options::recursive | fs::copy_options::overwrite_existing);
  // Drop one chunk line and its row, keeping the manifest's checksums honest
  // about the ids file would need the embeddings too: the ids checksum fails
  // and so does the chunk sequence; both are named.
  const fs::path ids = out / "ids-00000.jsonl";
  std::string text = read_file(ids);
  const size_t second = text.find('\n') + 1;
  text.erase(second, text.find('\n', second) + 1 - second);
  std::ofstream(ids, std::ios::trunc) << text;
  std::string err;
  EXPECT_NE(run("verify " + out.string(), &err), 0);
  EXPECT_NE(err.find("does not follow the line before it"), std::string::npos) << err;
}

// --partition files without --id-field: each chunk's line names its file
// and record there, so no two tasks write the same id; verify takes the
// tasks together.
TEST(EmbedChunkTasks, PartitionFilesChunkIdsAreUniqueAndVerify) {
  const fs::path dir = test::scratch_dir("cli-chunks-partition");
  fs::create_directories(dir / "parts");
  const auto& docs = documents();
  for (size_t f = 0; f < 3; ++f) {
    std::ofstream out(dir / "parts" / ("part-" + std::to_string(f) + ".jsonl"));
    for (size_t i = f; i < 12; i += 3) out << json{{"text", docs[i]}}.dump() << '\n';
  }
  std::set<std::string> ids;
  std::string folders;
  size_t rows = 0;
  for (int task = 0; task < 2; ++task) {
    const fs::path out = dir / ("task-" + std::to_string(task));
    folders += " " + out.string();
    std::string err;
    ASSERT_EQ(run(embed_args(dir / "parts", out, "--partition files --num-shards 2 --shard-index " +
                                                     std::to_string(task)),
                  &err),
              0)
        << err;
    for (const json& l : ids_lines(out)) {
      ASSERT_TRUE(l.contains("file") && l.contains("record") && l.contains("chunk")) << l.dump();
      EXPECT_TRUE(ids.insert(l["file"].get<std::string>() + "/" + l["record"].dump() + "/" + l["chunk"].dump()).second)
          << "two rows with " << l.dump();
      ++rows;
    }
  }
  std::string err;
  EXPECT_EQ(run("verify" + folders, &err), 0) << err;
  EXPECT_EQ(ids.size(), rows);
}

TEST(EmbedChunkFlags, MisusedFlagsAreRefusedNamingWhy) {
  const fs::path input = test::texts_file("cli-chunks-flags", {"one text"});
  const std::string base = "embed --model " + test::fixture("models/tiny-bert").string() + " --input " +
                           input.string() + " --output " + test::scratch_dir("cli-chunks-flags-out").string();
  std::string err;
  EXPECT_NE(run(base + " --late-chunking", &err), 0);
  EXPECT_NE(err.find("--late-chunking: needs --chunk-tokens"), std::string::npos) << err;
  EXPECT_NE(run(base + " --chunk-tokens 8 --chunk-overlap 8", &err), 0);
  EXPECT_NE(err.find("expected fewer tokens than --chunk-tokens 8"), std::string::npos) << err;
  EXPECT_NE(run(base + " --chunk-tokens 200", &err), 0);
  EXPECT_NE(err.find("more than the max length 128"), std::string::npos) << err;
}

}  // namespace
}  // namespace stoke
