// Data parallel training, the parts that run in one process (docs/design.md, "Data parallelism"):
// the shard plan, ZeRO-1's sharded state as a placement policy, the gradient-ready hook, the
// agreement of ranks on errors, and --freeze. The runs across processes (mpirun) are in
// tests/dist/dist_train.py.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <nlohmann/json.hpp>
#include <string>

#include "core/autograd.h"
#include "core/device_collectives.h"
#include "core/grad_ready_hook.h"
#include "core/ops.h"
#include "nn/gpt.h"
#include "optim/adam.h"
#include "optim/prodigy.h"
#include "serialize/checkpoint.h"
#include "serialize/checksum.h"
#include "tests/temp_dir.h"
#include "tests/test_helpers.h"
#include "train/distributed/agreement.h"
#include "train/distributed/communicator.h"
#include "train/distributed/data_parallel.h"
#include "train/run_checkpoints.h"
#include "train/trainer.h"

using namespace lathe;
using lathe::testing::TempDir;
using lathe::testing::error_of;
using lathe::testing::read_jsonl;

namespace {

train::TrainOptions tiny_run(const TempDir& d, const std::string& out) {
  std::ofstream(d.path / "model.json")
      << R"({"vocab_size": 256, "block_size": 16, "n_layer": 1, "n_head": 2, "n_embd": 32, "batch": 4})";
  std::ofstream text(d.path / "corpus.txt");
  for (int i = 0; i < 60; ++i) text << "the quick brown fox " << i << " jumps over the lazy dog. ";
  text.close();
  train::TrainOptions o;
  o.data = (d.path / "corpus.txt").string();
  o.config = (d.path / "model.json").string();
  o.lr = 3e-3;
  o.steps = 6;
  o.warmup = 2;
  o.eval_interval = 0;
  o.eval_iters = 2;
  o.sample_tokens = 0;
  o.threads = 1;
  o.quiet = true;
  o.out = (d.path / out).string();
  return o;
}

std::map<std::string, std::string> tensor_sums(const std::string& path) {
  std::map<std::string, std::string> out;
  for (const auto& [name, t] : serialize::read_safetensors(path).tensors) out[name] = serialize::tensor_checksum(t);
  return out;
}

std::vector<double> losses(const std::filesystem::path& dir) {
  std::vector<double> out;
  for (const nlohmann::json& rec : read_jsonl(dir / "metrics.jsonl")) out.push_back(rec["loss"].get<double>());
  return out;
}

}  // namespace

TEST_CASE("dist: shard ranges are contiguous, cover every parameter once, and balance elements") {
  const std::vector<int64_t> numels = {100, 10, 10, 80, 0, 100, 50, 50};
  for (int world = 1; world <= 5; ++world) {
    const auto ranges = dist::shard_ranges(numels, world);
    REQUIRE(ranges.size() == size_t(world));
    CHECK(ranges.front().first == 0);
    CHECK(ranges.back().second == int64_t(numels.size()));
    for (size_t r = 1; r < ranges.size(); ++r) CHECK(ranges[r].first == ranges[r - 1].second);
  }
  const auto two = dist::shard_ranges(numels, 2);  // 400 elements: 200 each
  for (const auto& [begin, end] : two) {
    int64_t elements = 0;
    for (int64_t i = begin; i < end; ++i) elements += numels[size_t(i)];
    CHECK(elements == 200);
  }
}

TEST_CASE("dist: a sharded optimizer keeps and updates only its own parameters' state, as policy 'sharded'") {
  std::vector<Tensor> params;
  for (int i = 0; i < 3; ++i) params.push_back(Tensor::randn({4, 3}, 7 + i).requires_grad_(true));
  optim::AdamW opt(params, {{"lr", 0.1}});
  opt.shard_state(1, 3);
  CHECK(opt.sharded());
  CHECK(!opt.owns(0));
  CHECK(opt.owns(2));
  const std::string before = serialize::tensor_checksum(params[0]);
  for (Tensor& p : params) p.set_grad(Tensor::ones({4, 3}));
  opt.step();
  CHECK(serialize::tensor_checksum(params[0]) == before);  // another process updates it
  CHECK(!opt.state(0, "exp_avg").defined());
  CHECK(opt.state(1, "exp_avg").defined());
  for (const optim::StateEntry& e : opt.state_entries()) {
    CHECK(e.index != 0);
    if (e.key == "exp_avg") CHECK(std::string(optim::placement_name(e.placement)) == "sharded");
  }
  // A whole state loaded here (a restore, a checkpoint's gather) is released back to the shard.
  opt.load_state({{"param.0.exp_avg", optim::StateSource{Tensor::zeros({4, 3})}}});
  CHECK(opt.state(0, "exp_avg").defined());
  opt.release_unowned_state();
  CHECK(!opt.state(0, "exp_avg").defined());
  CHECK(optim::placement_from_name("sharded") == optim::Placement::sharded);
}

