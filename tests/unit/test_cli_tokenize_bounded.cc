// `stoke tokenize --no-truncation` on a 3 MB unbroken line (XLM-R): the ids
// come from the text's first 1 MiB (SentencePiece's memory stays bounded),
// and the CLI says so on stderr, even with --quiet; a normal text is not
// capped and gets no warning.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "core/file_util.h"
#include "support/fixtures.h"

namespace stoke {
namespace {

TEST(CliTokenizeBounded, NoTruncationSaysATextWasCapped) {
  const std::filesystem::path dir = test::scratch_dir("cli-tokenize-bounded");
  std::string line(3 << 20, 'x');
  for (size_t i = 0; i < line.size(); ++i) line[i] = "abcdefghijklmnopqrstuvwxyz"[(i * 7919) % 26];
  {
    std::ofstream out(dir / "long.jsonl");
    out << nlohmann::json{{"text", line}}.dump() << "\n" << nlohmann::json{{"text", "a short text"}}.dump() << "\n";
  }
  const std::string model = test::fixture("models/tiny-xlmr").string();
  const auto r = test::run_stoke("tokenize --model " + model + " --input " + (dir / "long.jsonl").string() +
                                 " --no-truncation --quiet --output " + (dir / "ids.jsonl").string());
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("warning: texts over 1 MiB were tokenized from their first 1 MiB only (1 of them)"),
            std::string::npos)
      << r.err;
  std::ifstream in(dir / "ids.jsonl");
  std::string first, second;
  std::getline(in, first);
  std::getline(in, second);
  EXPECT_GT(nlohmann::json::parse(first)["ids"].size(), 1000u);  // many ids: no truncation at max length
  EXPECT_LT(nlohmann::json::parse(second)["ids"].size(), 20u);  // the short text whole
  // A normal input: no warning.
  const auto normal = test::run_stoke("tokenize --model " + model + " --input " +
                                      test::fixture("golden/texts.jsonl").string() + " --no-truncation --quiet");
  ASSERT_EQ(normal.status, 0) << normal.err;
  EXPECT_EQ(normal.err.find("warning"), std::string::npos) << normal.err;
}

}  // namespace
}  // namespace stoke
