// The doctor's rules on numbers: each verdict from the facts that make it,
// the advice it gives, and the facts' JSON round trip (what `stoke doctor
// --trace FILE` reads back).
#include <gtest/gtest.h>

#include "core/error.h"
#include "doctor/diagnose.h"

namespace stoke::doctor {
namespace {

// A 10-second embed run of 100 batches, each reading its result once.
EmbedFacts base() {
  EmbedFacts f;
  f.seconds = 10;
  f.device_busy = 5;
  f.read = {"read", 1, 1, 0, 0};
  f.tokenize = {"tokenize", 1, 2, 0, 0};
  f.batch = {"batch", 1, 0.5, 0.5, 0};
  f.write = {"write", 1, 0.2, 0, 0};
  f.batches = 100;
  f.host_syncs = 100;
  f.texts = 10000;
  f.real_tokens = f.computed_tokens = 1000000;
  f.workers = 1;
  f.cores = 4;
  f.batch_tokens = 16384;
  f.sort_window = 4096;
  f.windows = 3;
  return f;
}

bool has(const std::vector<std::string>& lines, const std::string& text) {
  for (const auto& l : lines)
    if (l.find(text) != std::string::npos) return true;
  return false;
}

TEST(Diagnose, ExtraHostSyncsPerBatchAreSyncBoundEvenWhenBusy) {
  EmbedFacts f = base();
  f.host_syncs = 200;
  f.device_busy = 8.5;
  const Diagnosis d = diagnose_embed(f);
  EXPECT_EQ(d.bound, Bound::sync);
  EXPECT_NE(d.verdict.find("1.0 extra host syncs per batch"), std::string::npos) << d.verdict;
}

TEST(Diagnose, BusyDeviceIsComputeBoundAndBf16IsAdvisedWhereNative) {
  EmbedFacts f = base();
  f.device_busy = 9.2;
  f.native_bf16 = true;
  Diagnosis d = diagnose_embed(f);
  EXPECT_EQ(d.bound, Bound::compute);
  EXPECT_TRUE(has(d.advice, "--precision f32 -> bf16")) << format_diagnosis(d);
  f.native_bf16 = false;
  d = diagnose_embed(f);
  EXPECT_FALSE(has(d.advice, "bf16"));
  EXPECT_NEAR(d.device_busy, 0.92, 1e-12);
}

TEST(Diagnose, BusyTokenizerIsInputBoundWithTheWorkersItNeeds) {
  EmbedFacts f = base();
  f.device_busy = 2;
  f.tokenize.busy = 9;  // 4.5x the device's time on one worker
  f.batch.wait_input = 7;
  Diagnosis d = diagnose_embed(f);
  EXPECT_EQ(d.bound, Bound::input);
  EXPECT_NE(d.verdict.find("input-bound (tokenization)"), std::string::npos);
  EXPECT_TRUE(has(d.advice, "--workers 1 -> 4")) << format_diagnosis(d);  // ceil(4.5) = 5, capped at 4 cores
  f.cores = 16;
  d = diagnose_embed(f);
  EXPECT_TRUE(has(d.advice, "--workers 1 -> 5")) << format_diagnosis(d);
  f.cores = 2;
  d = diagnose_embed(f);
  EXPECT_TRUE(has(d.advice, "--workers 1 -> 2"));
  EXPECT_FALSE(has(d.advice, "--sort-window"));
  f.windows = 1;
  f.sort_window = 65536;
  d = diagnose_embed(f);
  EXPECT_TRUE(has(d.advice, "--sort-window 65536 -> 4096")) << format_diagnosis(d);
  EXPECT_TRUE(has(d.advice, "2 cores shared by the tokenizer and the model"));
}

TEST(Diagnose, BusyReaderIsInputBoundOnReading) {
  EmbedFacts f = base();
  f.device_busy = 2;
  f.read.busy = 8;
  f.batch.wait_input = 7;
  const Diagnosis d = diagnose_embed(f);
  EXPECT_EQ(d.bound, Bound::input);
  EXPECT_NE(d.verdict.find("input-bound (reading)"), std::string::npos) << d.verdict;
}

TEST(Diagnose, WaitingOnlyForTheFirstWindowAdvisesASmallerSortWindow) {
  EmbedFacts f = base();
  f.device_busy = 7;
  f.batch.wait_input = 2.5;
  f.windows = 1;
  f.sort_window = 65536;
  const Diagnosis d = diagnose_embed(f);
  EXPECT_EQ(d.bound, Bound::input);
  EXPECT_NE(d.verdict.find("pipeline fill"), std::string::npos) << d.verdict;
  EXPECT_TRUE(has(d.advice, "--sort-window 65536 -> 4096")) << format_diagnosis(d);
}

TEST(Diagnose, PaddingAndSmallBatches) {
  EmbedFacts f = base();
  f.computed_tokens = 2000000;
  EXPECT_EQ(diagnose_embed(f).bound, Bound::padding);
  f = base();
  f.computed_tokens = f.real_tokens = 100 * 300;
  f.batch_tokens = 512;
  const Diagnosis d = diagnose_embed(f);
  EXPECT_EQ(d.bound, Bound::launch);
  EXPECT_TRUE(has(d.advice, "--batch-tokens 512 -> 4096"));
}

TEST(Diagnose, TrainingSyncsBeyondLoggingAreSyncBound) {
  TrainFacts f;
  f.seconds = 10;
  f.device_busy = 6;
  f.steps = 100;
  f.host_syncs = 104;
  f.expected_syncs = 4;
  f.batch_size = 16;
  f.log_every = 50;
  Diagnosis d = diagnose_train(f);
  EXPECT_EQ(d.bound, Bound::sync);
  EXPECT_TRUE(has(d.advice, "--log-every 50"));
  f.host_syncs = 4;
  f.device_busy = 9;
  d = diagnose_train(f);
  EXPECT_EQ(d.bound, Bound::compute);
  f.device_busy = 5;
  d = diagnose_train(f);
  EXPECT_EQ(d.bound, Bound::launch);
  EXPECT_TRUE(has(d.advice, "--batch-size 16 -> 32"));
}

// Data-parallel training whose device waits for the gradient all-reduce: the
// executor counts the wait as busy, so without the rule it read as
// compute-bound. The synthetic profile: 2 ranks, 10 s, 3 s waited.
TEST(Diagnose, WaitingForTheAllReduceIsCommunicationBound) {
  TrainFacts f;
  f.seconds = 10;
  f.device_busy = 9.5;
  f.steps = 20;
  f.host_syncs = 4;
  f.expected_syncs = 4;
  f.batch_size = 8;
  f.log_every = 10;
  f.ranks = 2;
  f.grad_accum = 1;
  f.bucket_mb = 25;
  f.comm_seconds = 5;
  f.comm_exposed_seconds = 3;
  f.allreduce_bytes_per_step = 90u << 20;
  Diagnosis d = diagnose_train(f);
  EXPECT_EQ(d.bound, Bound::communication);
  EXPECT_EQ(std::string(bound_name(d.bound)), "communication-bound");
  EXPECT_NE(d.verdict.find("30% of the time"), std::string::npos) << d.verdict;
  EXPECT_TRUE(has(d.evidence, "90.0 MiB of gradients per step"));
  EXPECT_TRUE(has(d.evidence, "40% of it overlapped"));
  EXPECT_TRUE(has(d.advice, "--bucket-mb 25 -> 100"));
  EXPECT_TRUE(has(d.advice, "--grad-accum 1 -> 4"));
  EXPECT_TRUE(has(d.advice, "bf16 gradients"));
  // Read back from a trace's facts: the same verdict.
  const Diagnosis read = diagnose_from_json({{"job", "train"}, {"facts", to_json(f)}});
  EXPECT_EQ(read.bound, Bound::communication);
  EXPECT_EQ(read.advice, d.advice);
  // Overlapped all-reduce (under the share on the critical path): compute-bound.
  f.comm_exposed_seconds = 0.5;
  EXPECT_EQ(diagnose_train(f).bound, Bound::compute);
  // One process never is, whatever the numbers say.
  f.comm_exposed_seconds = 3;
  f.ranks = 1;
  EXPECT_EQ(diagnose_train(f).bound, Bound::compute);
}

// The run: the compute thread at 32% of a core while the device stage
// was busy, two busy processes beside it. Today's "compute-bound, nothing to
// gain" becomes the contention verdict, with the shares as evidence.
TEST(Diagnose, ComputeThreadStarvedOfItsCoreIsCpuContention) {
  EmbedFacts f = base();
  f.device_busy = 9.2;
  f.cores = 2;
  f.workers = 2;
  f.cpu = {0.32, 1.6};
  Diagnosis d = diagnose_embed(f);
  EXPECT_EQ(d.bound, Bound::contention) << format_diagnosis(d);
  EXPECT_NE(d.verdict.find("other processes are taking this machine's cores"), std::string::npos) << d.verdict;
  EXPECT_TRUE(has(d.evidence, "32% of one core")) << format_diagnosis(d);
  EXPECT_TRUE(has(d.evidence, "other processes used 1.6 of this machine's 2 cores")) << format_diagnosis(d);
  EXPECT_TRUE(has(d.advice, "--workers 2 -> 1"));
  EXPECT_TRUE(has(d.advice, "nice"));
  // The same facts read back from a trace give the same verdict.
  EXPECT_EQ(diagnose_from_json({{"job", "embed"}, {"facts", to_json(f)}}).verdict, d.verdict);
  // Training: the same rule.
  TrainFacts t;
  t.seconds = 10;
  t.device_busy = 9;
  t.steps = 40;
  t.cores = 2;
  t.cpu = {0.4, 1.0};
  EXPECT_EQ(diagnose_train(t).bound, Bound::contention);
  EXPECT_EQ(diagnose_from_json({{"job", "train"}, {"facts", to_json(t)}}).bound, Bound::contention);
}

TEST(Diagnose, ContentionNeedsAStarvedComputeThreadAndOtherProcesses) {
  EmbedFacts f = base();
  f.device_busy = 9.2;
  f.cpu = {0.95, 1.5};  // others busy, but the compute thread has its core
  EXPECT_EQ(diagnose_embed(f).bound, Bound::compute);
  f.cpu = {0.5, 0.05};  // starved by our own threads, not by other processes
  EXPECT_EQ(diagnose_embed(f).bound, Bound::compute);
  f.cpu = {-1, 2.0};    // unknown share (a GPU, or an old trace): no verdict from guesses
  EXPECT_EQ(diagnose_embed(f).bound, Bound::compute);
  f.cpu = {0.69, -1};   // others unknown: the starved thread alone decides
  EXPECT_EQ(diagnose_embed(f).bound, Bound::contention);
  f.cpu = {0.71, 2.0};
  EXPECT_EQ(diagnose_embed(f).bound, Bound::compute);
  // Busy under 80% (a slow pipeline fill on the starved cores), yet the
  // device is still the busiest stage: contention, not "no single stage".
  f.device_busy = 7.6;
  f.batch.wait_input = 1.1;
  f.cpu = {0.45, 1.0};
  EXPECT_EQ(diagnose_embed(f).bound, Bound::contention) << format_diagnosis(diagnose_embed(f));
  f.cpu = {0.97, 0.0};
  EXPECT_NE(diagnose_embed(f).bound, Bound::contention);
  // The device is not the bottleneck: the pipeline's own verdicts stand.
  f = base();
  f.device_busy = 2;
  f.tokenize.busy = 9;
  f.batch.wait_input = 7;
  f.cpu = {0.3, 1.5};
  EXPECT_EQ(diagnose_embed(f).bound, Bound::input);
  EXPECT_TRUE(cpu_contended({0.3, 1.5}));
  EXPECT_FALSE(cpu_contended({0.3, 0.1}));
}

TEST(Diagnose, FactsRoundTripThroughJson) {
  EmbedFacts f = base();
  f.tokenize.busy = 9;
  f.device_busy = 2;
  f.batch.wait_input = 7;
  const Diagnosis live = diagnose_embed(f);
  const Diagnosis read = diagnose_from_json({{"job", "embed"}, {"facts", to_json(f)}});
  EXPECT_EQ(read.verdict, live.verdict);
  EXPECT_EQ(read.advice, live.advice);
  TrainFacts t;
  t.seconds = 1;
  t.steps = 3;
  t.host_syncs = 9;
  t.expected_syncs = 2;
  EXPECT_EQ(diagnose_from_json({{"job", "train"}, {"facts", to_json(t)}}).bound, Bound::sync);
  EXPECT_THROW(diagnose_from_json({{"job", "embed"}}), Error);
  EXPECT_THROW(diagnose_from_json({{"job", "paint"}, {"facts", nlohmann::json::object()}}), Error);
}

// GEMMs on the backend's plain kernel are evidence and advice whatever the
// verdict, for embed and train alike, and survive the trace's JSON.
TEST(Diagnose, GemmsOnThePlainKernelAreNamed) {
  const std::string line = "linear_backward dw M768 N3072 K4096 F32*BF16->F32: 24 calls (operand mix cuBLASLt does not take)";
  EmbedFacts e = base();
  EXPECT_FALSE(has(diagnose_embed(e).evidence, "plain fallback kernel"));
  e.gemm_fallbacks = {line};
  Diagnosis d = diagnose_embed(e);
  EXPECT_TRUE(has(d.evidence, "1 GEMM shape ran on the plain fallback kernel")) << d.evidence.front();
  EXPECT_TRUE(has(d.evidence, line));
  EXPECT_TRUE(has(d.advice, "docs/cuda.md"));
  EXPECT_TRUE(has(diagnose_from_json({{"job", "embed"}, {"facts", to_json(e)}}).evidence, line));

  TrainFacts t;
  t.seconds = 10;
  t.device_busy = 9;
  t.steps = 100;
  t.host_syncs = t.expected_syncs = 4;
  t.batch_size = 16;
  t.log_every = 50;
  t.gemm_fallbacks = std::vector<std::string>(7, line);
  d = diagnose_train(t);
  EXPECT_EQ(d.bound, Bound::compute);
  EXPECT_TRUE(has(d.evidence, "7 GEMM shapes ran on the plain fallback kernel"));
  EXPECT_TRUE(has(d.evidence, "... and 2 more"));
  EXPECT_TRUE(has(diagnose_from_json({{"job", "train"}, {"facts", to_json(t)}}).evidence, "7 GEMM shapes"));
}

}  // namespace
}  // namespace stoke::doctor
