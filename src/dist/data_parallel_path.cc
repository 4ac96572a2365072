#include "dist/data_parallel_path.h"

#include <cstdlib>

#include "core/error.h"

namespace stoke::dist {

const char* gradient_path_name(GradientPath path) {
  switch (path) {
    case GradientPath::none: return "none";
    case GradientPath::host: return "MPI on the executor";
    case GradientPath::device: return "NCCL on the device stream";
  }
  return "?";
}

GradientPath gradient_path(int ranks, const BackendTraits& backend, bool built_with_nccl) {
  if (ranks <= 1) return GradientPath::none;
  if (backend.host_executor) return GradientPath::host;
  if (backend.cuda && built_with_nccl) return GradientPath::device;
  if (backend.cuda)
    throw Error(Errc::unsupported, "data-parallel training on " + backend.name + " (" + std::to_string(ranks) +
                                       " ranks) needs NCCL, and this stoke was built without it: rebuild with NCCL "
                                       "found (the CUDA toolkit's libnccl, or libnccl-dev; -DSTOKE_NCCL=ON), or "
                                       "train on --device cpu");
  throw Error(Errc::unsupported, "data-parallel training on " + backend.name + " (" + std::to_string(ranks) +
                                     " ranks): no all-reduce for this device (use --device cpu or cuda)");
}

#ifdef STOKE_HAVE_NCCL
bool built_with_nccl() { return true; }
#else
bool built_with_nccl() { return false; }
#endif

int local_rank() {
  for (const char* name : {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"}) {
    const char* v = std::getenv(name);
    if (!v || !*v) continue;
    char* end = nullptr;
    const long n = std::strtol(v, &end, 10);
    if (*end == '\0' && n >= 0 && n < 4096) return static_cast<int>(n);
  }
  return 0;
}

}  // namespace stoke::dist