TEST_CASE("dist: prodigy refuses to shard its state, naming why") {
  std::vector<Tensor> params = {Tensor::randn({4}, 1).requires_grad_(true)};
  optim::Prodigy opt(params, {{"lr", 1.0}});
  CHECK(error_of([&] { opt.shard_state(0, 1); }).find("cannot be sharded") != std::string::npos);
}

TEST_CASE("dist: the grad-ready hook sees each leaf once, with its whole gradient") {
  Tensor w = Tensor::from_vector(std::vector<float>{1, 2, 3}, {3}).requires_grad_(true);
  Tensor b = Tensor::from_vector(std::vector<float>{1, 1, 1}, {3}).requires_grad_(true);
  std::map<const void*, std::vector<float>> seen;
  int calls = 0;
  {
    GradReadyHook hook([&](const Tensor& leaf, const Tensor& grad) {
      ++calls;
      seen[leaf.id()] = grad.contiguous().to_vector<float>();
    });
    // w is used twice: its hook must come after both contributions.
    sum(add(mul(w, w), mul(w, b))).backward();
  }
  CHECK(calls == 2);
  CHECK(seen[w.id()] == std::vector<float>{3, 5, 7});  // 2w + b
  CHECK(seen[b.id()] == std::vector<float>{1, 2, 3});
  sum(w).backward();  // outside the scope: no hook
  CHECK(calls == 2);
}

TEST_CASE("dist: a single process's communicator and agreement") {
  dist::SingleProcessCommunicator comm;
  CHECK(comm.rank() == 0);
  CHECK(comm.size() == 1);
  float v[2] = {1, 2};
  comm.all_reduce_sum(v, 2);
  comm.start_all_reduce_sum(v, 2)->wait();
  CHECK(v[1] == 2);
  CHECK(comm.all_gather("x") == std::vector<std::string>{"x"});
  dist::on_every_rank(comm, [] {});
  try {
    dist::on_every_rank(comm, [] { LATHE_FAIL("no corpus"); }, [](const std::exception&) { return 7; });
    FAIL("no error");
  } catch (const dist::CollectiveError& e) {
    CHECK(std::string(e.what()) == "no corpus");
    CHECK(e.exit_code == 7);
    CHECK(e.print_here);
  }
  if (!dist::launched_by_mpirun()) CHECK(dist::make_communicator()->size() == 1);
}

TEST_CASE("dist: --zero 1 in one process trains bitwise as --zero 0, and its checkpoint resumes without it") {
  TempDir d("zero1");
  train::TrainOptions plain = tiny_run(d, "plain");
  train::TrainOptions zero = tiny_run(d, "zero");
  zero.zero = 1;
  train::Trainer(plain).run(nullptr);
  train::Trainer(zero).run(nullptr);
  CHECK(losses(plain.out) == losses(zero.out));
  const std::string a = train::checkpoint_path(plain.out, 6), b = train::checkpoint_path(zero.out, 6);
  CHECK(tensor_sums(a) == tensor_sums(b));
  const auto ckpt = serialize::TrainingCheckpoint::read(b);
  CHECK(ckpt.document().tensors.at("optim.param.0.exp_avg").policy.value() == "sharded");
  // The same file restores into an unsharded run (any world size, with or without ZeRO).
  train::TrainOptions more = plain;
  more.steps = 8;
  train::Trainer resumed = train::Trainer::resume(zero.out, more, {"steps", "zero"});
  CHECK(!resumed.state().optimizer->sharded());
  CHECK(resumed.state().optimizer->state(0, "exp_avg").defined());
}

