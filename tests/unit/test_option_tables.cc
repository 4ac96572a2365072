// The option tables (src/jobs/option_table.h): embed's, train's, serve's,
// tune's, doctor's and the common one declare each option once, and every
// interface shows and checks what the table says — `stoke embed --help`
// (train, serve, tune embed|train, doctor [embed|train]) lists every CLI
// entry with its default and no flag a table lacks, each number refuses a
// value out of its range in one line naming flag, value and range, the
// precision's words are one list (--precision, --try-precisions), the README's usage of
// embed, train and serve names only flags their tables have, and
// docs/serve.md's flag table names serve's own options with their defaults.
// (Python's embed_job keywords against the table: tests/python/test_jobs.py.)
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "jobs/common_options.h"
#include "jobs/doctor_job.h"
#include "jobs/embed_job.h"
#include "jobs/precision.h"
#include "jobs/train_job.h"
#include "jobs/tune_job.h"
#include "serve/serve_options.h"
#include "support/fixtures.h"

namespace stoke {
namespace {

// Every CLI entry of `table` on its line of `stoke <command> --help`, with
// its type and its default: "  --batch-tokens INT=16384   Tokens per batch ...".
// `form`: only the entries that form of the command takes (doctor's own
// options under `doctor`, `doctor embed`, `doctor train`).
template <class O>
void expect_help_lists_the_table(const std::string& command, const OptionTable<O>& table, int at_least,
                                 unsigned form = 0) {
  const auto r = test::run_stoke(command + " --help");
  ASSERT_EQ(r.status, 0) << r.err;
  const std::string help = r.out + r.err;
  const O defaults;
  int listed = 0;
  for (const Option<O>& e : table) {
    if (!(e.offer & kOfferCli)) continue;
    if (form != 0 && !job_takes(e, form)) continue;
    size_t at = help.find("  " + e.flag + " ");  // (not a longer flag it begins: --lr-scale, --lr-scale-from)
    if (at == std::string::npos) at = help.find("  " + e.flag + ",");  // with aliases: --train,--input
    if (at == std::string::npos) at = help.find("  " + e.flag + "\n");  // a flag whose help starts on the next line
    ASSERT_NE(at, std::string::npos) << e.flag << " is not in `stoke " << command << " --help`";
    const std::string line = help.substr(at, help.find('\n', at) - at);
    if (e.show && !e.show(defaults).empty()) {
      EXPECT_NE(line.find("=" + e.show(defaults)), std::string::npos)
          << e.flag << ": its default " << e.show(defaults) << " is not shown: " << line;
    }
    if (!e.type_name.empty()) {
      EXPECT_NE(line.find(" " + e.type_name), std::string::npos) << line;
    }
    ++listed;
  }
  EXPECT_GE(listed, at_least) << command;
}

TEST(OptionTables, HelpListsEveryCliEntryWithItsDefault) {
  expect_help_lists_the_table("embed", embed_option_table(), 30);
  expect_help_lists_the_table("train", train_option_table(), 50);
  expect_help_lists_the_table("serve", serve_option_table(), 25);
  expect_help_lists_the_table("tune embed", tune_option_table(), 6);
  expect_help_lists_the_table("tune train", tune_train_option_table(), 3);
  expect_help_lists_the_table("doctor", doctor_option_table(), 2, kDoctorReadsTrace);
  expect_help_lists_the_table("doctor embed", doctor_option_table(), 2, kDoctorProfilesEmbed);
  expect_help_lists_the_table("doctor train", doctor_option_table(), 2, kDoctorProfilesTrain);
}

// The flags `stoke <command> --help` lists (every name of a line, aliases
// too), -h,--help left out.
std::vector<std::string> help_flags(const std::string& command) {
  const auto r = test::run_stoke(command + " --help");
  EXPECT_EQ(r.status, 0) << r.err;
  std::vector<std::string> flags;
  std::istringstream lines(r.out + r.err);
  const std::regex names(R"(^  (?:-h,)?(--[a-z0-9-]+(?:,--[a-z0-9-]+)*))");
  for (std::string line; std::getline(lines, line);) {
    std::smatch m;
    if (!std::regex_search(line, m, names)) continue;
    std::stringstream list(m[1].str());
    for (std::string f; std::getline(list, f, ',');)
      if (f != "--help") flags.push_back(f);
  }
  return flags;
}

// The other way round: each flag a command lists is an entry of its tables,
// the tuned or profiled job's and the command's own (for the forms of
// `tune` and `doctor`, whose own flags were once declared beside the parser).
template <class O>
bool in_table(const OptionTable<O>& table, const std::string& flag, unsigned form = 0) {
  for (const Option<O>& e : table) {
    if (!(e.offer & kOfferCli) || (form != 0 && !job_takes(e, form))) continue;
    if (e.flag == flag || std::find(e.aliases.begin(), e.aliases.end(), flag) != e.aliases.end()) return true;
  }
  return false;
}

TEST(OptionTables, TuneAndDoctorListOnlyTableFlags) {
  const auto expect_from_tables = [](const std::string& command, const std::vector<std::string>& flags,
                                     const auto& from_a_table, size_t at_least) {
    EXPECT_GE(flags.size(), at_least) << command;
    for (const std::string& f : flags) EXPECT_TRUE(from_a_table(f)) << f << " (`stoke " << command << " --help`)";
  };
  expect_from_tables(
      "tune embed", help_flags("tune embed"),
      [](const std::string& f) {
        return in_table(embed_option_table(), f, kEmbedFlags) || in_table(tune_option_table(), f);
      },
      30);
  expect_from_tables(
      "tune train", help_flags("tune train"),
      [](const std::string& f) {
        return in_table(train_option_table(), f, kTrainFlags) || in_table(tune_train_option_table(), f);
      },
      40);
  expect_from_tables(
      "doctor", help_flags("doctor"),
      [](const std::string& f) { return in_table(doctor_option_table(), f, kDoctorReadsTrace); }, 2);
  expect_from_tables(
      "doctor embed", help_flags("doctor embed"),
      [](const std::string& f) {
        return in_table(embed_option_table(), f, kEmbedFlags | kEmbedOutputOptions) ||
               in_table(doctor_option_table(), f, kDoctorProfilesEmbed);
      },
      30);
  expect_from_tables(
      "doctor train", help_flags("doctor train"),
      [](const std::string& f) {
        return in_table(train_option_table(), f, kTrainFlags | kTrainOutputOptions) ||
               in_table(doctor_option_table(), f, kDoctorProfilesTrain);
      },
      40);
  // tune's trials write to temporary folders: no output options there.
  for (const std::string& f : help_flags("tune embed")) EXPECT_NE(f, "--output");
}

// --precision is one enum with one list of words: the table parses the words
// into it and shows it back; --try-precisions refuses in the same words.
TEST(OptionTables, PrecisionIsAnEnumOfOneListOfWords) {
  EmbedOptions o;
  const Option<EmbedOptions>& p = *find_option(embed_option_table(), "--precision");
  EXPECT_EQ(p.show(o), "f32");
  EXPECT_EQ(p.accepted, "f32, bf16, f16, int8");
  for (const auto& [word, value] : precision_words()) {
    p.set(o, word);
    EXPECT_EQ(o.common.precision, value) << word;
    EXPECT_EQ(p.show(o), word);
    EXPECT_EQ(precision_name(value), word);
  }
  EXPECT_EQ(precision_dtype(Precision::bf16), DType::bf16);
  EXPECT_EQ(precision_dtype(Precision::f16), DType::f16);
  EXPECT_EQ(precision_dtype(Precision::int8), DType::f32);  // its linears quantize their input themselves
  try {
    p.set(o, "fp8");
    ADD_FAILURE() << "--precision took fp8";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "--precision \"fp8\": expected f32, bf16, f16 or int8");
    EXPECT_EQ(e.code(), Errc::invalid_argument);
  }
  TuneOptions t;
  const Option<TuneOptions>& tries = *find_option(tune_option_table(), "--try-precisions");
  tries.set(t, "bf16,int8");
  tries.set(t, "f16");
  EXPECT_EQ(t.try_precisions, (std::vector<std::string>{"bf16", "int8", "f16"}));
  try {
    tries.set(t, "bf16,fp8");
    ADD_FAILURE() << "--try-precisions took fp8";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "--try-precisions \"fp8\": expected f32, bf16, f16 or int8");
  }
  // The CLI says the same line, at parse time.
  const auto r = test::run_stoke("tune embed --model " + test::fixture("models/tiny-bert").string() +
                                 " --try-precisions bf16,fp8");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("--try-precisions \"fp8\": expected f32, bf16, f16 or int8"), std::string::npos) << r.err;
}

