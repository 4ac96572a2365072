// Data-parallel `stoke train` under a real `mpirun -n 2` (Open MPI), on the
// CPU with the tiny fixture models: five steps with dropout 0 give the
// weights of one process with the same global batch (to rounding: the sum
// over ranks adds in another order), two identical MPI runs give the same
// bits, kill -9 of one rank ends the job with the last checkpoint intact and
// `--resume` continues exactly, and ranks started with different flags or data
// stop on every rank naming the field. Skipped, with the reason, where mpirun
// is missing or stoke was built without MPI.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "dist/communicator.h"
#include "io/safetensors.h"
#include "support/fixtures.h"

namespace stoke {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Open MPI refuses root without both variables; --oversubscribe lets 2 ranks
// share fewer cores; loopback only; one OpenMP thread per rank.
const char* kMpirun =
    "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1 timeout 300 mpirun --oversubscribe "
    "--mca btl self,vader --mca btl_vader_single_copy_mechanism none --mca oob_tcp_if_include lo -n 2 ";

// n corpus records as language-labelled examples, spread over the corpus.
fs::path corpus_file(const std::string& name, size_t n, size_t first = 0) {
  const fs::path p = test::scratch_dir("cli-train-mpi-data-" + name) / "data.jsonl";
  std::ifstream in(test::fixture("corpus/fortunes-multilingual.jsonl"));
  std::ofstream out(p);
  std::string line;
  size_t written = 0;
  const size_t stride = std::max<size_t>(1, 24000 / n);
  for (size_t i = 0; written < n && std::getline(in, line); ++i) {
    if (i < first || (i - first) % stride != 0) continue;
    const json r = json::parse(line);
    out << json{{"text", r["text"]}, {"label", r["lang"]}}.dump() << "\n";
    ++written;
  }
  return p;
}

std::string model(const std::string& name) { return test::fixture("models/" + name).string(); }

// Five steps, dropout 0, the global batch 16 (2 ranks x 8, or 1 x 16).
std::string flags(const std::string& name, const fs::path& data, const fs::path& out, int batch) {
  return "train --model " + model(name) + " --train " + data.string() + " --output " + out.string() +
         " --batch-size " + std::to_string(batch) +
         " --max-steps 5 --dropout 0 --precision f32 --max-length 64 --log-every 1 --lr 1e-3 --quiet";
}

test::RunResult mpirun(const std::string& args, const std::string& rank1_env = "") {
  const std::string stoke = test::stoke_binary().string();
  if (rank1_env.empty()) return test::run_command(std::string(kMpirun) + stoke + " " + args);
  // One rank started differently: a shell picks by the rank Open MPI gives it.
  return test::run_command(std::string(kMpirun) + "sh -c 'if [ \"$OMPI_COMM_WORLD_RANK\" = 1 ]; then export " +
                           rank1_env + "; fi; exec " + stoke + " " + args + "'");
}

// Why the MPI tests cannot run here, or "" when they can.
std::string skip_reason() {
  static const std::string reason = [] {
    if (test::run_command("command -v mpirun").status != 0) return std::string("mpirun is not installed");
    const fs::path dir = test::scratch_dir("cli-train-mpi-probe");
    // One step (the flags say 5; a flag given twice is refused before the
    // MPI check, and then the probe would learn nothing).
    std::string probe = flags("tiny-bert", corpus_file("probe", 8), dir / "run", 4);
    probe.replace(probe.find("--max-steps 5"), 13, "--max-steps 1");
    const auto r = mpirun(probe);
    if (r.err.find("built without MPI") != std::string::npos) return std::string("stoke was built without MPI");
    return std::string();
  }();
  return reason;
}

#define SKIP_WITHOUT_MPI()                                   \
  do {                                                       \
    if (!skip_reason().empty()) GTEST_SKIP() << skip_reason(); \
  } while (0)

std::map<std::string, std::vector<float>> tensors(const fs::path& file) {
  std::map<std::string, std::vector<float>> out;
  auto f = SafetensorsFile::open(file);
  for (const StoredTensor& t : f->tensors()) {
    std::vector<float> v(static_cast<size_t>(t.numel()));
    std::memcpy(v.data(), t.data.data(), v.size() * 4);
    out[t.name] = std::move(v);
  }
  return out;
}

double relative_difference(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
    den += static_cast<double>(b[i]) * b[i];
  }
  return std::sqrt(num / std::max(den, 1e-300));
}

