// The default CPU thread count, following the cores other processes leave free.
//
// Every parallel region ends at a barrier that waits for each thread of the team. When another
// process keeps a core busy, one of lathe's threads is descheduled for a time slice at a time, and
// every barrier waits for it: on a 2-core machine with one core taken, `tiny` ran 58x slower on 2
// threads than on 1 (356 ms against 6.1 ms a step). So between steps the governor looks at how much
// CPU time the cores lathe may run on spent outside this process over the last quarter second
// (/proc/stat's per-CPU counters minus this process's own, /proc/self/stat), and sets the thread
// count to the cores left over. A busy neighbour then costs lathe its share of the machine instead
// of a wait at every op. The kernels split their work by shape only, so the thread count never
// changes a result (tests/test_determinism.cpp): the governor is invisible in the numbers.
//
// It governs only the default: a count chosen with --threads or OMP_NUM_THREADS is kept as given.
// Where /proc cannot be read (not Linux), it keeps OpenMP's default.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>

namespace lathe {

// CPU time in clock ticks: of the cores this process may run on (busy and all), and of itself.
struct CpuTimes {
  int64_t busy = 0, total = 0, self = 0;
  int cores = 0;  // the cores of this process's affinity mask
};
std::optional<CpuTimes> read_cpu_times();

// The cores free for this process, from two readings: its cores minus the time others used.
double free_cores(const CpuTimes& before, const CpuTimes& after);

// Where readings come from: read_cpu_times, or a test's script of readings.
using CpuTimesReader = std::function<std::optional<CpuTimes>()>;

class ThreadGovernor {
 public:
  // `requested`: the --threads value (0: the default, governed). Sets the starting thread count;
  // governed, from a first reading of 100 ms (the constructor sleeps for it).
  explicit ThreadGovernor(int requested, CpuTimesReader read = read_cpu_times);

  // Between steps: at most one reading every quarter second; changes the thread count when the
  // free cores changed. Returns the count in force.
  int update();

  bool governs() const { return governs_; }

 private:
  int threads_for(double free_cores) const;
  void set_threads(int threads);

  CpuTimesReader read_;
  bool governs_ = false;
  int max_threads_ = 1;
  int threads_ = 1;
  std::optional<CpuTimes> last_;
  std::chrono::steady_clock::time_point last_time_;
};

}  // namespace lathe
