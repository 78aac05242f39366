// Scratch memory for a CPU kernel's inner loops, one buffer per thread and element type, kept from
// call to call.
//
// A kernel that allocates a few hundred KiB per call and frees it on return hands it back to the
// system each time (glibc maps blocks past 128 KiB on their own and trims the top of its heap past
// 128 KiB), and the next call takes it back one page fault per 4 KiB page: a quarter of char's
// attention backward when it runs call after call (examples/bench_kernels, section 4; inside a
// training step the other allocations happened to keep the heap from shrinking). The buffer only
// grows, to the most one call on this thread asked for, and lives as long as the thread (OpenMP's
// pool keeps its threads).
#pragma once

#include <cstddef>
#include <vector>

namespace lathe::cpu {

// At least n elements; their values are whatever the last call on this thread left there. One call
// at a time: a kernel takes its scratch once and carves it up, and calls nothing that takes it too.
template <class T>
T* thread_scratch(size_t n) {
  thread_local std::vector<T> buffer;
  if (buffer.size() < n) buffer.resize(n);
  return buffer.data();
}

}  // namespace lathe::cpu
