#include "core/storage.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstdlib>
#include <mutex>

#include "core/backend.h"
#include "core/error.h"

namespace lathe {

HostAllocator::HostAllocator(std::string name) : name_(std::move(name)) {}

HostAllocator::~HostAllocator() { empty_cache(); }

size_t HostAllocator::size_class(size_t nbytes) {
  if (nbytes <= 4096) return std::max<size_t>(kAlignment, (nbytes + kAlignment - 1) / kAlignment * kAlignment);
  size_t step = std::bit_floor(nbytes) / 8;  // >= 512, a multiple of kAlignment
  return (nbytes + step - 1) / step * step;
}

void* HostAllocator::allocate(size_t nbytes) {
  const size_t cls = size_class(nbytes);
  std::lock_guard<std::mutex> lock(mu_);
  void* p = nullptr;
  auto it = cached_.find(cls);
  if (it != cached_.end() && !it->second.empty()) {
    p = it->second.back();
    it->second.pop_back();
  } else {
    p = std::aligned_alloc(kAlignment, cls);
    if (p == nullptr) {  // give the cache back to the system and try once more
      for (auto& [c, blocks] : cached_)
        for (void* b : blocks) {
          std::free(b);
          stats_.reserved -= c;
        }
      cached_.clear();
      p = std::aligned_alloc(kAlignment, cls);
    }
    LATHE_CHECK(p != nullptr, name_, ": out of memory allocating ", nbytes, " bytes (",
                stats_.allocated, " bytes in use)");
    stats_.reserved += cls;
  }
  stats_.allocated += cls;
  stats_.num_allocs += 1;
  if (stats_.allocated > stats_.peak_allocated) stats_.peak_allocated = stats_.allocated;
  return p;
}

void HostAllocator::deallocate(void* p, size_t nbytes) {
  const size_t cls = size_class(nbytes);
  std::lock_guard<std::mutex> lock(mu_);
  cached_[cls].push_back(p);
  stats_.allocated -= cls;
}

void HostAllocator::empty_cache() {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [cls, blocks] : cached_)
    for (void* b : blocks) {
      std::free(b);
      stats_.reserved -= cls;
    }
  cached_.clear();
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

Storage::Storage(void* data, size_t nbytes, Device device, std::function<void()> release)
    : data_(data), nbytes_(nbytes), device_(device), release_(std::move(release)) {}

std::shared_ptr<Storage> Storage::borrow(void* data, size_t nbytes, Device device, std::function<void()> release) {
  LATHE_CHECK(release != nullptr, "Storage::borrow: borrowed memory needs a release to hand it back");
  return std::shared_ptr<Storage>(new Storage(data, nbytes, device, std::move(release)));
}

Storage::~Storage() {
  if (release_) release_();
  else allocator_for(device_).deallocate(data_, nbytes_);
}

// ---- transfer counters ----
namespace {
std::atomic<uint64_t> g_h2d{0}, g_d2h{0}, g_d2d{0}, g_syncs{0}, g_bytes{0};
}  // namespace

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