std::vector<json> log_losses(const fs::path& dir) {
  std::vector<json> out;
  std::ifstream in(dir / "log.jsonl");
  std::string line;
  while (std::getline(in, line)) out.push_back(json::parse(line).value("loss", json()));
  return out;
}

class TrainMpi : public ::testing::TestWithParam<const char*> {};

TEST_P(TrainMpi, TwoRanksEqualOneProcessWithTheSameGlobalBatchAndRepeatBitwise) {
  SKIP_WITHOUT_MPI();
  const std::string name = GetParam();
  const fs::path dir = test::scratch_dir(std::string("cli-train-mpi-exact-") + name);
  const fs::path data = corpus_file("exact", 80);
  const auto one = test::run_stoke(flags(name, data, dir / "one", 16), "/dev/null", "OMP_NUM_THREADS=1");
  ASSERT_EQ(one.status, 0) << one.err;
  const auto a = mpirun(flags(name, data, dir / "a", 8));
  ASSERT_EQ(a.status, 0) << a.err;
  const auto b = mpirun(flags(name, data, dir / "b", 8));
  ASSERT_EQ(b.status, 0) << b.err;

  const auto single = tensors(dir / "one" / "model.safetensors");
  const auto ranked = tensors(dir / "a" / "model.safetensors");
  const auto again = tensors(dir / "b" / "model.safetensors");
  ASSERT_EQ(single.size(), ranked.size());
  for (const auto& [tensor, want] : single) {
    const std::vector<float>& got = ranked.at(tensor);
    ASSERT_EQ(got.size(), want.size()) << tensor;
    // The key bias's gradient is rounding noise (softmax ignores a per-query shift).
    if (tensor.find("attention.self.key.bias") == std::string::npos) {
      EXPECT_LE(relative_difference(got, want), 1e-6) << tensor;
    }
    EXPECT_EQ(std::memcmp(got.data(), again.at(tensor).data(), got.size() * 4), 0) << tensor << " differs between runs";
  }
  // Rank 0 logged every step, with the loss over both ranks' examples.
  const auto l1 = log_losses(dir / "one"), la = log_losses(dir / "a");
  ASSERT_EQ(la.size(), 5u);
  ASSERT_EQ(l1.size(), 5u);
  for (size_t i = 0; i < la.size(); ++i) EXPECT_NEAR(la[i].get<double>(), l1[i].get<double>(), 1e-5) << i;
  const json run = json::parse(std::ifstream(dir / "a" / "run.json"));
  EXPECT_EQ(run["data_parallel"]["ranks"], 2);
  EXPECT_EQ(run["data_parallel"]["global_batch"], 16);
  EXPECT_EQ(run["settings"]["effective_batch"], 16);
  EXPECT_GT(run["data_parallel"]["allreduce_bytes_per_step"].get<double>(), 0);
  // No host sync per step: the all-reduce runs on the executor.
  EXPECT_LE(run["host_syncs"].get<int>(), 5 + 2);
}

INSTANTIATE_TEST_SUITE_P(Models, TrainMpi, ::testing::Values("tiny-bert", "tiny-xlmr"));

// A stoke built without MPI (the ASan build, -DSTOKE_MPI=OFF) that finds a
// launcher's rank variables refuses `stoke train` in one line rather than
// training independent copies; under a real mpirun every rank says it.
TEST(TrainWithoutMpi, RefusesALaunchInOneLine) {
  if (dist::built_with_mpi()) GTEST_SKIP() << "this stoke has MPI (the refusal is for builds without it)";
  const fs::path dir = test::scratch_dir("cli-train-no-mpi");
  const fs::path data = corpus_file("no-mpi", 8);
  const auto r = test::run_stoke(flags("tiny-bert", data, dir / "run", 4), "/dev/null",
                                 "OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_RANK=1");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("started by an MPI launcher (OMPI_COMM_WORLD_SIZE=2) but this stoke was built without MPI"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << "one line:\n" << r.err;
  EXPECT_FALSE(fs::exists(dir / "run" / "model.safetensors"));
  if (test::run_command("command -v mpirun").status == 0) {
    const auto m = mpirun(flags("tiny-bert", data, dir / "mpirun", 4));
    EXPECT_NE(m.status, 0);
    EXPECT_NE(m.err.find("built without MPI"), std::string::npos) << m.err;
  }
}

// One rank failing mid-run (a fault injected at the start of its third step,
// as an out-of-memory there would be) ends the whole job promptly — the other
// rank is blocked in the step's all-reduce and must not hang — with a non-zero
// status and the failing rank's line naming it and the cause.
TEST(TrainMpiFailure, OneRankFailingMidRunEndsEveryRankNamingItAndTheCause) {
  SKIP_WITHOUT_MPI();
  const fs::path dir = test::scratch_dir("cli-train-mpi-fail");
  const fs::path data = corpus_file("fail", 80);
  const auto r = mpirun(flags("tiny-bert", data, dir / "run", 8), "STOKE_FAIL_AT=train_step:3");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.status, 124) << "the job hung until mpirun's timeout";
  EXPECT_NE(r.err.find("rank 1 of 2: train_step: No space left on device (injected by STOKE_FAIL_AT)"),
            std::string::npos)
      << r.err;
  EXPECT_FALSE(fs::exists(dir / "run" / "model.safetensors"));
}

