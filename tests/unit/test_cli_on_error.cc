// `--on-error stop|skip` on classify and tokenize, as on embed (RELIABILITY
// 5): a skipped record gets no output line, its record number and reason go
// to the errors file (OUTPUT.errors.jsonl, --errors FILE, or stderr lines when
// the output is stdout), and the ids of the other lines still name their
// records. The default still stops, and its advice (--on-error skip) is one
// the command takes.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/file_util.h"
#include "support/fixtures.h"

namespace stoke {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using test::RunResult;
using test::run_stoke;

std::string model() { return test::fixture("models/tiny-bert").string(); }

std::vector<json> jsonl(const std::string& text) {
  std::vector<json> rows;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line))
    if (!line.empty()) rows.push_back(json::parse(line));
  return rows;
}

// Records 0..4; record 1 is not JSON and record 3 has no text.
fs::path bad_input(const fs::path& dir) {
  const fs::path in = dir / "in.jsonl";
  std::ofstream(in) << R"({"text": "first", "key": "a"})" << "\n"
                    << R"({"text": "broken)" << "\n"
                    << R"({"text": "third", "key": "c"})" << "\n"
                    << R"({"other": "no text", "key": "d"})" << "\n"
                    << R"({"text": "fifth", "key": "e"})" << "\n";
  return in;
}

void expect_errors_file(const fs::path& path, const fs::path& input) {
  ASSERT_TRUE(fs::exists(path)) << path;
  const auto errors = jsonl(read_file(path));
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_EQ(errors[0]["record"], 1);
  EXPECT_EQ(errors[0]["line"], 2);
  EXPECT_EQ(errors[0]["file"], input.string());
  EXPECT_FALSE(errors[0]["error"].get<std::string>().empty());
  EXPECT_EQ(errors[1]["record"], 3);
  EXPECT_NE(errors[1]["error"].get<std::string>().find("text"), std::string::npos) << errors[1];
}

TEST(CliOnError, ClassifyAndTokenizeSkipIntoAnErrorsFileBesideTheOutput) {
  const fs::path dir = test::scratch_dir("cli-on-error-file");
  const fs::path in = bad_input(dir);
  for (const std::string cmd : {"classify", "tokenize"}) {
    const fs::path out = dir / (cmd + ".jsonl");
    const RunResult r = run_stoke(cmd + " --quiet --on-error skip --id-field key --model " + model() + " --input " +
                                  in.string() + " --output " + out.string());
    ASSERT_EQ(r.status, 0) << cmd << ": " << r.err;
    const auto rows = jsonl(read_file(out));
    ASSERT_EQ(rows.size(), 3u) << cmd;
    EXPECT_EQ(rows[0]["id"], "a");
    EXPECT_EQ(rows[1]["id"], "c");
    EXPECT_EQ(rows[2]["id"], "e");
    expect_errors_file(fs::path(out.string() + ".errors.jsonl"), in);
    EXPECT_NE(r.err.find("skipped 2 bad records"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(out.string() + ".errors.jsonl"), std::string::npos) << r.err;

    // --errors FILE puts them elsewhere.
    const fs::path elsewhere = dir / (cmd + "-errors.jsonl");
    const RunResult e = run_stoke(cmd + " --quiet --on-error skip --model " + model() + " --input " + in.string() +
                                  " --output " + (dir / (cmd + "-2.jsonl")).string() + " --errors " + elsewhere.string());
    ASSERT_EQ(e.status, 0) << e.err;
    expect_errors_file(elsewhere, in);
    EXPECT_FALSE(fs::exists(dir / (cmd + "-2.jsonl.errors.jsonl")));
  }
}

TEST(CliOnError, StdoutOutputSkipsOntoStderrLines) {
  const fs::path dir = test::scratch_dir("cli-on-error-stdout");
  const fs::path in = bad_input(dir);
  for (const std::string cmd : {"classify", "tokenize"}) {
    const RunResult r = run_stoke(cmd + " --quiet --on-error skip --model " + model() + " --input " + in.string());
    ASSERT_EQ(r.status, 0) << cmd << ": " << r.err;
    EXPECT_EQ(jsonl(r.out).size(), 3u) << cmd;
    EXPECT_NE(r.err.find("stoke: skipped record 1: " + in.string() + ":2: "), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("stoke: skipped record 3: " + in.string() + ":4: "), std::string::npos) << r.err;
  }
}

TEST(CliOnError, DefaultStopsWithAdviceTheCommandTakes) {
  const fs::path dir = test::scratch_dir("cli-on-error-stop");
  const fs::path in = bad_input(dir);
  for (const std::string cmd : {"classify", "tokenize"}) {
    const fs::path out = dir / (cmd + ".jsonl");
    const RunResult r =
        run_stoke(cmd + " --quiet --model " + model() + " --input " + in.string() + " --output " + out.string());
    EXPECT_EQ(r.status, 1) << cmd;
    EXPECT_EQ(r.err.rfind("stoke: error: " + in.string() + ":2: ", 0), 0u) << r.err;
    EXPECT_NE(r.err.find("--on-error skip"), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(out)) << cmd;
    EXPECT_FALSE(fs::exists(out.string() + ".errors.jsonl")) << cmd;
    const RunResult bad = run_stoke(cmd + " --on-error maybe --model " + model() + " --input " + in.string());
    EXPECT_EQ(bad.status, 1);
    EXPECT_EQ(bad.err, "stoke: error: --on-error \"maybe\": expected stop or skip\n") << cmd;
  }
}

// Without bad records there is no errors file.
TEST(CliOnError, NoErrorsFileWithoutSkippedRecords) {
  const fs::path dir = test::scratch_dir("cli-on-error-clean");
  std::ofstream(dir / "in.jsonl") << R"({"text": "fine"})" << "\n";
  const fs::path out = dir / "out.jsonl";
  const RunResult r = run_stoke("classify --quiet --on-error skip --model " + model() + " --input " +
                                (dir / "in.jsonl").string() + " --output " + out.string());
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(fs::exists(out));
  EXPECT_FALSE(fs::exists(out.string() + ".errors.jsonl"));
}

}  // namespace
}  // namespace stoke
