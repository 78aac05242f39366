#include "train/distributed/mpi_communicator.h"

#ifdef LATHE_HAVE_MPI

#include <mpi.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <numeric>
#include <thread>
#include <vector>

#include "core/error.h"

namespace lathe::dist {

namespace {

using Clock = std::chrono::steady_clock;

// MPI counts are ints: larger buffers go in pieces of this many elements.
constexpr size_t kMaxCount = size_t(1) << 30;

// The waiting loop's rhythm (mpi_communicator.h): spin this long, then sleep between tests for a
// sixteenth of the time waited so far, at most kShortSleepSeconds during the first second and
// kLongSleepSeconds after it.
constexpr double kSpinSeconds = 2e-3;
constexpr double kShortSleepSeconds = 1e-3, kLongSleepSeconds = 10e-3;
// A rank that timed out listens this long for the other ranks' answers.
constexpr double kListenSeconds = 2;
// Tags of the questions and answers on the watch's own communicator.
constexpr int kQuestionTag = 1, kAnswerTag = 2;

enum class Kind : int64_t { all_reduce, broadcast, all_gather, gather, barrier };

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::all_reduce: return "all-reduce";
    case Kind::broadcast: return "broadcast";
    case Kind::all_gather: return "all-gather";
    case Kind::gather: return "gather";
    case Kind::barrier: return "barrier";
  }
  return "collective";
}

double elapsed_seconds(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

void sleep_seconds(double s) { std::this_thread::sleep_for(std::chrono::duration<double>(s)); }

void check(int rc, Kind what, int rank) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  LATHE_FAIL("MPI ", kind_name(what), " failed on rank ", rank, ": ", std::string(text, size_t(len)));
}

int as_count(size_t n, const char* what) {
  LATHE_CHECK(n <= size_t(INT_MAX), "MPI ", what, ": ", n, " elements is more than one MPI call carries (", INT_MAX, ")");
  return int(n);
}

// "rank 2", "ranks 2 and 3", "ranks 1, 2 and 3".
std::string ranks_phrase(const std::vector<int>& ranks) {
  std::string out = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i)
    out += (i == 0 ? "" : i + 1 == ranks.size() ? " and " : ", ") + std::to_string(ranks[i]);
  return out;
}

std::string seconds_text(double s, const char* format) {
  char buf[32];
  std::snprintf(buf, sizeof buf, format, s);
  return buf;
}

}  // namespace

// Every wait for a collective of one MpiCommunicator (mpi_communicator.h explains the loop).
class CollectiveWatch {
 public:
  explicit CollectiveWatch(const Communicator& comm) : comm_(comm) {
    const int rc = MPI_Comm_dup(MPI_COMM_WORLD, &questions_);
    LATHE_CHECK(rc == MPI_SUCCESS, "MPI_Comm_dup failed on rank ", comm.rank(), " (code ", rc, ")");
  }
  ~CollectiveWatch() {
    int finalised = 0;
    MPI_Finalized(&finalised);
    if (!finalised && questions_ != MPI_COMM_NULL) MPI_Comm_free(&questions_);
  }
  CollectiveWatch(const CollectiveWatch&) = delete;
  CollectiveWatch& operator=(const CollectiveWatch&) = delete;

  int rank() const { return comm_.rank(); }
  // Numbers the collective about to start: the same numbers on every rank, which start them in
  // the same order.
  uint64_t next_number() { return ++started_; }

  // Returns when `request` (collective `number`, a `kind`) is complete; past the deadline it
  // ends the job and does not return.
  void wait(MPI_Request& request, Kind kind, uint64_t number) {
    const Waiting w{kind, number};
    const auto start = Clock::now();
    for (;;) {
      int done = 0;
      check(MPI_Test(&request, &done, MPI_STATUS_IGNORE), kind, rank());
      if (done) return;
      const double waited = elapsed_seconds(start);
      if (waited < kSpinSeconds) continue;
      answer_questions(w);
      if (waited >= comm_.timeout()) time_out(w, waited);
      sleep_seconds(std::min(waited / 16, waited < 1 ? kShortSleepSeconds : kLongSleepSeconds));
    }
  }

