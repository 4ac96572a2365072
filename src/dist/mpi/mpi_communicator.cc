// The communicator over MPI (built when CMake finds MPI): MPI_COMM_WORLD,
// initialised here once per process with MPI_THREAD_SERIALIZED (the
// executor thread and the trainer's thread both call, never at once).
#include <mpi.h>

#include <algorithm>
#include <cstring>
#include <exception>
#include <mutex>

#include "core/error.h"
#include "dist/communicator.h"

namespace stoke::dist {

namespace {

void check(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  throw Error(Errc::io, std::string(what) + " failed: " + std::string(text, static_cast<size_t>(len)));
}

std::string library_version() {
  char v[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  MPI_Get_library_version(v, &len);
  std::string s(v, static_cast<size_t>(len));
  const size_t comma = s.find(',');
  return comma == std::string::npos ? s : s.substr(0, comma);
}

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator() {
    int provided = 0;
    check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided), "MPI_Init_thread");
    // Errors come back as codes (turned into stoke::Error), not an abort inside MPI.
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    if (provided < MPI_THREAD_SERIALIZED)
      throw Error(Errc::unsupported, "the MPI library gives no MPI_THREAD_SERIALIZED support: stoke calls it from "
                                     "two threads (never at once)");
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    name_ = "MPI (" + library_version() + ")";
  }
  // A rank failing alone must not finalize (MPI_Finalize would wait for ranks
  // blocked in a collective): it exits, and the launcher ends the job.
  ~MpiCommunicator() override {
    if (std::uncaught_exceptions() == 0 || failing_together_) MPI_Finalize();
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string name() const override { return name_; }

  void allreduce_sum(float* data, size_t n) override { reduce(data, n, MPI_FLOAT); }
  void allreduce_sum(double* data, size_t n) override { reduce(data, n, MPI_DOUBLE); }

  std::vector<uint8_t> allgather(const void* data, size_t bytes) override {
    std::vector<uint8_t> out(bytes * static_cast<size_t>(size_));
    std::lock_guard<std::mutex> lock(mu_);
    check(MPI_Allgather(data, static_cast<int>(bytes), MPI_BYTE, out.data(), static_cast<int>(bytes), MPI_BYTE,
                        MPI_COMM_WORLD),
          "MPI_Allgather");
    return out;
  }

  std::string broadcast(const std::string& text) override {
    std::lock_guard<std::mutex> lock(mu_);
    uint64_t n = rank_ == 0 ? text.size() : 0;
    check(MPI_Bcast(&n, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD), "MPI_Bcast");
    std::string out = rank_ == 0 ? text : std::string(n, '\0');
    check(MPI_Bcast(out.data(), static_cast<int>(n), MPI_CHAR, 0, MPI_COMM_WORLD), "MPI_Bcast");
    return out;
  }

  void barrier() override {
    std::lock_guard<std::mutex> lock(mu_);
    check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
  }

 private:
  // A sum every rank gets bit for bit: each block is summed by one rank
  // (reduce-scatter) and copied to the others (all-gather), so no two ranks
  // can add in different orders — MPI_Allreduce does not promise that for
  // more than two ranks. The few elements left over go to rank 0 and back.
  void reduce(void* data, size_t n, MPI_Datatype type) {
    std::lock_guard<std::mutex> lock(mu_);
    const size_t elem = type == MPI_FLOAT ? 4 : 8;
    const size_t ranks = static_cast<size_t>(size_);
    const size_t piece = (size_t{1} << 26) * ranks;  // MPI counts are ints: large buffers go in pieces
    auto* bytes = static_cast<char*>(data);
    for (size_t done = 0; done < n;) {
      const size_t m = std::min(piece, n - done);
      const size_t block = m / ranks, rest = m - block * ranks;
      char* p = bytes + done * elem;
      if (block > 0) {
        check(MPI_Reduce_scatter_block(MPI_IN_PLACE, p, static_cast<int>(block), type, MPI_SUM, MPI_COMM_WORLD),
              "MPI_Reduce_scatter_block");
        // In place, this rank's sum lands at the front; the all-gather wants it at its block.
        if (rank_ != 0) std::memmove(p + static_cast<size_t>(rank_) * block * elem, p, block * elem);
        check(MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, p, static_cast<int>(block), type, MPI_COMM_WORLD),
              "MPI_Allgather");
      }
      if (rest > 0) {
        char* tail = p + block * ranks * elem;
        check(MPI_Reduce(rank_ == 0 ? MPI_IN_PLACE : tail, tail, static_cast<int>(rest), type, MPI_SUM, 0,
                         MPI_COMM_WORLD),
              "MPI_Reduce");
        check(MPI_Bcast(tail, static_cast<int>(rest), type, 0, MPI_COMM_WORLD), "MPI_Bcast");
      }
      done += m;
    }
  }

  int rank_ = 0, size_ = 1;
  std::string name_;
  std::mutex mu_;
};

}  // namespace

std::unique_ptr<Communicator> open_mpi_communicator() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized) throw Error(Errc::unsupported, "MPI is initialised once per process: one training run per process");
  return std::make_unique<MpiCommunicator>();
}

}  // namespace stoke::dist
