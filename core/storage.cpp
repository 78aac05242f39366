#include "core/storage.h"

#include <atomic>
#include <cstdlib>
#include <mutex>

#include "core/backend.h"
#include "core/error.h"

namespace lathe {

// Host memory aligned to a cache line (and to the widest vector register).
HostAllocator::HostAllocator(std::string name) : name_(std::move(name)) {}

void* HostAllocator::allocate(size_t nbytes) {
  if (nbytes == 0) nbytes = 1;
  size_t rounded = (nbytes + kAlignment - 1) / kAlignment * kAlignment;
  void* p = std::aligned_alloc(kAlignment, rounded);
  LATHE_CHECK(p != nullptr, name_, ": out of memory allocating ", nbytes, " bytes");
  std::lock_guard<std::mutex> lock(mu_);
  stats_.allocated += rounded;
  stats_.reserved += rounded;
  stats_.num_allocs += 1;
  if (stats_.allocated > stats_.peak_allocated) stats_.peak_allocated = stats_.allocated;
  return p;
}

void HostAllocator::deallocate(void* p, size_t nbytes) {
  if (nbytes == 0) nbytes = 1;
  size_t rounded = (nbytes + kAlignment - 1) / kAlignment * kAlignment;
  std::free(p);
  std::lock_guard<std::mutex> lock(mu_);
  stats_.allocated -= rounded;
  stats_.reserved -= rounded;
}

MemoryStats HostAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void HostAllocator::reset_peak() {
  std::lock_guard<std::mutex> lock(mu_);
  stats_.peak_allocated = stats_.allocated;
}

Allocator& allocator_for(Device d) { return backend_for(d).allocator(d.index); }
MemoryStats memory_stats(Device d) { return allocator_for(d).stats(); }
void reset_peak_memory(Device d) { allocator_for(d).reset_peak(); }

Storage::Storage(size_t nbytes, Device device) : nbytes_(nbytes), device_(device) {
  data_ = allocator_for(device).allocate(nbytes);
}

Storage::~Storage() { allocator_for(device_).deallocate(data_, nbytes_); }

// ---- transfer counters ----
namespace {
std::atomic<uint64_t> g_h2d{0}, g_d2h{0}, g_d2d{0}, g_syncs{0}, g_bytes{0};
}

TransferStats transfer_stats() {
  return {g_h2d.load(), g_d2h.load(), g_d2d.load(), g_syncs.load(), g_bytes.load()};
}

void reset_transfer_stats() {
  g_h2d = 0;
  g_d2h = 0;
  g_d2d = 0;
  g_syncs = 0;
  g_bytes = 0;
}

void count_transfer(Device src, Device dst, size_t bytes) {
  if (src.is_cpu() && dst.is_cpu()) return;
  if (src == dst) return;
  if (src.is_cpu()) g_h2d++;
  else if (dst.is_cpu()) g_d2h++;
  else g_d2d++;
  g_bytes += bytes;
}

void count_sync() { g_syncs++; }

}  // namespace lathe
