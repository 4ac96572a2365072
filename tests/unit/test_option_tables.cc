// The option tables (src/jobs/option_table.h): embed's and the common one
// declare each option once, and every interface shows and checks what the
// table says — `stoke embed --help` lists every CLI entry with its default,
// each number refuses a value out of its range in one line naming flag,
// value and range, and the README's embed usage names only flags the table
// has. (Python's embed_job keywords against the table: tests/python/test_jobs.py.)
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "jobs/common_options.h"
#include "jobs/embed_job.h"
#include "support/fixtures.h"

namespace stoke {
namespace {

TEST(OptionTables, EmbedHelpListsEveryCliEntryWithItsDefault) {
  const auto r = test::run_stoke("embed --help");
  ASSERT_EQ(r.status, 0) << r.err;
  const std::string help = r.out + r.err;
  const EmbedOptions defaults;
  int listed = 0;
  for (const Option<EmbedOptions>& e : embed_option_table()) {
    if (!(e.offer & kOfferCli)) continue;
    // The flag's line: "  --batch-tokens INT=16384   Tokens per batch ...".
    const size_t at = help.find("  " + e.flag + " ");
    ASSERT_NE(at, std::string::npos) << e.flag << " is not in `stoke embed --help`";
    const std::string line = help.substr(at, help.find('\n', at) - at);
    if (e.show && !e.show(defaults).empty())
      EXPECT_NE(line.find("=" + e.show(defaults)), std::string::npos)
          << e.flag << ": its default " << e.show(defaults) << " is not shown: " << line;
    if (!e.type_name.empty()) EXPECT_NE(line.find(" " + e.type_name), std::string::npos) << line;
    ++listed;
  }
  EXPECT_GE(listed, 30);
}

TEST(OptionTables, NamesAreUniqueAndNumbersRefuseValuesOutOfRange) {
  std::set<std::string> python;
  for (const Option<EmbedOptions>& e : embed_option_table()) {
    if (e.offer & kOfferPython) EXPECT_TRUE(python.insert(e.python_name()).second) << e.python_name() << " twice";
    EmbedOptions o;
    if (e.kind == OptionKind::integer) {
      try {
        e.set(o, "-9223372036854775807");
        ADD_FAILURE() << e.flag << " took a value below its range";
      } catch (const Error& err) {
        EXPECT_EQ(std::string(err.what()).rfind(e.flag + " -9223372036854775807: expected ", 0), 0u) << err.what();
        EXPECT_EQ(err.code(), Errc::invalid_argument);
      }
      try {
        e.set(o, "12x");
        ADD_FAILURE() << e.flag << " took 12x";
      } catch (const Error& err) {
        EXPECT_NE(std::string(err.what()).find("expected a whole number"), std::string::npos) << err.what();
      }
    }
    if (e.kind == OptionKind::real) EXPECT_THROW(e.set(o, "nan"), Error) << e.flag;
    if (e.kind == OptionKind::flag) EXPECT_THROW(e.set(o, "maybe"), Error) << e.flag;
  }
  EmbedOptions o;
  find_option(embed_option_table(), "--batch-tokens")->set(o, "+512");
  EXPECT_EQ(o.common.batch_tokens, 512);
  find_option(embed_option_table(), "shard_index")->set(o, "auto");
  EXPECT_TRUE(o.shard_index_auto);
  find_option(embed_option_table(), "--no-normalize")->set(o, "true");
  EXPECT_EQ(o.normalize, std::optional<bool>(false));
}

TEST(OptionTables, TheReadmesEmbedUsageNamesOnlyTableFlags) {
  std::ifstream in(test::source_dir() / "README.md");
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string readme = ss.str();
  const size_t start = readme.find("    stoke embed ");
  ASSERT_NE(start, std::string::npos);
  const size_t end = readme.find("    stoke verify", start);
  const std::string usage = readme.substr(start, end - start);
  const std::regex flag("--[a-z0-9-]+");
  int seen = 0;
  for (auto it = std::sregex_iterator(usage.begin(), usage.end(), flag); it != std::sregex_iterator(); ++it) {
    EXPECT_NE(find_option(embed_option_table(), it->str()), nullptr) << it->str() << " (README) is not an embed option";
    ++seen;
  }
  EXPECT_GE(seen, 15);
}

}  // namespace
}  // namespace stoke
