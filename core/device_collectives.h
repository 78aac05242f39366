// Collectives over tensors in an accelerator's memory, between the processes of a data parallel
// run (docs/design.md, "Data parallelism"). core holds only the interface and a registry: the CUDA
// backend registers NCCL's implementation (cuda/nccl/) when lathe is built with NCCL, so nothing
// above cuda/ includes a CUDA or NCCL header. Host tensors travel over MPI instead
// (train/distributed/communicator.h); this is for the device.
//
// Operations are queued on the device's stream, in the order they are called, like kernels: a
// gradient reduced here is ready for the optimizer's kernels that follow it on that stream.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>

#include "core/device.h"
#include "core/tensor.h"

namespace lathe {

class DeviceCollectives {
 public:
  virtual ~DeviceCollectives() = default;
  // In place: the element-wise sum over the ranks of a contiguous tensor on this rank's device.
  virtual void all_reduce_sum(const Tensor& t) = 0;
  // In place: `t` as rank `root` holds it, on every rank (the same shape and dtype on each).
  virtual void broadcast(const Tensor& t, int root) = 0;
};

// What an implementation needs to join the others: its device, its rank among `size`, and a way
// to hand rank 0's connection id (`bytes` bytes at `data`) to every rank (an MPI broadcast).
struct DeviceCollectivesSetup {
  Device device;
  int rank = 0;
  int size = 1;
  std::function<void(void* data, size_t bytes)> share_from_rank0;
};

using DeviceCollectivesFactory = std::function<std::unique_ptr<DeviceCollectives>(const DeviceCollectivesSetup&)>;

// Called by a backend during static initialisation.
void register_device_collectives(DeviceType type, DeviceCollectivesFactory factory);
bool has_device_collectives(DeviceType type);
// Collective; throws lathe::Error naming the device type when no implementation was built in.
std::unique_ptr<DeviceCollectives> make_device_collectives(const DeviceCollectivesSetup& setup);

}  // namespace lathe
