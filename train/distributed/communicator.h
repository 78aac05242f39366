// The processes of one data parallel run, and the collectives they use (docs/design.md, "Data
// parallelism"). lathe has no transport of its own: between processes the implementation is MPI
// (train/distributed/mpi_communicator.h, compiled when CMake finds MPI), and a process started
// alone has a communicator of size one whose collectives are no-ops, so the same training code runs
// at every world size.
//
// Every collective must be called by every rank, in the same order; a rank that cannot go on
// throws, and the caller either agrees on the error with the others first
// (train/distributed/agreement.h) or aborts the whole run (abort()), so that no rank waits forever
// on one that left.
//
// A rank that does not leave but stops answering (stopped with SIGSTOP, hung in a driver, lost in
// a loop) would still hold every other rank in its next collective forever. So a collective waits
// at most timeout() seconds: then the job ends, every process of it, with one message naming the
// rank or ranks that did not arrive, the collective and what the run was doing (activity()), as
// PyTorch's process-group watchdog does (MpiCommunicator explains how the rank is found).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace lathe::dist {

// How long a collective waits for the other ranks by default (`lathe train --dist-timeout`): long
// enough for rank 0 to write a checkpoint of GPT-2 while the others wait, short enough that a
// stuck job does not hold its machines for long.
inline constexpr double kDefaultTimeoutSeconds = 300;

// A collective started without waiting (an all-reduce overlapping the backward pass).
class PendingCollective {
 public:
  virtual ~PendingCollective() = default;
  // Lets the transport progress; true once the collective is complete.
  virtual bool test() = 0;
  virtual void wait() = 0;
};

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  // One line for the log: the transport and the world size.
  virtual std::string describe() const = 0;

  // In place: every rank ends with the element-wise sum over ranks, the same bits on every rank.
  virtual void all_reduce_sum(float* data, size_t n) = 0;
  virtual void all_reduce_sum(double* data, size_t n) = 0;
  // The same, started now and finished by the handle's wait(); `data` must stay untouched until
  // then.
  virtual std::unique_ptr<PendingCollective> start_all_reduce_sum(float* data, size_t n) = 0;
  // `bytes` bytes from `root` to every rank.
  virtual void broadcast(void* data, size_t bytes, int root) = 0;
  // Every rank's string, in rank order (lengths may differ).
  virtual std::vector<std::string> all_gather(const std::string& mine) = 0;
  // Every rank's block, concatenated in rank order into `out` (sizes[r] bytes come from rank r;
  // this rank sends sizes[rank()] bytes from `mine`).
  virtual void all_gather_bytes(const void* mine, void* out, const std::vector<size_t>& sizes) = 0;
  // Every rank's string at `root`, in rank order; the other ranks get an empty vector.
  virtual std::vector<std::string> gather(const std::string& mine, int root) = 0;
  virtual void barrier() = 0;
  // Ends every process of the run with `exit_code`, now (a rank that failed alone).
  [[noreturn]] virtual void abort(int exit_code) = 0;

  // Seconds a collective may wait for the other ranks before the job ends (positive, finite).
  void set_timeout(double seconds);
  double timeout() const { return timeout_; }
  // What the run is doing now, for the message of a collective that timed out ("step 12", "the
  // checkpoint at step 100"); it reads after "during".
  void set_activity(std::string what) { activity_ = std::move(what); }
  const std::string& activity() const { return activity_; }

 private:
  double timeout_ = kDefaultTimeoutSeconds;
  std::string activity_ = "the start of the run";
};

// A process started alone: rank 0 of 1, every collective a no-op.
class SingleProcessCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string describe() const override { return "1 process"; }
  void all_reduce_sum(float*, size_t) override {}
  void all_reduce_sum(double*, size_t) override {}
  std::unique_ptr<PendingCollective> start_all_reduce_sum(float*, size_t) override;
  void broadcast(void*, size_t, int) override {}
  std::vector<std::string> all_gather(const std::string& mine) override { return {mine}; }
  void all_gather_bytes(const void* mine, void* out, const std::vector<size_t>& sizes) override;
  std::vector<std::string> gather(const std::string& mine, int) override { return {mine}; }
  void barrier() override {}
  [[noreturn]] void abort(int exit_code) override;
};

// Whether this process was started by a process manager (mpirun) as one of several ranks.
bool launched_by_mpirun();
// Whether this build can talk MPI.
bool mpi_available();
// This process's rank among those of the run on the same machine, as the process manager says
// (Open MPI's OMPI_COMM_WORLD_LOCAL_RANK); 0 when it says nothing. Picks a rank's GPU.
int local_rank();

// The communicator of this process: MPI when started by mpirun (MPI is initialised here, and
// finalised when the communicator goes), else a single process. Throws lathe::Error when started
// by mpirun with more than one rank in a build without MPI: each copy would train the whole run.
std::unique_ptr<Communicator> make_communicator();

}  // namespace lathe::dist
