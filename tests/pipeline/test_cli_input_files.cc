// Inputs at scale (docs/scale-out.md): `stoke embed --input` given several
// files, a folder or a pattern reads them as one input in sorted name order
// (rows equal to one concatenated file's; the manifest lists every file); with
// --partition files, file f goes to task f mod N, each task reads and
// fingerprints only its files, verify understands the set, and a killed task
// resumes to the same bytes.
#include <gtest/gtest.h>
#include <signal.h>

#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/file_util.h"
#include "core/sha256.h"
#include "support/fixtures.h"

namespace stoke {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

// Lines per file of the test input: five files, one empty, of unequal length.
const std::vector<size_t> kLines = {23, 0, 41, 7, 30};

// parts/part-K.jsonl from the corpus, and the same texts as one file, whole.jsonl.
fs::path make_input(const std::string& name) {
  const fs::path dir = test::scratch_dir("cli-files-" + name);
  fs::create_directories(dir / "parts");
  std::ifstream in(test::fixture("corpus/fortunes-multilingual.jsonl"));
  std::ofstream whole(dir / "whole.jsonl");
  std::string line;
  for (size_t k = 0; k < kLines.size(); ++k) {
    std::ofstream part(dir / "parts" / ("part-" + std::to_string(k) + ".jsonl"));
    for (size_t i = 0; i < kLines[k] && std::getline(in, line); ++i) {
      part << line << '\n';
      whole << line << '\n';
    }
  }
  return dir;
}

std::string embed(const std::string& input, const fs::path& out, const std::string& extra = "") {
  const std::string shard_size = extra.find("--shard-size") == std::string::npos ? " --shard-size 16" : "";
  return "embed --model " + test::fixture("models/tiny-bert").string() + " --input " + input + " --output " +
         out.string() + " --quiet --sort-window 32" + shard_size + " " + extra;
}

json manifest(const fs::path& dir) { return json::parse(read_file(dir / "manifest.json")); }

// Record number (the ids) -> the row's bytes, from the committed shards.
std::map<uint64_t, std::string> rows(const fs::path& dir) {
  std::map<uint64_t, std::string> out;
  const json m = manifest(dir);
  const size_t width = m["dimensions"].get<size_t>() * 4;
  for (const json& s : m["shards"]) {
    const std::string npy = read_file(dir / s["embeddings"].get<std::string>());
    const std::string body = npy.substr(npy.size() - s["rows"].get<size_t>() * width);
    std::ifstream ids(dir / s["ids"].get<std::string>());
    std::string id;
    for (size_t r = 0; std::getline(ids, id); ++r) out[std::stoull(id)] = body.substr(r * width, width);
  }
  return out;
}

// --partition files without --id-field: (file name, record in that file) ->
// the row's bytes; every id must be {"file", "record"}.
std::map<std::pair<std::string, uint64_t>, std::string> file_rows(const fs::path& dir) {
  std::map<std::pair<std::string, uint64_t>, std::string> out;
  const json m = manifest(dir);
  const size_t width = m["dimensions"].get<size_t>() * 4;
  for (const json& s : m["shards"]) {
    const std::string npy = read_file(dir / s["embeddings"].get<std::string>());
    const std::string body = npy.substr(npy.size() - s["rows"].get<size_t>() * width);
    std::ifstream ids(dir / s["ids"].get<std::string>());
    std::string line;
    for (size_t r = 0; std::getline(ids, line); ++r) {
      const json id = json::parse(line);
      EXPECT_TRUE(id.is_object() && id.size() == 2) << line;
      out[{fs::path(id["file"].get<std::string>()).filename().string(), id["record"].get<uint64_t>()}] =
          body.substr(r * width, width);
    }
  }
  return out;
}

TEST(EmbedInputFiles, AFolderAPatternAndAListReadAsOneFileInNameOrder) {
  const fs::path dir = make_input("one");
  test::RunResult r = test::run_stoke(embed((dir / "whole.jsonl").string(), dir / "out-whole"));
  ASSERT_EQ(r.status, 0) << r.err;
  const auto whole = rows(dir / "out-whole");
  ASSERT_EQ(whole.size(), 101u);

  const std::string p = (dir / "parts").string();
  for (const auto& [name, input] : std::vector<std::pair<std::string, std::string>>{
           {"folder", p},
           {"pattern", "'" + p + "/part-*.jsonl'"},
           {"list", p + "/part-4.jsonl " + p + "/part-0.jsonl " + p + "/part-1.jsonl " + p + "/part-2.jsonl " + p +
                        "/part-3.jsonl"},
           {"repeated", p + "/part-3.jsonl --input " + p + "/part-[0-2].jsonl --input " + p + "/part-4.jsonl"}}) {
    const fs::path out = dir / ("out-" + name);
    r = test::run_stoke(embed(input, out));
    ASSERT_EQ(r.status, 0) << name << ": " << r.err;
    EXPECT_TRUE(rows(out) == whole) << name << ": rows differ from the one-file run";
    const json m = manifest(out);
    ASSERT_EQ(m["input"]["files"].size(), 5u) << name;
    EXPECT_EQ(m["input"]["files"][2]["name"], "part-2.jsonl");
    EXPECT_EQ(m["input"]["files"][1]["size"], 0);
    EXPECT_TRUE(m["input"]["files"][4]["sha256"].is_string());
    EXPECT_EQ(m["input"]["size"], fs::file_size(dir / "whole.jsonl"));
    EXPECT_EQ(m["counts"]["records"], 101);
  }
  // Several files, the records partition: killed after its second commit and
  // resumed, the rows are the uninterrupted run's.
  const fs::path killed = dir / "out-killed";
  EXPECT_EQ(test::run_stoke(embed(p, killed, "--shard-size 4"), "/dev/null", "STOKE_CRASH_AT=after-manifest:2").status,
            128 + SIGKILL);
  r = test::run_stoke(embed(p, killed, "--shard-size 4 --resume"));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_GT(manifest(killed)["run"]["resumed_records"].get<uint64_t>(), 0u);
  EXPECT_TRUE(rows(killed) == whole);
  // The fingerprint covers every file: change one, and --resume refuses.
  std::ofstream(dir / "parts" / "part-3.jsonl", std::ios::app) << "{\"text\": \"one more\"}\n";
  r = test::run_stoke(embed(p, dir / "out-folder", "--resume"));
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("input/"), std::string::npos) << r.err;
}

