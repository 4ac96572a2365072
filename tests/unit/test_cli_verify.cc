// `stoke verify DIR...` from the command line: exit status 0 with one summary
// line on stdout for a good set; exit status 1 with one `stoke: verify:` line
// per problem on stderr otherwise.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <fstream>

#include "core/file_util.h"
#include "support/embed_output.h"
#include "support/fixtures.h"

namespace stoke {
namespace {

namespace fs = std::filesystem;

using test::RunResult;
using test::run_stoke;

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += " " + x;
  return s;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t nl; (nl = text.find('\n', start)) != std::string::npos; start = nl + 1)
    out.push_back(text.substr(start, nl - start));
  return out;
}

TEST(CliVerify, GoodSetExitsZeroWithOneSummaryLine) {
  test::EmbedJob job;
  job.records = 10000;
  job.count = 4;
  job.shard_size = 1000;
  job.bad = {5, 9998};
  const auto folders = test::write_job(test::scratch_dir("cli-verify-good"), job);
  const RunResult r = run_stoke("verify" + join(folders));
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out,
            "verified 4 folders (4 tasks): 10000 records, 9998 rows, 2 skipped — complete, consistent, intact\n");
  EXPECT_EQ(r.err, "");

  test::EmbedJob one;
  one.count = 1;
  one.bad = {};
  const auto single = test::write_job(test::scratch_dir("cli-verify-one"), one);
  const RunResult s = run_stoke("verify " + single[0]);
  EXPECT_EQ(s.status, 0) << s.err;
  EXPECT_EQ(s.out, "verified 1 folder (1 task): 20 records, 20 rows, 0 skipped — complete, consistent, intact\n");

  // A leftover temporary file is a note on stderr, not a problem.
  std::ofstream(fs::path(single[0]) / "embeddings-00007.npy.stoke-tmp-99-0") << "partial";
  const RunResult t = run_stoke("verify " + single[0]);
  EXPECT_EQ(t.status, 0) << t.err;
  EXPECT_EQ(t.out, s.out);
  EXPECT_EQ(t.err, "stoke: note: " + single[0] +
                       ": 1 temporary file left by an interrupted write (never taken as output; safe to delete)\n");
}

TEST(CliVerify, ProblemsExitOneWithOneLineEach) {
  const auto folders = test::write_job(test::scratch_dir("cli-verify-bad"), test::EmbedJob{});
  const fs::path npy = fs::path(folders[0]) / "embeddings-00000.npy";
  std::string bytes = read_file(npy);
  bytes.back() ^= 0x40;
  std::ofstream(npy, std::ios::binary | std::ios::trunc) << bytes;
  const RunResult r = run_stoke("verify " + folders[0] + " " + folders[1]);  // task 2 left out
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.out, "");
  const auto lines = lines_of(r.err);
  ASSERT_EQ(lines.size(), 3u) << r.err;
  EXPECT_EQ(lines[0], "stoke: verify: tasks: 1 of 3 missing: no readable folder given holds task 2; run it and "
                      "verify all 3 folders together");
  EXPECT_EQ(lines[1], "stoke: verify: " + folders[0] +
                          ": shard 0 (embeddings-00000.npy): sha256 does not match the manifest (file changed or "
                          "corrupted)");
  EXPECT_EQ(lines[2], "stoke: verify found 2 problems in 2 folders");
}

// Memory is bounded by the files that exist, not by what a manifest claims
// (RELIABILITY 16): 10^12 tasks, or a shard of 10^15 rows, is reported, not
// allocated. Run under a 2 GB address-space limit, so a listing proportional
// to the claim fails here at once (sanitizer builds reserve terabytes of
// address space up front and run without the limit).
TEST(CliVerify, HugeClaimsInAManifestAreReportedNotAllocated) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  const std::string limit;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
  const std::string limit;
#else
  const std::string limit = "ulimit -v 2000000;";
#endif
#else
  const std::string limit = "ulimit -v 2000000;";
#endif
  test::EmbedJob job;
  job.count = 1;
  const auto folders = test::write_job(test::scratch_dir("cli-verify-huge"), job);
  nlohmann::json m = test::read_manifest(folders[0]);
  m["task"]["count"] = 1000000000000ULL;
  test::write_manifest(folders[0], m);
  const RunResult r = run_stoke("verify " + folders[0], "/dev/null", limit);
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.err.find("out of memory"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("stoke: verify: tasks: 999999999999 of 1000000000000 missing: no readable folder given holds "
                       "tasks 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20 and "
                       "999999999979 more;"),
            std::string::npos)
      << r.err;

  m = test::read_manifest(folders[0]);
  m["task"]["count"] = 1;
  m["shards"][0]["rows"] = 1000000000000000ULL;
  test::write_manifest(folders[0], m);
  const RunResult rows = run_stoke("verify " + folders[0], "/dev/null", limit);
  EXPECT_EQ(rows.status, 1);
  EXPECT_EQ(rows.err.find("out of memory"), std::string::npos) << rows.err;
  EXPECT_NE(rows.err.find("1000000000000000"), std::string::npos) << rows.err;
}

TEST(CliVerify, NeedsAFolder) {
  const RunResult r = run_stoke("verify");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("folders"), std::string::npos) << r.err;
  const RunResult missing = run_stoke("verify /nonexistent/stoke-out");
  EXPECT_EQ(missing.status, 1);
  EXPECT_EQ(missing.err, "stoke: verify: /nonexistent/stoke-out: no such folder\nstoke: verify found 1 problem in 1 folder\n");
}

}  // namespace
}  // namespace stoke
