// The Kubernetes manifests docs/scale-out.md shows (scripts/kubernetes):
// checked field by field, and their pods' commands run for every completion
// index and verified (scripts/kubernetes/check_manifests.py); a manifest with a
// field stoke depends on changed is refused naming it. Skipped without PyYAML.
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "core/file_util.h"
#include "support/fixtures.h"

namespace stoke {
namespace {

namespace fs = std::filesystem;

const std::string kScripts = std::string(STOKE_SOURCE_DIR) + "/scripts/kubernetes";

test::RunResult check(const std::string& args) {
  return test::run_command("python3 " + kScripts + "/check_manifests.py " + args);
}

TEST(KubernetesManifests, AreWellFormedAndTheirPodsEmbedAndVerify) {
  const test::RunResult r = check("--run " + test::stoke_binary().string() + " " +
                                  test::fixture("models/tiny-bert").string() + " " +
                                  test::fixture("corpus/fortunes-multilingual.jsonl").string());
  if (r.status == 77) GTEST_SKIP() << r.out;
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("8 pods and the verify pod ran: verified 8 folders (8 tasks): 400 records"), std::string::npos)
      << r.out;
}

TEST(KubernetesManifests, AChangedFieldIsNamed) {
  const std::string embed = read_file(kScripts + "/embed-job.yaml");
  const std::string verify = read_file(kScripts + "/verify-job.yaml");
  const std::vector<std::pair<std::pair<std::string, std::string>, std::string>> cases = {
      {{"completionMode: Indexed", "completionMode: NonIndexed"}, "spec.completionMode: expected Indexed"},
      {{"value: \"8\"", "value: \"4\""}, "env STOKE_NUM_TASKS is '4', expected spec.completions (8)"},
      {{"--shard-index auto --num-shards auto", "--shard-index 0 --num-shards 8"}, "--shard-index auto"},
      {{"task-$JOB_COMPLETION_INDEX", "task-0"}, "--output must differ per index"},
      {{"restartPolicy: Never", "restartPolicy: OnFailure"}, "backoffLimitPerIndex needs restartPolicy: Never"},
      {{"claimName: stoke-embed-data", "claimName: other"}, "claims 'other'"},
  };
  for (const auto& [change, want] : cases) {
    const fs::path dir = test::scratch_dir("k8s-changed");
    std::string altered = embed;
    const size_t at = altered.rfind(change.first);  // the field itself, not a comment above it
    ASSERT_NE(at, std::string::npos) << change.first;
    altered.replace(at, change.first.size(), change.second);
    std::ofstream(dir / "embed-job.yaml") << altered;
    std::ofstream(dir / "verify-job.yaml") << verify;
    const test::RunResult r = check("--dir " + dir.string());
    if (r.status == 77) GTEST_SKIP() << r.out;
    EXPECT_EQ(r.status, 1) << change.second << "\n" << r.out << r.err;
    EXPECT_NE(r.err.find(want), std::string::npos) << change.second << "\n" << r.err;
  }
}

}  // namespace
}  // namespace stoke
