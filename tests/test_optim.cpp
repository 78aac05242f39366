// Optimizers against their references: the golden cases of tests/golden/make_optim_goldens.py
// (torch.optim SGD/Adam/AdamW single-tensor path; prodigy_reference.py for Prodigy) and
// make_muon_goldens.py (torch.optim.Muon, or its transcription muon_reference.py) run through
// the `lathe ref` kind "optim" in-process; the fused AdamW gives the plain path's bits; parameter
// groups, frozen parameters, skipped gradients; every option check; malformed cases.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <string>

#include "core/autograd.h"
#include "core/ops.h"
#include "optim/adam.h"
#include "optim/prodigy.h"
#include "optim/sgd.h"
#include "ref/kinds.h"
#include "serialize/safetensors.h"

#include "tests/core_test_util.h"

using namespace lathe;
using namespace lathe::optim;

namespace {

const std::string kGolden = LATHE_GOLDEN_DIR;

struct Tol {
  double rtol, atol, atol_of_max;  // |a - e| <= atol + atol_of_max * max|e| + rtol * |e|
};
constexpr Tol kTorchTol{1e-4, 1e-6, 0};
constexpr Tol kProdigyTol{1e-3, 0, 1e-4};
// Muon: relative 1e-3, the bound for a bf16 Newton-Schulz iteration, with an absolute
// floor of 1e-6 of the largest value for elements that pass near zero.
constexpr Tol kMuonTol{1e-3, 0, 1e-6};

void check_close(const std::string& name, const Tensor& actual, const Tensor& expected, Tol tol) {
  double emax = 0;
  for (double v : expected.to_vector<double>()) emax = std::max(emax, std::abs(v));
  const std::string diff = core_test::compare(actual, expected, tol.rtol, tol.atol + tol.atol_of_max * emax);
  CHECK_MESSAGE(diff.empty(), "tensor ", name, ": ", diff);
}

void check_scalar(const std::string& name, double actual, double expected, double rtol) {
  INFO(name, ": lathe ", actual, " expected ", expected);
  CHECK(std::abs(actual - expected) <= rtol * std::abs(expected) + 1e-300);
}

ref::RefOutput run_case(const serialize::SafetensorsFile& c, Device device, nlohmann::json patch = {}) {
  nlohmann::json spec = nlohmann::json::parse(c.metadata.at("case"));
  if (!patch.is_null()) spec.merge_patch(patch);
  return ref::run_optim_case(c, spec, device);
}

void check_golden(const std::string& name, Tol tol, Device device, nlohmann::json patch = {}) {
  INFO("golden case ", name, " on ", device.str());
  auto c = serialize::read_safetensors(kGolden + "/optim_" + name + ".case.safetensors");
  auto e = serialize::read_safetensors(kGolden + "/optim_" + name + ".expected.safetensors");
  ref::RefOutput out = run_case(c, device, patch);
  // Exactly the expected tensors, each close.
  std::map<std::string, Tensor> got(out.tensors.begin(), out.tensors.end());
  for (const auto& [key, t] : e.tensors) {
    INFO("expected tensor ", key);
    REQUIRE(got.count(key));
    CHECK(got[key].device() == (key.find(".step") != std::string::npos && !patch.contains("fused") ? Device::cpu()
                                                                                                   : device));
    check_close(key, got[key].to(Device::cpu()).to(DType::f64), e.at(key).to(DType::f64), tol);
  }
  for (const auto& [key, t] : got) {
    INFO("lathe output ", key);
    CHECK(e.find(key) != nullptr);
  }
  const auto expected_result = nlohmann::json::parse(e.metadata.at("result"));
  REQUIRE(out.result["groups"].size() == expected_result["groups"].size());
  for (size_t g = 0; g < expected_result["groups"].size(); ++g)
    for (const auto& [key, v] : expected_result["groups"][g].items())
      check_scalar("group " + std::to_string(g) + " " + key, out.result["groups"][g][key].get<double>(),
                   v.get<double>(), 1e-3);
}

Tensor param_like(const Shape& shape, uint64_t seed, Device d = Device::cpu()) {
  return mul(Tensor::randn(shape, seed), 0.02).to(d).requires_grad_(true);
}


bool bitwise_equal(const Tensor& a, const Tensor& b) {
  std::vector<float> x = a.to(Device::cpu()).to_vector<float>(), y = b.to(Device::cpu()).to_vector<float>();
  return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0;
}

template <class Fn>
void check_error(Fn&& fn, const std::vector<std::string>& needles) {
  try {
    fn();
    FAIL("expected an error mentioning ", needles[0]);
  } catch (const Error& e) {
    const std::string msg = e.what();
    for (const auto& n : needles) {
      INFO("message: ", msg);
      CHECK(msg.find(n) != std::string::npos);
    }
  }
}

}  // namespace

