// Output paths that exist and are not regular files are written into, never
// replaced (RELIABILITY 14), through the real binary: `--output` of tokenize
// and classify into a FIFO, a character device made for the test, and a
// symlink (as /dev/stdout is); `--trace` through a symlink. Each must still be
// the same file (inode and type) afterwards, with no temp file beside it.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/file_util.h"
#include "support/fifo_reader.h"
#include "support/fixtures.h"

namespace stoke {
namespace {

namespace fs = std::filesystem;

std::string model() { return test::fixture("models/tiny-bert").string(); }

fs::path texts(const fs::path& dir) {
  std::ofstream(dir / "in.jsonl") << R"({"text": "hello world"})" << "\n" << R"({"text": "a second line"})" << "\n";
  return dir / "in.jsonl";
}

std::vector<std::string> names_in(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

TEST(CliOutputInPlace, TokenizeAndClassifyIntoAFifo) {
  const fs::path dir = test::scratch_dir("cli-out-fifo");
  const fs::path input = texts(dir), fifo = dir / "out.fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const auto before = test::identity_of(fifo);
  for (const std::string job : {"tokenize", "classify"}) {
    test::FifoReader reader(fifo);
    const auto r = test::run_stoke(job + " --model " + model() + " --input " + input.string() + " --output " +
                                   fifo.string());
    const std::string got = reader.finish();
    EXPECT_EQ(r.status, 0) << job << ": " << r.err;
    EXPECT_EQ(std::count(got.begin(), got.end(), '\n'), 2) << job << ": " << got;
    EXPECT_EQ(test::identity_of(fifo), before) << job << " replaced the FIFO";
  }
  EXPECT_EQ(names_in(dir), (std::vector<std::string>{"in.jsonl", "out.fifo"}));
}

TEST(CliOutputInPlace, IntoACharacterDevice) {
  const fs::path dir = test::scratch_dir("cli-out-device");
  const fs::path input = texts(dir), dev = dir / "null";
  if (::mknod(dev.c_str(), S_IFCHR | 0666, makedev(1, 3)) != 0)
    GTEST_SKIP() << "mknod of a character device needs root (CI runs as root): " << std::strerror(errno);
  const auto before = test::identity_of(dev);
  const auto r = test::run_stoke("classify --model " + model() + " --input " + input.string() + " --output " +
                                 dev.string() + " --trace " + dev.string());
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(test::identity_of(dev), before);
  EXPECT_EQ(test::identity_of(dev).type, S_IFCHR);
  EXPECT_EQ(names_in(dir), (std::vector<std::string>{"in.jsonl", "null"}));
}

TEST(CliOutputInPlace, ThroughASymlink) {
  const fs::path dir = test::scratch_dir("cli-out-symlink");
  const fs::path input = texts(dir);
  std::ofstream(dir / "target.jsonl") << "an older, longer content that must not survive\n\n\n\n";
  std::ofstream(dir / "trace.json") << "old";
  fs::create_symlink("target.jsonl", dir / "out");
  fs::create_symlink("trace.json", dir / "trace");
  const auto link = test::identity_of(dir / "out"), target = test::identity_of(dir / "target.jsonl");
  const auto trace_link = test::identity_of(dir / "trace");
  const auto r = test::run_stoke("tokenize --model " + model() + " --input " + input.string() + " --output " +
                                 (dir / "out").string() + " --trace " + (dir / "trace").string());
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(test::identity_of(dir / "out"), link);
  EXPECT_EQ(test::identity_of(dir / "target.jsonl"), target);
  EXPECT_EQ(test::identity_of(dir / "trace"), trace_link);
  const std::string out = read_file(dir / "target.jsonl");
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 2) << out;
  EXPECT_TRUE(nlohmann::json::accept(read_file(dir / "trace.json")));
  EXPECT_EQ(names_in(dir), (std::vector<std::string>{"in.jsonl", "out", "target.jsonl", "trace", "trace.json"}));
}

}  // namespace
}  // namespace stoke
