#include "cuda/allocator.h"

#include <cuda_runtime_api.h>

#include "core/error.h"
#include "cuda/runtime.h"

namespace lathe::cuda {

CachingAllocator::CachingAllocator(int device) : device_(device) {}

size_t CachingAllocator::round_size(size_t nbytes) {
  if (nbytes == 0) return kRound;  // a zero-byte tensor still gets a distinct, valid pointer
  return (nbytes + kRound - 1) / kRound * kRound;
}

// Best fit: the smallest free block that is large enough.
CachingAllocator::Block* CachingAllocator::find_free(Pool& pool, size_t size) {
  Block key;
  key.size = size;
  key.ptr = nullptr;
  auto it = pool.lower_bound(&key);
  if (it == pool.end()) return nullptr;
  Block* b = *it;
  // A large block far bigger than the request would be split into a long-lived remainder that
  // fragments the pool; take it only when the waste is moderate.
  if (!b->small && b->size > size + 64 * kLargeRound) return nullptr;
  pool.erase(it);
  return b;
}

CachingAllocator::Block* CachingAllocator::new_segment(size_t segment_size, bool small, size_t requested) {
  void* p = nullptr;
  cudaError_t err = cudaMalloc(&p, segment_size);
  if (err == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();
    release_free_segments();
    err = cudaMalloc(&p, segment_size);
  }
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    size_t free_bytes = 0, total_bytes = 0;
    if (cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) (void)cudaGetLastError();
    if (err == cudaErrorMemoryAllocation) {
      LATHE_FAIL("cuda:", device_, " out of memory: requested ", requested, " bytes, free ", free_bytes,
                 " of total ", total_bytes, " bytes (lathe holds ", stats_.allocated, " bytes in tensors and ",
                 stats_.reserved, " reserved)");
    }
    check_cuda(err, "cudaMalloc");
  }
  Block* b = new Block();
  b->ptr = static_cast<char*>(p);
  b->size = segment_size;
  b->small = small;
  stats_.reserved += segment_size;
  return b;
}

void* CachingAllocator::allocate(size_t nbytes) {
  set_device(device_);
  std::lock_guard<std::mutex> lock(mu_);
  if (nbytes > (size_t(1) << 56)) {  // beyond any GPU; rounding it up could overflow
    size_t free_bytes = 0, total_bytes = 0;
    if (cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) (void)cudaGetLastError();
    LATHE_FAIL("cuda:", device_, " out of memory: requested ", nbytes, " bytes, free ", free_bytes, " of total ",
               total_bytes, " bytes");
  }
  const size_t size = round_size(nbytes);
  const bool small = size <= kSmallLimit;
  Pool& pool = pool_of(small);
  Block* b = find_free(pool, size);
  if (b == nullptr) {
    const size_t seg = small ? kSmallSegment : (size + kLargeRound - 1) / kLargeRound * kLargeRound;
    b = new_segment(seg, small, nbytes);
  }
  // Split off the tail when what remains is worth keeping.
  const size_t rest = b->size - size;
  if (rest >= (small ? kRound : kSmallLimit)) {
    Block* tail = new Block();
    tail->ptr = b->ptr + size;
    tail->size = rest;
    tail->small = small;
    tail->prev = b;
    tail->next = b->next;
    if (b->next) b->next->prev = tail;
    b->next = tail;
    b->size = size;
    pool.insert(tail);
  }
  b->free = false;
  live_[b->ptr] = b;
  stats_.allocated += b->size;
  stats_.num_allocs += 1;
  if (stats_.allocated > stats_.peak_allocated) stats_.peak_allocated = stats_.allocated;
  return b->ptr;
}

void CachingAllocator::deallocate(void* p, size_t) {
  if (p == nullptr) return;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = live_.find(p);
  if (it == live_.end()) return;  // not ours: nothing sensible to do in a destructor path
  Block* b = it->second;
  live_.erase(it);
  stats_.allocated -= b->size;
  b->free = true;
  Pool& pool = pool_of(b->small);
  // Merge with free neighbours so that a segment can become one free block again.
  if (b->prev && b->prev->free) {
    Block* a = b->prev;
    pool.erase(a);
    a->size += b->size;
    a->next = b->next;
    if (b->next) b->next->prev = a;
    delete b;
    b = a;
  }
  if (b->next && b->next->free) {
    Block* c = b->next;
    pool.erase(c);
    b->size += c->size;
    b->next = c->next;
    if (c->next) c->next->prev = b;
    delete c;
  }
  pool.insert(b);
}

// Frees every segment that is one free block. The caller holds mu_.
void CachingAllocator::release_free_segments() {
  bool synced = false;
  for (Pool* pool : {&small_pool_, &large_pool_}) {
    for (auto it = pool->begin(); it != pool->end();) {
      Block* b = *it;
      if (b->prev == nullptr && b->next == nullptr) {
        if (!synced) {
          // Work queued before may still touch memory about to be returned to the driver.
          (void)cudaDeviceSynchronize();
          synced = true;
        }
        (void)cudaFree(b->ptr);
        stats_.reserved -= b->size;
        delete b;
        it = pool->erase(it);
      } else {
        ++it;
      }
    }
  }
}

void CachingAllocator::empty_cache() {
  set_device(device_);
  std::lock_guard<std::mutex> lock(mu_);
  release_free_segments();
}

MemoryStats CachingAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void CachingAllocator::reset_peak() {
  std::lock_guard<std::mutex> lock(mu_);
  stats_.peak_allocated = stats_.allocated;
}

}  // namespace lathe::cuda