TEST(EmbedInputFiles, BadInputListsAreNamed) {
  const fs::path dir = make_input("bad");
  const std::string p = (dir / "parts").string();
  std::ofstream(dir / "x.csv") << "text\nhello\n";
  for (const auto& [input, want] : std::vector<std::pair<std::string, std::string>>{
           {"'" + p + "/none-*.jsonl'", "the pattern matches no file"},
           {p + "/part-0.jsonl " + (dir / "x.csv").string(), "have different formats (jsonl, csv)"},
           {p + "/part-0.jsonl " + p + "/part-0.jsonl", "is given twice"},
           {p + "/part-0.jsonl -", "stdin cannot be one of several inputs"},
           {(dir / "empty").string(), "no such input file"}}) {
    const test::RunResult r = test::run_stoke(embed(input, dir / "out"));
    EXPECT_EQ(r.status, 1) << input;
    EXPECT_NE(r.err.find(want), std::string::npos) << input << "\n" << r.err;
  }
  const test::RunResult r = test::run_stoke(embed(p, dir / "out", "--partition lines"));
  EXPECT_NE(r.err.find("--partition \"lines\": expected records or files"), std::string::npos) << r.err;
}

TEST(EmbedInputFiles, PartitionFilesGivesWholeFilesToTasksAndVerifies) {
  const fs::path dir = make_input("partition");
  const std::string p = (dir / "parts").string();
  ASSERT_EQ(test::run_stoke(embed(p, dir / "out-whole")).status, 0);
  const auto whole = rows(dir / "out-whole");
  // Where each file's records start in the whole input.
  std::vector<uint64_t> first(kLines.size() + 1, 0);
  for (size_t k = 0; k < kLines.size(); ++k) first[k + 1] = first[k] + kLines[k];

  const uint64_t N = 3;
  std::string folders;
  size_t seen = 0;
  for (uint64_t i = 0; i < N; ++i) {
    const fs::path out = dir / ("task-" + std::to_string(i));
    folders += " " + out.string();
    const test::RunResult r =
        test::run_stoke(embed(p, out, "--partition files --shard-index " + std::to_string(i) + " --num-shards 3"));
    ASSERT_EQ(r.status, 0) << r.err;
    const json m = manifest(out);
    EXPECT_EQ(m["task"]["partition"], "files");
    EXPECT_EQ(m["ids"], "file_record");
    // The task's records are its files' (f mod 3 == i); each row's id names
    // its file and its number there, so no two tasks write the same id.
    uint64_t local = 0, size = 0;
    const auto got = file_rows(out);
    for (size_t f = i; f < kLines.size(); f += N) {
      EXPECT_TRUE(m["input"]["files"][f]["sha256"].is_string()) << f;
      const std::string name = "part-" + std::to_string(f) + ".jsonl";
      size += fs::file_size(dir / "parts" / name);
      for (uint64_t j = 0; j < kLines[f]; ++j, ++local) {
        ASSERT_TRUE(got.count({name, j})) << "task " << i << " " << name << " record " << j;
        EXPECT_TRUE(got.at({name, j}) == whole.at(first[f] + j)) << "task " << i << " file " << f << " record " << j;
      }
    }
    for (size_t f = 0; f < kLines.size(); ++f) {
      if (f % N != i) {
        EXPECT_TRUE(m["input"]["files"][f]["sha256"].is_null()) << "task " << i << " hashed file " << f;
      }
    }
    EXPECT_EQ(got.size(), local);
    EXPECT_EQ(m["counts"]["records"], local);
    EXPECT_EQ(m["input"]["size"], size);
    seen += got.size();
  }
  EXPECT_EQ(seen, whole.size());

  test::RunResult v = test::run_stoke("verify" + folders);
  ASSERT_EQ(v.status, 0) << v.err;
  EXPECT_NE(v.out.find("verified 3 folders (3 tasks): 101 records, 101 rows"), std::string::npos) << v.out;
  // A missing task is named; a task of the records partition does not mix in.
  v = test::run_stoke("verify " + (dir / "task-0").string() + " " + (dir / "task-2").string());
  EXPECT_EQ(v.status, 1);
  EXPECT_NE(v.err.find("no readable folder given holds task 1"), std::string::npos) << v.err;
  ASSERT_EQ(test::run_stoke(embed(p, dir / "rec-1", "--shard-index 1 --num-shards 3")).status, 0);
  v = test::run_stoke("verify " + (dir / "task-0").string() + " " + (dir / "rec-1").string() + " " +
                      (dir / "task-2").string());
  EXPECT_EQ(v.status, 1);
  EXPECT_NE(v.err.find("task.partition differs"), std::string::npos) << v.err;

  // Killed after its second commit and resumed: the same bytes as uninterrupted.
  const fs::path killed = dir / "task-0-killed";
  // Small shards (rows are compared, not files): many commits, so the crash comes mid-run.
  const std::string flags = "--partition files --shard-index 0 --num-shards 3 --shard-size 4";
  EXPECT_EQ(test::run_stoke(embed(p, killed, flags), "/dev/null", "STOKE_CRASH_AT=after-manifest:2").status,
            128 + SIGKILL);
  const test::RunResult r = test::run_stoke(embed(p, killed, flags + " --resume"));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_GT(manifest(killed)["run"]["resumed_records"].get<uint64_t>(), 0u);
  EXPECT_TRUE(file_rows(killed) == file_rows(dir / "task-0"));

  // verify reads the {"file", "record"} ids: out of order, or naming another
  // task's file, is found (the checksums made to match, so only that is wrong).
  for (const auto& [what, want] : std::vector<std::pair<std::string, std::string>>{
           {"swap", "is not after the row before it"}, {"foreign", "is not one of this task's files"}}) {
    const fs::path bad = dir / ("task-0-" + what);
    fs::copy(dir / "task-0", bad, fs::copy_options::recursive);
    json m = manifest(bad);
    const std::string ids_name = m["shards"][0]["ids"].get<std::string>();
    std::vector<std::string> lines;
    {
      std::ifstream in(bad / ids_name);
      for (std::string l; std::getline(in, l);) lines.push_back(l);
    }
    if (what == "swap") std::swap(lines[0], lines[1]);
    else lines[0] = R"({"file":"part-1.jsonl","record":0})";
    std::string text;
    for (const std::string& l : lines) text += l + "\n";
    std::ofstream(bad / ids_name, std::ios::trunc) << text;
    m["shards"][0]["ids_sha256"] = sha256_file(bad / ids_name);
    std::ofstream(bad / "manifest.json", std::ios::trunc) << m.dump(2);
    const test::RunResult vb = test::run_stoke("verify " + bad.string() + " " + (dir / "task-1").string() + " " +
                                               (dir / "task-2").string());
    EXPECT_EQ(vb.status, 1) << what;
    EXPECT_NE(vb.err.find(want), std::string::npos) << what << ": " << vb.err;
  }
  // --resume with the other partition is refused, naming it. (A flag not
  // given is taken from the manifest: the other partition is given.)
  const test::RunResult other =
      test::run_stoke(embed(p, killed, "--partition records --shard-index 0 --num-shards 3 --shard-size 4 --resume"));
  EXPECT_EQ(other.status, 1);
  EXPECT_NE(other.err.find("task/partition"), std::string::npos) << other.err;
}

TEST(EmbedInputFiles, MoreTasksThanFilesLeavesEmptyCompleteTasks) {
  const fs::path dir = make_input("many-tasks");
  const std::string p = (dir / "parts").string();
  std::string folders;
  for (int i = 0; i < 7; ++i) {
    const fs::path out = dir / ("t-" + std::to_string(i));
    folders += " " + out.string();
    const test::RunResult r =
        test::run_stoke(embed(p, out, "--partition files --shard-index " + std::to_string(i) + " --num-shards 7"));
    ASSERT_EQ(r.status, 0) << r.err;
  }
  EXPECT_EQ(manifest(dir / "t-6")["counts"]["records"], 0);
  const test::RunResult v = test::run_stoke("verify" + folders);
  EXPECT_EQ(v.status, 0) << v.err;
}

}  // namespace
}  // namespace stoke
