#pragma once
// Emulator stand-in for the CUDA runtime API (see cuda/emulator/run.sh): device memory is host
// memory, one device with 3 SMs and 8 GiB, streams are immediate.
#include "emu_core.h"

typedef void* cudaStream_t;
enum cudaError_t { cudaSuccess = 0, cudaErrorMemoryAllocation = 2, cudaErrorInvalidValue = 1, cudaErrorNoDevice = 100 };
enum cudaMemcpyKind { cudaMemcpyHostToHost, cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost, cudaMemcpyDeviceToDevice };
constexpr unsigned cudaStreamNonBlocking = 1;
constexpr unsigned cudaHostAllocMapped = 2;
struct cudaDeviceProp {
  char name[256];
  size_t totalGlobalMem;
  int multiProcessorCount;
};
namespace emu {
inline cudaError_t& last_error() { static cudaError_t e = cudaSuccess; return e; }
inline size_t& live_bytes() { static size_t b = 0; return b; }
constexpr size_t kTotal = size_t(8) << 30;
}
inline cudaError_t cudaGetDeviceCount(int* n) { *n = 1; return cudaSuccess; }
inline cudaError_t cudaSetDevice(int) { return cudaSuccess; }
inline cudaError_t cudaGetDeviceProperties(cudaDeviceProp* p, int) {
  std::strcpy(p->name, "emulated GPU");
  p->totalGlobalMem = emu::kTotal;
  p->multiProcessorCount = 3;
  return cudaSuccess;
}
inline cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned) { *s = reinterpret_cast<void*>(1); return cudaSuccess; }
inline cudaError_t cudaStreamSynchronize(cudaStream_t) { return cudaSuccess; }
inline cudaError_t cudaDeviceSynchronize() { return cudaSuccess; }
inline cudaError_t cudaMalloc(void** p, size_t n) {
  if (n > emu::kTotal - emu::live_bytes()) { emu::last_error() = cudaErrorMemoryAllocation; return cudaErrorMemoryAllocation; }
  *p = std::aligned_alloc(256, (n + 255) / 256 * 256);
  // Poison fresh memory so that reads of unwritten data show up.
  std::memset(*p, 0xA5, n);
  emu::live_bytes() += n;
  return cudaSuccess;
}
inline cudaError_t cudaFree(void* p) { std::free(p); return cudaSuccess; }
inline cudaError_t cudaMemGetInfo(size_t* f, size_t* t) { *t = emu::kTotal; *f = emu::kTotal - emu::live_bytes(); return cudaSuccess; }
inline cudaError_t cudaMemcpyAsync(void* d, const void* s, size_t n, cudaMemcpyKind, cudaStream_t) { std::memmove(d, s, n); return cudaSuccess; }
inline cudaError_t cudaMemsetAsync(void* d, int v, size_t n, cudaStream_t) { std::memset(d, v, n); return cudaSuccess; }
inline cudaError_t cudaMemset(void* d, int v, size_t n) { std::memset(d, v, n); return cudaSuccess; }
inline cudaError_t cudaHostAlloc(void** p, size_t n, unsigned) { *p = std::calloc(1, n); return cudaSuccess; }
inline cudaError_t cudaHostGetDevicePointer(void** d, void* h, unsigned) { *d = h; return cudaSuccess; }
inline cudaError_t cudaGetLastError() { cudaError_t e = emu::last_error(); emu::last_error() = cudaSuccess; return e; }
inline const char* cudaGetErrorName(cudaError_t) { return "cudaErrorEmulated"; }
inline const char* cudaGetErrorString(cudaError_t) { return "emulated error"; }