// Dropout 0.1 at every site: each rank keys its masks by its slice's place in
// the global micro-batch, so 2 ranks x 8 draw the masks of 1 process x 16 and
// the weights agree as closely as with dropout 0 (RoBERTa-style head: its
// two dropout sites; the unit test TrainDropoutSplit covers BERT's and MPNet's).
TEST(TrainMpiDropout, TwoRanksDrawTheMasksOfOneProcessWithTheSameGlobalBatch) {
  SKIP_WITHOUT_MPI();
  const fs::path dir = test::scratch_dir("cli-train-mpi-dropout");
  const fs::path data = corpus_file("dropout", 80);
  auto with_dropout = [](std::string f) { return f.replace(f.find("--dropout 0"), 11, "--dropout 0.1"); };
  const auto one = test::run_stoke(with_dropout(flags("tiny-xlmr", data, dir / "one", 16)), "/dev/null",
                                   "OMP_NUM_THREADS=1");
  ASSERT_EQ(one.status, 0) << one.err;
  const auto ranked = mpirun(with_dropout(flags("tiny-xlmr", data, dir / "mpi", 8)));
  ASSERT_EQ(ranked.status, 0) << ranked.err;
  // Without dropout, the same run: dropout must have changed the weights (else the check is empty).
  const auto plain = test::run_stoke(flags("tiny-xlmr", data, dir / "plain", 16), "/dev/null", "OMP_NUM_THREADS=1");
  ASSERT_EQ(plain.status, 0) << plain.err;
  const auto want = tensors(dir / "one" / "model.safetensors");
  const auto got = tensors(dir / "mpi" / "model.safetensors");
  const auto undropped = tensors(dir / "plain" / "model.safetensors");
  double moved = 0;
  for (const auto& [tensor, w] : want) {
    if (tensor.find("attention.self.key.bias") != std::string::npos) continue;
    EXPECT_LE(relative_difference(got.at(tensor), w), 1e-6) << tensor;
    moved = std::max(moved, relative_difference(undropped.at(tensor), w));
  }
  EXPECT_GT(moved, 1e-4) << "dropout 0.1 left the weights as without dropout";
  const auto l1 = log_losses(dir / "one"), lm = log_losses(dir / "mpi");
  ASSERT_EQ(lm.size(), l1.size());
  for (size_t i = 0; i < lm.size(); ++i) EXPECT_NEAR(lm[i].get<double>(), l1[i].get<double>(), 1e-5) << i;
}

// With --grad-accum 2 the all-reduce runs once per step, during the second
// micro-batch's backward: the global batch 32 = 2 ranks x 8 x 2 = 1 x 16 x 2.
TEST(TrainMpiAccum, GradientAccumulationAllReducesOncePerStepAndStaysExact) {
  SKIP_WITHOUT_MPI();
  const fs::path dir = test::scratch_dir("cli-train-mpi-accum");
  const fs::path data = corpus_file("accum", 96);
  const auto one =
      test::run_stoke(flags("tiny-bert", data, dir / "one", 16) + " --grad-accum 2", "/dev/null", "OMP_NUM_THREADS=1");
  ASSERT_EQ(one.status, 0) << one.err;
  const auto ranked = mpirun(flags("tiny-bert", data, dir / "mpi", 8) + " --grad-accum 2 --bucket-mb 1");
  ASSERT_EQ(ranked.status, 0) << ranked.err;
  const auto want = tensors(dir / "one" / "model.safetensors");
  const auto got = tensors(dir / "mpi" / "model.safetensors");
  for (const auto& [tensor, w] : want) {
    if (tensor.find("attention.self.key.bias") == std::string::npos) {
      EXPECT_LE(relative_difference(got.at(tensor), w), 1e-6) << tensor;
    }
  }
  const json run = json::parse(std::ifstream(dir / "mpi" / "run.json"));
  EXPECT_EQ(run["data_parallel"]["global_batch"], 32);
}

