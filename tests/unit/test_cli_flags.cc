// What the command line accepts (DESIGN "Conventions every job shares",
// RELIABILITY 16): every numeric flag is read as a signed number and refused
// outside its range in one line naming flag, value and range (from the command
// line and from --config alike); thread counts are capped; each command lists
// exactly the shared flags its job uses, every flag its --help lists is
// accepted, and the defaults the docs quote are the ones --help shows. A flag
// a command does not have, or a misspelled command, is one `stoke: error:`
// line saying what to type instead (the names other tools use included).
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "core/file_util.h"
#include "support/fixtures.h"

namespace stoke {
namespace {

namespace fs = std::filesystem;
using test::RunResult;
using test::run_stoke;

std::string model(const std::string& name) { return test::fixture("models/" + name).string(); }

// ---- numbers ---------------------------------------------------------------

struct Refusal {
  std::string args;  // after `stoke`
  std::string line;  // the whole stderr line, without "stoke: " and the newline
};

TEST(CliFlags, NegativeAndOutOfRangeNumbersAreRefusedInOneLine) {
  const std::vector<Refusal> cases = {
      {"embed --num-shards -2", "--num-shards -2: expected 1 to 1000000 (or auto)"},
      {"embed --shard-index 3 --num-shards 0", "--num-shards 0: expected 1 to 1000000 (or auto)"},
      {"embed --shard-index -1", "--shard-index -1: expected 0 to 999999 (or auto)"},
      {"embed --shard-size -3", "--shard-size -3: expected 1 to 100000000"},
      {"embed --sort-window -1", "--sort-window -1: expected 1 to 16777216"},
      {"embed --dimensions -4", "--dimensions -4: expected 0 to 1048576"},
      {"embed --max-batch-size 0", "--max-batch-size 0: expected 1 to 1048576"},
      {"embed --batch-tokens -1", "--batch-tokens -1: expected 1 to 16777216"},
      {"embed --batch-tokens 18446744073709551615", "--batch-tokens 18446744073709551615: expected 1 to 16777216"},
      {"embed --max-length 0", "--max-length 0: expected 1 to 1048576"},
      {"embed --num-shards 2x", "--num-shards \"2x\": expected a whole number, 1 to 1000000 (or auto)"},
      {"classify --max-batch-size -1", "--max-batch-size -1: expected 1 to 1048576"},
      {"tokenize --max-length -1", "--max-length -1: expected 1 to 1048576"},
      {"train --max-steps -5", "--max-steps -5: expected 1 to 1000000000"},
      {"train --max-steps 0", "--max-steps 0: expected 1 to 1000000000"},
      {"train --epochs 0", "--epochs 0: expected 1 to 1000000"},
      {"train --batch-size -5", "--batch-size -5: expected 1 to 1048576 (or auto)"},
      {"train --grad-accum 0", "--grad-accum 0: expected 1 to 65536"},
      {"train --seed -1", "--seed -1: expected 0 to 9223372036854775807"},
      {"train --log-every 0", "--log-every 0: expected 1 to 1000000000"},
      {"train --save-every -1", "--save-every -1: expected 0 to 1000000000"},
      {"train --lr -1", "--lr -1: expected 0 < value <= 10"},
      {"train --lr 0", "--lr 0: expected 0 < value <= 10"},
      {"train --lr nan", "--lr \"nan\": expected a number, 0 < value <= 10"},
      {"train --dropout 1", "--dropout 1: expected 0 <= value < 1"},
      {"train --warmup-ratio 2", "--warmup-ratio 2: expected 0 to 1"},
      {"train --num-labels -2", "--num-labels -2: expected 0 to 1048576"},
      {"doctor embed --seconds 0", "--seconds 0: expected 0 < value <= 86400"},
      {"doctor train --steps -1", "--steps -1: expected 1 to 1000000"},
      {"tune embed --seconds-per-trial -1", "--seconds-per-trial -1: expected 0 < value <= 3600"},
      {"tune train --steps-per-trial 0", "--steps-per-trial 0: expected 1 to 1000000"},
  };
  for (const Refusal& c : cases) {
    const RunResult r = run_stoke(c.args);
    EXPECT_EQ(r.status, 1) << c.args;
    EXPECT_EQ(r.err, "stoke: error: " + c.line + "\n") << c.args;
    EXPECT_EQ(r.out, "") << c.args;
  }
}

// --num-shards 0 is the count's fault, not the index's.
TEST(CliFlags, ZeroTasksBlamesNumShards) {
  const RunResult r = run_stoke("embed --num-shards 0");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("--num-shards 0"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("--shard-index"), std::string::npos) << r.err;
}

TEST(CliFlags, ConfigFileNumbersAreCheckedTheSameWay) {
  const fs::path dir = test::scratch_dir("cli-flags-config");
  std::ofstream(dir / "c.json") << R"({"num-shards": -2})";
  const RunResult r = run_stoke("embed --config " + (dir / "c.json").string());
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("--num-shards -2: expected 1 to 1000000"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find((dir / "c.json").string()), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;

  std::ofstream(dir / "w.json") << R"({"workers": 100000})";
  const RunResult w = run_stoke("tokenize --config " + (dir / "w.json").string());
  EXPECT_EQ(w.status, 1);
  EXPECT_NE(w.err.find("--workers 100000: expected 0 to"), std::string::npos) << w.err;
}

TEST(CliFlags, WorkersAreCappedByTheCores) {
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const int cap = std::min(4 * cores, 256);
  const RunResult r = run_stoke("tokenize --workers 100000");
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.err.rfind("stoke: error: --workers 100000: expected 0 to " + std::to_string(cap) + " (at most 4 per core",
                        0),
            0u)
      << r.err;
  EXPECT_NE(r.err.find("this machine has " + std::to_string(cores)), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  for (const char* cmd : {"embed", "classify", "train", "tune embed"}) {
    const std::string flag = std::string(cmd) == "tune embed" ? "--max-workers" : "--workers";
    const RunResult c = run_stoke(std::string(cmd) + " " + flag + " " + std::to_string(cap + 1));
    EXPECT_EQ(c.status, 1) << cmd;
    EXPECT_NE(c.err.find(flag + " " + std::to_string(cap + 1) + ": expected 0 to " + std::to_string(cap)),
              std::string::npos)
        << cmd << ": " << c.err;
  }
  // The cap itself is accepted (the run then fails later, on the missing model).
  const RunResult ok = run_stoke("tokenize --workers " + std::to_string(cap));
  EXPECT_EQ(ok.err.find("--workers"), std::string::npos) << ok.err;
}

// A max length below a single text's special tokens names that minimum, and
// says nothing about pairs when no pair was given.
TEST(CliFlags, MaxLengthOneOnSingleTextsNamesTheMinimum) {
  const fs::path dir = test::scratch_dir("cli-flags-maxlen");
  std::ofstream(dir / "in.jsonl") << R"({"text": "hello world"})" << "\n";
  for (const std::string name : {"tiny-bert", "tiny-xlmr"}) {
    const RunResult r =
        run_stoke("tokenize --quiet --max-length 1 --model " + model(name) + " --input " + (dir / "in.jsonl").string());
    EXPECT_EQ(r.status, 1) << name;
    EXPECT_EQ(r.err, "stoke: error: max length 1 (from --max-length): expected at least 2, the special tokens this "
                     "model adds to a text\n")
        << name;
    EXPECT_EQ(r.err.find("pair"), std::string::npos) << r.err;
  }
  // Two is enough for a single text: the special tokens alone.
  const RunResult two =
      run_stoke("tokenize --quiet --max-length 2 --model " + model("tiny-bert") + " --input " + (dir / "in.jsonl").string());
  EXPECT_EQ(two.status, 0) << two.err;
  EXPECT_NE(two.out.find("\"ids\": [2, 3]"), std::string::npos) << two.out;
}

// ---- which flags each command lists and accepts -----------------------------

struct HelpFlag {
  std::vector<std::string> names;  // "--train", "--input" for an alias
  std::string default_value;       // after "=" in the help line ("" = none shown)
  std::string line;
};

// The flags `stoke <cmd> --help` lists, by every name.
std::map<std::string, HelpFlag> help_flags(const std::string& cmd) {
  const RunResult r = run_stoke(cmd + " --help");
  EXPECT_EQ(r.status, 0) << cmd << ": " << r.err;
  std::map<std::string, HelpFlag> flags;
  std::istringstream in(r.out);
  std::string line;
  bool in_options = false;
  while (std::getline(in, line)) {
    if (line == "Options:") in_options = true;
    if (line == "Subcommands:") in_options = false;
    if (!in_options || line.rfind("  -", 0) != 0) continue;
    std::istringstream words(line);
    std::string names, type;
    words >> names >> type;
    HelpFlag f;
    f.line = line;
    if (const size_t eq = type.find('='); eq != std::string::npos && type.rfind("[", 0) != 0)
      f.default_value = type.substr(eq + 1);
    std::istringstream split(names);
    for (std::string n; std::getline(split, n, ',');)
      if (n.rfind("--", 0) == 0) f.names.push_back(n);
    for (const auto& n : f.names) flags[n] = f;
  }
  return flags;
}

const std::vector<std::string> kCommands = {"tokenize",   "embed",       "classify",   "train",      "doctor",
                                            "doctor embed", "doctor train", "tune embed", "tune train", "inspect",
                                            "verify"};

// The shared flags, and which of them each job uses (DESIGN: tokenize runs no
// model and forms no batches; embed never reads pairs; train reads --train,
// with --input its alias, and has no ids or token budget).
const std::set<std::string> kShared = {"--model",  "--input",   "--input-format", "--text-field", "--pair-field",
                                       "--id-field", "--max-length", "--device",     "--precision",  "--workers",
                                       "--batch-tokens", "--trace", "--quiet",      "--config"};
const std::set<std::string> kBase = {"--model", "--input-format", "--text-field", "--max-length", "--trace", "--quiet",
                                     "--config"};
std::set<std::string> with(std::set<std::string> s, std::initializer_list<const char*> more) {
  for (const char* m : more) s.insert(m);
  return s;
}

TEST(CliFlags, EachCommandListsTheSharedFlagsItsJobUses) {
  const std::set<std::string> tokenize = with(kBase, {"--input", "--pair-field", "--id-field", "--workers"});
  const std::set<std::string> embed =
      with(kBase, {"--input", "--id-field", "--device", "--precision", "--workers", "--batch-tokens"});
  const std::set<std::string> classify = with(embed, {"--pair-field"});
  const std::set<std::string> train = with(kBase, {"--input", "--pair-field", "--device", "--precision", "--workers"});
  const std::map<std::string, std::set<std::string>> want = {
      {"tokenize", tokenize},   {"embed", embed},         {"classify", classify},  {"train", train},
      {"doctor embed", embed},  {"doctor train", train},  {"tune embed", embed},   {"tune train", train}};
  for (const auto& [cmd, shared] : want) {
    std::set<std::string> listed;
    for (const auto& [name, f] : help_flags(cmd))
      if (kShared.count(name)) listed.insert(name);
    EXPECT_EQ(listed, shared) << cmd;
  }
}

TEST(CliFlags, HelpListsWhatTheJobReallyTakes) {
  // train's --input is --train under another name, not a flag of its own.
  for (const char* cmd : {"train", "doctor train", "tune train"}) {
    const auto flags = help_flags(cmd);
    ASSERT_TRUE(flags.count("--train")) << cmd;
    EXPECT_EQ(flags.at("--train").names, (std::vector<std::string>{"--train", "--input"})) << cmd;
    // --max-steps has no numeric default: unset, --epochs decides.
    ASSERT_TRUE(flags.count("--max-steps")) << cmd;
    EXPECT_EQ(flags.at("--max-steps").default_value, "") << flags.at("--max-steps").line;
  }
  // doctor's and tune's runs write to a temporary folder: --output is not required there.
  const auto doctor_embed = help_flags("doctor embed");
  ASSERT_TRUE(doctor_embed.count("--output"));
  EXPECT_EQ(doctor_embed.at("--output").line.find("required"), std::string::npos) << doctor_embed.at("--output").line;
  EXPECT_EQ(doctor_embed.at("--output").line.find("REQUIRED"), std::string::npos);
  EXPECT_NE(help_flags("embed").at("--output").line.find("required"), std::string::npos);
  for (const char* cmd : {"tune embed", "tune train"}) {
    const auto flags = help_flags(cmd);
    for (const char* f : {"--output", "--resume", "--overwrite"}) EXPECT_FALSE(flags.count(f)) << cmd << " " << f;
  }
  for (const char* cmd : {"tokenize", "classify"}) {
    const auto flags = help_flags(cmd);
    EXPECT_TRUE(flags.count("--on-error")) << cmd;
    EXPECT_TRUE(flags.count("--errors")) << cmd;
  }
}

// Every flag a --help lists is one the parser takes ("required ... missing" or
// the job's own error, never "not expected"), and the shared flags a job does
// not use are refused, not ignored.
TEST(CliFlags, EveryListedFlagIsAcceptedAndUnusedOnesAreRefused) {
  std::map<std::string, std::map<std::string, HelpFlag>> help;
  for (const std::string& cmd : kCommands) help[cmd] = help_flags(cmd);
  for (const std::string& cmd : kCommands) {
    // doctor's and tune's subcommands share embed's and train's flags (one
    // function adds both): only their own flags are run again.
    const std::string base = cmd.find(' ') == std::string::npos ? "" : cmd.substr(cmd.find(' ') + 1);
    for (const auto& [name, f] : help[cmd]) {
      if (name == "--help" || name == "--version") continue;
      if (!base.empty() && help[base].count(name) && name != "--quiet") continue;
      const RunResult r = run_stoke(cmd + " " + name);
      EXPECT_EQ(r.err.find("unknown flag"), std::string::npos) << cmd << " " << name << ": " << r.err;
      EXPECT_EQ(r.err.find("unexpected argument"), std::string::npos) << cmd << " " << name << ": " << r.err;
      EXPECT_EQ(r.err.find("internal error"), std::string::npos) << cmd << " " << name << ": " << r.err;
    }
  }
  const std::vector<std::pair<std::string, std::string>> refused = {
      {"tokenize", "--device cpu"},     {"tokenize", "--precision f32"}, {"tokenize", "--batch-tokens 64"},
      {"embed", "--pair-field p"},      {"train", "--id-field id"},       {"train", "--batch-tokens 64"},
      {"tune embed", "--output o"},     {"tune train", "--output o"},     {"doctor embed", "--pair-field p"},
      // serve's texts come in requests: it reads no records from files
      {"serve", "--text-field t"},      {"serve", "--input-format jsonl"}};
  for (const auto& [cmd, flag] : refused) {
    const RunResult r = run_stoke(cmd + " " + flag);
    EXPECT_EQ(r.status, 1) << cmd << " " << flag;
    const std::string name = flag.substr(0, flag.find(' '));
    EXPECT_EQ(r.err.rfind("stoke: error: unknown flag " + name + " for `stoke " + cmd + "`: ", 0), 0u)
        << cmd << " " << flag << ": " << r.err;
  }
}

// ---- flags people type from the tools they know ------------------------------

// The one line for a flag the command does not have (apps/stoke/flag_suggestions.h
// over the parser's own flags of each command): the name stoke uses for what
// sentence-transformers, TEI and the Hugging Face Trainer call it, among the
// flags the command really has; a slip gets "did you mean"; another command's
// flag says which. Never the parser's "The following arguments were not
// expected: 32 --batch-size".
TEST(CliFlags, UnknownFlagsSayWhatToTypeInstead) {
  const std::string batch = "use --max-batch-size (sequences per batch) or --batch-tokens (a token budget per batch)";
  const std::vector<Refusal> cases = {
      {"embed --batch-size 32", "unknown flag --batch-size for `stoke embed`: " + batch},
      {"tune embed --batch-size 32", "unknown flag --batch-size for `stoke tune embed`: " + batch},
      {"doctor embed --batch-size 32", "unknown flag --batch-size for `stoke doctor embed`: " + batch},
      {"serve --batch-size 32", "unknown flag --batch-size for `stoke serve`: " + batch},
      {"tokenize --batch-size 32", "unknown flag --batch-size for `stoke tokenize`: tokenize forms no batches"},
      {"serve --model-id BAAI/bge-small-en-v1.5", "unknown flag --model-id for `stoke serve`: use --model"},
      {"embed --model-id BAAI/bge-small-en-v1.5", "unknown flag --model-id for `stoke embed`: use --model"},
      {"serve --hostname 0.0.0.0", "unknown flag --hostname for `stoke serve`: use --host"},
      {"embed --hostname 0.0.0.0", "unknown flag --hostname for `stoke embed`: stoke calls it --host, a flag of `stoke serve`"},
      {"embed --normalise", "unknown flag --normalise for `stoke embed`: use --normalize"},
      {"serve --max-batch-tokens 16384", "unknown flag --max-batch-tokens for `stoke serve`: use --batch-tokens"},
      {"embed --max-client-batch-size 32", "unknown flag --max-client-batch-size for `stoke embed`: it limits the texts "
                                           "of one request; --max-client-batch-size is a flag of `stoke serve`"},
      {"embed --pooling-mode mean", "unknown flag --pooling-mode for `stoke embed`: use --pooling"},
      {"embed --pooling_mode mean", "unknown flag --pooling_mode for `stoke embed`: use --pooling"},
      {"serve --pooling mean", "unknown flag --pooling for `stoke serve`: the model folder decides how it pools "
                               "(1_Pooling/config.json); --pooling is a flag of `stoke embed`"},
      {"embed --dtype float16", "unknown flag --dtype for `stoke embed`: use --precision (what the model computes in) "
                                "or --output-dtype (what the .npy files hold)"},
      {"serve --dtype float16", "unknown flag --dtype for `stoke serve`: use --precision (what the model computes in)"},
      {"embed --max-seq-length 128", "unknown flag --max-seq-length for `stoke embed`: use --max-length"},
      {"embed --max_seq_length 128", "unknown flag --max_seq_length for `stoke embed`: use --max-length"},
      {"train --output-dir out", "unknown flag --output-dir for `stoke train`: use --output"},
      {"train --output_dir out", "unknown flag --output_dir for `stoke train`: use --output"},
      {"train --num-train-epochs 3", "unknown flag --num-train-epochs for `stoke train`: use --epochs"},
      {"train --learning-rate 2e-5", "unknown flag --learning-rate for `stoke train`: use --lr"},
      {"train --per-device-train-batch-size 16",
       "unknown flag --per-device-train-batch-size for `stoke train`: use --batch-size"},
      {"train --gradient-accumulation-steps 2", "unknown flag --gradient-accumulation-steps for `stoke train`: use "
                                                "--grad-accum"},
      {"train --batch-tokens 64", "unknown flag --batch-tokens for `stoke train`: use --batch-size (examples per "
                                  "micro-batch)"},
      {"train --warmup_ratio 0.1", "unknown flag --warmup_ratio for `stoke train`: it is spelled --warmup-ratio"},
      {"embed --warmup-ratio 0.1", "unknown flag --warmup-ratio for `stoke embed`: --warmup-ratio is a flag of `stoke train`"},
      {"embed --seed 42", "unknown flag --seed for `stoke embed`: nothing in it is random (the same input gives the "
                          "same output); --seed is a flag of `stoke train`"},
      {"embed --batch_tokens 64", "unknown flag --batch_tokens for `stoke embed`: it is spelled --batch-tokens"},
      {"embed --batch_tokens=64", "unknown flag --batch_tokens for `stoke embed`: it is spelled --batch-tokens"},
      {"embed --max-lenght 8", "unknown flag --max-lenght for `stoke embed`: did you mean --max-length?"},
      {"embed --dim 256", "unknown flag --dim for `stoke embed`: did you mean --dimensions?"},
      {"embed --frobnicate", "unknown flag --frobnicate for `stoke embed` (`stoke embed --help` lists its flags)"},
      {"tune embed --output o", "unknown flag --output for `stoke tune embed`: tune's trials write to temporary "
                                "folders; give --output to the job you run with the tuned --config"},
      {"doctor --model m", "unknown flag --model for `stoke doctor`: --model is a flag of `stoke doctor embed` and "
                           "`stoke doctor train` (name the command before its flags)"},
      {"inspect --model-id m", "unknown flag --model-id for `stoke inspect`: it takes the model as its argument: "
                               "`stoke inspect PATH`"},
  };
  for (const Refusal& c : cases) {
    const RunResult r = run_stoke(c.args);
    EXPECT_EQ(r.status, 1) << c.args;
    EXPECT_EQ(r.err, "stoke: error: " + c.line + "\n") << c.args;
    EXPECT_EQ(r.out, "") << c.args;
  }
  // Where the flag exists, it is taken: train's --batch-size gets past the parser.
  const RunResult train = run_stoke("train --batch-size 32");
  EXPECT_EQ(train.err.find("unknown flag"), std::string::npos) << train.err;
}

// A missing value, a missing or misspelled command, a word with no place:
// one `stoke: error:` line each, naming what and where.
TEST(CliFlags, ParseErrorsAreOneErrorLine) {
  const std::vector<Refusal> cases = {
      {"embed --model", "--model needs a value"},
      {"embed --batch-tokens", "--batch-tokens needs a value (a whole number)"},
      {"train --lr", "--lr needs a value (a number)"},
      {"embedd", "unknown command \"embedd\" for `stoke`: did you mean `stoke embed`?"},
      {"tune foo", "unknown command \"foo\" for `stoke tune`: expected embed or train"},
      {"doctor foo", "unknown command \"foo\" for `stoke doctor`: expected embed or train"},
      {"tune", "`stoke tune` needs a command: embed or train"},
      {"", "`stoke` needs a command: tokenize, embed, classify, train, doctor, tune, inspect, verify or serve"},
      {"embed foo", "unexpected argument \"foo\" for `stoke embed` (`stoke embed --help` says what it takes)"},
      {"inspect a b", "unexpected argument \"b\" for `stoke inspect` (`stoke inspect --help` says what it takes)"},
  };
  for (const Refusal& c : cases) {
    const RunResult r = run_stoke(c.args);
    EXPECT_EQ(r.status, 1) << c.args;
    EXPECT_EQ(r.err, "stoke: error: " + c.line + "\n") << c.args;
  }
  // A required argument names itself and says what it is (its help).
  const RunResult verify = run_stoke("verify");
  EXPECT_EQ(verify.status, 1);
  EXPECT_EQ(verify.err.rfind("stoke: error: `stoke verify` needs its folders argument: output folders", 0), 0u)
      << verify.err;
  EXPECT_EQ(std::count(verify.err.begin(), verify.err.end(), '\n'), 1) << verify.err;
}

// A synopsis in README.md or docs/*.md that shows a flag with a number in
// brackets ("[--batch-size 8]") shows its default; it must be the one --help
// shows.
TEST(CliFlags, DocsQuoteTheDefaultsHelpShows) {
  const fs::path source(STOKE_SOURCE_DIR);
  std::vector<fs::path> docs = {source / "README.md"};
  for (const auto& e : fs::directory_iterator(source / "docs"))
    if (e.path().extension() == ".md") docs.push_back(e.path());
  const std::regex command(R"(^\s*stoke (tokenize|embed|classify|train|doctor|tune)( (embed|train))?\b)");
  const std::regex bracket(R"(\[--([a-z-]+) ([0-9][0-9.e+-]*)[\]| ])");
  std::map<std::string, std::map<std::string, HelpFlag>> help;
  size_t checked = 0;
  for (const fs::path& doc : docs) {
    std::istringstream in(read_file(doc));
    std::string line, cmd;
    int line_no = 0;
    while (std::getline(in, line)) {
      ++line_no;
      std::smatch m;
      if (std::regex_search(line, m, command)) {
        cmd = m[1].str() + (m[3].matched ? " " + m[3].str() : "");
      } else if (line.find_first_not_of(' ') == std::string::npos || line.find_first_not_of(' ') < 4 ||
                 line[line.find_first_not_of(' ')] != '[') {
        cmd.clear();  // a synopsis continues on indented lines that start with '['
      }
      if (cmd.empty() || cmd == "doctor" || cmd == "tune") continue;
      if (!help.count(cmd)) help[cmd] = help_flags(cmd);
      for (auto it = std::sregex_iterator(line.begin(), line.end(), bracket); it != std::sregex_iterator(); ++it) {
        const std::string flag = "--" + (*it)[1].str(), value = (*it)[2].str();
        const std::string where = doc.filename().string() + ":" + std::to_string(line_no) + ": stoke " + cmd + " " + flag;
        ASSERT_TRUE(help[cmd].count(flag)) << where << " is not a flag of the command";
        const std::string shown = help[cmd].at(flag).default_value;
        ASSERT_FALSE(shown.empty()) << where << ": --help shows no default";
        EXPECT_DOUBLE_EQ(std::stod(value), std::stod(shown)) << where << " " << value << ", but --help says " << shown;
        ++checked;
      }
    }
  }
  EXPECT_GE(checked, 5u) << "the docs' synopses quote defaults (training.md, doctor.md): the parser found too few";
}

}  // namespace
}  // namespace stoke