namespace {
// Bytes of the buffers the optimizer's state tensors hold, each buffer once (a view counts its
// whole buffer): what the process really keeps, whatever the sharding plan says. Per-parameter
// state (the part ZeRO-1 shards) apart from group and global state (which every process keeps).
std::pair<size_t, size_t> state_storage_bytes(const optim::Optimizer& opt) {
  std::set<const void*> seen;
  size_t param = 0, other = 0;
  for (const optim::StateEntry& e : opt.state_entries())
    if (seen.insert(e.tensor.storage().get()).second)
      (e.scope == optim::StateScope::param ? param : other) += e.tensor.storage()->nbytes();
  return {param, other};
}

struct StateHeld {
  size_t param = 0;      // state_storage_bytes after the first update: per-parameter state
  size_t other = 0;      // and group and global state
  size_t tensors = 0;    // state tensors
  size_t allocated = 0;  // what the host allocator lent during the first update and still lends
  size_t largest = 0;    // the state of the largest parameter (AdamW: two f32 tensors of its size)
};

// One data parallel step of a small GPT with AdamW (state created by its first update) over `comm`.
StateHeld first_update_state(dist::Communicator& comm, bool zero) {
  nn::GPTConfig cfg;
  cfg.vocab_size = 64;
  cfg.block_size = 8;
  cfg.n_layer = 4;
  cfg.n_head = 2;
  cfg.n_embd = 32;
  const Tensor idx = Tensor::from_vector(std::vector<int64_t>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}, {2, 8});
  nn::GPT model(cfg, 5);
  optim::AdamW opt(model.parameters());
  dist::DataParallel dp(comm, opt, zero);
  const Tensor loss = model.forward(idx, idx).loss;
  dp.before_backward();
  loss.backward();
  dp.after_backward();
  const size_t before = memory_stats(Device::cpu()).allocated;
  opt.step();
  const size_t after = memory_stats(Device::cpu()).allocated;
  dp.after_update();
  size_t largest = 0;
  for (const Tensor& p : model.parameters()) largest = std::max(largest, size_t(p.numel()) * 2 * sizeof(float));
  const auto [param, other] = state_storage_bytes(opt);
  return {param, other, opt.state_entries().size(), after - before, largest};
}
}  // namespace

// Run by tests/dist/dist_train.py under mpirun -np 2 (in one process N = 1 and it checks little).
// A process owns whole parameters, so its share may be off 1/N by up to the largest parameter's
// state.
TEST_CASE("dist: ZeRO-1 leaves each process about 1/N of the optimizer state, measured in the buffers it holds") {
  std::unique_ptr<dist::Communicator> comm = dist::make_communicator();
  const auto n = size_t(comm->size());
  const StateHeld whole = first_update_state(*comm, /*zero=*/false);
  const StateHeld mine = first_update_state(*comm, /*zero=*/true);
  // The allocator agrees with the walk: the update kept what the state holds, each tensor rounded
  // up to the allocator's size class (core/storage.cpp: at most 1/8 more, or to 64 bytes).
  for (const StateHeld& h : {whole, mine}) {
    CHECK(h.allocated >= h.param + h.other);
    CHECK(double(h.allocated) <= 1.125 * double(h.param + h.other) + 64.0 * double(h.tensors));
  }
  size_t sum = 0;
  for (const std::string& s : comm->all_gather(std::to_string(mine.param))) sum += size_t(std::stoull(s));
  MESSAGE("rank ", comm->rank(), " of ", n, ": per-parameter optimizer state ", mine.param, " bytes with ZeRO-1, ",
          whole.param, " without (all ranks with ZeRO-1: ", sum, "); group and global state ", mine.other,
          " bytes on each; the allocator lent ", mine.allocated, " and ", whole.allocated);
  CHECK(sum == whole.param);  // every byte of per-parameter state is held once
  CHECK(std::abs(double(mine.param) - double(whole.param) / double(n)) <= double(whole.largest));
  CHECK(mine.other == whole.other);
  if (n > 1) CHECK(mine.param < whole.param);
}