// f16 with the dynamic loss scale: each rank unscales and checks the summed
// gradient (after the all-reduce), so every rank's scaler takes the same
// decisions and the two ranks train the one-process model. Closer than f16's
// own precision, not as close as f32's 1e-6: the sums' other order moves a
// master weight by ~1e-7, which now and then tips its f16 copy to the next
// f16 value (2^-11 apart), and the steps after carry that on (5.6e-6 measured
// after 5 steps; 5e-5 allowed).
constexpr double kF16RankTolerance = 5e-5;
TEST(TrainMpiF16, TwoRanksEqualOneProcessWithTheLossScale) {
  SKIP_WITHOUT_MPI();
  const fs::path dir = test::scratch_dir("cli-train-mpi-f16");
  const fs::path data = corpus_file("f16", 80);
  auto f16 = [&](const fs::path& out, int batch) {
    std::string f = flags("tiny-bert", data, out, batch);
    f.replace(f.find("--precision f32"), 15, "--precision f16");
    return f;
  };
  const auto one = test::run_stoke(f16(dir / "one", 16), "/dev/null", "OMP_NUM_THREADS=1");
  ASSERT_EQ(one.status, 0) << one.err;
  const auto ranked = mpirun(f16(dir / "mpi", 8));
  ASSERT_EQ(ranked.status, 0) << ranked.err;
  const auto want = tensors(dir / "one" / "model.safetensors");
  const auto got = tensors(dir / "mpi" / "model.safetensors");
  for (const auto& [tensor, w] : want) {
    if (tensor.find("attention.self.key.bias") == std::string::npos) {
      EXPECT_LE(relative_difference(got.at(tensor), w), kF16RankTolerance) << tensor;
    }
  }
  const json run_one = json::parse(std::ifstream(dir / "one" / "run.json"));
  const json run_mpi = json::parse(std::ifstream(dir / "mpi" / "run.json"));
  EXPECT_EQ(run_mpi["loss_scaler"], run_one["loss_scaler"]);
  EXPECT_EQ(run_mpi["loss_scaler"]["optimizer_steps"], 5);
}

TEST(TrainMpiCrash, KillingOneRankEndsTheJobAndResumeContinuesExactly) {
  SKIP_WITHOUT_MPI();
  const fs::path dir = test::scratch_dir("cli-train-mpi-crash");
  const fs::path data = corpus_file("crash", 80);
  const std::string f = flags("tiny-bert", data, dir / "whole", 8) + " --save-every 2";
  const auto whole = mpirun(f);
  ASSERT_EQ(whole.status, 0) << whole.err;
  // Rank 1 dies (SIGKILL) right after checkpoint-2 is on disk.
  const std::string g = flags("tiny-bert", data, dir / "cut", 8) + " --save-every 2";
  const auto cut = mpirun(g, "STOKE_CRASH_AT=checkpoint_saved:1");
  EXPECT_NE(cut.status, 0) << "mpirun must end the job when a rank is killed";
  EXPECT_TRUE(fs::exists(dir / "cut" / "checkpoint-2" / "trainer_state.json"));
  EXPECT_FALSE(fs::exists(dir / "cut" / "model.safetensors"));
  const auto resumed = mpirun(g + " --resume");
  ASSERT_EQ(resumed.status, 0) << resumed.err;
  const auto want = tensors(dir / "whole" / "model.safetensors");
  const auto got = tensors(dir / "cut" / "model.safetensors");
  for (const auto& [tensor, w] : want)
    EXPECT_EQ(std::memcmp(w.data(), got.at(tensor).data(), w.size() * 4), 0) << tensor << " differs after --resume";
  EXPECT_EQ(log_losses(dir / "whole"), log_losses(dir / "cut"));
  // A checkpoint written by 2 ranks is not resumed by one process (another global batch).
  const auto single = test::run_stoke(g + " --resume");
  EXPECT_NE(single.status, 0);
}

