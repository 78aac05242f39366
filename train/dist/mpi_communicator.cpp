#include "train/dist/mpi_communicator.h"

#ifdef LATHE_HAVE_MPI

#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstdint>
#include <numeric>

#include "core/error.h"

namespace lathe::dist {

namespace {

// MPI counts are ints: larger buffers go in pieces of this many elements.
constexpr size_t kMaxCount = size_t(1) << 30;

void check(int rc, const char* what, int rank) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  LATHE_FAIL("MPI ", what, " failed on rank ", rank, ": ", std::string(text, size_t(len)));
}

int as_count(size_t n, const char* what) {
  LATHE_CHECK(n <= size_t(INT_MAX), "MPI ", what, ": ", n, " elements is more than one MPI call carries (", INT_MAX, ")");
  return int(n);
}

class MpiPending final : public PendingCollective {
 public:
  MpiPending(MPI_Request request, int rank) : request_(request), rank_(rank) {}
  ~MpiPending() override {
    // A collective cannot be cancelled; one still running when its owner unwinds is waited for.
    if (request_ != MPI_REQUEST_NULL) MPI_Wait(&request_, MPI_STATUS_IGNORE);
  }
  bool test() override {
    if (request_ == MPI_REQUEST_NULL) return true;
    int done = 0;
    check(MPI_Test(&request_, &done, MPI_STATUS_IGNORE), "all-reduce (test)", rank_);
    return done != 0;
  }
  void wait() override {
    if (request_ == MPI_REQUEST_NULL) return;
    check(MPI_Wait(&request_, MPI_STATUS_IGNORE), "all-reduce (wait)", rank_);
  }

 private:
  MPI_Request request_;
  int rank_;
};

}  // namespace

MpiCommunicator::MpiCommunicator() {
  int initialised = 0;
  MPI_Initialized(&initialised);
  if (!initialised) {
    int provided = 0;
    const int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
    LATHE_CHECK(rc == MPI_SUCCESS, "MPI_Init_thread failed (code ", rc, ")");
    initialised_here_ = true;
  }
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
}

MpiCommunicator::~MpiCommunicator() {
  int finalised = 0;
  MPI_Finalized(&finalised);
  if (initialised_here_ && !finalised) MPI_Finalize();
}

std::string MpiCommunicator::describe() const {
  char version[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  MPI_Get_library_version(version, &len);
  std::string v(version, size_t(len));
  if (auto comma = v.find(','); comma != std::string::npos) v.resize(comma);  // "Open MPI v4.1.4"
  return std::to_string(size_) + (size_ == 1 ? " process" : " processes") + " over MPI (" + v + ")";
}

void MpiCommunicator::all_reduce_sum(float* data, size_t n) {
  for (size_t at = 0; at < n; at += kMaxCount)
    check(MPI_Allreduce(MPI_IN_PLACE, data + at, int(std::min(kMaxCount, n - at)), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD),
          "all-reduce", rank_);
}

void MpiCommunicator::all_reduce_sum(double* data, size_t n) {
  for (size_t at = 0; at < n; at += kMaxCount)
    check(MPI_Allreduce(MPI_IN_PLACE, data + at, int(std::min(kMaxCount, n - at)), MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD),
          "all-reduce", rank_);
}

std::unique_ptr<PendingCollective> MpiCommunicator::start_all_reduce_sum(float* data, size_t n) {
  MPI_Request request = MPI_REQUEST_NULL;
  check(MPI_Iallreduce(MPI_IN_PLACE, data, as_count(n, "all-reduce"), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &request),
        "all-reduce (start)", rank_);
  return std::make_unique<MpiPending>(request, rank_);
}

void MpiCommunicator::broadcast(void* data, size_t bytes, int root) {
  auto* p = static_cast<char*>(data);
  for (size_t at = 0; at < bytes; at += kMaxCount)
    check(MPI_Bcast(p + at, int(std::min(kMaxCount, bytes - at)), MPI_BYTE, root, MPI_COMM_WORLD), "broadcast", rank_);
}

std::vector<std::string> MpiCommunicator::all_gather(const std::string& mine) {
  std::vector<size_t> sizes(static_cast<size_t>(size_));
  const uint64_t my_size = mine.size();
  std::vector<uint64_t> all(static_cast<size_t>(size_));
  check(MPI_Allgather(&my_size, 1, MPI_UINT64_T, all.data(), 1, MPI_UINT64_T, MPI_COMM_WORLD), "all-gather (sizes)",
        rank_);
  for (int r = 0; r < size_; ++r) sizes[size_t(r)] = size_t(all[size_t(r)]);
  std::string joined(std::accumulate(sizes.begin(), sizes.end(), size_t(0)), '\0');
  all_gather_bytes(mine.data(), joined.data(), sizes);
  std::vector<std::string> out;
  size_t at = 0;
  for (size_t s : sizes) {
    out.push_back(joined.substr(at, s));
    at += s;
  }
  return out;
}

void MpiCommunicator::all_gather_bytes(const void* mine, void* out, const std::vector<size_t>& sizes) {
  LATHE_CHECK(sizes.size() == size_t(size_), "all_gather_bytes: ", sizes.size(), " sizes for ", size_, " processes");
  std::vector<int> counts(sizes.size()), displs(sizes.size());
  size_t total = 0;
  for (size_t r = 0; r < sizes.size(); ++r) {
    counts[r] = as_count(sizes[r], "all-gather");
    displs[r] = as_count(total, "all-gather");
    total += sizes[r];
  }
  as_count(total, "all-gather");
  check(MPI_Allgatherv(mine, counts[size_t(rank_)], MPI_BYTE, out, counts.data(), displs.data(), MPI_BYTE,
                       MPI_COMM_WORLD),
        "all-gather", rank_);
}

std::vector<std::string> MpiCommunicator::gather(const std::string& mine, int root) {
  const int my_size = as_count(mine.size(), "gather");
  std::vector<int> counts(static_cast<size_t>(size_)), displs(static_cast<size_t>(size_));
  check(MPI_Gather(&my_size, 1, MPI_INT, counts.data(), 1, MPI_INT, root, MPI_COMM_WORLD), "gather (sizes)", rank_);
  size_t total = 0;
  if (rank_ == root)
    for (size_t r = 0; r < counts.size(); ++r) {
      displs[r] = as_count(total, "gather");
      total += size_t(counts[r]);
    }
  std::string joined(rank_ == root ? total : 0, '\0');
  check(MPI_Gatherv(mine.data(), my_size, MPI_BYTE, joined.data(), counts.data(), displs.data(), MPI_BYTE, root,
                    MPI_COMM_WORLD),
        "gather", rank_);
  std::vector<std::string> out;
  if (rank_ != root) return out;
  for (size_t r = 0; r < counts.size(); ++r) out.push_back(joined.substr(size_t(displs[r]), size_t(counts[r])));
  return out;
}

void MpiCommunicator::barrier() { check(MPI_Barrier(MPI_COMM_WORLD), "barrier", rank_); }

void MpiCommunicator::abort(int exit_code) {
  MPI_Abort(MPI_COMM_WORLD, exit_code);
  std::_Exit(exit_code);  // MPI_Abort does not return; this keeps [[noreturn]] honest if it did
}

}  // namespace lathe::dist

#endif  // LATHE_HAVE_MPI