// tune's and doctor's own numbers keep their ranges: one line naming flag,
// value and range.
TEST(OptionTables, TuneAndDoctorNumbersRefuseValuesOutOfRange) {
  DoctorOptions d;
  try {
    find_option(doctor_option_table(), "--seconds")->set(d, "0");
    ADD_FAILURE() << "--seconds took 0";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "--seconds 0: expected 0 < value <= 86400");
  }
  find_option(doctor_option_table(), "--steps")->set(d, "7");
  EXPECT_EQ(d.steps, 7);
  TuneOptions t;
  try {
    find_option(tune_option_table(), "--seconds-per-trial")->set(t, "3601");
    ADD_FAILURE() << "--seconds-per-trial took 3601";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "--seconds-per-trial 3601: expected 0 < value <= 3600");
  }
  TuneTrainOptions tt;
  try {
    find_option(tune_train_option_table(), "--max-loss-change")->set(tt, "-1");
    ADD_FAILURE() << "--max-loss-change took -1";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "--max-loss-change -1: expected 0 to 1000");
  }
  const auto r = test::run_stoke("doctor train --model " + test::fixture("models/tiny-bert").string() + " --steps 0");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("--steps 0: expected 1 to 1000000"), std::string::npos) << r.err;
}

// Python names unique; every number refuses a value below its range and a
// value that is not a number, in one line naming the flag; flags take only
// true/false words.
template <class O>
void expect_entries_refuse_bad_values(const OptionTable<O>& table) {
  std::set<std::string> python;
  for (const Option<O>& e : table) {
    if (e.offer & kOfferPython) {
      EXPECT_TRUE(python.insert(e.python_name()).second) << e.python_name() << " twice";
    }
    O o;
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
    if (e.kind == OptionKind::real) {
      EXPECT_THROW(e.set(o, "nan"), Error) << e.flag;
    }
    if (e.kind == OptionKind::flag) {
      EXPECT_THROW(e.set(o, "maybe"), Error) << e.flag;
    }
  }
}

