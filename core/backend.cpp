#include "core/backend.h"

#include <array>
#include <atomic>
#include <cstring>

#include "core/cpu/cpu_backend.h"

namespace lathe {

namespace {
std::array<Backend*, 3>& backends() {
  static CpuBackend cpu(DeviceType::cpu);
  static CpuBackend sim(DeviceType::sim);
  static std::array<Backend*, 3> r{&cpu, &sim, nullptr};
  return r;
}
}  // namespace

namespace {
std::atomic<bool> g_allow_tf32{false};
std::atomic<AttentionBackward> g_attention_backward{AttentionBackward::split};
}  // namespace

void set_allow_tf32(bool on) { g_allow_tf32.store(on, std::memory_order_relaxed); }
bool allow_tf32() { return g_allow_tf32.load(std::memory_order_relaxed); }
void set_attention_backward(AttentionBackward how) { g_attention_backward.store(how, std::memory_order_relaxed); }
AttentionBackward attention_backward() { return g_attention_backward.load(std::memory_order_relaxed); }
const char* attention_backward_name(AttentionBackward how) { return how == AttentionBackward::split ? "split" : "atomic"; }
AttentionBackward parse_attention_backward(std::string_view name) {
  for (AttentionBackward how : {AttentionBackward::split, AttentionBackward::atomic})
    if (name == attention_backward_name(how)) return how;
  LATHE_FAIL("the attention backward '", name, "' is not one of split (deterministic, the default) and atomic ",
             "(FlashAttention-2's one kernel, dQ summed by atomics)");
}

void register_backend(DeviceType type, Backend* backend) { backends()[size_t(type)] = backend; }

bool backend_available(DeviceType type) { return backends()[size_t(type)] != nullptr; }

Backend& backend_for(Device d) {
  Backend* b = backends()[size_t(d.type)];
  if (b == nullptr) {
    LATHE_FAIL("device ", d, " is not available: this build of lathe has no CUDA backend ",
               "(configure with -DLATHE_CUDA=ON on a machine with the CUDA toolkit)");
  }
  int n = b->device_count();
  LATHE_CHECK(d.index >= 0 && d.index < n, "device ", d, " does not exist: ", n, " ",
              b->name(), " device(s) present", n == 0 ? " (no GPU was found)" : "");
  return *b;
}

// ---- CpuBackend: memory ----
CpuBackend::CpuBackend(DeviceType type) : type_(type) {
  int n = type == DeviceType::cpu ? 1 : kSimDeviceCount;
  for (int i = 0; i < n; ++i)
    allocators_.push_back(std::make_unique<HostAllocator>(Device{type, i}.str()));
}

std::string CpuBackend::name() const { return type_ == DeviceType::cpu ? "cpu" : "sim"; }

void CpuBackend::synchronize(int) {}  // the CPU computes as it is called
Allocator& CpuBackend::allocator(int index) { return *allocators_.at(size_t(index)); }
int CpuBackend::device_count() const { return int(allocators_.size()); }

void CpuBackend::copy_to_host(void* dst, const void* src, size_t nbytes, int) {
  if (nbytes) std::memcpy(dst, src, nbytes);
}
void CpuBackend::copy_from_host(void* dst, const void* src, size_t nbytes, int) {
  if (nbytes) std::memcpy(dst, src, nbytes);
}

}  // namespace lathe