TEST_CASE("dist: --freeze keeps the matched parameters bitwise unchanged, without gradient or state") {
  TempDir d("freeze");
  train::TrainOptions o = tiny_run(d, "frozen");
  o.freeze = "wte";
  train::TrainOptions free_run = tiny_run(d, "free");
  train::Trainer trainer(o);
  train::Trainer reference(free_run);
  CHECK(trainer.frozen() == std::vector<std::string>{"transformer.wte.weight"});
  const Tensor wte = trainer.state().model->named_parameters().at(0).second;
  const std::string before = serialize::tensor_checksum(wte);
  trainer.run(nullptr);
  CHECK(serialize::tensor_checksum(wte) == before);
  // The optimizer tracks the same parameters in the same groups as without --freeze.
  const nlohmann::json a = trainer.state().optimizer->groups_json(), b = reference.state().optimizer->groups_json();
  REQUIRE(a.size() == b.size());
  for (size_t g = 0; g < a.size(); ++g) CHECK(a[g]["params"] == b[g]["params"]);
  const auto sums = tensor_sums(train::checkpoint_path(o.out, 6));
  for (const auto& [name, sum] : sums) CHECK(name.rfind("optim.param.0.", 0) != 0);  // parameter 0 is wte
  CHECK(sums.at("transformer.wte.weight") == before);
  // A resume keeps the set: another pattern is refused, naming the option.
  train::TrainOptions other = o;
  other.freeze = "wpe";
  CHECK(error_of([&] { train::Trainer::resume(o.out, other, {"freeze"}); }).find("freeze") != std::string::npos);
  train::TrainOptions more = o;
  more.steps = 8;
  train::Trainer resumed = train::Trainer::resume(o.out, more, {"steps"});
  resumed.run(nullptr);
  CHECK(tensor_sums(train::checkpoint_path(o.out, 8)).at("transformer.wte.weight") == before);
}

TEST_CASE("dist: bad --zero and --freeze values are errors naming the flag") {
  TempDir d("badflags");
  train::TrainOptions o = tiny_run(d, "bad");
  o.zero = 2;
  CHECK(error_of([&] { train::validate(o); }).find("--zero") != std::string::npos);
  o.zero = 1;
  o.optimizer = "prodigy";
  CHECK(error_of([&] { train::validate(o); }).find("prodigy") != std::string::npos);
  o = tiny_run(d, "bad");
  o.freeze = "(";
  CHECK(error_of([&] { train::validate(o); }).find("--freeze") != std::string::npos);
  o.freeze = "no_such_parameter";
  CHECK(error_of([&] { train::Trainer t(o); }).find("matches no parameter") != std::string::npos);
  o.freeze = ".";
  CHECK(error_of([&] { train::Trainer t(o); }).find("nothing would train") != std::string::npos);
}

TEST_CASE("dist: --dist-timeout is a positive number of seconds, given to the communicator, and a resume may change it") {
  TempDir d("timeout");
  train::TrainOptions o = tiny_run(d, "run");
  for (double bad : {0.0, -1.0, std::nan(""), HUGE_VAL}) {
    INFO(bad);
    o.dist_timeout = bad;
    CHECK(error_of([&] { train::validate(o); }).find("--dist-timeout must be a positive number of seconds") !=
          std::string::npos);
  }
  dist::SingleProcessCommunicator comm;
  CHECK(comm.timeout() == dist::kDefaultTimeoutSeconds);
  CHECK(error_of([&] { comm.set_timeout(0); }).find("positive") != std::string::npos);
  o.dist_timeout = 7.5;
  train::Trainer(o, &comm).run(nullptr);
  CHECK(comm.timeout() == 7.5);
  CHECK(comm.activity() == "the checkpoint at step 6");  // what the run did last with its communicator
  train::TrainOptions more = o;
  more.steps = 8;
  more.dist_timeout = 60;
  dist::SingleProcessCommunicator again;
  train::Trainer resumed = train::Trainer::resume(o.out, more, {"steps", "dist_timeout"}, &again);
  CHECK(resumed.options().dist_timeout == 60);
  CHECK(again.timeout() == 60);
}

