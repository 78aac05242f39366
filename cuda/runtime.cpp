#include "cuda/runtime.h"

#include <array>
#include <memory>
#include <mutex>
#include <vector>

#include "core/error.h"

namespace lathe::cuda {

namespace {

const char* dt_name(DT dt) {
  static const char* names[] = {"f32", "f64", "bf16", "f16", "i32", "i64", "b8"};
  return unsigned(dt) < 7 ? names[unsigned(dt)] : "?";
}

struct Contexts {
  std::mutex mu;
  std::vector<std::unique_ptr<DeviceContext>> devices;
};
Contexts& contexts() {
  static Contexts* c = new Contexts();  // leaked on purpose: see runtime.h
  return *c;
}

thread_local int t_current_device = -1;

const char* index_op_name(int32_t code) {
  switch (code) {
    case kEmbeddingId: return "embedding: id";
    case kCrossEntropyTarget: return "cross_entropy: target";
    case kIndexSelect: return "index_select: index";
    case kIndexAdd: return "index_add: index";
    case kGather: return "gather: index";
    case kScatterAdd: return "scatter_add: index";
    default: return "index kernel: index";
  }
}

}  // namespace

void check_cuda(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return;
  LATHE_FAIL(what, ": CUDA error ", cudaGetErrorName(err), ": ", cudaGetErrorString(err));
}

void check_cublas(cublasStatus_t st, const char* what) {
  if (st == CUBLAS_STATUS_SUCCESS) return;
  LATHE_FAIL(what, ": cuBLAS error ", cublasGetStatusString(st));
}

void check_launch(const char* what) { check_cuda(cudaGetLastError(), what); }

void fail_dtype(const char* what, DT dt) {
  LATHE_FAIL(what, ": no CUDA kernel for dtype ", dt_name(dt));
}

int gpu_count() {
  static const int n = [] {
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess) {
      (void)cudaGetLastError();  // clear the sticky "no driver" error; it is not ours to report
      return 0;
    }
    return count;
  }();
  return n;
}

void set_device(int index) {
  if (t_current_device == index) return;
  check_cuda(cudaSetDevice(index), "cudaSetDevice");
  t_current_device = index;
}

DeviceContext& context(int index) {
  LATHE_CHECK(index >= 0 && index < gpu_count(), "cuda:", index, " does not exist: ", gpu_count(),
              " GPU(s) present");
  set_device(index);
  Contexts& c = contexts();
  std::lock_guard<std::mutex> lock(c.mu);
  if (c.devices.empty()) c.devices.resize(size_t(gpu_count()));
  auto& slot = c.devices[size_t(index)];
  if (slot) return *slot;

  auto ctx = std::make_unique<DeviceContext>();
  ctx->index = index;
  cudaDeviceProp prop{};
  check_cuda(cudaGetDeviceProperties(&prop, index), "cudaGetDeviceProperties");
  ctx->sm_count = prop.multiProcessorCount;
  ctx->total_memory = prop.totalGlobalMem;
  ctx->name = prop.name;
  // A non-blocking stream: lathe's work never serialises against the legacy default stream.
  check_cuda(cudaStreamCreateWithFlags(&ctx->stream, cudaStreamNonBlocking), "cudaStreamCreate");
  check_cublas(cublasCreate(&ctx->cublas), "cublasCreate");
  check_cublas(cublasSetStream(ctx->cublas, ctx->stream), "cublasSetStream");
  // alpha and beta live on the host. Default math (no TF32 for f32: backend_matmul.cpp opts in
  // only when asked), and 16-bit products reduce in their f32 compute type, never in 16 bits.
  check_cublas(cublasSetPointerMode(ctx->cublas, CUBLAS_POINTER_MODE_HOST), "cublasSetPointerMode");
  check_cublas(cublasSetMathMode(ctx->cublas, cublasMath_t(CUBLAS_DEFAULT_MATH |
                                                          CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)),
               "cublasSetMathMode");
  // cuBLASLt (linear layers with epilogues, backend_matmul.cpp) with the workspace NVIDIA
  // recommends for Hopper, held for the life of the process beside the caching allocator.
  check_cublas(cublasLtCreate(&ctx->cublaslt), "cublasLtCreate");
  ctx->lt_workspace_bytes = size_t(32) << 20;
  check_cuda(cudaMalloc(&ctx->lt_workspace, ctx->lt_workspace_bytes), "cudaMalloc (cuBLASLt workspace)");
  void* flag = nullptr;
  check_cuda(cudaHostAlloc(&flag, sizeof(DeviceErrorInfo), cudaHostAllocMapped), "cudaHostAlloc (error flag)");
  ctx->error_host = static_cast<DeviceErrorInfo*>(flag);
  *ctx->error_host = DeviceErrorInfo{};
  void* dflag = nullptr;
  check_cuda(cudaHostGetDevicePointer(&dflag, flag, 0), "cudaHostGetDevicePointer (error flag)");
  ctx->error_device = static_cast<DeviceErrorInfo*>(dflag);
  void* error_lock = nullptr;
  check_cuda(cudaMalloc(&error_lock, sizeof(int32_t)), "cudaMalloc (error lock)");
  check_cuda(cudaMemset(error_lock, 0, sizeof(int32_t)), "cudaMemset (error lock)");
  ctx->error_host->lock = static_cast<int32_t*>(error_lock);
  slot = std::move(ctx);
  return *slot;
}

void raise_pending_index_error(int index) {
  DeviceContext& ctx = context(index);
  volatile DeviceErrorInfo* e = ctx.error_host;
  if (e->code == kNoError) return;
  const DeviceErrorInfo info{e->code, 0, e->value, e->position, e->limit, nullptr};
  e->code = kNoError;
  // Free the lock for the next error; ordered after everything already queued.
  check_cuda(cudaMemsetAsync(e->lock, 0, sizeof(int32_t), ctx.stream), "cudaMemsetAsync (error lock)");
  LATHE_FAIL(index_op_name(info.code), " ", info.value, " at flat position ", info.position,
             " is out of range [0, ", info.limit, ") on cuda:", index,
             " (found by the kernel; reported at the next synchronisation with the GPU)");
}

void sync_stream(int index) {
  DeviceContext& ctx = context(index);
  check_cuda(cudaStreamSynchronize(ctx.stream), "cudaStreamSynchronize");
  raise_pending_index_error(index);
}

}  // namespace lathe::cuda
