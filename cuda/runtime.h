// Per-GPU runtime state of the CUDA backend: one stream, one cuBLAS and one cuBLASLt handle (with
// the workspace of its products), the mapped flag that kernels raise for bad indices, and the
// device's properties. Created on first use of a device,
// never destroyed (tensors may outlive static destructors; the driver frees it all at exit).
#pragma once

#include <cstdint>
#include <string>

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "cuda/kernels.h"

namespace lathe::cuda {

struct DeviceContext {
  int index = 0;
  cudaStream_t stream = nullptr;
  cublasHandle_t cublas = nullptr;
  cublasLtHandle_t cublaslt = nullptr;
  void* lt_workspace = nullptr;  // device memory for cuBLASLt's split-K and epilogue products
  size_t lt_workspace_bytes = 0;
  DeviceErrorInfo* error_host = nullptr;    // host view of the mapped error flag
  DeviceErrorInfo* error_device = nullptr;  // the same memory as kernels see it
  int sm_count = 0;
  size_t total_memory = 0;
  std::string name;
};

// Number of GPUs; 0 without a driver or device. Never throws, never prints.
int gpu_count();

// The context of GPU `index`, created on first use; also makes `index` the calling thread's
// current device, as every kernel launch that follows expects.
DeviceContext& context(int index);

// Makes `index` the calling thread's current device (cheap when it already is).
void set_device(int index);

// Throws lathe::Error "<what>: cuBLAS error <description>" unless st is success.
void check_cublas(cublasStatus_t st, const char* what);

// Waits for the stream of `index`, then turns a bad index recorded by a kernel into a
// lathe::Error (and clears the flag so that the next call starts clean).
void sync_stream(int index);
void raise_pending_index_error(int index);

}  // namespace lathe::cuda