TEST(OptionTables, NamesAreUniqueAndNumbersRefuseValuesOutOfRange) {
  expect_entries_refuse_bad_values(embed_option_table());
  expect_entries_refuse_bad_values(train_option_table());
  expect_entries_refuse_bad_values(serve_option_table());
  expect_entries_refuse_bad_values(tune_option_table());
  expect_entries_refuse_bad_values(tune_train_option_table());
  expect_entries_refuse_bad_values(doctor_option_table());
  EmbedOptions o;
  find_option(embed_option_table(), "--batch-tokens")->set(o, "+512");
  EXPECT_EQ(o.common.batch_tokens, 512);
  find_option(embed_option_table(), "shard_index")->set(o, "auto");
  EXPECT_TRUE(o.shard_index_auto);
  find_option(embed_option_table(), "--no-normalize")->set(o, "true");
  EXPECT_EQ(o.normalize, std::optional<bool>(false));
  TrainOptions t;
  find_option(train_option_table(), "--batch-size")->set(t, "auto");
  EXPECT_TRUE(t.batch_size_auto);
  find_option(train_option_table(), "--batch-size")->set(t, "16");
  EXPECT_FALSE(t.batch_size_auto);
  EXPECT_EQ(t.batch_size, 16);
  // Words become the enums train/ names them with, parsed once, here.
  find_option(train_option_table(), "--schedule")->set(t, "cosine");
  EXPECT_EQ(t.schedule, train::Schedule::cosine);
  find_option(train_option_table(), "--eval-strategy")->set(t, "epoch");
  EXPECT_EQ(t.eval_strategy, std::optional<train::EvalStrategy>(train::EvalStrategy::epoch));
  find_option(train_option_table(), "--metric")->set(t, "eval_macro_f1");
  EXPECT_EQ(t.metric, train::EvalMetric::macro_f1);
  find_option(train_option_table(), "--lr-scale")->set(t, "sqrt");
  EXPECT_EQ(t.lr_scale, train::LrScaling::sqrt);
  find_option(train_option_table(), "--on-error")->set(t, "skip");
  EXPECT_TRUE(t.skip_bad_records);
  find_option(train_option_table(), "--memory-budget")->set(t, "512M");
  EXPECT_EQ(t.memory_budget, std::optional<int64_t>(512LL << 20));
  EXPECT_EQ(find_option(train_option_table(), "--schedule")->show(t), "cosine");
  EXPECT_THROW(find_option(train_option_table(), "--memory-budget")->set(t, "8X"), Error);
  EXPECT_THROW(find_option(train_option_table(), "--batch-size")->set(t, "0"), Error);
  find_option(train_option_table(), "--dropout")->set(t, "0.25");
  EXPECT_EQ(t.dropout, std::optional<double>(0.25));
  EXPECT_THROW(find_option(train_option_table(), "--dropout")->set(t, "1"), Error);  // below 1
  find_option(train_option_table(), "--resume")->set(t, "");
  EXPECT_TRUE(t.resume);
  // Words are checked when given, in the words of the later checks.
  try {
    find_option(train_option_table(), "--schedule")->set(t, "triangle");
    ADD_FAILURE() << "--schedule took triangle";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "--schedule \"triangle\": expected linear, constant or cosine");
  }
  try {
    find_option(embed_option_table(), "on_error")->set(o, "later");
    ADD_FAILURE() << "--on-error took later";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "--on-error \"later\": expected stop or skip");
  }
}

