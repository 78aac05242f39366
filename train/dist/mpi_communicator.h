// The Communicator between processes started by `mpirun` (Open MPI on Debian), compiled when
// CMake finds MPI's C API (LATHE_HAVE_MPI). No MPI type appears here, so the rest of lathe never
// includes mpi.h.
//
// Errors: MPI_ERRORS_RETURN is set on the world communicator, so a failed call becomes a
// lathe::Error naming the collective and the rank instead of MPI's default abort. A rank that dies
// (killed, crashed, or exited without finalising) is the process manager's to handle: Open MPI's
// mpirun then ends every other rank of the job and names the one that died (tests/dist checks it).
#pragma once

#ifdef LATHE_HAVE_MPI

#include "train/dist/communicator.h"

namespace lathe::dist {

class MpiCommunicator final : public Communicator {
 public:
  // Initialises MPI (threads: only the main thread calls MPI; OpenMP's workers never do).
  MpiCommunicator();
  // Finalises MPI: every rank must get here (after the same collectives).
  ~MpiCommunicator() override;
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string describe() const override;
  void all_reduce_sum(float* data, size_t n) override;
  void all_reduce_sum(double* data, size_t n) override;
  std::unique_ptr<PendingCollective> start_all_reduce_sum(float* data, size_t n) override;
  void broadcast(void* data, size_t bytes, int root) override;
  std::vector<std::string> all_gather(const std::string& mine) override;
  void all_gather_bytes(const void* mine, void* out, const std::vector<size_t>& sizes) override;
  std::vector<std::string> gather(const std::string& mine, int root) override;
  void barrier() override;
  [[noreturn]] void abort(int exit_code) override;

 private:
  int rank_ = 0, size_ = 1;
  bool initialised_here_ = false;
};

}  // namespace lathe::dist

#endif  // LATHE_HAVE_MPI
