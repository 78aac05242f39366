// The placement promise of docs/design.md, tested on the sim device (a host-backed accelerator): after
// any order of (create optimizer, move parameters, load state, step), every per-parameter,
// per-group and global state tensor is where its policy says, and a step after a move or a load
// does exactly the transfers of a fresh run's step. The plain Adam step counter never reaches the
// device; Prodigy's group scalars stay on the host; fused AdamW keeps the counter with its parameter.
#include <doctest/doctest.h>

#include <functional>
#include <memory>

#include "core/ops.h"
#include "core/storage.h"
#include "optim/adam.h"
#include "optim/composite.h"
#include "optim/grad_scaler.h"
#include "optim/muon.h"
#include "optim/prodigy.h"
#include "optim/sgd.h"

using namespace lathe;
using namespace lathe::optim;

namespace {

const Device kSim = Device::sim(0);

struct Model {
  std::vector<Shape> shapes = {{8, 4}, {4}, {3, 3}};
  std::vector<Tensor> params;
  explicit Model(Device d = Device::cpu()) {
    for (size_t i = 0; i < shapes.size(); ++i)
      params.push_back(mul(Tensor::randn(shapes[i], 7 + i), 0.02).to(d).requires_grad_(true));
  }
  // As Module::to: in place, identity kept, gradients follow.
  void to(Device d) {
    for (Tensor& p : params) {
      Tensor g = p.grad();
      p.set_data(p.detach().to(d));
      if (g.defined()) p.set_grad(g.to(d));
    }
  }
  // Gradients made directly on the parameters' device (no transfer).
  void make_grads(uint64_t step) {
    for (size_t i = 0; i < params.size(); ++i)
      params[i].set_grad(Tensor::randn(shapes[i], 1000 * step + i, 0, DType::f32, params[i].device()));
  }
};

using Factory = std::function<std::unique_ptr<Optimizer>(const std::vector<Tensor>&)>;

std::vector<std::pair<std::string, Factory>> factories() {
  return {
      {"sgd", [](const std::vector<Tensor>& p) { return std::make_unique<SGD>(p, nlohmann::json{{"lr", 0.1}, {"momentum", 0.9}}); }},
      {"adam", [](const std::vector<Tensor>& p) { return std::make_unique<Adam>(p, nlohmann::json{{"amsgrad", true}}); }},
      {"adamw", [](const std::vector<Tensor>& p) { return std::make_unique<AdamW>(p); }},
      {"adamw fused", [](const std::vector<Tensor>& p) { return std::make_unique<AdamW>(p, nlohmann::json::object(), true); }},
      {"prodigy", [](const std::vector<Tensor>& p) { return std::make_unique<Prodigy>(p); }},
      // Muon on the matrices beside a fused AdamW on the vector: two modes in one composite.
      {"muon+adamw", [](const std::vector<Tensor>& p) -> std::unique_ptr<Optimizer> {
         std::vector<std::unique_ptr<Optimizer>> parts;
         parts.push_back(std::make_unique<Muon>(std::vector<Tensor>{p[0], p[2]}, nlohmann::json{{"lr", 0.02}}));
         parts.push_back(std::make_unique<AdamW>(std::vector<Tensor>{p[1]}, nlohmann::json::object(), true));
         return std::make_unique<Composite>(std::move(parts));
       }},
  };
}

// Every state tensor sits where its policy says for where the parameters are now.
void check_placement(const Optimizer& opt, Device param_device) {
  for (const auto& e : opt.state_entries()) {
    INFO("state ", e.name, " policy ", placement_name(e.placement), " is on ", e.tensor.device().str());
    const Device want = e.placement == Placement::host ? Device::cpu() : param_device;
    CHECK(e.tensor.device() == want);
    CHECK(e.tensor.device() == opt.state_device(e.scope, e.index, e.key));
  }
}

TransferStats step_transfers(Optimizer& opt, Model& m, uint64_t step) {
  m.make_grads(step);
  reset_transfer_stats();
  opt.step();
  return transfer_stats();
}

}  // namespace

