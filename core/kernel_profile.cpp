#include "core/kernel_profile.h"

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>

namespace lathe::profile {

namespace {

std::atomic<bool> g_enabled{false};
thread_local int t_depth = 0;

struct Table {
  std::mutex mutex;
  std::map<std::string, KernelRow> rows;
};
Table& table() {
  static Table t;
  return t;
}

}  // namespace

void set_enabled(bool on) { g_enabled.store(on, std::memory_order_relaxed); }
bool enabled() { return g_enabled.load(std::memory_order_relaxed); }

std::vector<KernelRow> take() {
  Table& t = table();
  std::lock_guard<std::mutex> lock(t.mutex);
  std::vector<KernelRow> out;
  for (auto& [name, row] : t.rows) out.push_back(row);
  t.rows.clear();
  std::sort(out.begin(), out.end(), [](const KernelRow& a, const KernelRow& b) { return a.seconds > b.seconds; });
  return out;
}

KernelScope::KernelScope(const char* kernel, double flops) {
  if (!enabled()) return;
  counted_ = true;
  if (t_depth++ > 0) return;
  kernel_ = kernel;
  flops_ = flops;
  start_ = std::chrono::steady_clock::now();
}

KernelScope::~KernelScope() {
  if (counted_) --t_depth;
  if (!kernel_) return;
  const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  Table& t = table();
  std::lock_guard<std::mutex> lock(t.mutex);
  KernelRow& row = t.rows[kernel_];
  row.kernel = kernel_;
  row.calls += 1;
  row.seconds += dt;
  row.flops += flops_;
}

}  // namespace lathe::profile
