// Which gradient all-reduce a training run uses, from the rank count, the
// backend and what this build has — decided in one place, with one clear
// refusal line for each combination that cannot run:
//
//   1 rank                          -> none
//   N ranks, CPU backend            -> host   (MPI on the executor)
//   N ranks, CUDA, built with NCCL  -> device (NCCL on the compute stream)
//   N ranks, CUDA, no NCCL          -> Error(unsupported): rebuild with NCCL, or --device cpu
//
// A build without MPI never gets N > 1 ranks (dist::open_communicator
// refuses the launch first).
#pragma once

#include <string>

namespace stoke::dist {

enum class GradientPath { none, host, device };
const char* gradient_path_name(GradientPath path);  // "none", "MPI on the executor", "NCCL on the device stream"

struct BackendTraits {
  std::string name;                // "cpu", "cuda:1"
  bool host_executor = false;      // Backend::can_enqueue_host (the CPU backend)
  bool cuda = false;               // a CUDA backend (NCCL can serve it)
};

// Throws Error(unsupported) naming the device and what to do instead.
GradientPath gradient_path(int ranks, const BackendTraits& backend, bool built_with_nccl);

// True when this build has the NCCL communicator (STOKE_NCCL, with CUDA and MPI).
bool built_with_nccl();

// The GPU a rank uses for `--device cuda` (no index) under a launcher: its
// rank among the ranks of its node (OMPI_COMM_WORLD_LOCAL_RANK,
// MPI_LOCALRANKID, SLURM_LOCALID), or 0 when the launcher does not say.
int local_rank();

}  // namespace stoke::dist
