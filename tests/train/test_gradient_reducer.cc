// The gradient all-reduce's buckets and hand-overs without MPI: a stand-in
// communicator of two identical ranks (a sum doubles every element) checks
// that every gradient element is summed exactly once per step, in buckets
// that follow the backward (the layers from the last down, then the rest),
// whether the layers are handed over one by one or all at the step's end;
// and the launcher variables are read as Open MPI / PMI / PMIx set them.
#include <gtest/gtest.h>

#include <cstdlib>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "dist/communicator.h"
#include "dist/data_parallel_path.h"
#include "io/model_folder.h"
#include "jobs/common_options.h"
#include "jobs/model_session.h"
#include "support/fixtures.h"
#include "train/gradient_reducer.h"

namespace stoke::train {
namespace {

// Two ranks holding the same gradient: the sum is twice it. Records the
// element ranges it was asked to sum, in order.
class TwinRanks final : public dist::Communicator {
 public:
  explicit TwinRanks(const float* base) : base_(base) {}
  int rank() const override { return 0; }
  int size() const override { return 2; }
  std::string name() const override { return "twin ranks"; }
  void allreduce_sum(float* data, size_t n) override {
    for (size_t i = 0; i < n; ++i) data[i] *= 2;
    std::lock_guard<std::mutex> lock(mu_);
    calls.emplace_back(data - base_, static_cast<int64_t>(n));
  }
  void allreduce_sum(double* data, size_t n) override {
    for (size_t i = 0; i < n; ++i) data[i] *= 2;
  }
  std::vector<uint8_t> allgather(const void* data, size_t bytes) override {
    const auto* p = static_cast<const uint8_t*>(data);
    std::vector<uint8_t> out(p, p + bytes);
    out.insert(out.end(), p, p + bytes);
    return out;
  }
  std::string broadcast(const std::string& text) override { return text; }
  void barrier() override {}

  std::mutex mu_;
  std::vector<std::pair<int64_t, int64_t>> calls;  // (offset, count)

