// Emulator stand-in for the CUDA runtime API (cuda/emulator/README.md): one device with an
// H100's limits but 3 SMs and 8 GiB, device memory is host memory, streams are immediate.
#pragma once

#include "emu_core.h"

typedef void* cudaStream_t;
typedef void* cudaEvent_t;
enum cudaError_t {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorInvalidDeviceFunction = 98,
  cudaErrorNoDevice = 100,
};
enum cudaMemcpyKind { cudaMemcpyHostToHost, cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost, cudaMemcpyDeviceToDevice,
                      cudaMemcpyDefault };
constexpr unsigned cudaStreamNonBlocking = 1;
constexpr unsigned cudaHostAllocMapped = 2;
struct cudaDeviceProp {
  char name[256];
  size_t totalGlobalMem;
  size_t sharedMemPerBlock;
  size_t sharedMemPerBlockOptin;
  int multiProcessorCount;
  int maxThreadsPerBlock;
  int warpSize;
  int major, minor;
};
enum cudaDeviceAttr {
  cudaDevAttrMaxThreadsPerBlock = 1,
  cudaDevAttrMaxSharedMemoryPerBlock = 8,
  cudaDevAttrWarpSize = 10,
  cudaDevAttrMultiProcessorCount = 16,
  cudaDevAttrComputeCapabilityMajor = 75,
  cudaDevAttrComputeCapabilityMinor = 76,
  cudaDevAttrMaxSharedMemoryPerBlockOptin = 97,
};
enum cudaFuncAttribute {
  cudaFuncAttributeMaxDynamicSharedMemorySize = 8,
  cudaFuncAttributePreferredSharedMemoryCarveout = 9,
};

namespace emu {
inline cudaError_t& last_error() { static cudaError_t e = cudaSuccess; return e; }
inline size_t& live_bytes() { static size_t b = 0; return b; }
constexpr size_t kTotal = size_t(8) << 30;
constexpr int kSMs = 3;

// cudaFuncSetAttribute, recorded under the kernel's name as its first argument writes it.
template <class F>
cudaError_t func_set_attribute(const char* args, F*, cudaFuncAttribute attr, int value) {
  std::string name(args);
  int depth = 0;
  for (size_t i = 0; i < name.size(); ++i) {  // the first argument ends at the first top-level comma
    if (name[i] == '<' || name[i] == '(') ++depth;
    if (name[i] == '>' || name[i] == ')') --depth;
    if (name[i] == ',' && depth == 0) {
      name.resize(i);
      break;
    }
  }
  if (attr == cudaFuncAttributeMaxDynamicSharedMemorySize) {
    if (value < 0 || size_t(value) > kSharedPerBlockOptin) return last_error() = cudaErrorInvalidValue;
    st().max_dynamic_shared[kernel_key(name.c_str())] = size_t(value);
  }
  return cudaSuccess;
}
}  // namespace emu

#define cudaFuncSetAttribute(...) ::emu::func_set_attribute(#__VA_ARGS__, __VA_ARGS__)

inline cudaError_t cudaGetDeviceCount(int* n) { *n = 1; return cudaSuccess; }
inline cudaError_t cudaSetDevice(int) { return cudaSuccess; }
inline cudaError_t cudaGetDevice(int* d) { *d = 0; return cudaSuccess; }
inline cudaError_t cudaGetDeviceProperties(cudaDeviceProp* p, int) {
  std::strcpy(p->name, "emulated GPU");
  p->totalGlobalMem = emu::kTotal;
  p->sharedMemPerBlock = emu::kSharedPerBlockDefault;
  p->sharedMemPerBlockOptin = emu::kSharedPerBlockOptin;
  p->multiProcessorCount = emu::kSMs;
  p->maxThreadsPerBlock = int(emu::kMaxThreadsPerBlock);
  p->warpSize = 32;
  p->major = 9;
  p->minor = 0;
  return cudaSuccess;
}
inline cudaError_t cudaDeviceGetAttribute(int* v, cudaDeviceAttr a, int) {
  switch (a) {
    case cudaDevAttrMaxThreadsPerBlock: *v = int(emu::kMaxThreadsPerBlock); break;
    case cudaDevAttrMaxSharedMemoryPerBlock: *v = int(emu::kSharedPerBlockDefault); break;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin: *v = int(emu::kSharedPerBlockOptin); break;
    case cudaDevAttrWarpSize: *v = 32; break;
    case cudaDevAttrMultiProcessorCount: *v = emu::kSMs; break;
    case cudaDevAttrComputeCapabilityMajor: *v = 9; break;
    case cudaDevAttrComputeCapabilityMinor: *v = 0; break;
    default: return emu::last_error() = cudaErrorInvalidValue;
  }
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
inline cudaError_t cudaMemcpy(void* d, const void* s, size_t n, cudaMemcpyKind) { std::memmove(d, s, n); return cudaSuccess; }
inline cudaError_t cudaMemcpyAsync(void* d, const void* s, size_t n, cudaMemcpyKind, cudaStream_t) { std::memmove(d, s, n); return cudaSuccess; }
inline cudaError_t cudaMemsetAsync(void* d, int v, size_t n, cudaStream_t) { std::memset(d, v, n); return cudaSuccess; }
inline cudaError_t cudaMemset(void* d, int v, size_t n) { std::memset(d, v, n); return cudaSuccess; }
inline cudaError_t cudaHostAlloc(void** p, size_t n, unsigned) { *p = std::calloc(1, n); return cudaSuccess; }
inline cudaError_t cudaHostGetDevicePointer(void** d, void* h, unsigned) { *d = h; return cudaSuccess; }
inline cudaError_t cudaGetLastError() { cudaError_t e = emu::last_error(); emu::last_error() = cudaSuccess; return e; }
inline cudaError_t cudaPeekAtLastError() { return emu::last_error(); }
inline const char* cudaGetErrorName(cudaError_t) { return "cudaErrorEmulated"; }
inline const char* cudaGetErrorString(cudaError_t) { return "emulated error"; }