TEST(TrainMpiSetup, RanksStartedDifferentlyStopOnEveryRankNamingTheField) {
  SKIP_WITHOUT_MPI();
  const fs::path dir = test::scratch_dir("cli-train-mpi-mismatch");
  const fs::path data = corpus_file("mismatch-a", 16);
  const fs::path other = corpus_file("mismatch-b", 16, 5);
  // Rank 1 reads another file (same flags): its data digest differs.
  const std::string base = flags("tiny-bert", data, dir / "data", 4);
  std::string args = base;
  args.replace(args.find(data.string()), data.string().size(), "$TRAIN_FILE");
  const auto r = test::run_command(std::string(kMpirun) + "sh -c 'TRAIN_FILE=" + data.string() +
                                   "; if [ \"$OMPI_COMM_WORLD_RANK\" = 1 ]; then TRAIN_FILE=" + other.string() +
                                   "; fi; exec " + test::stoke_binary().string() + " " + args + "'");
  EXPECT_NE(r.status, 0);
  const std::string want = "rank 1's train_sha256 differs from rank 0's";
  const size_t first = r.err.find(want);
  ASSERT_NE(first, std::string::npos) << r.err;
  EXPECT_NE(r.err.find(want, first + 1), std::string::npos) << "every rank says it:\n" << r.err;
  // A flag: --log-every differs on rank 1.
  std::string flag_args = flags("tiny-bert", data, dir / "flag", 4);
  flag_args.replace(flag_args.find("--log-every 1"), 13, "--log-every $E");
  const auto f = test::run_command(std::string(kMpirun) +
                                   "sh -c 'E=1; if [ \"$OMPI_COMM_WORLD_RANK\" = 1 ]; then E=2; fi; exec " +
                                   test::stoke_binary().string() + " " + flag_args + "'");
  EXPECT_NE(f.status, 0);
  EXPECT_NE(f.err.find("rank 1's log_every differs from rank 0's"), std::string::npos) << f.err;
}

}  // namespace
}  // namespace stoke

namespace stoke {
namespace {

// An embedding model over 2 ranks: each embeds its 8 examples' texts, the
// embeddings are gathered so every anchor sees the 16 positives of the
// global batch as negatives (sentence-transformers' gather_across_devices),
// and 5 steps equal one process with batch 16 (to rounding: the gradient
// sum over ranks adds in another order).
TEST(TrainMpiEmbedding, TwoRanksWithGatheredNegativesEqualOneProcessWithTheGlobalBatch) {
  SKIP_WITHOUT_MPI();
  const fs::path dir = test::scratch_dir("cli-train-mpi-embedding");
  const fs::path data = dir / "pairs.jsonl";
  {
    std::ifstream in(test::fixture("corpus/fortunes-multilingual.jsonl"));
    std::ofstream out(data);
    std::string line, previous;
    for (size_t i = 0; i < 24000 && std::getline(in, line); ++i) {
      if (i % 150 != 0) continue;
      const std::string text = json::parse(line)["text"].get<std::string>();
      if (!previous.empty()) out << json{{"anchor", previous}, {"positive", text}}.dump() << "\n";
      previous = previous.empty() ? text : "";
    }
  }
  auto flags_for = [&](const fs::path& out, int batch) {
    return "train --objective mnrl --model " + model("tiny-bert") + " --train " + data.string() + " --output " +
           out.string() + " --batch-size " + std::to_string(batch) +
           " --max-steps 5 --dropout 0 --precision f32 --max-length 64 --log-every 1 --lr 1e-3 --quiet";
  };
  const auto one = test::run_stoke(flags_for(dir / "one", 16), "/dev/null", "OMP_NUM_THREADS=1");
  ASSERT_EQ(one.status, 0) << one.err;
  const auto two = mpirun(flags_for(dir / "two", 8));
  ASSERT_EQ(two.status, 0) << two.err;
  const auto single = tensors(dir / "one" / "model.safetensors");
  const auto ranked = tensors(dir / "two" / "model.safetensors");
  ASSERT_EQ(single.size(), ranked.size());
  for (const auto& [tensor, want] : single) {
    if (tensor.find("attention.self.key.bias") != std::string::npos) continue;  // rounding noise
    EXPECT_LE(relative_difference(ranked.at(tensor), want), 1e-5) << tensor;
  }
  const auto l1 = log_losses(dir / "one"), l2 = log_losses(dir / "two");
  ASSERT_EQ(l1.size(), 5u);
  ASSERT_EQ(l2.size(), 5u);
  for (size_t i = 0; i < l1.size(); ++i) EXPECT_NEAR(l2[i].get<double>(), l1[i].get<double>(), 1e-5) << i;
  const json run = json::parse(std::ifstream(dir / "two" / "run.json"));
  EXPECT_EQ(run["data_parallel"]["global_batch"], 16);
}

}  // namespace
}  // namespace stoke