 private:
  struct Waiting {
    Kind kind;
    uint64_t number;
  };
  // What a rank waiting in a collective answers: which one it is waiting in (number, kind).
  using Answer = std::array<int64_t, 2>;
  struct Sent {
    Answer answer;
    MPI_Request request = MPI_REQUEST_NULL;
  };

  // Tells every rank that asked which collective this one is waiting in.
  void answer_questions(const Waiting& w) {
    for (;;) {
      int asked = 0;
      MPI_Status status;
      if (MPI_Iprobe(MPI_ANY_SOURCE, kQuestionTag, questions_, &asked, &status) != MPI_SUCCESS || !asked) break;
      int64_t question = 0;
      MPI_Recv(&question, 1, MPI_INT64_T, status.MPI_SOURCE, kQuestionTag, questions_, MPI_STATUS_IGNORE);
      Sent& s = sent_.emplace_back();  // a deque: the buffer stays where MPI was told it is
      s.answer = {int64_t(w.number), int64_t(w.kind)};
      MPI_Isend(s.answer.data(), 2, MPI_INT64_T, status.MPI_SOURCE, kAnswerTag, questions_, &s.request);
    }
    while (!sent_.empty()) {
      int done = 0;
      MPI_Test(&sent_.front().request, &done, MPI_STATUS_IGNORE);
      if (!done) break;
      sent_.pop_front();
    }
  }

  // Past the deadline: asks the other ranks which collective each waits in, says who did not
  // answer (or, when all did, where each waits), and ends the job.
  [[noreturn]] void time_out(const Waiting& w, double waited) {
    const int me = rank(), n = comm_.size();
    std::vector<Answer> heard(size_t(n), Answer{-1, -1});
    heard[size_t(me)] = {int64_t(w.number), int64_t(w.kind)};
    std::vector<MPI_Request> replies(size_t(n), MPI_REQUEST_NULL), questions(size_t(n), MPI_REQUEST_NULL);
    const int64_t question = int64_t(w.number);
    for (int r = 0; r < n; ++r) {
      if (r == me) continue;
      MPI_Irecv(heard[size_t(r)].data(), 2, MPI_INT64_T, r, kAnswerTag, questions_, &replies[size_t(r)]);
      MPI_Isend(&question, 1, MPI_INT64_T, r, kQuestionTag, questions_, &questions[size_t(r)]);
    }
    const auto asked = Clock::now();
    for (int left = n - 1; left > 0 && elapsed_seconds(asked) < kListenSeconds;) {
      answer_questions(w);  // another rank that timed out asks this one at the same time
      for (MPI_Request& r : replies) {
        int done = 0;
        if (r != MPI_REQUEST_NULL && MPI_Test(&r, &done, MPI_STATUS_IGNORE) == MPI_SUCCESS && done) --left;
      }
      sleep_seconds(1e-3);
    }
    std::vector<int> answered, silent;
    for (int r = 0; r < n; ++r) (replies[size_t(r)] == MPI_REQUEST_NULL ? answered : silent).push_back(r);

    const std::string message =
        silent.empty() ? all_waiting_message(w, waited, heard) : missing_message(w, waited, silent, answered);
    if (answered.front() != me) {
      // A lower rank is waiting too and prints for the job: keep answering it until it ends the
      // job, and end it from here only if it never does.
      const auto t0 = Clock::now();
      while (elapsed_seconds(t0) < comm_.timeout() + kListenSeconds + 5) {
        answer_questions(w);
        sleep_seconds(kLongSleepSeconds);
      }
    }
    std::fprintf(stderr, "lathe: %s\n", message.c_str());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
    std::_Exit(1);
  }

  // " during step 12 (--dist-timeout 300)"
  std::string during() const {
    return " during " + comm_.activity() + " (--dist-timeout " + seconds_text(comm_.timeout(), "%g") + ")";
  }

