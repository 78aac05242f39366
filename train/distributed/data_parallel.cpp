#include "train/distributed/data_parallel.h"

#include <chrono>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>

#include "core/autograd.h"
#include "core/error.h"
#include "core/ops.h"
#include "serialize/checksum.h"
#include "train/distributed/agreement.h"

namespace lathe::dist {

namespace {

using Clock = std::chrono::steady_clock;

// Adds the wall time of its scope to a counter.
class Timed {
 public:
  explicit Timed(double& total) : total_(total), t0_(Clock::now()) {}
  ~Timed() { total_ += std::chrono::duration<double>(Clock::now() - t0_).count(); }

 private:
  double& total_;
  Clock::time_point t0_;
};

bool trains(const Tensor& p) { return p.requires_grad(); }

}  // namespace

std::vector<std::pair<int64_t, int64_t>> shard_ranges(const std::vector<int64_t>& numels, int world_size) {
  LATHE_CHECK(world_size >= 1, "shard_ranges: world size ", world_size);
  const int64_t n = int64_t(numels.size());
  double total = 0;
  for (int64_t v : numels) total += double(v);
  std::vector<std::pair<int64_t, int64_t>> ranges;
  int64_t begin = 0;
  double before = 0;  // elements in the ranges so far
  for (int r = 0; r < world_size; ++r) {
    int64_t end = begin;
    if (r == world_size - 1) {
      end = n;
    } else {
      // Cut where the running count comes closest to an equal share (r + 1) / N of the whole.
      const double target = total * double(r + 1) / double(world_size);
      double count = before;
      while (end < n && std::abs(count + double(numels[size_t(end)]) - target) <= std::abs(count - target)) {
        count += double(numels[size_t(end)]);
        ++end;
      }
    }
    for (int64_t i = begin; i < end; ++i) before += double(numels[size_t(i)]);
    ranges.emplace_back(begin, end);
    begin = end;
  }
  return ranges;
}

DataParallel::DataParallel(Communicator& comm, optim::Optimizer& opt, bool zero, size_t bucket_bytes)
    : comm_(comm), opt_(opt), zero_(zero) {
  const int64_t n = int64_t(opt.num_params());
  std::vector<int64_t> numels(size_t(n), 0);
  std::optional<Device> device;  // of the first trainable parameter
  for (int64_t i = 0; i < n; ++i) {
    const Tensor& p = opt.param(i);
    if (!trains(p)) continue;
    if (!device) device = p.device();
    LATHE_CHECK(comm.size() == 1 || p.device() == *device, "data parallel training: parameter ", i, " is on ",
                p.device().str(), " but parameter 0 is on ", device->str(), "; a rank's parameters live on one device");
    LATHE_CHECK(comm.size() == 1 || !p.device().is_cpu() || (p.dtype() == DType::f32 && p.is_contiguous()),
                "data parallel training: parameter ", i, " is ", p.desc(),
                "; across processes lathe reduces f32 parameters in host memory");
    numels[size_t(i)] = p.numel();
  }
  ranges_ = shard_ranges(numels, comm.size());
  if (zero_) opt_.shard_state(ranges_[size_t(comm.rank())].first, ranges_[size_t(comm.rank())].second);
  if (comm.size() == 1) return;  // nothing to reduce: no buckets
  if (device && !device->is_cpu()) {
    // Collective: every rank gets here with the same kind of device.
    DeviceCollectivesSetup setup;
    setup.device = *device;
    setup.rank = comm.rank();
    setup.size = comm.size();
    setup.share_from_rank0 = [&comm](void* data, size_t bytes) { comm.broadcast(data, bytes, 0); };
    device_ = make_device_collectives(setup);
    return;  // the device path reduces each gradient in place: no buckets
  }

  // Buckets in reverse parameter order: the backward pass finishes the last layers first.
  const size_t per_bucket = std::max<size_t>(1, bucket_bytes / sizeof(float));
  for (int64_t i = n - 1; i >= 0; --i) {
    if (numels[size_t(i)] == 0) continue;
    if (buckets_.empty() || buckets_.back().buffer.size() >= per_bucket) buckets_.emplace_back();
    Bucket& b = buckets_.back();
    slot_of_[opt.param(i).id()] = {buckets_.size() - 1, b.params.size()};
    b.params.push_back(i);
    b.offsets.push_back(b.buffer.size());
    b.buffer.resize(b.buffer.size() + size_t(numels[size_t(i)]));
  }
  for (Bucket& b : buckets_) b.arrived.assign(b.params.size(), false);
}

DataParallel::~DataParallel() = default;

void DataParallel::before_backward() {
  if (device_) return;
  for (Bucket& b : buckets_) {
    std::fill(b.arrived.begin(), b.arrived.end(), false);
    b.waiting = b.params.size();
    b.pending.reset();
  }
  next_launch_ = 0;
  if (comm_.size() > 1) hook_.emplace([this](const Tensor& leaf, const Tensor& grad) { on_grad_ready(leaf, grad); });
}

void DataParallel::on_grad_ready(const Tensor& leaf, const Tensor& grad) {
  const auto it = slot_of_.find(leaf.id());
  if (it == slot_of_.end()) return;  // not one of the optimizer's parameters
  Bucket& b = buckets_[it->second.first];
  const size_t k = it->second.second;
  if (b.arrived[k]) return;
  const Tensor g = grad.contiguous();
  std::memcpy(b.buffer.data() + b.offsets[k], g.data<float>(), size_t(g.numel()) * sizeof(float));
  b.arrived[k] = true;
  --b.waiting;
  launch_ready_buckets(false);
}

void DataParallel::launch_ready_buckets(bool all) {
  Timed timed(comm_seconds_);
  while (next_launch_ < buckets_.size() && (all || buckets_[next_launch_].waiting == 0)) {
    Bucket& b = buckets_[next_launch_++];
    // A parameter the graph did not reach has no gradient on any rank (the same graph everywhere):
    // it adds zeros and keeps no gradient afterwards.
    for (size_t k = 0; k < b.params.size(); ++k)
      if (!b.arrived[k])
        std::memset(b.buffer.data() + b.offsets[k], 0, size_t(opt_.param(b.params[k]).numel()) * sizeof(float));
    b.pending = comm_.start_all_reduce_sum(b.buffer.data(), b.buffer.size());
  }
  // Open MPI moves a non-blocking collective along only inside MPI calls: give the started ones a push.
  for (size_t i = 0; i < next_launch_; ++i)
    if (buckets_[i].pending) buckets_[i].pending->test();
}

void DataParallel::scale_gradients(float scale) {
  NoGradGuard no_grad;
  for (int64_t i = 0; i < int64_t(opt_.num_params()); ++i) {
    Tensor g = opt_.param(i).grad();
    if (!trains(opt_.param(i)) || !g.defined()) continue;
    if (g.device().is_cpu() && g.dtype() == DType::f32 && g.is_contiguous()) {
      float* p = g.data<float>();
      for (int64_t e = 0; e < g.numel(); ++e) p[e] = p[e] * scale;  // as the bucket path below
    } else {
      g.copy_(mul(g, double(scale)));
    }
  }
}

void DataParallel::after_backward() {
  const float scale = 1.0f / float(int64_t(comm_.size()) * slices_per_rank_);
  if (comm_.size() == 1) {
    if (slices_per_rank_ > 1) scale_gradients(scale);  // the sum of the slices' gradients -> their mean
    return;
  }
  if (device_) {
    {
      Timed timed(comm_seconds_);  // the time to queue them: the device runs them in order
      for (int64_t i = 0; i < int64_t(opt_.num_params()); ++i) {
        const Tensor g = opt_.param(i).grad();
        if (trains(opt_.param(i)) && g.defined()) device_->all_reduce_sum(g);
      }
    }
    scale_gradients(scale);
    return;
  }
  hook_.reset();
  launch_ready_buckets(/*all=*/true);
  for (Bucket& b : buckets_) {
    {
      Timed timed(comm_seconds_);
      b.pending->wait();
      b.pending.reset();
    }
    for (size_t k = 0; k < b.params.size(); ++k) {
      if (!b.arrived[k]) continue;
      Tensor g = opt_.param(b.params[k]).grad();
      float* dst = g.data<float>();
      const float* src = b.buffer.data() + b.offsets[k];
      for (int64_t e = 0; e < g.numel(); ++e) dst[e] = src[e] * scale;
    }
  }
}

void DataParallel::after_update() {
  if (!zero_ || comm_.size() == 1) return;
  if (device_) {
    Timed timed(comm_seconds_);
    for (int r = 0; r < comm_.size(); ++r)
      for (int64_t i = ranges_[size_t(r)].first; i < ranges_[size_t(r)].second; ++i)
        if (trains(opt_.param(i))) {
          device_->broadcast(opt_.param(i), r);
          opt_.param(i).bump_version();  // written in place: its 16-bit copy (nn/precision.h) is stale
        }
    return;
  }
  // Each rank's owned, trainable parameters, in order, one block per rank.
  std::vector<size_t> sizes;
  for (const auto& [begin, end] : ranges_) {
    size_t bytes = 0;
    for (int64_t i = begin; i < end; ++i)
      if (trains(opt_.param(i))) bytes += opt_.param(i).nbytes();
    sizes.push_back(bytes);
  }
  std::vector<uint8_t> mine(sizes[size_t(comm_.rank())]), all;
  size_t at = 0;
  const auto [my_begin, my_end] = owned_range();
  for (int64_t i = my_begin; i < my_end; ++i) {
    const Tensor& p = opt_.param(i);
    if (!trains(p)) continue;
    std::memcpy(mine.data() + at, p.data_ptr(), p.nbytes());
    at += p.nbytes();
  }
  size_t total = 0;
  for (size_t s : sizes) total += s;
  all.resize(total);
  {
    Timed timed(comm_seconds_);
    comm_.all_gather_bytes(mine.data(), all.data(), sizes);
  }
  at = 0;
  for (int r = 0; r < comm_.size(); ++r) {
    for (int64_t i = ranges_[size_t(r)].first; i < ranges_[size_t(r)].second; ++i) {
      const Tensor& p = opt_.param(i);
      if (!trains(p)) continue;
      if (r != comm_.rank()) {
        std::memcpy(p.data_ptr(), all.data() + at, p.nbytes());
        p.bump_version();  // written in place: its 16-bit copy (nn/precision.h) is stale
      }
      at += p.nbytes();
    }
  }
}

double DataParallel::mean_over_ranks(double local) {
  if (comm_.size() == 1) return local;
  Timed timed(comm_seconds_);
  comm_.all_reduce_sum(&local, 1);
  return local / double(comm_.size());
}

void DataParallel::gather_state_to_root() {
  if (!zero_ || comm_.size() == 1) return;
  // Each rank's per-parameter state as one blob: a JSON list of {name, dtype, shape, bytes}, then
  // the tensors' bytes in that order. Rank 0 keeps its own state and loads the others'.
  std::string blob;
  if (comm_.rank() != 0) {
    nlohmann::json header = nlohmann::json::array();
    std::string data;
    for (const optim::StateEntry& e : opt_.state_entries()) {
      if (e.scope != optim::StateScope::param) continue;
      const Tensor t = e.tensor.to(Device::cpu()).contiguous();  // a GPU's state comes through the host
      header.push_back({{"name", e.name}, {"dtype", dtype_name(t.dtype())}, {"shape", t.shape()}, {"bytes", t.nbytes()}});
      data.append(static_cast<const char*>(t.data_ptr()), t.nbytes());
    }
    const std::string h = header.dump();
    const uint64_t h_size = h.size();
    blob.append(reinterpret_cast<const char*>(&h_size), sizeof h_size).append(h).append(data);
  }
  std::vector<std::string> blobs;
  {
    Timed timed(comm_seconds_);
    blobs = comm_.gather(blob, 0);
  }
  if (comm_.rank() != 0) return;
  for (size_t r = 1; r < blobs.size(); ++r) {
    const std::string& b = blobs[r];
    uint64_t h_size = 0;
    std::memcpy(&h_size, b.data(), sizeof h_size);
    const nlohmann::json header = nlohmann::json::parse(b.substr(sizeof h_size, size_t(h_size)));
    size_t at = sizeof h_size + size_t(h_size);
    std::map<std::string, optim::StateSource> sources;
    for (const nlohmann::json& e : header) {
      optim::HostBytes hb;
      hb.data = b.data() + at;
      hb.shape = e["shape"].get<Shape>();
      hb.dtype = dtype_from_name(e["dtype"].get<std::string>());
      sources[e["name"].get<std::string>()] = optim::StateSource{hb};
      at += e["bytes"].get<size_t>();
    }
    opt_.load_state(sources);
  }
}

void DataParallel::release_gathered_state() { opt_.release_unowned_state(); }

void DataParallel::check_replicas_agree(int64_t step) {
  if (comm_.size() == 1) return;
  // The checksum of the parameters' checksums (each over its bytes, wherever the parameter is).
  std::string sums;
  for (int64_t i = 0; i < int64_t(opt_.num_params()); ++i) sums += serialize::tensor_checksum(opt_.param(i));
  const std::string mine = serialize::checksum_hex(serialize::checksum_bytes(sums.data(), sums.size()));
  std::vector<std::string> all;
  {
    Timed timed(comm_seconds_);
    all = comm_.all_gather(mine);
  }
  for (size_t r = 1; r < all.size(); ++r)
    if (all[r] != all[0])
      throw CollectiveError("data parallel: at step " + std::to_string(step) + " the weights of rank " + std::to_string(r) +
                                " (checksum " + all[r] + ") differ from rank 0's (" + all[0] +
                                "); the replicas drifted apart, so no checkpoint was written",
                            1, comm_.rank() == 0);
}

std::vector<size_t> DataParallel::state_bytes_per_rank() {
  size_t mine = 0;
  for (const optim::StateEntry& e : opt_.state_entries()) mine += e.tensor.nbytes();
  std::vector<size_t> out;
  for (const std::string& s : comm_.all_gather(std::to_string(mine))) out.push_back(size_t(std::stoull(s)));
  return out;
}

}  // namespace lathe::dist
