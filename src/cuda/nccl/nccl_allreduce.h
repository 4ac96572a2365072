// NCCL for the gradient all-reduce of data-parallel training on the CUDA
// backend (built with STOKE_NCCL, which needs CUDA and MPI). The ranks'
// NCCL communicator is bootstrapped from a unique id that rank 0 makes and
// the launcher's MPI communicator carries to the others (jobs/train_job.cc).
//
// Sums are enqueued on the backend's compute stream (one NCCL group per
// bucket), so the host syncs 0 times per step for them. A watchdog thread
// polls the communicator: an error NCCL reports, or a step's collectives not
// complete after `timeout_seconds` (a rank died or hangs), aborts the
// communicator with ncclCommAbort — the stuck kernels return, the next
// enqueue_sum / check throws, and the rank exits, so mpirun ends the job —
// never a hang. Verified on a machine with 2+ GPUs only (docs/scale-out.md).
#pragma once

#include <memory>
#include <string>

#include "backend/device_allreduce.h"

namespace stoke::cuda {

class CudaBackend;

// NCCL's unique id (ncclGetUniqueId) as its bytes; rank 0 calls it.
std::string nccl_unique_id();

// This rank's member of the `ranks`-rank communicator named by `unique_id`,
// on `backend`'s device and stream. Every rank calls it (it waits for all).
std::unique_ptr<DeviceAllReduce> open_nccl_allreduce(CudaBackend& backend, int rank, int ranks,
                                                     const std::string& unique_id, double timeout_seconds);

}  // namespace stoke::cuda