TEST_CASE("optim golden: SGD, Adam, AdamW match torch.optim (single-tensor path)") {
  check_golden("sgd", kTorchTol, Device::cpu());
  check_golden("adam", kTorchTol, Device::cpu());
  check_golden("adamw", kTorchTol, Device::cpu());
}

TEST_CASE("optim golden: Prodigy matches the reference algorithm, every option") {
  check_golden("prodigy", kProdigyTol, Device::cpu());
  check_golden("prodigy_options", kProdigyTol, Device::cpu());
  check_golden("prodigy_nobeta1", kProdigyTol, Device::cpu());
  // A d0 per group: d and d_max start at the optimizer's d0 (1e-6), not the group's.
  check_golden("prodigy_group_d0", kProdigyTol, Device::cpu());
  // The optimizer's own d0, given beside the groups.
  check_golden("prodigy_opt_d0", kProdigyTol, Device::cpu());
}

TEST_CASE("optim golden: Muon matches torch.optim.Muon (PyTorch 2.9's step), momentum buffers included") {
  // tests/golden/make_muon_goldens.py: tall, wide and square matrices, skipped and late gradients.
  for (const Device device : {Device::cpu(), Device::sim()}) {
    check_golden("muon", kMuonTol, device);             // no weight decay
    check_golden("muon_decay", kMuonTol, device);       // PyTorch's defaults but the lr: decay 0.1
    check_golden("muon_nonesterov", kMuonTol, device);  // plain momentum 0.9
    check_golden("muon_match_rms", kMuonTol, device);   // adjust_lr_fn "match_rms_adamw"
    check_golden("muon_groups", kMuonTol, device);      // two groups, two lrs, every option set
    check_golden("muon_unfused", kMuonTol, device);     // use_addmm false (PyTorch's main branch)
  }
}

TEST_CASE("optim golden: the same results on the sim device, and through the fused Adam path") {
  check_golden("sgd", kTorchTol, Device::sim());
  check_golden("adamw", kTorchTol, Device::sim());
  check_golden("prodigy_options", kProdigyTol, Device::sim());
  check_golden("adam", kTorchTol, Device::cpu(), {{"fused", true}});
  check_golden("adamw", kTorchTol, Device::sim(), {{"fused", true}});
}

TEST_CASE("optim fused AdamW gives the same bits as the plain path") {
  for (bool amsgrad : {false, true}) {
    std::vector<Tensor> a, b;
    // One parameter larger than a parallel chunk, so the fused pass splits it.
    const std::vector<Shape> shapes = {{300, 257}, {7}, {3, 5}};
    for (size_t i = 0; i < shapes.size(); ++i) {
      a.push_back(param_like(shapes[i], 10 + i));
      b.push_back(a.back().detach().clone().requires_grad_(true));
    }
    nlohmann::json o = {{"lr", 3e-3}, {"weight_decay", 0.1}, {"amsgrad", amsgrad}};
    AdamW plain(a, o), fused(b, o, /*fused=*/true);
    for (uint64_t t = 0; t < 7; ++t) {
      for (size_t i = 0; i < a.size(); ++i) {
        if ((t + i) % 3 == 2) {
          a[i].set_grad(Tensor());
          b[i].set_grad(Tensor());
          continue;
        }
        Tensor g = mul(Tensor::randn(shapes[i], 100 * t + i), 0.1);
        a[i].set_grad(g);
        b[i].set_grad(g.clone());
      }
      plain.step();
      fused.step();
    }
    for (size_t i = 0; i < a.size(); ++i) {
      INFO("parameter ", i, " amsgrad ", amsgrad);
      CHECK(bitwise_equal(a[i], b[i]));
      CHECK(bitwise_equal(plain.state(int64_t(i), "exp_avg"), fused.state(int64_t(i), "exp_avg")));
      CHECK(bitwise_equal(plain.state(int64_t(i), "exp_avg_sq"), fused.state(int64_t(i), "exp_avg_sq")));
      CHECK(plain.state(int64_t(i), "step").item() == fused.state(int64_t(i), "step").item());
    }
  }
}

