// The default thread count follows the cores other processes leave free (core/thread_governor.h):
// the arithmetic on two readings, the readings themselves, and what the governor leaves alone.
#include <doctest/doctest.h>

#include <omp.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "core/thread_governor.h"

using namespace lathe;

TEST_CASE("thread governor: free cores are the cores minus what other processes used") {
  CpuTimes a{.busy = 1000, .total = 4000, .self = 300, .cores = 2};
  // 1000 ticks of the 2 cores passed: 900 busy, 400 of them this process's, so others used 500:
  // half the machine, one core of two.
  CpuTimes b{.busy = 1900, .total = 5000, .self = 700, .cores = 2};
  CHECK(free_cores(a, b) == doctest::Approx(1.0));
  // Nothing but this process busy: both cores free.
  CpuTimes c{.busy = 2000, .total = 6000, .self = 1800, .cores = 2};
  CHECK(free_cores(b, c) == doctest::Approx(2.0));
  // Others took everything: no core free (the governor still keeps one thread).
  CpuTimes d{.busy = 3000, .total = 7000, .self = 1800, .cores = 2};
  CHECK(free_cores(c, d) == doctest::Approx(0.0));
  // No time passed, or the affinity mask changed between readings: all the cores, no guess.
  CHECK(free_cores(d, d) == doctest::Approx(2.0));
  CpuTimes e = d;
  e.cores = 4;
  e.total += 100;
  CHECK(free_cores(d, e) == doctest::Approx(4.0));
}

TEST_CASE("thread governor: reads this machine's counters") {
  const auto t = read_cpu_times();
  REQUIRE(t.has_value());  // lathe's CI and users' machines are Linux
  CHECK(t->cores >= 1);
  CHECK(t->total >= t->busy);
  CHECK(t->busy >= 0);
}

TEST_CASE("thread governor: a chosen count is kept as given") {
  const int saved = omp_get_max_threads();
  ThreadGovernor fixed(3);
  CHECK_FALSE(fixed.governs());
  CHECK(omp_get_max_threads() == 3);
  CHECK(fixed.update() == 3);
  omp_set_num_threads(saved);
  // OMP_NUM_THREADS is a choice too.
  setenv("OMP_NUM_THREADS", "2", 1);
  ThreadGovernor by_env(0);
  CHECK_FALSE(by_env.governs());
  unsetenv("OMP_NUM_THREADS");
  omp_set_num_threads(saved);
}

TEST_CASE("thread governor: the thread count is the free cores, rounded, from each pair of readings") {
  const int saved = omp_get_max_threads();
  const char* env = std::getenv("OMP_NUM_THREADS");
  const std::string saved_env = env ? env : "";
  unsetenv("OMP_NUM_THREADS");
  omp_set_num_threads(4);  // the default count the governor starts from: four cores
  // Readings of a 4-core machine, 400 ticks apart (100 per core): `others` ticks of them used by
  // other processes, 50 by this one.
  std::vector<CpuTimes> script;
  CpuTimes t{.busy = 0, .total = 0, .self = 0, .cores = 4};
  script.push_back(t);
  for (int64_t others : {100, 200, 0, 150, 400, 251}) {
    t.busy += others + 50;
    t.self += 50;
    t.total += 400;
    script.push_back(t);
  }
  size_t next = 0;
  ThreadGovernor governor(0, [&]() -> std::optional<CpuTimes> { return script.at(next++); });
  REQUIRE(governor.governs());
  // Before the first step: one core of four taken.
  CHECK(omp_get_max_threads() == 3);
  // Within a quarter second of the last reading nothing is read.
  CHECK(governor.update() == 3);
  CHECK(next == 2);
  // Each later window: two cores taken, none, one and a half (a core at least half free is worth
  // a thread: 2.5 free gives 3), all (one thread is always kept), 2.51 (1.49 free gives 1).
  for (int expected : {2, 4, 3, 1, 1}) {
    std::this_thread::sleep_for(std::chrono::milliseconds(260));
    CHECK(governor.update() == expected);
    CHECK(omp_get_max_threads() == expected);
  }
  CHECK(next == script.size());
  if (!saved_env.empty()) setenv("OMP_NUM_THREADS", saved_env.c_str(), 1);
  omp_set_num_threads(saved);
}

TEST_CASE("thread governor: beside a process that keeps a core busy, the first step runs on one thread fewer") {
  const int saved = omp_get_max_threads();
  if (saved < 2 || std::getenv("OMP_NUM_THREADS") != nullptr) {
    MESSAGE("skipped: the governor governs only the default count of a machine of 2+ cores");
    return;
  }
  // The neighbour: a child process spinning until killed; it says so once it runs.
  int ready[2];
  REQUIRE(pipe(ready) == 0);
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    close(ready[0]);
    const char c = 1;
    if (write(ready[1], &c, 1) != 1) _exit(1);
    for (;;) __asm__ volatile("");  // a loop the compiler must keep
  }
  close(ready[1]);
  char c = 0;
  REQUIRE(read(ready[0], &c, 1) == 1);
  close(ready[0]);
  // Governed: the reading taken in the constructor already sees one core taken (the whole
  // machine's other load counts too, so the count can only be lower, never all cores).
  ThreadGovernor governed(0);
  const int first = omp_get_max_threads();
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  omp_set_num_threads(saved);
  REQUIRE(governed.governs());
  CHECK(first <= saved - 1);
}
