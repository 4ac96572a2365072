// What the real jobs write with --trace reads back through the doctor's
// trace reader: named threads, the pipeline's spans, times within the run.
#include <gtest/gtest.h>

#include <set>

#include "core/file_util.h"
#include "doctor/trace_reader.h"
#include "support/fixtures.h"

namespace stoke {
namespace {

namespace fs = std::filesystem;

std::string model(const std::string& name) { return test::fixture("models/" + name).string(); }

TEST(CliTrace, EmbedTraceReadsBack) {
  const fs::path dir = test::scratch_dir("cli-trace");
  const test::RunResult r =
      test::run_stoke("embed --quiet --workers 2 --model " + model("tiny-bert") + " --input " +
                      test::fixture("golden/texts.jsonl").string() + " --output " + (dir / "out").string() +
                      " --trace " + (dir / "trace.json").string());
  ASSERT_EQ(r.status, 0) << r.err;
  const doctor::ParsedTrace p = doctor::parse_trace(read_file(dir / "trace.json"), "trace.json");
  ASSERT_FALSE(p.spans.empty());
  std::set<std::string> threads, names;
  double first = 1e30, last = 0;
  for (const doctor::Span& s : p.spans) {
    threads.insert(s.thread);
    names.insert(s.name);
    first = std::min(first, s.start);
    last = std::max(last, s.start + s.duration);
    EXPECT_GE(s.duration, 0.0);
  }
  EXPECT_EQ(first, 0.0);
  EXPECT_LT(last, 600.0);  // seconds, not microseconds
  EXPECT_TRUE(threads.count("reader") && threads.count("writer")) << testing::PrintToString(threads);
  EXPECT_TRUE(names.count("read") && names.count("tokenize")) << testing::PrintToString(names);
}

}  // namespace
}  // namespace stoke
