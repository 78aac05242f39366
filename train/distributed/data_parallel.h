// Data parallel training over a Communicator (docs/design.md, "Data parallelism").
//
// Every process holds the whole model and the same optimizer (never rebuilt: the one the run made,
// with the same groups and parameters at every world size) and computes the gradients of its
// slice of the global batch. DataParallel then makes the processes agree at the three points of a
// step (train::StepSync):
//
//   backward   gradients are packed into buckets (about kBucketBytes each, parameters in reverse
//              order, the order the backward pass finishes them); a bucket's all-reduce starts as
//              soon as its last gradient is final (core/grad_ready_hook.h), while the backward pass
//              goes on, and buckets start in the same order on every rank, as MPI requires. After
//              the backward pass every gradient is the sum over ranks times 1/N: the mean, the same
//              bits on every rank, so clipping, the loss scaler and the update agree everywhere.
//   update     without ZeRO every rank updates every parameter (identical inputs, identical
//              results). With ZeRO-1 the optimizer's state is sharded (optim::Optimizer::shard_state):
//              rank r owns a contiguous range of parameters, balanced by element count, keeps their
//              state (policy "sharded") and updates them only; the updated parameters are then
//              all-gathered.
//   checkpoint with ZeRO-1 the owners send their state to rank 0, which writes one file in the
//              format of a single-process run (gather_state_to_root, release_gathered_state).
//
// Parameters in host memory travel over the Communicator (MPI). Parameters on a GPU travel over
// the device's collectives (NCCL, core/device_collectives.h; ranks meet through the Communicator):
// each gradient is all-reduced in place on the device's stream after the backward pass (no buckets
// and no overlap on that path yet), and ZeRO-1's owners broadcast their updated parameters.
//
// Time spent in collectives (waiting included) is counted, for the benchmark's communication share.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/device_collectives.h"
#include "core/grad_ready_hook.h"
#include "optim/optimizer.h"
#include "train/distributed/communicator.h"
#include "train/train_step.h"

namespace lathe::dist {

// Contiguous parameter ranges [begin, end), one per rank, balanced by the element count of the
// parameters that train (`numels[i]`, 0 for a frozen one). Every parameter is in exactly one range.
std::vector<std::pair<int64_t, int64_t>> shard_ranges(const std::vector<int64_t>& numels, int world_size);

class DataParallel final : public train::StepSync {
 public:
  static constexpr size_t kBucketBytes = size_t(2) << 20;

  // Throws lathe::Error naming the parameter when a trainable one is neither f32 in host memory
  // (the MPI path) nor on the device of the others (the device path), or when the device has no
  // collectives built in. `zero`: shard the optimizer's state (ZeRO-1).
  DataParallel(Communicator& comm, optim::Optimizer& opt, bool zero, size_t bucket_bytes = kBucketBytes);
  ~DataParallel() override;

  void before_backward() override;
  void after_backward() override;
  void after_update() override;

  // The mean of `local` over the ranks (a loss).
  double mean_over_ranks(double local);
  // ZeRO-1: the whole optimizer state into rank 0's optimizer, for a checkpoint (collective);
  // release_gathered_state() drops it again. Nothing without ZeRO.
  void gather_state_to_root();
  void release_gathered_state();
  // Throws a CollectiveError on every rank when the ranks' parameters are not bitwise the same
  // (collective): a replica that drifted would make rank 0's checkpoint a lie.
  void check_replicas_agree(int64_t step);
  // Bytes of optimizer state held by each rank, in rank order (collective).
  std::vector<size_t> state_bytes_per_rank();

  // Slices of the batch each rank runs before its gradients are final (train_step's `slices`):
  // the reduced gradients are scaled by 1 / (world size x slices), in one float multiplication, the
  // same in one process as in N, so that a process with slices S reproduces N = S ranks of one slice.
  void set_slices_per_rank(int64_t slices) { slices_per_rank_ = slices; }

  bool zero() const { return zero_; }
  std::pair<int64_t, int64_t> owned_range() const { return ranges_[size_t(comm_.rank())]; }
  double comm_seconds() const { return comm_seconds_; }
  int64_t buckets() const { return int64_t(buckets_.size()); }

 private:
  struct Bucket {
    std::vector<int64_t> params;    // parameter numbers, in the order of the buffer
    std::vector<size_t> offsets;    // where each one's gradient starts in the buffer
    std::vector<bool> arrived;      // its gradient was final in this backward pass
    std::vector<float> buffer;
    size_t waiting = 0;             // gradients still to arrive
    std::unique_ptr<PendingCollective> pending;
  };
  void on_grad_ready(const Tensor& leaf, const Tensor& grad);
  // Every gradient of the optimizer's trainable parameters times `scale`, in place.
  void scale_gradients(float scale);
  void launch_ready_buckets(bool all);

  Communicator& comm_;
  optim::Optimizer& opt_;
  bool zero_;
  std::vector<std::pair<int64_t, int64_t>> ranges_;
  std::vector<Bucket> buckets_;
  std::unordered_map<const void*, std::pair<size_t, size_t>> slot_of_;  // TensorImpl -> (bucket, index)
  size_t next_launch_ = 0;  // buckets start in index order on every rank
  int64_t slices_per_rank_ = 1;
  std::optional<GradReadyHook> hook_;
  std::unique_ptr<DeviceCollectives> device_;  // parameters on a GPU: NCCL; null on the host path
  double comm_seconds_ = 0;
};

}  // namespace lathe::dist