TEST_CASE("placement: create the optimizer, then move the parameters") {
  for (auto& [name, make] : factories()) {
    INFO("optimizer ", name);
    Model m;
    auto opt = make(m.params);
    m.make_grads(0);
    opt->step();
    check_placement(*opt, Device::cpu());
    m.to(kSim);
    m.make_grads(1);
    opt->step();
    check_placement(*opt, kSim);
    CHECK(opt->state_entries().size() > 1);
    m.to(Device::cpu());
    m.make_grads(2);
    opt->step();
    check_placement(*opt, Device::cpu());
  }
}

TEST_CASE("placement: move the parameters, then create the optimizer") {
  for (auto& [name, make] : factories()) {
    INFO("optimizer ", name);
    Model m;
    m.to(kSim);
    auto opt = make(m.params);
    check_placement(*opt, kSim);  // group and global state exist before the first step
    m.make_grads(0);
    opt->step();
    check_placement(*opt, kSim);
  }
}

TEST_CASE("placement: step, move, step costs one move of the state, then no more than a fresh run") {
  for (auto& [name, make] : factories()) {
    INFO("optimizer ", name);
    Model fresh(kSim);
    auto fresh_opt = make(fresh.params);
    step_transfers(*fresh_opt, fresh, 0);
    const TransferStats fresh_step = step_transfers(*fresh_opt, fresh, 1);

    Model m;
    auto opt = make(m.params);
    step_transfers(*opt, m, 0);
    m.to(kSim);
    step_transfers(*opt, m, 1);  // moves the state once
    check_placement(*opt, kSim);
    const TransferStats after = step_transfers(*opt, m, 2);
    CHECK(after == fresh_step);
    if (name != "prodigy") {
      // Adam, AdamW (plain and fused), SGD: a step reads nothing from the device.
      CHECK(after.host_to_device == 0);
      CHECK(after.device_to_host == 0);
      CHECK(after.syncs == 0);
    }
  }
}

TEST_CASE("placement: the plain Adam step counter never reaches the device, fused keeps it with the parameter") {
  Model m(kSim);
  AdamW plain(m.params);
  for (uint64_t t = 0; t < 3; ++t) {
    const TransferStats s = step_transfers(plain, m, t);
    CHECK(s.device_to_host == 0);
    CHECK(s.host_to_device == 0);
  }
  for (int64_t i = 0; i < 3; ++i) {
    CHECK(plain.state(i, "step").device() == Device::cpu());
    CHECK(plain.state(i, "step").item() == 3);
    CHECK(plain.state(i, "exp_avg").device() == kSim);
  }
  Model n(kSim);
  AdamW fused(n.params, nlohmann::json::object(), /*fused=*/true);
  step_transfers(fused, n, 0);
  for (int64_t i = 0; i < 3; ++i) CHECK(fused.state(i, "step").device() == kSim);
  CHECK(fused.global_state_tensor("step").device() == Device::cpu());
}

TEST_CASE("placement: Prodigy's group scalars stay on the host, its moments with the parameters") {
  Model m(kSim);
  Prodigy opt(m.params);
  m.make_grads(0);
  opt.step();
  for (const auto& e : opt.state_entries()) {
    INFO(e.name);
    if (e.scope == StateScope::group) {
      CHECK(e.placement == Placement::host);
      CHECK(e.tensor.device() == Device::cpu());
      CHECK(e.dtype == DType::f64);
    } else if (e.scope == StateScope::param) {
      // Moments with their parameters; the per-parameter step counter is host state.
      CHECK(e.tensor.device() == (e.placement == Placement::host ? Device::cpu() : kSim));
    }
  }
  // Prodigy has only the plain path: its group scalars are declared host in both modes.
  const StateSlot* d = opt.declared(StateScope::group, "d");
  REQUIRE(d != nullptr);
  CHECK(d->placement(false) == Placement::host);
  CHECK(d->placement(true) == Placement::host);
  CHECK(opt.state_device(StateScope::group, 0, "d") == Device::cpu());
}