TEST_CASE("optim fused Adam: the 16-bit copies it writes are the updated parameters rounded once, and bad copies are refused") {
  AdamParams a;
  a.lr = 1e-2;
  a.weight_decay = 0.1;
  a.decoupled_weight_decay = true;
  const int64_t n = 20000;  // several threaded chunks
  std::vector<Tensor> params, grads, m, v, steps;
  for (int i = 0; i < 2; ++i) {
    params.push_back(Tensor::randn({n}, 10 + uint64_t(i)));
    grads.push_back(Tensor::randn({n}, 20 + uint64_t(i)));
    m.push_back(Tensor::zeros({n}));
    v.push_back(Tensor::zeros({n}));
    steps.push_back(Tensor::zeros({1}));
  }
  const std::vector<Tensor> copies = {Tensor::empty({n}, DType::bf16), Tensor::empty({n}, DType::f16)};
  adam_update_multi(params, grads, m, v, {}, steps, a, copies);
  for (int i = 0; i < 2; ++i) CHECK(bitwise_equal(copies[size_t(i)], params[size_t(i)].to(copies[size_t(i)].dtype())));

  auto refused = [&](std::vector<Tensor> bad, const std::string& says) {
    CHECK_THROWS_WITH(adam_update_multi(params, grads, m, v, {}, steps, a, bad), doctest::Contains(says.c_str()));
  };
  refused({copies[0]}, "2 params but 1 copies");
  refused({Tensor::empty({n}), Tensor()}, "the copy of parameter 0 must be a contiguous bf16 or f16 tensor of an f32");
  refused({Tensor::empty({n - 1}, DType::bf16), Tensor()}, "copy bf16[19999]");
  refused({copies[0], copies[0]}, "is also updated by another entry");
  std::vector<Tensor> p64 = {params[0].to(DType::f64)}, g64 = {grads[0].to(DType::f64)};
  CHECK_THROWS_WITH(adam_update_multi(p64, g64, {m[0]}, {v[0]}, {}, {steps[0]}, a, {copies[0]}),
                    doctest::Contains("param f64[20000]"));
}

TEST_CASE("optim param groups: one group per parameter, frozen and gradient-less parameters skipped") {
  Tensor p = param_like({3}, 1), q = param_like({2}, 2), frozen = param_like({2}, 3);
  frozen.requires_grad_(false);
  Adam opt({p});
  check_error([&] { opt.add_param_group({p}); }, {"already parameter 0", "one group"});
  check_error([&] { opt.add_param_group({q, q}); }, {"twice"});
  check_error([&] { opt.add_param_group({q}, {{"lr", 0.1}, {"momentum", 0.9}}); }, {"unknown option", "momentum"});
  CHECK(opt.param_groups().size() == 1);
  opt.add_param_group({q, frozen}, {{"lr", 0.1}});
  CHECK(opt.num_params() == 3);
  CHECK(opt.lr(1) == 0.1);
  opt.set_lr(1, 0.2);
  CHECK(opt.lr(1) == 0.2);
  check_error([&] { opt.set_lr(1, -1.0); }, {"lr", "-1"});
  CHECK(opt.lr(1) == 0.2);

  const Tensor q_before = q.detach().clone();
  p.set_grad(Tensor::ones({3}));
  frozen.set_grad(Tensor::ones({2}));  // frozen: ignored even with a gradient
  const Tensor frozen_before = frozen.detach().clone();
  opt.step();
  CHECK(opt.state(0, "step").item() == 1);
  CHECK_FALSE(opt.state(1, "exp_avg").defined());  // no grad yet: no state
  CHECK_FALSE(opt.state(2, "exp_avg").defined());  // frozen: never state
  CHECK(bitwise_equal(q, q_before));
  CHECK(bitwise_equal(frozen, frozen_before));
  q.set_grad(Tensor::ones({2}));
  p.set_grad(Tensor());
  opt.step();
  CHECK(opt.state(0, "step").item() == 1);  // skipped: its step does not advance
  CHECK(opt.state(1, "step").item() == 1);
  CHECK(opt.step_count() == 2);
  opt.zero_grad();
  CHECK_FALSE(p.grad().defined());
  CHECK_FALSE(q.grad().defined());
  // The checkpoint view: names, policies, groups.
  auto entries = opt.state_entries();
  bool saw_step = false;
  for (const auto& e : entries)
    if (e.name == "param.0.step") {
      saw_step = true;
      CHECK(e.placement == Placement::host);
    }
  CHECK(saw_step);
  auto groups = opt.groups_json();
  CHECK(groups[1]["params"] == nlohmann::json({1, 2}));
  CHECK(groups[1]["lr"].get<double>() == 0.2);
  CHECK(opt.kind() == "adam");
}