  // Some ranks did not answer: they are the ones this rank waits for.
  std::string missing_message(const Waiting& w, double waited, const std::vector<int>& silent,
                              const std::vector<int>& answered) const {
    const bool one = silent.size() == 1;
    const char* article = w.kind == Kind::all_reduce || w.kind == Kind::all_gather ? "an " : "a ";
    std::string m = ranks_phrase(silent) + " of " + std::to_string(comm_.size()) + " did not arrive: rank " +
                    std::to_string(rank()) + " waited " + seconds_text(waited, "%.1f") + " s for " +
                    (one ? "it" : "them") + " in " + article + kind_name(w.kind) + during();
    if (answered.size() > 1)
      m += "; " + ranks_phrase(answered) + " were waiting in collectives, " + ranks_phrase(silent) + " did not answer";
    else
      m += std::string(", and ") + (one ? "it" : "they") + " did not answer";
    return m + ", so " + (one ? "it is" : "they are") +
           " stopped, hung or busy elsewhere. Ending every process of the job; if " + (one ? "it was" : "they were") +
           " only slow (a long checkpoint write, an overloaded machine), allow more time with --dist-timeout SECONDS";
  }

  // Every rank answered: each waits in a collective, and this rank's does not complete.
  std::string all_waiting_message(const Waiting& w, double waited, const std::vector<Answer>& heard) const {
    bool same = true;
    std::string where;
    for (size_t r = 0; r < heard.size(); ++r) {
      same = same && heard[r] == heard[0];
      where += (r == 0 ? "rank " : ", rank ") + std::to_string(r) + " in " + kind_name(Kind(heard[r][1])) +
               " number " + std::to_string(heard[r][0]);
    }
    return "every rank of " + std::to_string(comm_.size()) + " is waiting in a collective, but rank " +
           std::to_string(rank()) + "'s " + kind_name(w.kind) + " did not complete in " + seconds_text(waited, "%.1f") +
           " s" + during() + ": " + where +
           (same ? "; the transport is stuck or far too slow"
                 : "; the ranks called collectives in different orders, a bug in lathe") +
           ". Ending every process of the job";
  }

  const Communicator& comm_;
  MPI_Comm questions_ = MPI_COMM_NULL;  // a duplicate of the world: questions and answers only
  uint64_t started_ = 0;
  std::deque<Sent> sent_;  // answers that may still be on their way
};

namespace {

// Starts a collective (`start` is its MPI_I* call, writing the request) and waits for it.
template <class Start>
void collective(CollectiveWatch& watch, Kind kind, Start&& start) {
  MPI_Request request = MPI_REQUEST_NULL;
  const uint64_t number = watch.next_number();
  check(start(&request), kind, watch.rank());
  watch.wait(request, kind, number);
}

class MpiPending final : public PendingCollective {
 public:
  MpiPending(CollectiveWatch& watch, MPI_Request request, uint64_t number)
      : watch_(watch), request_(request), number_(number) {}
  ~MpiPending() override {
    // A collective cannot be cancelled; one still running when its owner unwinds is waited for,
    // under the deadline like any other.
    if (request_ == MPI_REQUEST_NULL) return;
    try {
      watch_.wait(request_, Kind::all_reduce, number_);
    } catch (const Error&) {
    }
  }
  bool test() override {
    if (request_ == MPI_REQUEST_NULL) return true;
    int done = 0;
    check(MPI_Test(&request_, &done, MPI_STATUS_IGNORE), Kind::all_reduce, watch_.rank());
    return done != 0;
  }
  void wait() override {
    if (request_ != MPI_REQUEST_NULL) watch_.wait(request_, Kind::all_reduce, number_);
  }