namespace {
// Rank 0 of two whose partner's all_gather contribution is `other`.
class PairCommunicator final : public dist::Communicator {
 public:
  explicit PairCommunicator(std::string other) : other_(std::move(other)) {}
  int rank() const override { return 0; }
  int size() const override { return 2; }
  std::string describe() const override { return "pair"; }
  void all_reduce_sum(float*, size_t) override {}
  void all_reduce_sum(double*, size_t) override {}
  std::unique_ptr<dist::PendingCollective> start_all_reduce_sum(float* d, size_t n) override {
    return dist::SingleProcessCommunicator().start_all_reduce_sum(d, n);
  }
  void broadcast(void*, size_t, int) override {}
  std::vector<std::string> all_gather(const std::string& mine) override { return {mine, other_}; }
  void all_gather_bytes(const void*, void*, const std::vector<size_t>&) override {}
  std::vector<std::string> gather(const std::string& mine, int) override { return {mine, other_}; }
  void barrier() override {}
  [[noreturn]] void abort(int code) override { std::exit(code); }

 private:
  std::string other_;
};

// check_same_run's error between rank 0 training `mine` and rank 1 training `theirs` ("" if none).
std::string same_run_error(const train::Trainer& mine, const train::Trainer& theirs) {
  const std::string data = mine.data().fingerprint();
  PairCommunicator comm(nlohmann::json{{"options", theirs.applied_options()}, {"data", data}}.dump());
  return error_of([&] { dist::check_same_run(comm, mine.applied_options(), data); });
}
}  // namespace

TEST_CASE("dist: ranks compare the options they train with, a default as the value it stands for") {
  TempDir d("same_run");
  train::TrainOptions preset = tiny_run(d, "run");  // the config's batch, 4
  preset.batch = 0;
  train::TrainOptions two = preset, four = preset;
  two.batch = 2;
  four.batch = 4;
  const train::Trainer a(preset), b(two), c(four);
  CHECK(a.applied_options()["batch"] == 4);
  CHECK(train::to_json(a.options())["batch"] == 0);  // what a checkpoint stores: "the preset's"
  CHECK(same_run_error(a, b).find("--batch is 4 on rank 0 but 2 on rank 1") != std::string::npos);
  CHECK(same_run_error(a, c).empty());
  // The floor of the cosine decay: lr / 10 by default, whichever way it is written.
  train::TrainOptions floor = preset, other_floor = preset;
  floor.min_lr = preset.lr / 10;
  other_floor.min_lr = preset.lr / 5;
  CHECK(same_run_error(a, train::Trainer(floor)).empty());
  const std::string floors = same_run_error(a, train::Trainer(other_floor));
  CHECK_MESSAGE(floors.find("--min-lr is " + nlohmann::json(preset.lr / 10).dump() + " on rank 0 but " +
                            nlohmann::json(preset.lr / 5).dump() + " on rank 1") != std::string::npos,
                floors);
}

TEST_CASE("dist: --grad-slices sums the slices' gradients in one process, a batch it does not divide is refused") {
  TempDir d("slices");
  train::TrainOptions whole = tiny_run(d, "whole");
  train::TrainOptions sliced = tiny_run(d, "sliced");
  sliced.grad_slices = 2;
  train::Trainer(whole).run(nullptr);
  train::Trainer(sliced).run(nullptr);
  const std::vector<double> a = losses(whole.out), b = losses(sliced.out);
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) CHECK(b[i] == doctest::Approx(a[i]).epsilon(1e-5));
  train::TrainOptions odd = tiny_run(d, "odd");
  odd.grad_slices = 3;  // batch 4
  CHECK(error_of([&] { train::Trainer t(odd); }).find("not divisible by --grad-slices 3") != std::string::npos);
}