// serve's words and numbers are typed as they are read: --model-kind is the
// kind ServedModel runs (auto: unset, decided from the folder), the timeouts
// are above 0.
TEST(OptionTables, ServesOptionsAreTyped) {
  ServeOptions o;
  const OptionTable<ServeOptions>& t = serve_option_table();
  EXPECT_EQ(find_option(t, "--model-kind")->show(o), "auto");
  find_option(t, "--model-kind")->set(o, "reranker");
  EXPECT_EQ(o.model_kind, std::optional<serve::ModelKind>(serve::ModelKind::reranker));
  EXPECT_EQ(find_option(t, "--model-kind")->show(o), "reranker");
  find_option(t, "--model-kind")->set(o, "auto");
  EXPECT_EQ(o.model_kind, std::nullopt);
  try {
    find_option(t, "--model-kind")->set(o, "ranker");
    ADD_FAILURE() << "--model-kind took ranker";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "--model-kind \"ranker\": expected auto, embedding, classifier or reranker");
  }
  find_option(t, "--port")->set(o, "0");
  EXPECT_EQ(o.port, 0);
  EXPECT_THROW(find_option(t, "--port")->set(o, "65536"), Error);
  EXPECT_THROW(find_option(t, "--drain-timeout")->set(o, "0"), Error);
  find_option(t, "--auto-truncate")->set(o, "true");
  EXPECT_TRUE(o.auto_truncate);
  // The common options serve takes are there, and only those (its texts come in requests).
  EXPECT_NE(find_option(t, "--batch-tokens"), nullptr);
  EXPECT_EQ(find_option(t, "--text-field"), nullptr);
  EXPECT_EQ(find_option(t, "--input"), nullptr);
  EXPECT_EQ(find_option(t, "--stop-timeout"), nullptr);
}

