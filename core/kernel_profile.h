// Where a CPU step spends its time, kernel by kernel (`lathe bench --profile`).
//
// Each CPU kernel entry point opens a `KernelScope` with its name and the floating-point operations
// it performs (2 M N K for a matrix product, else 0). While profiling is off a scope is one relaxed
// atomic load; while it is on, the outermost scope of the calling thread adds its wall time, calls
// and operations to its kernel's row. A kernel that calls another (a 16-bit product converts its
// operands with `copy`) is counted once, under the outer name, so the rows add up to the time spent
// in kernels. Kernels are entered from the thread that runs the program; the threads a kernel
// spreads its work over are inside its scope.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace lathe::profile {

struct KernelRow {
  std::string kernel;
  int64_t calls = 0;
  double seconds = 0;
  double flops = 0;
};

void set_enabled(bool on);
bool enabled();
// The rows gathered since the last call (largest time first), and a fresh start.
std::vector<KernelRow> take();

class KernelScope {
 public:
  // `kernel` must outlive the program's profile (a string literal, or an op's table name).
  explicit KernelScope(const char* kernel, double flops = 0);
  ~KernelScope();
  KernelScope(const KernelScope&) = delete;
  KernelScope& operator=(const KernelScope&) = delete;

 private:
  bool counted_ = false;          // entered while profiling was on: holds one level of depth
  const char* kernel_ = nullptr;  // null: not recording (profiling off, or an inner scope)
  double flops_ = 0;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace lathe::profile
