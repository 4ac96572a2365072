// The jobs read every input format through RecordReader: the same texts as
// JSONL, CSV, TSV, plain text and stdin give the same token ids (the JSONL run
// is the reference, itself checked against the HF goldens in test_cli.cc);
// --input-format overrides the file name; a bad record stops the job with one
// "FILE:LINE: message" line and no output.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/file_util.h"
#include "support/fixtures.h"
#include "support/jsonl.h"

namespace stoke {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

using test::RunResult;
using test::run_stoke;

std::string tokenize_args() { return "tokenize --quiet --model " + test::fixture("models/tiny-bert").string(); }

std::vector<json> jsonl(const std::string& text) { return test::jsonl_rows(text); }

std::vector<json> ids_of(const std::vector<json>& rows) {
  std::vector<json> ids;
  for (const auto& r : rows) ids.push_back(r["ids"]);
  return ids;
}

// Texts with what CSV must quote: commas, quotes, a line break; and an empty text.
const std::vector<std::string> kTexts = {"Hello, world", "say \"hi\"", "two\nlines", "", "plain text"};

// Built with append: GCC 12 warns falsely (-Wrestrict) on "literal" + std::to_string(i).
std::string key(size_t i) {
  std::string k = "k";
  k += std::to_string(i);
  return k;
}

std::string csv_quote(const std::string& s, char delim) {
  if (s.find_first_of(std::string("\"\n") + delim) == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

TEST(CliInputFormats, SameIdsFromEveryFormat) {
  const fs::path dir = test::scratch_dir("cli-formats");
  {
    std::ofstream j(dir / "in.jsonl"), c(dir / "in.csv"), t(dir / "in.tsv");
    c << "key,text\r\n";
    t << "text\tkey\n";
    for (size_t i = 0; i < kTexts.size(); ++i) {
      j << json{{"text", kTexts[i]}, {"key", key(i)}}.dump() << "\n";
      c << "k" << i << "," << csv_quote(kTexts[i], ',') << "\r\n";
      t << csv_quote(kTexts[i], '\t') << "\tk" << i << "\n";
    }
  }
  const RunResult ref = run_stoke(tokenize_args() + " --id-field key --input " + (dir / "in.jsonl").string());
  ASSERT_EQ(ref.status, 0) << ref.err;
  const auto ref_rows = jsonl(ref.out);
  ASSERT_EQ(ref_rows.size(), kTexts.size());
  EXPECT_EQ(ref_rows[3]["ids"].size(), 2u);  // the empty text: [CLS] [SEP]

  for (const char* name : {"in.csv", "in.tsv"}) {
    SCOPED_TRACE(name);
    const RunResult r = run_stoke(tokenize_args() + " --id-field key --input " + (dir / name).string());
    ASSERT_EQ(r.status, 0) << r.err;
    const auto rows = jsonl(r.out);
    EXPECT_EQ(ids_of(rows), ids_of(ref_rows));
    ASSERT_EQ(rows.size(), kTexts.size());
    for (size_t i = 0; i < rows.size(); ++i) EXPECT_EQ(rows[i]["id"], key(i));
  }

  // Plain text: one text per line, so the text with a line break is left out here.
  std::vector<json> ref_single;
  {
    std::ofstream t(dir / "in.txt");
    for (size_t i = 0; i < kTexts.size(); ++i) {
      if (kTexts[i].find('\n') != std::string::npos) continue;
      t << kTexts[i] << "\n";
      ref_single.push_back(ref_rows[i]["ids"]);
    }
  }
  RunResult r = run_stoke(tokenize_args() + " --input " + (dir / "in.txt").string());
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(ids_of(jsonl(r.out)), ref_single);

  // stdin has no name: --input-format says what it is.
  r = run_stoke(tokenize_args() + " --input - --input-format csv --id-field key", (dir / "in.csv").string());
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(ids_of(jsonl(r.out)), ids_of(ref_rows));

  // A name that says nothing: --input-format wins.
  fs::copy_file(dir / "in.txt", dir / "texts.dat");
  r = run_stoke(tokenize_args() + " --input-format text --input " + (dir / "texts.dat").string());
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(ids_of(jsonl(r.out)), ref_single);
}

TEST(CliInputFormats, BadCsvRecordStopsWithFileAndLine) {
  const fs::path dir = test::scratch_dir("cli-formats-bad");
  std::ofstream(dir / "in.csv") << "text,label\nfine,1\n\"multi\nline\",2\ntoo,many,fields\n";
  const RunResult r = run_stoke(tokenize_args() + " --input " + (dir / "in.csv").string() + " --output " +
                                (dir / "out.jsonl").string());
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("in.csv:5: expected 2 fields as the header has, found 3"), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_FALSE(fs::exists(dir / "out.jsonl"));
}

TEST(CliInputFormats, UnusableSettingsAreOneLineErrors) {
  const fs::path dir = test::scratch_dir("cli-formats-errors");
  std::ofstream(dir / "in.txt") << "a\n";
  std::ofstream(dir / "in.csv") << "body\nx\n";
  struct Case {
    std::string args, needle;
  };
  for (const Case& c : std::vector<Case>{
           {"--input " + (dir / "in.txt").string() + " --input-format xml", "--input-format \"xml\""},
           {"--input " + (dir / "in.txt").string() + " --id-field id", "--id-field \"id\" cannot be used with plain text"},
           {"--input " + (dir / "in.csv").string(), "has no column \"text\" (--text-field); its columns are: \"body\""},
       }) {
    SCOPED_TRACE(c.args);
    const RunResult r = run_stoke(tokenize_args() + " " + c.args);
    EXPECT_EQ(r.status, 1);
    EXPECT_NE(r.err.find(c.needle), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
}

}  // namespace
}  // namespace stoke