namespace {
// Rank 0 of two whose partner holds the same gradients and parameters: a sum over the ranks is
// twice this rank's values. It records when all-reduces start.
class MirrorCommunicator final : public dist::Communicator {
 public:
  int started = 0;
  int rank() const override { return 0; }
  int size() const override { return 2; }
  std::string describe() const override { return "mirror"; }
  void all_reduce_sum(float* d, size_t n) override {
    for (size_t i = 0; i < n; ++i) d[i] += d[i];
  }
  void all_reduce_sum(double* d, size_t n) override {
    for (size_t i = 0; i < n; ++i) d[i] += d[i];
  }
  std::unique_ptr<dist::PendingCollective> start_all_reduce_sum(float* d, size_t n) override {
    ++started;
    all_reduce_sum(d, n);
    return dist::SingleProcessCommunicator().start_all_reduce_sum(d, n);
  }
  void broadcast(void*, size_t, int) override {}
  std::vector<std::string> all_gather(const std::string& mine) override { return {mine, mine}; }
  void all_gather_bytes(const void* mine, void* out, const std::vector<size_t>& sizes) override {
    std::memcpy(out, mine, sizes[0]);
  }
  std::vector<std::string> gather(const std::string& mine, int) override { return {mine, mine}; }
  void barrier() override {}
  [[noreturn]] void abort(int code) override { std::exit(code); }
};
}  // namespace

TEST_CASE("dist: buckets start their all-reduce during the backward pass, and the mean comes back exactly") {
  nn::GPTConfig cfg;
  cfg.vocab_size = 64;
  cfg.block_size = 8;
  cfg.n_layer = 2;
  cfg.n_head = 2;
  cfg.n_embd = 16;
  const Tensor idx = Tensor::from_vector(std::vector<int64_t>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}, {2, 8});
  nn::GPT alone(cfg, 5), mirrored(cfg, 5);
  optim::AdamW opt_alone(alone.parameters()), opt_mirrored(mirrored.parameters());
  alone.forward(idx, idx).loss.backward();

  MirrorCommunicator comm;
  dist::DataParallel dp(comm, opt_mirrored, /*zero=*/false, /*bucket_bytes=*/8192);
  REQUIRE(dp.buckets() > 2);
  const Tensor loss = mirrored.forward(idx, idx).loss;
  dp.before_backward();
  loss.backward();
  // Every bucket but those the last gradients complete has started before the pass returned.
  CHECK(comm.started >= dp.buckets() - 1);
  dp.after_backward();
  CHECK(comm.started == dp.buckets());
  // (g + g) / 2 == g, bitwise: the reduction is a plain sum and one scaling.
  for (int64_t i = 0; i < int64_t(opt_alone.num_params()); ++i)
    CHECK(serialize::tensor_checksum(opt_alone.param(i).grad()) == serialize::tensor_checksum(opt_mirrored.param(i).grad()));
}

namespace {
// The device path's stand-in for NCCL, on the sim device: the partner rank mirrors this one.
class MirrorDeviceCollectives final : public DeviceCollectives {
 public:
  static inline int reduced = 0;
  void all_reduce_sum(const Tensor& t) override {
    NoGradGuard no_grad;
    Tensor(t).copy_(add(t, t));
    ++reduced;
  }
  void broadcast(const Tensor&, int) override {}
};
}  // namespace

TEST_CASE("dist: the device path (NCCL's place) reduces every gradient in place and scales it once") {
  register_device_collectives(DeviceType::sim, [](const DeviceCollectivesSetup& s) {
    CHECK(s.size == 2);
    return std::unique_ptr<DeviceCollectives>(new MirrorDeviceCollectives());
  });
  nn::GPTConfig cfg;
  cfg.vocab_size = 64;
  cfg.block_size = 8;
  cfg.n_layer = 1;
  cfg.n_head = 2;
  cfg.n_embd = 16;
  const Tensor idx = Tensor::from_vector(std::vector<int64_t>{1, 2, 3, 4, 5, 6, 7, 8}, {1, 8}, Device::sim());
  nn::GPT alone(cfg, 5, Device::sim()), mirrored(cfg, 5, Device::sim());
  optim::AdamW opt_alone(alone.parameters()), opt_mirrored(mirrored.parameters());
  alone.forward(idx, idx).loss.backward();
  MirrorCommunicator comm;
  dist::DataParallel dp(comm, opt_mirrored, /*zero=*/false);
  const Tensor loss = mirrored.forward(idx, idx).loss;
  dp.before_backward();
  loss.backward();
  dp.after_backward();
  CHECK(MirrorDeviceCollectives::reduced == int(opt_mirrored.num_params()));
  for (int64_t i = 0; i < int64_t(opt_alone.num_params()); ++i)
    CHECK(serialize::tensor_checksum(opt_alone.param(i).grad()) == serialize::tensor_checksum(opt_mirrored.param(i).grad()));
}