 private:
  const float* base_;
};

struct GradientBuffer {
  std::unique_ptr<Backend> backend = open_backend(parse_device("cpu"), BackendUse::training);
  TrainableEncoder enc{open_model_folder(test::fixture("models/tiny-bert")).config};
  GradientBuffer() {
    enc.grad_buffer = backend->allocate(static_cast<size_t>(enc.layout.numel()) * 4);
    fill();
  }
  void fill() {
    float* g = enc.grad_data();
    for (int64_t i = 0; i < enc.layout.numel(); ++i) g[i] = static_cast<float>(i % 97) - 48.0f;
  }
  void expect_doubled(int times) {
    const float* g = enc.grad_data();
    const float factor = static_cast<float>(1 << times);
    for (int64_t i = 0; i < enc.layout.numel(); ++i)
      ASSERT_EQ(g[i], (static_cast<float>(i % 97) - 48.0f) * factor) << "element " << i;
  }
};

TEST(GradientReducer, EveryElementIsSummedOncePerStepInBackwardOrder) {
  GradientBuffer s;
  TwinRanks comm(s.enc.grad_data());
  const int64_t layers = s.enc.config.num_hidden_layers;
  ASSERT_GE(layers, 2);
  {
    GradientReducer r(s.enc, *s.backend, comm, 1);  // 1 byte: one bucket per layer, then the rest
    EXPECT_EQ(r.bucket_count(), static_cast<size_t>(layers + 1));
    for (int64_t l = layers - 1; l >= 0; --l) r.layer_done(l);
    r.layer_done(-1);
    r.finish_step();
    s.backend->synchronize();
    s.expect_doubled(1);
    const ReduceStats st = r.stats();
    EXPECT_EQ(st.steps, 1u);
    EXPECT_EQ(st.buckets, static_cast<uint64_t>(layers + 1));
    EXPECT_EQ(st.bytes_per_step, static_cast<uint64_t>(s.enc.layout.numel()) * 4);
    // The last layer's gradient went first; the embeddings (offset 0) last.
    const ParamSlot* last_qkv = s.enc.layout.find(TensorRole::query_weight, layers - 1);
    ASSERT_NE(last_qkv, nullptr);
    ASSERT_FALSE(comm.calls.empty());
    EXPECT_LE(comm.calls.front().first, last_qkv->offset);
    EXPECT_GT(comm.calls.front().first + comm.calls.front().second, last_qkv->offset);
    bool embeddings_last = false;
    for (size_t i = comm.calls.size(); i-- > 0;)
      if (comm.calls[i].first == 0) embeddings_last = i + 3 >= comm.calls.size();
    EXPECT_TRUE(embeddings_last);

    // A rank whose slice of the last micro-batch was empty runs no backward:
    // the step's end hands every bucket over.
    comm.calls.clear();
    r.finish_step();
    s.backend->synchronize();
    s.expect_doubled(2);
    EXPECT_EQ(r.stats().steps, 2u);
  }
}

TEST(GradientReducer, LargeBucketsMergeTheLayers) {
  GradientBuffer s;
  TwinRanks comm(s.enc.grad_data());
  GradientReducer r(s.enc, *s.backend, comm, int64_t{1} << 30);
  EXPECT_EQ(r.bucket_count(), 2u);  // every layer, then the rest
  r.layer_done(0);  // the lowest layer done: the layers' bucket goes, the rest waits for -1
  r.finish_step();
  s.backend->synchronize();
  s.expect_doubled(1);
}

TEST(GradientReducer, RefusesANonPositiveBucket) {
  GradientBuffer s;
  TwinRanks comm(s.enc.grad_data());
  EXPECT_THROW(GradientReducer(s.enc, *s.backend, comm, 0), Error);
}

// A device all-reduce stand-in (NCCL's place on a GPU): records the ranges
// it is asked to sum, sums them like two identical ranks, and can be made to
// fail as NCCL's watchdog would after an abort.
class FakeDeviceAllReduce final : public DeviceAllReduce {
 public:
  std::string name() const override { return "fake device all-reduce"; }
  void enqueue_sum(float* data, const std::vector<std::pair<int64_t, int64_t>>& ranges) override {
    check();
    for (const auto& r : ranges) {
      for (int64_t i = r.first; i < r.second; ++i) data[i] *= 2;
      calls.push_back(r);
    }
    last_group = ranges;
    ++groups;
  }
  void check() override {
    if (!failure.empty()) throw Error(Errc::io, failure);
  }
  std::vector<std::pair<int64_t, int64_t>> calls, last_group;
  int groups = 0;
  std::string failure;
};

// With a device all-reduce the buckets are enqueued in backward order as the
// layers finish (no executor hand-over, no thread), each element once per
// step, and a failure the communicator recorded stops the step.
TEST(GradientReducer, ADeviceAllReduceGetsTheBucketsInBackwardOrder) {
  GradientBuffer s;
  TwinRanks comm(s.enc.grad_data());
  FakeDeviceAllReduce device;
  const int64_t layers = s.enc.config.num_hidden_layers;
  GradientReducer r(s.enc, *s.backend, comm, 1, &device);
  EXPECT_EQ(r.bucket_count(), static_cast<size_t>(layers + 1));
  r.layer_done(layers - 1);
  EXPECT_EQ(device.groups, 1) << "the last layer's bucket goes as soon as its backward is enqueued";
  for (int64_t l = layers - 2; l >= 0; --l) r.layer_done(l);
  r.layer_done(-1);
  r.finish_step();
  s.backend->synchronize();
  s.expect_doubled(1);
  EXPECT_EQ(device.groups, layers + 1);
  EXPECT_TRUE(comm.calls.empty()) << "the host communicator sums no gradient on the device path";
  EXPECT_EQ(r.stats().steps, 1u);
  ASSERT_FALSE(device.last_group.empty());
  EXPECT_EQ(device.last_group.front().first, 0) << "the embeddings (offset 0) go in the last group";
  device.failure = "NCCL: an all-reduce did not complete in 600 s (a rank died or hangs)";
  EXPECT_THROW(r.finish_step(), Error);
}

// Which all-reduce a run uses, and the refusals, in one place.
TEST(GradientPath, ChoosesByRanksBackendAndBuild) {
  using dist::GradientPath;
  const dist::BackendTraits cpu{"cpu", true, false}, cuda{"cuda:1", false, true}, other{"metal", false, false};
  EXPECT_EQ(dist::gradient_path(1, cuda, false), GradientPath::none);
  EXPECT_EQ(dist::gradient_path(1, cpu, false), GradientPath::none);
  EXPECT_EQ(dist::gradient_path(2, cpu, false), GradientPath::host);
  EXPECT_EQ(dist::gradient_path(2, cpu, true), GradientPath::host);
  EXPECT_EQ(dist::gradient_path(8, cuda, true), GradientPath::device);
  try {
    dist::gradient_path(2, cuda, false);
    FAIL() << "CUDA without NCCL must be refused";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_EQ(e.code(), Errc::unsupported);
    EXPECT_NE(m.find("cuda:1 (2 ranks) needs NCCL"), std::string::npos) << m;
    EXPECT_NE(m.find("--device cpu"), std::string::npos) << m;
    EXPECT_EQ(m.find('\n'), std::string::npos) << "one line";
  }
  EXPECT_THROW(dist::gradient_path(2, other, true), Error);
  EXPECT_STREQ(dist::gradient_path_name(GradientPath::device), "NCCL on the device stream");
}

TEST(GradientPath, LocalRankFromTheLauncher) {
  for (const char* v : {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"}) unsetenv(v);
  EXPECT_EQ(dist::local_rank(), 0);
  setenv("SLURM_LOCALID", "3", 1);
  EXPECT_EQ(dist::local_rank(), 3);
  setenv("OMPI_COMM_WORLD_LOCAL_RANK", "1", 1);
  EXPECT_EQ(dist::local_rank(), 1);
  setenv("OMPI_COMM_WORLD_LOCAL_RANK", "x", 1);  // not a number: the next variable
  EXPECT_EQ(dist::local_rank(), 3);
  for (const char* v : {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"}) unsetenv(v);
}

TEST(LaunchEnvironment, ReadsOpenMpiPmiAndPmixVariables) {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "PMI_SIZE", "PMI_RANK", "PMIX_SIZE",
                        "PMIX_RANK"})
    unsetenv(v);
  EXPECT_TRUE(dist::launch_environment().source.empty());
  EXPECT_EQ(dist::launch_environment().size, 1);
  setenv("PMI_SIZE", "4", 1);
  setenv("PMI_RANK", "3", 1);
  EXPECT_EQ(dist::launch_environment().source, "PMI_SIZE");
  EXPECT_EQ(dist::launch_environment().size, 4);
  EXPECT_EQ(dist::launch_environment().rank, 3);
  setenv("OMPI_COMM_WORLD_SIZE", "2", 1);
  setenv("OMPI_COMM_WORLD_RANK", "1", 1);
  EXPECT_EQ(dist::launch_environment().source, "OMPI_COMM_WORLD_SIZE");
  EXPECT_EQ(dist::launch_environment().size, 2);
  setenv("OMPI_COMM_WORLD_SIZE", "two", 1);  // not a number: the next source
  EXPECT_EQ(dist::launch_environment().source, "PMI_SIZE");
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "PMI_SIZE", "PMI_RANK"}) unsetenv(v);
  // Without a launcher the job is one process, MPI or not.
  EXPECT_EQ(dist::open_communicator()->size(), 1);
}

// A build without MPI (the ASan build: -DSTOKE_MPI=OFF) started by a launcher
// of 2 ranks refuses in one line naming the variable, instead of training two
// independent copies; a launcher of 1 rank is one process. (A build with MPI
// would initialise MPI here: skipped.)
TEST(LaunchEnvironment, ABuildWithoutMpiRefusesALaunchOfSeveralRanks) {
  if (dist::built_with_mpi()) GTEST_SKIP() << "this build has MPI (the refusal is for builds without it)";
  for (const auto& [size_var, rank_var] : {std::pair{"OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK"},
                                           std::pair{"PMI_SIZE", "PMI_RANK"}}) {
    setenv(size_var, "2", 1);
    setenv(rank_var, "1", 1);
    try {
      dist::open_communicator();
      ADD_FAILURE() << size_var << ": a launch of 2 ranks must be refused";
    } catch (const Error& e) {
      const std::string m = e.what();
      EXPECT_EQ(e.code(), Errc::unsupported);
      EXPECT_NE(m.find(std::string(size_var) + "=2"), std::string::npos) << m;
      EXPECT_NE(m.find("built without MPI"), std::string::npos) << m;
      EXPECT_EQ(m.find('\n'), std::string::npos) << "one line: " << m;
    }
    setenv(size_var, "1", 1);
    setenv(rank_var, "0", 1);
    EXPECT_EQ(dist::open_communicator()->size(), 1) << size_var;
    unsetenv(size_var);
    unsetenv(rank_var);
  }
}

}  // namespace
}  // namespace stoke::train
