// What the real jobs write with --trace reads back through the doctor's
// trace reader: named threads, the pipeline's spans, times within the run.
#include <gtest/gtest.h>

#include <fstream>
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

// Every job's trace carries the device's op spans, CPU-utilization counters
// and the run's facts, so `stoke doctor --trace` diagnoses it.
TEST(CliTrace, ClassifyAndTrainTracesAreDiagnosable) {
  const fs::path dir = test::scratch_dir("cli-trace-jobs");
  const std::string texts = test::fixture("golden/texts.jsonl").string();
  const test::RunResult c = test::run_stoke("classify --quiet --model " + model("tiny-bert") + " --input " + texts +
                                            " --output " + (dir / "c.jsonl").string() + " --trace " +
                                            (dir / "classify.json").string());
  ASSERT_EQ(c.status, 0) << c.err;
  const fs::path data = dir / "train.jsonl";
  {
    std::ofstream out(data);
    for (int i = 0; i < 24; ++i) out << "{\"text\": \"text number " << i << "\", \"label\": " << i % 3 << "}\n";
  }
  const test::RunResult t = test::run_stoke("train --quiet --model " + model("tiny-bert") + " --train " +
                                            data.string() + " --max-steps 3 --batch-size 8 --output " +
                                            (dir / "run").string() + " --trace " + (dir / "train.json").string());
  ASSERT_EQ(t.status, 0) << t.err;
  for (const char* name : {"classify.json", "train.json"}) {
    const doctor::ParsedTrace p = doctor::parse_trace(read_file(dir / name), name);
    EXPECT_FALSE(p.metadata_json.empty()) << name;
    std::set<std::string> spans;
    for (const doctor::Span& s : p.spans) spans.insert(s.thread + ":" + s.name);
    EXPECT_TRUE(spans.count("device:linear")) << name << " " << testing::PrintToString(spans);
    const test::RunResult d = test::run_stoke("doctor --trace " + (dir / name).string());
    EXPECT_EQ(d.status, 0) << d.err;
    EXPECT_NE(d.out.find(std::string("stoke doctor: ") + (name[0] == 'c' ? "classify" : "train")), std::string::npos) << d.out;
  }
}

}  // namespace
}  // namespace stoke
