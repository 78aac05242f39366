// TEMPORARY: kernels not written yet. Each file that implements one removes it from here.
#include "core/cpu/cpu_backend.h"

namespace lathe {
#define LATHE_TODO(name) LATHE_FAIL("cpu kernel ", name, " is not implemented yet")
void CpuBackend::index_select(const Tensor&, int64_t, const Tensor&, const Tensor&) { LATHE_TODO("index_select"); }
void CpuBackend::index_add(const Tensor&, int64_t, const Tensor&, const Tensor&) { LATHE_TODO("index_add"); }
void CpuBackend::gather(const Tensor&, int64_t, const Tensor&, const Tensor&) { LATHE_TODO("gather"); }
void CpuBackend::scatter_add(const Tensor&, int64_t, const Tensor&, const Tensor&) { LATHE_TODO("scatter_add"); }
void CpuBackend::adam_update(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, double, const AdamParams&) { LATHE_TODO("adam_update"); }
}  // namespace lathe
