// The `stoke` command-line contract: what later checks rely on. Runs the real
// binary and checks outputs, exit statuses and error lines.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "core/file_util.h"
#include "support/fixtures.h"

namespace stoke {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

using test::RunResult;
using test::run_stoke;

std::string model(const std::string& name) { return test::fixture("models/" + name).string(); }

std::vector<json> jsonl(const std::string& text) {
  std::vector<json> rows;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line))
    if (!line.empty()) rows.push_back(json::parse(line));
  return rows;
}

int count_lines(const std::string& s) { return static_cast<int>(std::count(s.begin(), s.end(), '\n')); }

TEST(Cli, TokenizeMatchesTheGoldensForBothModels) {
  for (const std::string name : {"tiny-bert", "tiny-xlmr"}) {
    const RunResult r = run_stoke("tokenize --quiet --no-truncation --model " + model(name) + " --input " +
                                  test::fixture("golden/texts.jsonl").string());
    ASSERT_EQ(r.status, 0) << r.err;
    const auto rows = jsonl(r.out);
    const auto golden = jsonl(read_file(test::fixture("golden/" + name + ".tokens.jsonl")));
    ASSERT_EQ(rows.size(), golden.size());
    for (size_t i = 0; i < rows.size(); ++i) {
      EXPECT_EQ(rows[i]["ids"], golden[i]["ids"]) << name << " text " << i;
      EXPECT_EQ(rows[i]["tokens"], golden[i]["tokens"]) << name << " text " << i;
      EXPECT_FALSE(rows[i].contains("type_ids"));
    }
  }
}

TEST(Cli, TokenizeTruncatesToTheResolvedMaxLengthAndReportsIt) {
  const RunResult r = run_stoke("tokenize --model " + model("tiny-bert") + " --input " +
                                test::fixture("golden/texts.jsonl").string());
  ASSERT_EQ(r.status, 0) << r.err;
  for (const auto& row : jsonl(r.out)) EXPECT_LE(row["ids"].size(), 128u);
  EXPECT_NE(r.err.find("truncated"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("max_seq_length"), std::string::npos) << r.err;
}

TEST(Cli, PairsStdinStdoutFieldsAndConfig) {
  const fs::path dir = test::scratch_dir("cli-pairs");
  std::ofstream(dir / "in.jsonl") << R"({"q": "first text", "d": "second one"})" << "\n"
                                  << R"({"q": "alone", "d": null})" << "\n";
  RunResult r = run_stoke("tokenize --quiet --model " + model("tiny-bert") +
                              " --input - --text-field q --pair-field d",
                          (dir / "in.jsonl").string());
  ASSERT_EQ(r.status, 0) << r.err;
  auto rows = jsonl(r.out);
  ASSERT_EQ(rows.size(), 2u);
  ASSERT_TRUE(rows[0].contains("type_ids"));
  EXPECT_EQ(rows[0]["type_ids"].size(), rows[0]["ids"].size());
  EXPECT_EQ(rows[0]["type_ids"].back(), 1);
  EXPECT_FALSE(rows[1].contains("type_ids"));
  EXPECT_FALSE(rows[0].contains("id"));

  // --id-field copies each record's id into its output line.
  std::ofstream(dir / "ids.jsonl") << R"({"text": "a", "key": "doc-1"})" << "\n" << R"({"text": "b", "key": 7})" << "\n";
  r = run_stoke("tokenize --quiet --model " + model("tiny-bert") + " --input " + (dir / "ids.jsonl").string() +
                " --id-field key");
  ASSERT_EQ(r.status, 0) << r.err;
  rows = jsonl(r.out);
  EXPECT_EQ(rows[0]["id"], "doc-1");
  EXPECT_EQ(rows[1]["id"], 7);

  // --config supplies flags; the command line wins over it.
  std::ofstream(dir / "cfg.json") << R"({"max-length": 4, "--quiet": true, "text-field": "q"})";
  r = run_stoke("tokenize --model " + model("tiny-bert") + " --input " + (dir / "in.jsonl").string() +
                " --config " + (dir / "cfg.json").string());
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.err, "");  // quiet came from the config
  EXPECT_EQ(jsonl(r.out)[0]["ids"].size(), 4u);
  r = run_stoke("tokenize --model " + model("tiny-bert") + " --input " + (dir / "in.jsonl").string() +
                " --config " + (dir / "cfg.json").string() + " --max-length 6");
  EXPECT_EQ(jsonl(r.out)[0]["ids"].size(), 6u);
  std::ofstream(dir / "bad.json") << R"({"max-lenght": 4})";
  r = run_stoke("tokenize --model " + model("tiny-bert") + " --config " + (dir / "bad.json").string());
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("max-lenght"), std::string::npos) << r.err;
}

TEST(Cli, OutputFileAndTrace) {
  const fs::path dir = test::scratch_dir("cli-output");
  const RunResult r = run_stoke("tokenize --quiet --model " + model("tiny-xlmr") + " --input " +
                                test::fixture("golden/texts.jsonl").string() + " --output " +
                                (dir / "t.jsonl").string() + " --trace " + (dir / "trace.json").string());
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(jsonl(read_file(dir / "t.jsonl")).size(), 66u);
  const json trace = json::parse(read_file(dir / "trace.json"));
  std::set<std::string> names;
  for (const auto& e : trace["traceEvents"]) names.insert(e["name"].get<std::string>());
  EXPECT_TRUE(names.count("read") && names.count("tokenize") && names.count("write")) << trace.dump();
  for (const auto& entry : fs::directory_iterator(dir))
    EXPECT_EQ(entry.path().filename().string().find("tmp"), std::string::npos) << entry.path();
}

