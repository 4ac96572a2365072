// The processes of one data-parallel training job and the collectives they
// call: how many ranks there are, which one this is, and blocking sum /
// gather / broadcast operations that every rank calls in the same order.
//
// A single process is a communicator of one rank whose collectives return
// their input. Under an MPI launcher (mpirun, srun with PMI/PMIx) a build
// with MPI opens MPI; a build without it refuses in one line rather than
// training N independent copies of the model.
//
// Thread use: one collective at a time per process (calls are serialised by
// a mutex), and every rank issues them in the same order — the trainer
// guarantees the order (gradient buckets from the executor, host collectives
// only when the executor is idle).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace stoke::dist {

// What the environment says about the launch, read without MPI: the rank
// count and this process's rank, and the variable they came from.
struct LaunchEnvironment {
  int size = 1, rank = 0;
  std::string source;  // "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"; "" when not launched by MPI
};
LaunchEnvironment launch_environment();

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string name() const = 0;  // "single process", "MPI (Open MPI ...)"

  // Element-wise sums over the ranks, in place; every rank gets the same bits.
  virtual void allreduce_sum(float* data, size_t n) = 0;
  virtual void allreduce_sum(double* data, size_t n) = 0;
  // Every rank's `bytes` bytes, in rank order (each rank must give the same size).
  virtual std::vector<uint8_t> allgather(const void* data, size_t bytes) = 0;
  // Rank 0's text on every rank (the others' argument is ignored).
  virtual std::string broadcast(const std::string& text) = 0;
  virtual void barrier() = 0;

  // Every rank is about to fail with the same error (a failed agreement):
  // the communicator may then close normally instead of leaving the job to
  // the launcher, so each rank's message gets printed.
  void fail_together() { failing_together_ = true; }
  bool failing_together() const { return failing_together_; }

 protected:
  bool failing_together_ = false;
};

// The job's communicator: one rank without a launcher; MPI under one (built
// with MPI), else Error(unsupported) naming the variable found. MPI is
// initialised at most once per process: a second call under a launcher throws.
std::unique_ptr<Communicator> open_communicator();

// True when this build can talk MPI.
bool built_with_mpi();

}  // namespace stoke::dist
