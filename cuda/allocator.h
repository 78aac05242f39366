// A caching allocator for one GPU.
//
// cudaMalloc and cudaFree are slow and cudaFree synchronises the device, so freed blocks are kept
// and handed out again. Requests are rounded up to 512 bytes. Small requests (up to 1 MiB) are
// cut from 2 MiB segments; large ones get segments rounded up to 2 MiB. A free block is split
// when it is larger than asked, and merged with free neighbours of its segment when released.
//
// Reuse is safe without events because the backend has one stream per device: a block freed by
// the host while kernels still use it is only handed to work queued later on the same stream.
//
// When cudaMalloc fails, the cache is released and the call retried once; then the allocator
// throws "cuda:N out of memory: requested R bytes, free F of total T bytes".
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <unordered_map>

#include "core/storage.h"

namespace lathe::cuda {

class CachingAllocator final : public Allocator {
 public:
  static constexpr size_t kRound = 512;                   // every block is a multiple of this
  static constexpr size_t kSmallLimit = size_t(1) << 20;  // requests up to here are "small"
  static constexpr size_t kSmallSegment = size_t(2) << 20;
  static constexpr size_t kLargeRound = size_t(2) << 20;

  explicit CachingAllocator(int device);
  void* allocate(size_t nbytes) override;
  void deallocate(void* p, size_t nbytes) override;
  MemoryStats stats() const override;
  void reset_peak() override;
  // Returns every segment that holds no live block to the driver.
  void empty_cache() override;

  static size_t round_size(size_t nbytes);

 private:
  struct Block {
    char* ptr = nullptr;
    size_t size = 0;
    bool free = true;
    bool small = true;  // which pool
    Block* prev = nullptr;  // neighbours within one segment (address order)
    Block* next = nullptr;
  };
  struct BySize {
    bool operator()(const Block* a, const Block* b) const {
      return a->size != b->size ? a->size < b->size : a->ptr < b->ptr;
    }
  };
  using Pool = std::set<Block*, BySize>;

  Block* find_free(Pool& pool, size_t size);
  Block* new_segment(size_t segment_size, bool small, size_t requested);
  void release_free_segments();
  Pool& pool_of(bool small) { return small ? small_pool_ : large_pool_; }

  int device_;
  mutable std::mutex mu_;
  Pool small_pool_, large_pool_;                   // free blocks
  std::unordered_map<void*, Block*> live_;         // allocated blocks by pointer
  MemoryStats stats_;
};

}  // namespace lathe::cuda
