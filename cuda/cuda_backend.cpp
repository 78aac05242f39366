// The CUDA backend's registration, memory, host<->device copies and synchronisation, and the
// helpers that turn Tensors into kernel geometry.
#include "cuda/cuda_backend.h"

#include <array>

namespace lathe::cuda {

// kernels.h mirrors core's DType by value so that nvcc never parses core headers.
static_assert(int(DT::f32) == int(DType::f32) && int(DT::f64) == int(DType::f64) &&
              int(DT::bf16) == int(DType::bf16) && int(DT::f16) == int(DType::f16) &&
              int(DT::i32) == int(DType::i32) && int(DT::i64) == int(DType::i64) && int(DT::b8) == int(DType::b8));

namespace {
// Registered before main runs. Asking the driver anything is left to first use, so a machine
// without a GPU or driver loads lathe silently; device_count() then says 0 and core's
// backend_for reports "no GPU was found". Never destroyed: tensors in static objects may
// release memory after static destructors ran.
[[maybe_unused]] const bool g_registered = [] {
  register_backend(DeviceType::cuda, new CudaBackend());
  return true;
}();
}  // namespace

// ---------------------------------------------------------------- memory

std::string CudaBackend::name() const { return "cuda"; }

int CudaBackend::device_count() const { return gpu_count(); }

Allocator& CudaBackend::allocator(int index) {
  LATHE_CHECK(index >= 0 && index < gpu_count(), "cuda:", index, " does not exist: ", gpu_count(),
              " GPU(s) present", gpu_count() == 0 ? " (no GPU was found)" : "");
  std::lock_guard<std::mutex> lock(mu_);
  if (allocators_.empty()) allocators_.resize(size_t(gpu_count()));
  auto& a = allocators_[size_t(index)];
  if (!a) a = std::make_unique<CachingAllocator>(index);
  return *a;
}

// The host reads dst as soon as this returns, so it waits for the stream. core counts the copy
// (and, for item()/to_vector(), the sync) itself.
void CudaBackend::copy_to_host(void* dst, const void* src, size_t nbytes, int index) {
  DeviceContext& ctx = context(index);
  if (nbytes) check_cuda(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDeviceToHost, ctx.stream), "copy to host");
  sync_stream(index);
}

// From pageable memory the runtime stages src before returning, so the caller may free it at
// once; the copy stays ordered with the kernels on the stream.
void CudaBackend::copy_from_host(void* dst, const void* src, size_t nbytes, int index) {
  DeviceContext& ctx = context(index);
  if (nbytes) check_cuda(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyHostToDevice, ctx.stream), "copy from host");
}

void CudaBackend::synchronize(int index) {
  sync_stream(index);
  count_sync();
}

// ---------------------------------------------------------------- helpers

DT dt_of(DType t) { return DT(uint8_t(t)); }

DeviceContext& context_of(const Tensor& t) {
  LATHE_CHECK(t.device().type == DeviceType::cuda, "CUDA backend: tensor ", t.desc(), " is not on a GPU");
  return context(t.device().index);
}

Tensor scratch_like(const Tensor& t, size_t bytes) {
  const int64_t words = int64_t((bytes + 7) / 8);
  return Tensor::empty({words > 0 ? words : 1}, DType::i64, t.device());
}

template <int N>
Geometry<N> make_geometry(const Shape& shape, const std::array<const Strides*, N>& strides, const char* op) {
  // Merge dim i into the dim before it when every operand steps across both as across one.
  Shape sh;
  std::array<Strides, N> st;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 1) continue;  // a size-1 dim moves no address
    if (!sh.empty()) {
      bool merge = true;
      for (int k = 0; k < N; ++k)
        if (st[size_t(k)].back() != (*strides[size_t(k)])[i] * shape[i]) merge = false;
      if (merge) {
        sh.back() *= shape[i];
        for (int k = 0; k < N; ++k) st[size_t(k)].back() = (*strides[size_t(k)])[i];
        continue;
      }
    }
    sh.push_back(shape[i]);
    for (int k = 0; k < N; ++k) st[size_t(k)].push_back((*strides[size_t(k)])[i]);
  }
  LATHE_CHECK(int(sh.size()) <= kMaxDims, op, ": the CUDA kernels take at most ", kMaxDims,
              " dims after merging contiguous ones; shape ", shape_str(shape), " leaves ", sh.size());
  Geometry<N> g;
  g.ndim = int(sh.size());
  g.numel = numel_of(shape);
  for (size_t d = 0; d < sh.size(); ++d) {
    g.shape[d] = sh[d];
    for (int k = 0; k < N; ++k) g.strides[k][d] = st[size_t(k)][d];
  }
  return g;
}

template Geometry<2> make_geometry<2>(const Shape&, const std::array<const Strides*, 2>&, const char*);
template Geometry<3> make_geometry<3>(const Shape&, const std::array<const Strides*, 3>&, const char*);
template Geometry<4> make_geometry<4>(const Shape&, const std::array<const Strides*, 4>&, const char*);

}  // namespace lathe::cuda
