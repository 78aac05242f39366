// LR schedules (nanoGPT's get_lr), global-norm gradient clipping (torch.nn.utils.clip_grad_norm_)
// and the dynamic loss scaler (GradScaler semantics).
#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "core/ops.h"
#include "optim/adam.h"
#include "optim/clip.h"
#include "optim/grad_scaler.h"
#include "optim/schedule.h"
#include "optim/sgd.h"

using namespace lathe;
using namespace lathe::optim;

TEST_CASE("optim schedule: constant, warmup + cosine as nanoGPT, step decay") {
  CHECK(ConstantLr(0.1).lr(12345) == 0.1);
  WarmupCosineLr s(6e-4, 10, 100, 6e-5);
  CHECK(s.lr(0) == doctest::Approx(6e-4 * 1 / 11).epsilon(1e-12));
  CHECK(s.lr(9) == doctest::Approx(6e-4 * 10 / 11).epsilon(1e-12));
  CHECK(s.lr(10) == doctest::Approx(6e-4).epsilon(1e-12));
  CHECK(s.lr(55) == doctest::Approx(6e-5 + 0.5 * (6e-4 - 6e-5)).epsilon(1e-12));
  CHECK(s.lr(100) == doctest::Approx(6e-5).epsilon(1e-12));
  CHECK(s.lr(101) == 6e-5);
  StepDecayLr d(0.1, 30, 0.1);
  CHECK(d.lr(29) == 0.1);
  CHECK(d.lr(30) == doctest::Approx(0.01));
  CHECK(d.lr(65) == doctest::Approx(0.001));
  CHECK_THROWS_WITH_AS(WarmupCosineLr(1e-3, 10, 5, 0), doctest::Contains("lr_decay_iters"), Error);
  CHECK_THROWS_WITH_AS(ConstantLr(-1), doctest::Contains("lr = -1"), Error);
  CHECK_THROWS_WITH_AS(StepDecayLr(0.1, 0, 0.5), doctest::Contains("step_size = 0"), Error);
  // Applied to an optimizer.
  Tensor p = Tensor::zeros({2}).requires_grad_(true);
  SGD opt({p}, {{"lr", 1.0}});
  opt.set_lr_all(s.lr(0));
  CHECK(opt.lr(0) == s.lr(0));
}

TEST_CASE("optim clip_grad_norm: total 2-norm over all gradients, coefficient clamped to 1") {
  Tensor a = Tensor::zeros({2}).requires_grad_(true), b = Tensor::zeros({1}).requires_grad_(true);
  Tensor c = Tensor::zeros({3}).requires_grad_(true);  // no gradient: skipped
  a.set_grad(Tensor::from_vector<float>({3, 4}, {2}));
  b.set_grad(Tensor::from_vector<float>({12}, {1}));
  Tensor norm = clip_grad_norm({a, b, c}, 1.0);
  CHECK(norm.item() == doctest::Approx(13.0));
  const double coef = 1.0 / (13.0 + 1e-6);
  CHECK(a.grad().to_vector<float>()[0] == doctest::Approx(3 * coef).epsilon(1e-6));
  CHECK(b.grad().to_vector<float>()[0] == doctest::Approx(12 * coef).epsilon(1e-6));
  // Below the limit: unchanged (coefficient clamped to 1).
  a.set_grad(Tensor::from_vector<float>({0.3f, 0.4f}, {2}));
  CHECK(clip_grad_norm({a}, 1.0).item() == doctest::Approx(0.5));
  CHECK(a.grad().to_vector<float>()[1] == 0.4f);
  // On the sim device the norm stays there.
  Tensor s = Tensor::zeros({2}, DType::f32, Device::sim()).requires_grad_(true);
  s.set_grad(Tensor::from_vector<float>({6, 8}, {2}, Device::sim()));
  Tensor ns = clip_grad_norm({s}, 5.0);
  CHECK(ns.device() == Device::sim());
  CHECK(ns.item() == doctest::Approx(10.0));
  CHECK(s.grad().to_vector<float>()[0] == doctest::Approx(3.0).epsilon(1e-5));
  CHECK_THROWS_WITH_AS(clip_grad_norm({a}, -1.0), doctest::Contains("max_norm = -1"), Error);
}

TEST_CASE("optim GradScaler: scale, unscale, skip on inf/nan, back off and grow") {
  GradScalerOptions o;
  CHECK(o.init_scale == 65536.0);
  CHECK(o.growth_factor == 2.0);
  CHECK(o.backoff_factor == 0.5);
  CHECK(o.growth_interval == 2000);
  o.growth_interval = 2;
  GradScaler scaler(o);
  Tensor p = Tensor::ones({2}).requires_grad_(true);
  SGD opt({p}, {{"lr", 1.0}});
  CHECK(scaler.scale(Tensor::scalar(2.0)).item() == 131072.0);

  p.set_grad(Tensor::full({2}, 65536.0));
  CHECK(scaler.step(opt));  // unscales to 1, steps
  CHECK(p.to_vector<float>()[0] == 0.0f);
  scaler.update();
  CHECK(scaler.growth_tracker() == 1);

  p.set_grad(Tensor::from_vector<float>({std::numeric_limits<float>::infinity(), 1}, {2}));
  scaler.unscale_(opt);
  CHECK_THROWS_WITH_AS(scaler.unscale_(opt), doctest::Contains("already"), Error);
  CHECK_FALSE(scaler.step(opt));  // skipped
  CHECK(p.to_vector<float>()[1] == 0.0f);
  CHECK(opt.step_count() == 1);
  scaler.update();
  CHECK(scaler.get_scale() == 32768.0);
  CHECK(scaler.growth_tracker() == 0);

  p.set_grad(Tensor::from_vector<float>({std::nanf(""), 1}, {2}));
  CHECK_FALSE(scaler.step(opt));
  scaler.update();
  CHECK(scaler.get_scale() == 16384.0);

  for (int i = 0; i < 2; ++i) {
    p.set_grad(Tensor::zeros({2}));
    CHECK(scaler.step(opt));
    scaler.update();
  }
  CHECK(scaler.get_scale() == 32768.0);  // grew after growth_interval good steps
  CHECK(scaler.growth_tracker() == 0);

  CHECK_THROWS_WITH_AS(GradScaler({.init_scale = -1}), doctest::Contains("init_scale = -1"), Error);
  CHECK_THROWS_WITH_AS(GradScaler({.growth_factor = 0.5}), doctest::Contains("growth_factor = 0.5"), Error);
  CHECK_THROWS_WITH_AS(GradScaler({.backoff_factor = 2}), doctest::Contains("backoff_factor = 2"), Error);
  CHECK_THROWS_WITH_AS(GradScaler({.growth_interval = 0}), doctest::Contains("growth_interval = 0"), Error);
}