TEST_CASE("optim bad options are errors naming the option and the value") {
  Tensor p = param_like({3}, 1);
  check_error([&] { Adam({p}, {{"lr", -0.1}}); }, {"lr", "-0.1"});
  check_error([&] { Adam({p}, {{"betas", {1.0, 0.999}}}); }, {"betas[0]", "1"});
  check_error([&] { AdamW({p}, {{"betas", {0.9, -0.5}}}); }, {"betas[1]", "-0.5"});
  check_error([&] { Adam({p}, {{"eps", 0.0}}); }, {"eps", "0"});
  check_error([&] { AdamW({p}, {{"weight_decay", -1e-2}}); }, {"weight_decay", "-0.01"});
  check_error([&] { Adam({p}, {{"amsgrad", 3}}); }, {"amsgrad"});
  check_error([&] { SGD({p}, {{"lr", -1}}); }, {"lr", "-1"});
  check_error([&] { SGD({p}, {{"momentum", -0.5}}); }, {"momentum", "-0.5"});
  check_error([&] { SGD({p}, {{"dampening", -0.5}}); }, {"dampening", "-0.5"});
  check_error([&] { SGD({p}, {{"weight_decay", -2}}); }, {"weight_decay", "-2"});
  check_error([&] { SGD({p}, {{"nesterov", true}}); }, {"nesterov", "momentum"});
  check_error([&] { SGD({p}, {{"nesterov", true}, {"momentum", 0.9}, {"dampening", 0.1}}); }, {"nesterov", "dampening"});
  check_error([&] { Prodigy({p}, {{"lr", -1}}); }, {"lr", "-1"});
  check_error([&] { Prodigy({p}, {{"betas", {0.9, 1.5}}}); }, {"betas[1]", "1.5"});
  check_error([&] { Prodigy({p}, {{"beta3", 1.0}}); }, {"beta3", "1"});
  check_error([&] { Prodigy({p}, {{"eps", -1e-8}}); }, {"eps", "-1e-08"});
  check_error([&] { Prodigy({p}, {{"weight_decay", -1}}); }, {"weight_decay", "-1"});
  check_error([&] { Prodigy({p}, {{"d0", 0.0}}); }, {"d0", "0"});
  check_error([&] { Prodigy({p}, {{"d_coef", -1.0}}); }, {"d_coef", "-1"});
  check_error([&] { Prodigy({p}, {{"growth_rate", 0.0}}); }, {"growth_rate", "0"});
  check_error([&] { Prodigy({p}, {{"slice_p", 0}}); }, {"slice_p", "0"});
  check_error([&] { Prodigy({p}, {{"fsdp_in_use", true}}); }, {"unknown option", "fsdp_in_use"});
  // Prodigy: group lrs equal or 0.
  Tensor q = param_like({2}, 2), r = param_like({2}, 3);
  Prodigy opt({p}, {{"lr", 1.0}});
  opt.add_param_group({q}, {{"lr", 0.0}});
  opt.add_param_group({r}, {{"lr", 0.5}});
  p.set_grad(Tensor::ones({3}));
  check_error([&] { opt.step(); }, {"group 2", "lr 0.5", "1"});
}

TEST_CASE("optim Prodigy: a step without progress changes nothing, group scalars are host f64 state") {
  Tensor p = param_like({4}, 1);
  Prodigy opt({p});
  p.set_grad(Tensor::zeros({4}));
  const Tensor before = p.detach().clone();
  opt.step();
  CHECK(bitwise_equal(p, before));
  auto g = opt.group_scalars(0);
  CHECK(g["k"] == 0);
  CHECK(g["d"].get<double>() == 1e-6);
  for (const auto& e : opt.state_entries())
    if (e.scope == StateScope::group) {
      CHECK(e.dtype == DType::f64);
      CHECK(e.placement == Placement::host);
      CHECK(e.tensor.device() == Device::cpu());
    }
}

TEST_CASE("optim ref: malformed optim cases are errors naming the fault") {
  auto c = serialize::read_safetensors(kGolden + "/optim_adam.case.safetensors");
  check_error([&] { run_case(c, Device::cpu(), {{"optimizer", "lion"}}); }, {"unknown optimizer", "lion"});
  check_error([&] { run_case(c, Device::cpu(), {{"groups", {{{"params", {0, 1, 2, 3, 4, 5, 9}}}}}}); },
              {"parameter 9", "does not exist"});
  check_error([&] { run_case(c, Device::cpu(), {{"groups", {{{"params", {0, 1, 2, 3, 4}}}}}}); },
              {"parameter 5", "no group"});
  check_error([&] { run_case(c, Device::cpu(), {{"groups", {{{"params", {0, 1, 2}}}, {{"params", {2, 3, 4, 5}}}}}}); },
              {"parameter 2", "group 0", "group 1"});
  check_error([&] { run_case(c, Device::cpu(), {{"steps", 3}}); }, {"is for step", "3 steps"});
  check_error([&] { run_case(c, Device::cpu(), {{"groups", {{{"params", {0, 1, 2, 3, 4, 5}}, {"lr", -1}}}}}); },
              {"lr", "-1"});
  check_error([&] { run_case(c, Device::cpu(), {{"optimizer", "sgd"}, {"fused", true}}); }, {"sgd", "fused"});
}
