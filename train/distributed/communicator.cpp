#include "train/distributed/communicator.h"

#include <cmath>
#include <cstdlib>
#include <cstring>

#include "core/error.h"
#include "train/distributed/mpi_communicator.h"

namespace lathe::dist {

namespace {
class Done final : public PendingCollective {
 public:
  bool test() override { return true; }
  void wait() override {}
};

// The world size the process manager announced (Open MPI, then the PMI variables others use); 0 if none.
int announced_world_size() {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMIX_SIZE", "PMI_SIZE"})
    if (const char* v = std::getenv(var); v != nullptr && *v != '\0') return std::atoi(v);
  return 0;
}
}  // namespace

void Communicator::set_timeout(double seconds) {
  LATHE_CHECK(std::isfinite(seconds) && seconds > 0, "the collectives' timeout must be a positive number of seconds, got ",
              seconds);
  timeout_ = seconds;
}

std::unique_ptr<PendingCollective> SingleProcessCommunicator::start_all_reduce_sum(float*, size_t) {
  return std::make_unique<Done>();
}

void SingleProcessCommunicator::all_gather_bytes(const void* mine, void* out, const std::vector<size_t>& sizes) {
  LATHE_CHECK(sizes.size() == 1, "all_gather_bytes: ", sizes.size(), " sizes for 1 process");
  if (sizes[0] > 0) std::memmove(out, mine, sizes[0]);
}

void SingleProcessCommunicator::abort(int exit_code) { std::exit(exit_code); }

bool launched_by_mpirun() { return announced_world_size() > 0; }

int local_rank() {
  for (const char* var : {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"})
    if (const char* v = std::getenv(var); v != nullptr && *v != '\0') return std::atoi(v);
  return 0;
}

bool mpi_available() {
#ifdef LATHE_HAVE_MPI
  return true;
#else
  return false;
#endif
}

std::unique_ptr<Communicator> make_communicator() {
  const int announced = announced_world_size();
#ifdef LATHE_HAVE_MPI
  if (announced > 0) return std::make_unique<MpiCommunicator>();
#else
  LATHE_CHECK(announced <= 1, "started by mpirun as one of ", announced,
              " processes, but this lathe was built without MPI (install libopenmpi-dev and rebuild): each "
              "process would train the whole run on its own");
#endif
  return std::make_unique<SingleProcessCommunicator>();
}

}  // namespace lathe::dist
