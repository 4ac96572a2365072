#include "dist/communicator.h"

#include <cstdlib>
#include <cstring>

#include "core/error.h"

namespace stoke::dist {

namespace {

// A positive integer from the environment, or -1 when unset or not a number.
int env_int(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) return -1;
  char* end = nullptr;
  const long n = std::strtol(v, &end, 10);
  return *end == '\0' && n >= 0 && n < (1 << 30) ? static_cast<int>(n) : -1;
}

class SingleProcess final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string name() const override { return "single process"; }
  void allreduce_sum(float*, size_t) override {}
  void allreduce_sum(double*, size_t) override {}
  std::vector<uint8_t> allgather(const void* data, size_t bytes) override {
    const auto* p = static_cast<const uint8_t*>(data);
    return std::vector<uint8_t>(p, p + bytes);
  }
  std::string broadcast(const std::string& text) override { return text; }
  void barrier() override {}
};

}  // namespace

LaunchEnvironment launch_environment() {
  // Open MPI's mpirun, then MPICH/Hydra and Slurm's PMI-2, then PMIx (srun --mpi=pmix).
  struct Source {
    const char *size, *rank;
  };
  for (const Source s : {Source{"OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK"}, Source{"PMI_SIZE", "PMI_RANK"},
                         Source{"PMIX_SIZE", "PMIX_RANK"}}) {
    const int size = env_int(s.size), rank = env_int(s.rank);
    if (size >= 1 && rank >= 0) return {size, rank, s.size};
  }
  // PMIx sets the rank but not always the size: MPI will tell.
  if (env_int("PMIX_RANK") >= 0) return {0, env_int("PMIX_RANK"), "PMIX_RANK"};
  return {};
}

#ifdef STOKE_HAVE_MPI
std::unique_ptr<Communicator> open_mpi_communicator();  // dist/mpi/mpi_communicator.cc
bool built_with_mpi() { return true; }
#else
bool built_with_mpi() { return false; }
#endif

std::unique_ptr<Communicator> open_communicator() {
  const LaunchEnvironment env = launch_environment();
  if (env.source.empty()) return std::make_unique<SingleProcess>();
#ifdef STOKE_HAVE_MPI
  return open_mpi_communicator();
#else
  if (env.size == 1) return std::make_unique<SingleProcess>();
  throw Error(Errc::unsupported, "started by an MPI launcher (" + env.source + "=" +
                                     (env.size > 0 ? std::to_string(env.size) : std::string("?")) +
                                     ") but this stoke was built without MPI: rebuild with libopenmpi-dev installed "
                                     "for data-parallel training, or run one process");
#endif
}

}  // namespace stoke::dist