 private:
  CollectiveWatch& watch_;
  MPI_Request request_;
  uint64_t number_;
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
  watch_ = std::make_unique<CollectiveWatch>(*this);
}

MpiCommunicator::~MpiCommunicator() {
  watch_.reset();  // its communicator goes before MPI does
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
    collective(*watch_, Kind::all_reduce, [&](MPI_Request* r) {
      return MPI_Iallreduce(MPI_IN_PLACE, data + at, int(std::min(kMaxCount, n - at)), MPI_FLOAT, MPI_SUM,
                            MPI_COMM_WORLD, r);
    });
}

void MpiCommunicator::all_reduce_sum(double* data, size_t n) {
  for (size_t at = 0; at < n; at += kMaxCount)
    collective(*watch_, Kind::all_reduce, [&](MPI_Request* r) {
      return MPI_Iallreduce(MPI_IN_PLACE, data + at, int(std::min(kMaxCount, n - at)), MPI_DOUBLE, MPI_SUM,
                            MPI_COMM_WORLD, r);
    });
}

std::unique_ptr<PendingCollective> MpiCommunicator::start_all_reduce_sum(float* data, size_t n) {
  MPI_Request request = MPI_REQUEST_NULL;
  const uint64_t number = watch_->next_number();
  check(MPI_Iallreduce(MPI_IN_PLACE, data, as_count(n, "all-reduce"), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &request),
        Kind::all_reduce, rank_);
  return std::make_unique<MpiPending>(*watch_, request, number);
}

void MpiCommunicator::broadcast(void* data, size_t bytes, int root) {
  auto* p = static_cast<char*>(data);
  for (size_t at = 0; at < bytes; at += kMaxCount)
    collective(*watch_, Kind::broadcast, [&](MPI_Request* r) {
      return MPI_Ibcast(p + at, int(std::min(kMaxCount, bytes - at)), MPI_BYTE, root, MPI_COMM_WORLD, r);
    });
}

std::vector<std::string> MpiCommunicator::all_gather(const std::string& mine) {
  std::vector<size_t> sizes(static_cast<size_t>(size_));
  const uint64_t my_size = mine.size();
  std::vector<uint64_t> all(static_cast<size_t>(size_));
  collective(*watch_, Kind::all_gather, [&](MPI_Request* r) {
    return MPI_Iallgather(&my_size, 1, MPI_UINT64_T, all.data(), 1, MPI_UINT64_T, MPI_COMM_WORLD, r);
  });
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
  collective(*watch_, Kind::all_gather, [&](MPI_Request* r) {
    return MPI_Iallgatherv(mine, counts[size_t(rank_)], MPI_BYTE, out, counts.data(), displs.data(), MPI_BYTE,
                           MPI_COMM_WORLD, r);
  });
}

std::vector<std::string> MpiCommunicator::gather(const std::string& mine, int root) {
  const int my_size = as_count(mine.size(), "gather");
  std::vector<int> counts(static_cast<size_t>(size_)), displs(static_cast<size_t>(size_));
  collective(*watch_, Kind::gather, [&](MPI_Request* r) {
    return MPI_Igather(&my_size, 1, MPI_INT, counts.data(), 1, MPI_INT, root, MPI_COMM_WORLD, r);
  });
  size_t total = 0;
  if (rank_ == root)
    for (size_t r = 0; r < counts.size(); ++r) {
      displs[r] = as_count(total, "gather");
      total += size_t(counts[r]);
    }
  std::string joined(rank_ == root ? total : 0, '\0');
  collective(*watch_, Kind::gather, [&](MPI_Request* r) {
    return MPI_Igatherv(mine.data(), my_size, MPI_BYTE, joined.data(), counts.data(), displs.data(), MPI_BYTE, root,
                        MPI_COMM_WORLD, r);
  });
  std::vector<std::string> out;
  if (rank_ != root) return out;
  for (size_t r = 0; r < counts.size(); ++r) out.push_back(joined.substr(size_t(displs[r]), size_t(counts[r])));
  return out;
}

void MpiCommunicator::barrier() {
  collective(*watch_, Kind::barrier, [&](MPI_Request* r) { return MPI_Ibarrier(MPI_COMM_WORLD, r); });
}

void MpiCommunicator::abort(int exit_code) {
  MPI_Abort(MPI_COMM_WORLD, exit_code);
  std::_Exit(exit_code);  // MPI_Abort does not return; this keeps [[noreturn]] honest if it did
}

}  // namespace lathe::dist

#endif  // LATHE_HAVE_MPI
