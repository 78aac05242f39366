// NCCL's collectives for the CUDA backend (core/device_collectives.h), compiled when CMake finds
// NCCL (cuda/CMakeLists.txt). Ranks meet over MPI: rank 0 makes the ncclUniqueId, the trainer's
// communicator broadcasts it, every rank joins with ncclCommInitRank on its own GPU. Every call is
// queued on lathe's stream of that GPU (cuda/runtime.h), after the kernels that made its input and
// before those that read its output, so no synchronisation is needed around it.
#include <nccl.h>

#include "core/device_collectives.h"
#include "core/error.h"
#include "cuda/runtime.h"

namespace lathe::cuda {

namespace {

void check_nccl(ncclResult_t result, const char* what) {
  if (result != ncclSuccess) LATHE_FAIL("NCCL ", what, " failed: ", ncclGetErrorString(result));
}

ncclDataType_t nccl_type(DType t) {
  switch (t) {
    case DType::f32: return ncclFloat32;
    case DType::f64: return ncclFloat64;
    case DType::f16: return ncclFloat16;  // (bf16 is left out: its NCCL type depends on the CUDA headers)
    case DType::i32: return ncclInt32;
    case DType::i64: return ncclInt64;
    default: LATHE_FAIL("NCCL: no NCCL type for dtype ", dtype_name(t));
  }
}

class NcclCollectives final : public DeviceCollectives {
 public:
  explicit NcclCollectives(const DeviceCollectivesSetup& setup) : index_(setup.device.index) {
    ncclUniqueId id{};
    if (setup.rank == 0) check_nccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
    setup.share_from_rank0(&id, sizeof id);
    set_device(index_);
    check_nccl(ncclCommInitRank(&comm_, setup.size, id, setup.rank), "ncclCommInitRank");
  }
  ~NcclCollectives() override {
    if (comm_) ncclCommDestroy(comm_);
  }
  NcclCollectives(const NcclCollectives&) = delete;
  NcclCollectives& operator=(const NcclCollectives&) = delete;

  void all_reduce_sum(const Tensor& t) override {
    void* p = checked(t, "all-reduce");
    check_nccl(ncclAllReduce(p, p, size_t(t.numel()), nccl_type(t.dtype()), ncclSum, comm_, context(index_).stream),
               "all-reduce");
  }
  void broadcast(const Tensor& t, int root) override {
    void* p = checked(t, "broadcast");
    check_nccl(ncclBroadcast(p, p, size_t(t.numel()), nccl_type(t.dtype()), root, comm_, context(index_).stream),
               "broadcast");
  }

 private:
  void* checked(const Tensor& t, const char* what) const {
    LATHE_CHECK(t.device() == Device::cuda(index_) && t.is_contiguous(), "NCCL ", what, ": ", t.desc(),
                " is not a contiguous tensor on cuda:", index_);
    return t.data_ptr();
  }

  int index_;
  ncclComm_t comm_ = nullptr;
};

[[maybe_unused]] const bool g_nccl_registered = [] {
  register_device_collectives(DeviceType::cuda, [](const DeviceCollectivesSetup& setup) {
    return std::unique_ptr<DeviceCollectives>(new NcclCollectives(setup));
  });
  return true;
}();

}  // namespace

}  // namespace lathe::cuda
