#include "core/thread_governor.h"

#include <omp.h>
#include <sched.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <utility>

namespace lathe {

namespace {

// A reading covers at least this long: shorter windows see a time slice, not a share.
constexpr std::chrono::milliseconds kWindow{250};
// The reading taken before the first step, while this process sleeps.
constexpr std::chrono::milliseconds kFirstWindow{100};

// Busy and total ticks of the CPUs in `mask` from /proc/stat's "cpuN ..." lines.
bool read_proc_stat(const cpu_set_t& mask, CpuTimes& t) {
  std::ifstream f("/proc/stat");
  if (!f) return false;
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("cpu", 0) != 0) break;  // the cpu lines come first
    if (line.size() < 4 || line[3] < '0' || line[3] > '9') continue;  // the "cpu " sum of all
    std::istringstream in(line.substr(3));
    int cpu = -1;
    in >> cpu;
    if (cpu < 0 || cpu >= CPU_SETSIZE || !CPU_ISSET(cpu, &mask)) continue;
    // user nice system idle iowait irq softirq steal (guest time is inside user and nice)
    int64_t v[8] = {};
    for (int64_t& x : v) in >> x;
    if (!in) return false;
    int64_t total = 0;
    for (int64_t x : v) total += x;
    t.total += total;
    t.busy += total - v[3] - v[4];
    ++t.cores;
  }
  return t.cores > 0;
}

// This process's user + system ticks: fields 14 and 15 of /proc/self/stat, counted after the
// command name, which is in parentheses and may itself hold spaces.
bool read_self_ticks(int64_t& ticks) {
  std::ifstream f("/proc/self/stat");
  std::string s((std::istreambuf_iterator<char>(f)), {});
  const auto paren = s.rfind(')');
  if (!f || paren == std::string::npos) return false;
  std::istringstream in(s.substr(paren + 1));
  std::string field;
  int64_t utime = 0, stime = 0;
  for (int i = 3; i <= 15 && in >> field; ++i) {
    if (i == 14) utime = std::strtoll(field.c_str(), nullptr, 10);
    if (i == 15) stime = std::strtoll(field.c_str(), nullptr, 10);
  }
  if (!in) return false;
  ticks = utime + stime;
  return true;
}

}  // namespace

std::optional<CpuTimes> read_cpu_times() {
  cpu_set_t mask;
  CPU_ZERO(&mask);
  if (sched_getaffinity(0, sizeof mask, &mask) != 0) return std::nullopt;
  CpuTimes t;
  if (!read_proc_stat(mask, t) || !read_self_ticks(t.self)) return std::nullopt;
  return t;
}

double free_cores(const CpuTimes& before, const CpuTimes& after) {
  const double total = double(after.total - before.total);
  if (total <= 0 || after.cores != before.cores) return after.cores;
  const double others = std::max(0.0, double(after.busy - before.busy) - double(after.self - before.self));
  return std::clamp(after.cores * (1.0 - others / total), 0.0, double(after.cores));
}

ThreadGovernor::ThreadGovernor(int requested, CpuTimesReader read) : read_(std::move(read)) {
  if (requested > 0) {
    omp_set_num_threads(requested);
    threads_ = max_threads_ = requested;
    return;
  }
  max_threads_ = threads_ = omp_get_max_threads();
  // OMP_NUM_THREADS is a choice like --threads; so is a machine of one core.
  governs_ = std::getenv("OMP_NUM_THREADS") == nullptr && max_threads_ > 1;
  if (!governs_) return;
  // A first reading before any work: a run that started on all cores beside a busy neighbour would
  // spend its first window at a barrier per op (for `tiny`, the whole of a short benchmark). While
  // this process sleeps, every busy tick is another's; 100 ms is ten ticks of /proc/stat per core.
  const std::optional<CpuTimes> before = read_();
  std::this_thread::sleep_for(kFirstWindow);
  last_ = read_();
  last_time_ = std::chrono::steady_clock::now();
  governs_ = before.has_value() && last_.has_value();
  if (governs_) set_threads(threads_for(free_cores(*before, *last_)));
}

int ThreadGovernor::threads_for(double free) const {
  // A core more than half free is worth a thread: a neighbour at a few percent (a terminal, a
  // browser tab at rest) leaves its core to lathe, one that keeps a core busy takes it.
  return std::clamp(int(std::floor(free + 0.5)), 1, max_threads_);
}

void ThreadGovernor::set_threads(int threads) {
  if (threads == threads_) return;
  threads_ = threads;
  omp_set_num_threads(threads_);
}

int ThreadGovernor::update() {
  if (!governs_) return threads_;
  const auto now = std::chrono::steady_clock::now();
  if (now - last_time_ < kWindow) return threads_;
  const std::optional<CpuTimes> t = read_();
  if (!t) return threads_;
  set_threads(threads_for(free_cores(*last_, *t)));
  last_ = t;
  last_time_ = now;
  return threads_;
}

}  // namespace lathe
