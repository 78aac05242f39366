// Reference-counted memory on one device, and the allocators that hand it out.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/device.h"

namespace lathe {

// Memory statistics of one device's allocator, in bytes.
struct MemoryStats {
  size_t allocated = 0;       // bytes in live blocks
  size_t peak_allocated = 0;  // high-water mark of `allocated` since the last reset
  size_t reserved = 0;        // bytes held from the system (a caching allocator holds more than it lends)
  size_t num_allocs = 0;      // allocations served since start
};

class Allocator {
 public:
  virtual ~Allocator() = default;
  virtual void* allocate(size_t nbytes) = 0;  // throws lathe::Error when out of memory
  virtual void deallocate(void* p, size_t nbytes) = 0;
  virtual MemoryStats stats() const = 0;
  virtual void reset_peak() = 0;
  virtual void empty_cache() {}
};

// Aligned host memory with statistics: the allocator of cpu and of each sim device.
//
// It caches freed blocks by size class and hands them out again. A training step allocates the
// same sizes every iteration; with plain malloc each large block would be fresh pages (a page fault
// per 4 KB) or, above glibc's mmap threshold, an mmap/munmap pair per tensor. Size classes are
// multiples of 1/8 of a power of two, so a block is at most 12.5% larger than asked for.
class HostAllocator final : public Allocator {
 public:
  static constexpr size_t kAlignment = 64;
  explicit HostAllocator(std::string name);
  ~HostAllocator() override;
  void* allocate(size_t nbytes) override;
  void deallocate(void* p, size_t nbytes) override;
  MemoryStats stats() const override;
  void reset_peak() override;
  void empty_cache() override;  // returns every cached block to the system

  static size_t size_class(size_t nbytes);

 private:
  std::string name_;
  mutable std::mutex mu_;
  MemoryStats stats_;
  std::unordered_map<size_t, std::vector<void*>> cached_;  // size class -> free blocks
};

// The allocator of a device (cpu, sim:N, or cuda:N once cuda/ registered its backend).
Allocator& allocator_for(Device d);
MemoryStats memory_stats(Device d);
void reset_peak_memory(Device d);

// A block of memory. Tensors share it through shared_ptr; views are tensors over the same storage.
class Storage {
 public:
  Storage(size_t nbytes, Device device);
  // Memory that another owner lends (a NumPy array's, a DLPack producer's, python/): lathe neither
  // allocates nor frees it, and `release` runs when the last tensor over it goes, handing it back.
  // Allocator statistics do not count it.
  static std::shared_ptr<Storage> borrow(void* data, size_t nbytes, Device device, std::function<void()> release);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }

  // The version of the contents: every in-place write through lathe's API (Tensor::copy_ and
  // fill_, the optimizer updates, collectives into a parameter) bumps it, so that a copy made from
  // this memory (a weight cast to 16 bits once per step, nn/precision.h) can tell it is stale. Code
  // that writes through data() itself calls bump_version().
  uint64_t version() const { return version_.load(std::memory_order_relaxed); }
  void bump_version() { version_.fetch_add(1, std::memory_order_relaxed); }

 private:
  Storage(void* data, size_t nbytes, Device device, std::function<void()> release);

  void* data_ = nullptr;
  size_t nbytes_ = 0;
  Device device_;
  std::atomic<uint64_t> version_{0};
  std::function<void()> release_;  // set for borrowed memory
};

using StoragePtr = std::shared_ptr<Storage>;

// Host<->device traffic, counted so that tests can assert a resumed run transfers exactly what a
// fresh one does (docs/design.md, "Transfers you can count").
struct TransferStats {
  uint64_t host_to_device = 0;    // copies cpu -> sim/cuda
  uint64_t device_to_host = 0;    // copies sim/cuda -> cpu (item() on a device tensor is one)
  uint64_t device_to_device = 0;  // copies between two non-cpu devices
  uint64_t syncs = 0;             // host waits for a device
  uint64_t bytes = 0;             // bytes moved by the copies above
  friend bool operator==(const TransferStats&, const TransferStats&) = default;
};

TransferStats transfer_stats();
void reset_transfer_stats();
// Called by backends: count one copy of `bytes` from `src` to `dst` (cpu->cpu is not counted).
void count_transfer(Device src, Device dst, size_t bytes);
void count_sync();

}  // namespace lathe