TEST(Cli, BadRecordNamesFileLineAndFieldAndLeavesNoOutput) {
  const fs::path dir = test::scratch_dir("cli-bad");
  std::ofstream(dir / "in.jsonl") << R"({"text": "fine"})" << "\n" << R"({"text": 42})" << "\n";
  RunResult r = run_stoke("tokenize --model " + model("tiny-bert") + " --input " + (dir / "in.jsonl").string() +
                          " --output " + (dir / "out.jsonl").string());
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(count_lines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("in.jsonl:2"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("\"text\""), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir / "out.jsonl"));
  std::ofstream(dir / "broken.jsonl") << "{\"text\": \"unterminated\n";
  r = run_stoke("tokenize --model " + model("tiny-bert") + " --input " + (dir / "broken.jsonl").string());
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("broken.jsonl:1"), std::string::npos) << r.err;
}

TEST(Cli, UserErrorsAreOneLineAndExitOne) {
  const std::vector<std::string> bad = {
      "tokenize --model " + model("tiny-bert") + " --frobnicate",
      "tokenize --model " + model("tiny-bert") + " --max-length 129",
      "tokenize --model " + model("tiny-bert") + " --device gpu",
      "tokenize --model " + model("tiny-bert") + " --precision f8",
      "tokenize --model /no/such/model",
      "tokenize",
      "inspect /no/such/path",
      "inspect " + test::fixture("golden/texts.jsonl").string(),
      "frobnicate",
      "",
  };
  for (const auto& args : bad) {
    const RunResult r = run_stoke(args);
    EXPECT_EQ(r.status, 1) << args << "\n" << r.err;
    EXPECT_EQ(count_lines(r.err), 1) << args << "\n" << r.err;
  }
}

TEST(Cli, HelpListsEveryFlagWithItsDefault) {
  RunResult r = run_stoke("--help");
  EXPECT_EQ(r.status, 0);
  EXPECT_NE(r.out.find("tokenize"), std::string::npos);
  EXPECT_NE(r.out.find("inspect"), std::string::npos);
  r = run_stoke("tokenize --help");
  EXPECT_EQ(r.status, 0);
  for (const char* flag : {"--model", "--input TEXT=-", "--text-field TEXT=text", "--pair-field TEXT=text_pair",
                           "--id-field", "--max-length", "--workers INT=0", "--config", "--trace",
                           "--output TEXT=-", "--no-truncation", "--on-error TEXT=stop"})
    EXPECT_NE(r.out.find(flag), std::string::npos) << flag << "\n" << r.out;
  // The device and the token budget are embed's and classify's (test_cli_flags.cc checks every command).
  r = run_stoke("embed --help");
  EXPECT_EQ(r.status, 0);
  for (const char* flag : {"--device TEXT=auto", "--precision TEXT=f32", "--batch-tokens INT=16384",
                           "--num-shards INT|auto=1", "--sort-window INT=65536"})
    EXPECT_NE(r.out.find(flag), std::string::npos) << flag << "\n" << r.out;
  r = run_stoke("inspect --help");
  EXPECT_EQ(r.status, 0);
}

TEST(Cli, InspectDescribesFoldersAndFiles) {
  RunResult r = run_stoke("inspect " + model("tiny-bert"));
  ASSERT_EQ(r.status, 0) << r.err;
  for (const char* want : {"BertForSequenceClassification", "hidden 64", "layers 2", "heads 4", "WordPiece",
                           "vocab size 3000", "pooling mean", "normalize", "bert.embeddings.word_embeddings.weight",
                           "[3000, 64]"})
    EXPECT_NE(r.out.find(want), std::string::npos) << want << "\n" << r.out;
  r = run_stoke("inspect " + model("tiny-xlmr"));
  ASSERT_EQ(r.status, 0) << r.err;
  for (const char* want : {"xlm-roberta", "usable 128", "SentencePiece", "vocab size 4002", "pooling cls"})
    EXPECT_NE(r.out.find(want), std::string::npos) << want << "\n" << r.out;
  r = run_stoke("inspect " + model("tiny-bert") + "/model.safetensors");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("I64"), std::string::npos);
}

TEST(Cli, InspectRefusesBadFilesWithOneLine) {
  const fs::path dir = test::scratch_dir("cli-inspect-bad");
  // A header length far past the end of a 12-byte file.
  std::ofstream(dir / "bad.safetensors", std::ios::binary) << std::string("\xff\x00\x00\x00\x00\x00\x00\x00{}  ", 12);
  RunResult r = run_stoke("inspect " + (dir / "bad.safetensors").string());
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(count_lines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("bad.safetensors"), std::string::npos) << r.err;
  // A model folder whose pytorch_model.bin is not torch.save's zip.
  fs::create_directories(dir / "pickle");
  fs::copy_file(test::fixture("models/tiny-bert/config.json"), dir / "pickle/config.json");
  fs::copy_file(test::fixture("models/tiny-bert/vocab.txt"), dir / "pickle/vocab.txt");
  std::ofstream(dir / "pickle/pytorch_model.bin") << "not really a pickle";
  r = run_stoke("inspect " + (dir / "pickle").string());
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(count_lines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("pytorch_model.bin: no zip end-of-central-directory record"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace stoke
