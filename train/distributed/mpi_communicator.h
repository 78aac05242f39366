// The Communicator between processes started by `mpirun` (Open MPI on Debian), compiled when
// CMake finds MPI's C API (LATHE_HAVE_MPI). No MPI type appears here, so the rest of lathe never
// includes mpi.h.
//
// Errors: MPI_ERRORS_RETURN is set on the world communicator, so a failed call becomes a
// lathe::Error naming the collective and the rank instead of MPI's default abort. A rank that dies
// (killed, crashed, or exited without finalising) is the process manager's to handle: Open MPI's
// mpirun then ends every other rank of the job and names the one that died (tests/dist checks it).
//
// A rank that stops answering without dying is this class's to handle (Communicator::timeout()).
// Every collective is MPI's non-blocking form (MPI_Iallreduce, MPI_Ibcast, MPI_Iallgather(v),
// MPI_Igather(v), MPI_Ibarrier), and every wait for one goes through one loop (CollectiveWatch,
// mpi_communicator.cpp) that tests it with a deadline:
//
//   - it spins on MPI_Test for the first 2 ms, as MPI_Wait would: Open MPI moves a collective
//     along only inside MPI calls, and a healthy run's waits are mostly this short; then it
//     sleeps between tests for 1/16 of the time waited so far, at most 1 ms during the first
//     second and 10 ms after, so a long wait costs a few wake-ups a second instead of a core.
//     The price: each round of the collective that needs this rank to pass data on (one or two
//     for two ranks) can start that much later, at most 1/16 of the wait;
//   - a rank in that sleeping phase also answers questions from other ranks on a communicator of
//     their own (a duplicate of the world's), saying which collective it waits in;
//   - past the deadline, the rank asks every other rank and listens for 2 s: the ranks that
//     answer are waiting in a collective too; those that do not are stopped, hung or busy
//     elsewhere, and are the ones named. The lowest rank that answered (itself included) prints
//     the message and calls MPI_Abort, so mpirun ends every process, a stopped one included (it
//     sends SIGCONT before SIGTERM and SIGKILL); the other ranks that timed out keep answering
//     and leave the printing to it, and print themselves only if the job is still alive a whole
//     timeout later.
#pragma once

#ifdef LATHE_HAVE_MPI

#include <memory>

#include "train/distributed/communicator.h"

namespace lathe::dist {

class CollectiveWatch;  // mpi_communicator.cpp

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
  std::unique_ptr<CollectiveWatch> watch_;  // every wait for a collective
};

}  // namespace lathe::dist

#endif  // LATHE_HAVE_MPI
