// The Slurm test (issue 21) under ctest: scripts/slurm/test-array.sh starts a
// real single-node slurmctld/slurmd from Debian's packages and submits the
// documented array and verify jobs (docs/scale-out.md), once plainly and once
// with a task requeued mid-run. Skipped where Slurm or munge is not installed.
#include <gtest/gtest.h>

#include <string>

#include "support/fixtures.h"

namespace stoke {
namespace {

TEST(SlurmArray, DocumentedArrayVerifiesEqualsOneProcessAndSurvivesARequeue) {
  const std::string script = std::string(STOKE_SOURCE_DIR) + "/scripts/slurm/test-array.sh";
  const test::RunResult r =
      test::run_command(script + " " + test::stoke_binary().string() + " " +
                        test::fixture("models/tiny-bert").string() + " " +
                        test::fixture("corpus/fortunes-multilingual.jsonl").string());
  if (r.status == 77) GTEST_SKIP() << r.out;
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("test-array: passed"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("8000 rows equal to the single-process run"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace stoke