// The flags of the README's usage block of `stoke <command>` (up to the next
// command's block).
std::vector<std::string> readme_usage_flags(const std::string& command, const std::string& next) {
  std::ifstream in(test::source_dir() / "README.md");
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string readme = ss.str();
  const size_t start = readme.find("    stoke " + command + " ");
  if (start == std::string::npos) return {};
  const size_t end = readme.find("    stoke " + next, start);
  const std::string usage = readme.substr(start, end - start);
  const std::regex flag("--[a-z0-9-]+");
  std::vector<std::string> flags;
  for (auto it = std::sregex_iterator(usage.begin(), usage.end(), flag); it != std::sregex_iterator(); ++it)
    flags.push_back(it->str());
  return flags;
}

TEST(OptionTables, TheReadmesUsageNamesOnlyTableFlags) {
  const auto embed = readme_usage_flags("embed", "verify");
  EXPECT_GE(embed.size(), 15u);
  for (const std::string& f : embed)
    EXPECT_NE(find_option(embed_option_table(), f), nullptr) << f << " (README) is not an embed option";
  const auto train = readme_usage_flags("train", "doctor");
  EXPECT_GE(train.size(), 20u);
  for (const std::string& f : train)
    EXPECT_NE(find_option(train_option_table(), f), nullptr) << f << " (README) is not a train option";
  const auto serve = readme_usage_flags("serve", "--help");
  EXPECT_GE(serve.size(), 5u);
  for (const std::string& f : serve)
    EXPECT_NE(find_option(serve_option_table(), f), nullptr) << f << " (README) is not a serve option";
}

// docs/serve.md's "Flags" table: "| `--port` | 8080 | TCP port; ... |", a row
// per flag or a few flags. Each row's flags and its default cell.
std::vector<std::pair<std::vector<std::string>, std::string>> serve_doc_rows() {
  std::ifstream in(test::source_dir() / "docs" / "serve.md");
  std::vector<std::pair<std::vector<std::string>, std::string>> rows;
  const std::regex flag("--[a-z0-9-]+");
  bool in_flags = false;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("## ", 0) == 0) in_flags = line == "## Flags";
    if (!in_flags || line.rfind("| `--", 0) != 0) continue;
    const size_t second = line.find(" | ");
    const size_t third = line.find(" | ", second + 3);
    const std::string flags = line.substr(2, second - 2);
    std::string cell = line.substr(second + 3, third - second - 3);
    cell.erase(std::remove(cell.begin(), cell.end(), '`'), cell.end());
    std::vector<std::string> names;
    for (auto it = std::sregex_iterator(flags.begin(), flags.end(), flag); it != std::sregex_iterator(); ++it)
      names.push_back(it->str());
    rows.emplace_back(names, cell);
  }
  return rows;
}

TEST(OptionTables, ServesDocsNameItsOptionsWithTheirDefaults) {
  const auto rows = serve_doc_rows();
  ASSERT_GE(rows.size(), 15u);
  std::set<std::string> documented;
  for (const auto& [flags, cell] : rows)
    for (const std::string& f : flags) {
      EXPECT_NE(find_option(serve_option_table(), f), nullptr) << f << " (docs/serve.md) is not a serve option";
      documented.insert(f);
    }
  // Serve's own options (the common ones are documented as embed's): each
  // has a row, and a single flag's row says the default the table shows.
  const ServeOptions defaults;
  for (const Option<ServeOptions>& e : serve_option_table()) {
    if (find_option(common_option_table(), e.flag) != nullptr) continue;
    EXPECT_TRUE(documented.count(e.flag)) << e.flag << " has no row in docs/serve.md";
    const std::string shown = e.show ? e.show(defaults) : "";
    if (shown.empty()) continue;
    for (const auto& [flags, cell] : rows)
      if (flags == std::vector<std::string>{e.flag}) {
        EXPECT_TRUE(cell == shown || cell.rfind(shown + " ", 0) == 0)
            << e.flag << ": docs/serve.md says the default is \"" << cell << "\", the table " << shown;
      }
  }
}

}  // namespace
}  // namespace stoke
