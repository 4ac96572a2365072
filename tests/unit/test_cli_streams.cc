// Inputs that are not regular files: embed reads a FIFO, /dev/stdin and `-`
// like the other commands (the same vectors as from the file; the manifest's
// fingerprint is taken as the bytes stream by), says such a run cannot be
// resumed, and refuses --resume on one. A missing --input with a terminal on
// stdin is an error, not a silent wait; an input without records is a
// warning.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "core/file_util.h"
#include "core/sha256.h"
#include "support/fixtures.h"

namespace stoke {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using test::RunResult;
using test::run_stoke;

std::string model() { return test::fixture("models/tiny-bert").string(); }

fs::path texts(const fs::path& dir) {
  const fs::path in = dir / "in.jsonl";
  std::ofstream(in) << R"({"text": "a first text"})" << "\n"
                    << R"({"text": "and a second, somewhat longer one"})" << "\n"
                    << R"({"text": "third"})" << "\n";
  return in;
}

std::string embed(const fs::path& out, const std::string& input) {
  return "embed --quiet --device cpu --model " + model() + " --input " + input + " --output " + out.string();
}

// Runs a shell command line (bash: process substitution) with `stoke` in it
// replaced by the built binary; stdout and stderr captured.
RunResult run_shell(const std::string& line) {
  std::string cmd = line;
  for (size_t at; (at = cmd.find("STOKE")) != std::string::npos;) cmd.replace(at, 5, test::stoke_binary().string());
  return test::run_command("bash -c '" + cmd + "'");
}

TEST(CliStreams, EmbedReadsFifosPipesAndProcessSubstitutionLikeTheFile) {
  const fs::path dir = test::scratch_dir("cli-streams-fifo");
  const fs::path in = texts(dir);
  const RunResult ref = run_stoke(embed(dir / "ref", in.string()));
  ASSERT_EQ(ref.status, 0) << ref.err;
  const fs::path fifo = dir / "texts.fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);

  struct Case {
    std::string name, line;
  } cases[] = {
      // A named FIFO, written by a process beside stoke (its timeout ends it
      // should stoke never open the FIFO).
      {"fifo", "timeout 60 cat " + in.string() + " > " + fifo.string() + " & STOKE " +
                   embed(dir / "fifo", fifo.string())},
      {"process-substitution", "STOKE " + embed(dir / "process-substitution", "<(cat " + in.string() + ")")},
      {"dev-stdin", "cat " + in.string() + " | STOKE " + embed(dir / "dev-stdin", "/dev/stdin")},
      {"dash", "cat " + in.string() + " | STOKE " + embed(dir / "dash", "-")},
      // stdin redirected from a named FIFO whose writer is gone by the time
      // stoke starts: /dev/stdin must be read, not opened again (an open
      // would wait for a writer for ever; the timeout turns that into 124).
      {"fifo-as-dev-stdin", "cat " + in.string() + " > " + fifo.string() + " & timeout 30 STOKE " +
                                embed(dir / "fifo-as-dev-stdin", "/dev/stdin") + " < " + fifo.string()},
  };
  for (const Case& c : cases) {
    const fs::path out = dir / c.name;
    const RunResult r = run_shell(c.line);
    ASSERT_EQ(r.status, 0) << c.name << ": " << r.err;
    EXPECT_EQ(read_file(out / "embeddings-00000.npy"), read_file(dir / "ref" / "embeddings-00000.npy")) << c.name;
    EXPECT_EQ(read_file(out / "ids-00000.jsonl"), read_file(dir / "ref" / "ids-00000.jsonl")) << c.name;
    const json m = json::parse(read_file(out / "manifest.json"));
    EXPECT_EQ(m["input"]["size"], fs::file_size(in)) << c.name;
    EXPECT_EQ(m["input"]["sha256"], sha256_file(in)) << c.name;
    EXPECT_NE(r.err.find("cannot be resumed"), std::string::npos) << c.name << ": " << r.err;
  }
  // The note is for streams only.
  EXPECT_EQ(ref.err.find("cannot be resumed"), std::string::npos) << ref.err;
}

TEST(CliStreams, ResumeNeedsARegularFile) {
  const fs::path dir = test::scratch_dir("cli-streams-resume");
  const fs::path fifo = dir / "texts.fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const RunResult r = run_stoke(embed(dir / "out", fifo.string()) + " --resume");
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.err, "stoke: error: --resume needs a regular --input file: " + fifo.string() +
                       " is a stream, which cannot be read again to check it against what the first run read\n");
  const RunResult s = run_stoke(embed(dir / "out", "-") + " --resume");
  EXPECT_EQ(s.status, 1);
  EXPECT_NE(s.err.find("--resume needs a regular --input file: stdin is a stream"), std::string::npos) << s.err;
}

TEST(CliStreams, MissingInputOnATerminalIsAnError) {
  const int master = ::posix_openpt(O_RDWR | O_NOCTTY);
  ASSERT_GE(master, 0);
  ASSERT_EQ(::grantpt(master), 0);
  ASSERT_EQ(::unlockpt(master), 0);
  const std::string terminal = ::ptsname(master);
  const fs::path dir = test::scratch_dir("cli-streams-tty");
  for (const std::string& cmd : {std::string("tokenize"), std::string("classify"), "embed --output " + (dir / "out").string()}) {
    // The timeout ends a run that waits on the terminal (what this test forbids).
    const RunResult r = run_stoke(cmd + " --quiet --model " + model(), terminal, "timeout 30");
    EXPECT_EQ(r.status, 1) << cmd;
    EXPECT_EQ(r.err, "stoke: error: --input is required (or pipe texts to stdin)\n") << cmd;
  }
  ::close(master);
}

TEST(CliStreams, AnEmptyInputIsAWarning) {
  const fs::path dir = test::scratch_dir("cli-streams-empty");
  std::ofstream(dir / "empty.jsonl").flush();
  const std::string in = (dir / "empty.jsonl").string();
  const std::string warning = "stoke: warning: " + in + " holds no records: nothing was done\n";
  const RunResult t = run_stoke("tokenize --quiet --model " + model() + " --input " + in);
  EXPECT_EQ(t.status, 0) << t.err;
  EXPECT_EQ(t.err, warning);
  const RunResult c = run_stoke("classify --quiet --model " + model() + " --input " + in);
  EXPECT_EQ(c.status, 0) << c.err;
  EXPECT_EQ(c.err, warning);
  const RunResult e = run_stoke(embed(dir / "out", in));
  EXPECT_EQ(e.status, 0) << e.err;
  EXPECT_EQ(e.err, warning);
  const RunResult s = run_stoke("tokenize --quiet --model " + model(), "/dev/null");
  EXPECT_EQ(s.status, 0) << s.err;
  EXPECT_EQ(s.err, "stoke: warning: stdin holds no records: nothing was done\n");
}

}  // namespace
}  // namespace stoke
