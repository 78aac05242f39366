// The residual stream's add fused into the norm that reads it (add_layer_norm, add_rms_norm), and
// the stream's gradient folded into the norm's backward, checked against the add and the norm run
// apart, on any device: tests/test_residual_norm.cpp (cpu, sim) and tests/test_cuda.cpp (cuda).
#pragma once

#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/autograd.h"
#include "core/ops.h"

namespace lathe::testing {

struct ResidualNormCase {
  bool rms;       // RMSNorm (weight only) or LayerNorm (weight and bias)
  bool affine;    // with the parameters, or none
  DType stream;   // x's dtype
  DType branch;   // the branch's: x's, or 16 bits for an f32 x
  DType out;      // the norm's output: x's, or 16 bits for an f32 x
  Shape shape;
};

inline std::string describe(const ResidualNormCase& c) {
  return std::string(c.rms ? "rms_norm" : "layer_norm") + (c.affine ? " affine" : " plain") + " x " +
         dtype_name(c.stream) + " branch " + dtype_name(c.branch) + " out " + dtype_name(c.out) + " " +
         shape_str(c.shape);
}

// Every element equal (NaN to NaN), same shape and dtype.
inline bool bitwise_equal(const Tensor& got, const Tensor& want) {
  if (got.shape() != want.shape() || got.dtype() != want.dtype()) return false;
  const Tensor g = got.to(Device::cpu()).to(DType::f64).contiguous(), w = want.to(Device::cpu()).to(DType::f64).contiguous();
  const double* pg = static_cast<const double*>(g.data_ptr());
  const double* pw = static_cast<const double*>(w.data_ptr());
  for (int64_t i = 0; i < g.numel(); ++i)
    if (!(pg[i] == pw[i] || (std::isnan(pg[i]) && std::isnan(pw[i])))) return false;
  return true;
}

// The fused op on device `d` as a model uses it: z = sum + normed (the next add reads both, so the
// norm's backward runs after the add has sent the stream its gradient), loss = sum(z * gz). Returns
// {sum, normed, x.grad, branch.grad, weight.grad, bias.grad} (undefined where there is none), after
// checking each bitwise against the add and the norm run apart, their gradients summed by add.
inline std::vector<Tensor> check_residual_norm(const ResidualNormCase& c, Device d, uint64_t seed) {
  const int64_t D = c.shape.back();
  auto random = [&](const Shape& s, uint64_t k, DType t, double scale) {
    return mul(Tensor::randn(s, seed + k, 0, DType::f64), scale).to(t).to(d);
  };
  const Tensor x = add(random(c.shape, 0, c.stream, 2.0), 0.5), r = random(c.shape, 1, c.branch, 1.0);
  const Tensor w = c.affine ? add(random({D}, 2, c.stream, 0.1), 1.0) : Tensor();
  const Tensor b = c.affine && !c.rms ? random({D}, 3, c.stream, 0.1) : Tensor();
  const Tensor gz = random(c.shape, 4, c.stream, 1.0);

  auto leaf = [](const Tensor& t) { return t.defined() ? t.detach().clone().requires_grad_(true) : Tensor(); };
  auto grad_of = [](const Tensor& t) { return t.defined() ? t.grad() : Tensor(); };

  // Fused.
  Tensor xl = leaf(x), rl = leaf(r), wl = leaf(w), bl = leaf(b);
  const SumAndNorm f = c.rms ? add_rms_norm(xl, rl, wl, 1e-5, c.out) : add_layer_norm(xl, rl, wl, bl, 1e-5, c.out);
  sum(mul(add(f.sum, f.normed), gz)).backward();
  const std::vector<Tensor> fused{f.sum, f.normed, xl.grad(), rl.grad(), grad_of(wl), grad_of(bl)};

  // Apart: the add, the norm of its result, and autograd's sum of the stream's two gradients.
  const Tensor h = add(x, r);
  Tensor hl = leaf(h), wa = leaf(w), ba = leaf(b);
  const Tensor y = c.rms ? rms_norm(hl, wa, 1e-5, c.out) : layer_norm(hl, wa, ba, 1e-5, c.out);
  y.backward(gz.to(c.out));
  const Tensor gh = add(gz, hl.grad());
  const std::vector<Tensor> apart{h, y, gh.to(c.stream), gh.to(c.branch), grad_of(wa), grad_of(ba)};

  const char* names[] = {"sum", "normed", "grad x", "grad branch", "grad weight", "grad bias"};
  for (size_t i = 0; i < fused.size(); ++i) {
    INFO(describe(c), " on ", d.str(), ": ", std::string(names[i]));
    CHECK(fused[i].defined() == apart[i].defined());
    if (fused[i].defined() && apart[i].defined()) CHECK(bitwise_equal(fused[i], apart[i]));
  }
  return fused;
}

// The cases: every dtype pairing the fused kernels take, ragged shapes (one element, rows shorter
// and longer than a block of threads, rows CUDA reads 16 bytes at a time, none), both norms with
// and without parameters.
inline std::vector<ResidualNormCase> residual_norm_cases() {
  struct Types {
    DType stream, branch, out;
  };
  const Types types[] = {{DType::f32, DType::f32, DType::f32},   {DType::f32, DType::bf16, DType::bf16},
                         {DType::f32, DType::f16, DType::f16},   {DType::f32, DType::bf16, DType::f32},
                         {DType::f64, DType::f64, DType::f64},   {DType::bf16, DType::bf16, DType::bf16},
                         {DType::f16, DType::f16, DType::f16}};
  const Shape shapes[] = {{1, 1}, {3, 5}, {3, 64}, {2, 3, 77}, {4, 769}, {0, 8}};
  std::vector<ResidualNormCase> cases;
  for (bool rms : {false, true})
    for (bool affine : {true, false})
      for (const Types& t : types)
        for (const Shape& s : shapes) cases.push_back({rms, affine, t.stream, t.branch, t.out, s});
  return cases;
}

}  // namespace lathe::testing