TEST_CASE("placement: loaded state is created where the policy says, in any order with moves") {
  for (auto& [name, make] : factories()) {
    INFO("optimizer ", name);
    // A run on the CPU, then its state exported (as a checkpoint writer would).
    Model src;
    auto src_opt = make(src.params);
    for (uint64_t t = 0; t < 2; ++t) step_transfers(*src_opt, src, t);
    std::map<std::string, StateSource> saved, saved_bytes;
    std::vector<Tensor> keep;  // the bytes must outlive the load
    for (const auto& e : src_opt->state_entries()) {
      saved[e.name] = StateSource{e.tensor};
      keep.push_back(e.tensor.contiguous());
      saved_bytes[e.name] = StateSource{HostBytes{keep.back().data_ptr(), e.tensor.shape(), e.tensor.dtype()}};
    }
    for (int order = 0; order < 3; ++order) {
      INFO("order ", order);
      Model m;
      std::unique_ptr<Optimizer> opt;
      if (order == 0) {  // move, create, load
        m.to(kSim);
        opt = make(m.params);
        opt->load_state(saved);
      } else if (order == 1) {  // create, load (on cpu), move
        opt = make(m.params);
        opt->load_state(saved_bytes);
        check_placement(*opt, Device::cpu());
        m.to(kSim);
      } else {  // create, move, load from host bytes
        opt = make(m.params);
        m.to(kSim);
        opt->load_state(saved_bytes);
      }
      m.make_grads(5);
      opt->step();
      check_placement(*opt, kSim);
      CHECK(opt->step_count() == 3);
      // A resumed step transfers exactly what a fresh run's step does.
      Model fresh(kSim);
      auto fresh_opt = make(fresh.params);
      step_transfers(*fresh_opt, fresh, 0);
      const TransferStats fresh_step = step_transfers(*fresh_opt, fresh, 1);
      CHECK(step_transfers(*opt, m, 6) == fresh_step);
    }
  }
}

TEST_CASE("placement: loaded state gives the same result as the run that never stopped") {
  Model a, b;
  AdamW run(a.params), resumed_src(b.params);
  for (uint64_t t = 0; t < 3; ++t) {
    step_transfers(run, a, t);
    step_transfers(resumed_src, b, t);
  }
  std::map<std::string, StateSource> saved;
  for (const auto& e : resumed_src.state_entries()) saved[e.name] = StateSource{e.tensor.clone()};
  b.to(kSim);
  AdamW resumed(b.params);
  resumed.load_state(saved);
  step_transfers(run, a, 3);
  step_transfers(resumed, b, 3);
  for (size_t i = 0; i < a.params.size(); ++i) {
    std::vector<float> x = a.params[i].to_vector<float>(), y = b.params[i].to_vector<float>();
    CHECK(x == y);
  }
}

TEST_CASE("placement: bad state loads are errors naming the entry, and change nothing") {
  Model m;
  AdamW opt(m.params);
  auto check_err = [&](std::map<std::string, StateSource> s, const std::string& needle) {
    try {
      opt.load_state(s);
      FAIL("expected an error");
    } catch (const Error& e) {
      INFO(e.what());
      CHECK(std::string(e.what()).find(needle) != std::string::npos);
    }
  };
  check_err({{"param.9.exp_avg", StateSource{Tensor::zeros({4})}}}, "parameter 9");
  check_err({{"param.0.momentum_buffer", StateSource{Tensor::zeros({8, 4})}}}, "momentum_buffer");
  check_err({{"param.0.exp_avg", StateSource{Tensor::zeros({4, 8})}}}, "shape");
  check_err({{"bogus", StateSource{Tensor::zeros({1})}}}, "malformed state name");
  CHECK(opt.state_entries().size() == 1);  // only global.step
}

TEST_CASE("placement: mixed-device gradients are errors naming both devices") {
  Model m(kSim);
  Adam opt(m.params);
  try {
    m.params[0].set_grad(Tensor::zeros({8, 4}));
    opt.step();
    FAIL("expected an error");
  } catch (const Error& e) {
    const std::string msg = e.what();
    CHECK(msg.find("cpu") != std::string::npos);
    CHECK(msg.find("sim:0") != std::string::npos);
  }
}

TEST_CASE("placement: the loss scaler's state is host global state, exported and restored") {
  GradScaler scaler;
  auto entries = scaler.state_entries();
  REQUIRE(entries.size() == 2);
  for (const auto& e : entries) {
    CHECK(e.placement == Placement::host);
    CHECK(e.tensor.device() == Device::cpu());
  }
  GradScaler other;
  std::map<std::string, StateSource> s;
  s["scaler.scale"] = StateSource{Tensor::scalar(1024.0)};
  s["scaler.growth_tracker"] = StateSource{Tensor::scalar(7, DType::i64)};
  other.load_state(s);
  CHECK(other.get_scale() == 1024.0);
  CHECK(other.growth_tracker() == 7);
}
