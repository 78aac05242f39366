// The op test registry, in the manner of ggml's test-backend-ops: every op of core/ops.h (the
// elementwise, reduction, joining and indexing ops, the nn ops, and the fused Adam kernels), one
// line each, and four checks of every line:
//   - against PyTorch's golden values (tests/golden/make_core_goldens.py, make_nn_op_goldens.py):
//     the forward result and torch's gradients of sum(out * gout);
//   - a float64 finite-difference gradcheck of each differentiable case;
//   - bitwise the cpu's result and gradients on the sim device;
//   - within the case's tolerance of the cpu on CUDA, where a GPU exists.
// Broadcasting and non-contiguous inputs are cases of their own.
//
// Tolerances: f32 values within 1e-6 relative + 1e-7 absolute; ops built on a transcendental
// function (exp, log, tanh, pow, softmax, layer_norm, ...) within 1e-5 relative, and the nn ops'
// results (long sums) within 1e-6 absolute. Gradients chain a few roundings and use the same rule
// with the case's relative tolerance and 1e-6 absolute.
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <map>

#include "core_test_util.h"
#include "tests/gpu_cases.h"

using namespace lathe;
using core_test::compare;
using core_test::golden;

namespace {

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

constexpr double kExact = 1e-6;       // relative tolerance of plain f32 arithmetic
constexpr double kTranscend = 1e-5;   // relative tolerance of ops built on exp/log/tanh/pow

constexpr double kSums = 1e-6;        // absolute tolerance of results that are long sums

struct Case {
  const char* name;
  Fn f;
  double rtol = kExact;
  // Inputs sit on a kink or a tie (relu at 0, clamp at a bound, equal maxima): the gradcheck
  // runs on slightly moved inputs, where finite differences are meaningful.
  bool kinks = false;
  double atol = 1e-7;  // of the forward result
};

// One Adam / AdamW step (step 3, the generator's hyperparameters) on copies of the inputs param,
// grad, exp_avg, exp_avg_sq: the updated parameter and moments, flattened and joined.
Tensor adam_step(const std::vector<Tensor>& v, bool decoupled, double weight_decay) {
  Tensor p = v[0].detach().clone(), m = v[2].detach().clone(), s = v[3].detach().clone();
  AdamParams a;
  a.lr = 1e-2;
  a.weight_decay = weight_decay;
  a.decoupled_weight_decay = decoupled;
  adam_update(p, v[1].detach(), m, s, Tensor(), 3.0, a);
  return cat({p.reshape({-1}), m.reshape({-1}), s.reshape({-1})});
}

// Rotary embeddings at positions pos0 .. pos0 + T - 1 of x [B, H, T, D] (base 10000), with the
// angle tables built as the generator builds them: in f64, then rounded to x's compute type.
Tensor rope_at(const Tensor& x, int64_t pos0) {
  const int64_t T = x.size(2), half = x.size(3) / 2;
  std::vector<double> c, s;
  for (int64_t t = pos0; t < pos0 + T; ++t)
    for (int64_t i = 0; i < half; ++i) {
      const double angle = double(t) * std::pow(10000.0, -double(2 * i) / double(2 * half));
      c.push_back(std::cos(angle));
      s.push_back(std::sin(angle));
    }
  const DType table = x.dtype() == DType::f64 ? DType::f64 : DType::f32;
  auto place = [&](const std::vector<double>& v) { return Tensor::from_vector(v, {T, half}).to(table).to(x.device()); };
  return rope(x, place(c), place(s));
}

// softmax(q k^T / sqrt(head size) + causal mask) v of the inputs q, k, v.
Tensor attention(const std::vector<Tensor>& v) {
  return causal_attention(v[0], v[1], v[2], 1.0 / std::sqrt(double(v[0].size(3))));
}

// The cases, under the generator's names; v holds the inputs in the generator's order.
const std::vector<Case>& cases() {
  static const std::vector<Case> all = {
      // binary, broadcasting
      {"add_bcast", [](auto& v) { return v[0] + v[1]; }},
      {"sub_bcast", [](auto& v) { return v[0] - v[1]; }},
      {"mul_bcast", [](auto& v) { return v[0] * v[1]; }},
      {"div_bcast", [](auto& v) { return v[0] / v[1]; }},
      {"pow_bcast", [](auto& v) { return pow(v[0], v[1]); }, kTranscend},
      {"maximum_bcast", [](auto& v) { return maximum(v[0], v[1]); }},
      {"minimum_bcast", [](auto& v) { return minimum(v[0], v[1]); }},
      {"maximum_ties", [](auto& v) { return maximum(v[0], v[1]); }, kExact, true},
      {"minimum_ties", [](auto& v) { return minimum(v[0], v[1]); }, kExact, true},
      {"mul_outer", [](auto& v) { return v[0] * v[1]; }},
      {"add_noncontig", [](auto& v) { return v[0].t() + v[1]; }},
      {"mul_noncontig", [](auto& v) { return v[0].slice(1, 0, 8, 2) * v[1].t(); }},
      {"div_noncontig", [](auto& v) { return v[0].t() / v[1]; }},
      // comparisons
      {"eq_bcast", [](auto& v) { return eq(v[0], v[1]); }},
      {"ne_bcast", [](auto& v) { return ne(v[0], v[1]); }},
      {"lt_bcast", [](auto& v) { return lt(v[0], v[1]); }},
      {"le_bcast", [](auto& v) { return le(v[0], v[1]); }},
      {"gt_bcast", [](auto& v) { return gt(v[0], v[1]); }},
      {"ge_bcast", [](auto& v) { return ge(v[0], v[1]); }},
      // scalar forms
      {"add_scalar", [](auto& v) { return v[0] + 2.5; }},
      {"sub_scalar", [](auto& v) { return v[0] - 0.75; }},
      {"mul_scalar", [](auto& v) { return v[0] * -1.5; }},
      {"div_scalar", [](auto& v) { return v[0] / 3.0; }},
      {"pow_scalar", [](auto& v) { return pow(v[0], 2.5); }, kTranscend},
      {"pow_scalar_neg", [](auto& v) { return pow(v[0], -0.5); }, kTranscend},
      {"pow_scalar_int", [](auto& v) { return pow(v[0], 3.0); }, kTranscend},
      // unary
      {"neg", [](auto& v) { return -v[0]; }},
      {"exp", [](auto& v) { return exp(v[0]); }, kTranscend},
      {"log", [](auto& v) { return log(v[0]); }, kTranscend},
      {"sqrt", [](auto& v) { return sqrt(v[0]); }},
      {"rsqrt", [](auto& v) { return rsqrt(v[0]); }, kTranscend},
      {"tanh", [](auto& v) { return tanh(v[0]); }, kTranscend},
      {"gelu", [](auto& v) { return gelu(v[0]); }, kTranscend},
      {"relu", [](auto& v) { return relu(v[0]); }, kExact, true},
      {"sigmoid", [](auto& v) { return sigmoid(v[0]); }, kTranscend},
      {"silu", [](auto& v) { return silu(v[0]); }, kTranscend},
      {"gelu_erf", [](auto& v) { return gelu_erf(v[0]); }, kTranscend},
      {"squared_relu", [](auto& v) { return squared_relu(v[0]); }},
      {"softcap", [](auto& v) { return softcap(v[0], 2.0); }, kTranscend},
      {"abs", [](auto& v) { return abs(v[0]); }, kExact, true},
      {"square", [](auto& v) { return square(v[0]); }},
      {"clamp", [](auto& v) { return clamp(v[0], -0.5, 0.5); }, kExact, true},
      {"clamp_lo", [](auto& v) { return clamp(v[0], -0.3, std::nullopt); }, kExact, true},
      {"clamp_hi", [](auto& v) { return clamp(v[0], std::nullopt, 0.2); }, kExact, true},
      {"exp_noncontig", [](auto& v) { return exp(v[0].t()); }, kTranscend},
      {"gelu_noncontig", [](auto& v) { return gelu(v[0].slice(1, 1, 8, 2)); }, kTranscend},
      {"tanh_noncontig", [](auto& v) { return tanh(v[0].t()); }, kTranscend},
      // selection
      {"where_bcast", [](auto& v) { return where(v[0], v[1], v[2]); }},
      {"masked_fill", [](auto& v) { return masked_fill(v[0], v[1], -2.0); }},
      // reductions
      {"sum_all", [](auto& v) { return sum(v[0]); }},
      {"sum_d02", [](auto& v) { return sum(v[0], {0, 2}); }},
      {"sum_d1_keep", [](auto& v) { return sum(v[0], {1}, true); }},
      {"sum_dlast", [](auto& v) { return sum(v[0], {-1}); }},
      {"sum_noncontig", [](auto& v) { return sum(v[0].transpose(0, 2), {0}); }},
      {"mean_all", [](auto& v) { return mean(v[0]); }},
      {"mean_d1", [](auto& v) { return mean(v[0], {1}); }},
      {"mean_d02_keep", [](auto& v) { return mean(v[0], {0, 2}, true); }},
      {"max_d1", [](auto& v) { return max(v[0], 1); }},
      {"max_dlast_keep", [](auto& v) { return max(v[0], -1, true); }},
      {"argmax_d1", [](auto& v) { return argmax(v[0], 1); }},
      {"argmax_d0_keep", [](auto& v) { return argmax(v[0], 0, true); }},
      {"max_full", [](auto& v) { return max(v[0]); }},
      {"max_d1_ties", [](auto& v) { return max(v[0], 1); }, kExact, true},
      {"argmax_d1_ties", [](auto& v) { return argmax(v[0], 1); }},
      {"max_full_ties", [](auto& v) { return max(v[0]); }, kExact, true},
      {"var_all", [](auto& v) { return var(v[0]); }},
      {"var_d1", [](auto& v) { return var(v[0], {1}); }},
      {"var_d02_c0_keep", [](auto& v) { return var(v[0], {0, 2}, true, 0); }},
      // joining and splitting
      {"cat_d1", [](auto& v) { return cat({v[0], v[1], v[2]}, 1); }},
      {"cat_d0_noncontig", [](auto& v) { return cat({v[0].t(), v[1]}, 0); }},
      {"cat_dlast_3d", [](auto& v) { return cat({v[0], v[1]}, -1); }},
      {"stack_d0", [](auto& v) { return stack({v[0], v[1]}, 0); }},
      {"stack_d1", [](auto& v) { return stack({v[0], v[1], v[2]}, 1); }},
      {"stack_dlast", [](auto& v) { return stack({v[0], v[1]}, -1); }},
      {"split_size", [](auto& v) {
         auto p = split(v[0], 2, 0);
         std::vector<Tensor> flat;
         for (size_t i = p.size(); i-- > 0;) flat.push_back(p[i].reshape({-1}));
         return cat(flat);
       }},
      {"split_sizes", [](auto& v) {
         auto p = split(v[0], std::vector<int64_t>{1, 3, 1}, 1);
         std::vector<Tensor> flat;
         for (size_t i = p.size(); i-- > 0;) flat.push_back(p[i].reshape({-1}));
         return cat(flat);
       }},
      // indexing
      {"index_select_d1", [](auto& v) { return index_select(v[0], 1, v[1]); }},
      {"index_select_d0", [](auto& v) { return index_select(v[0], 0, v[1]); }},
      {"index_select_3d", [](auto& v) { return index_select(v[0], 1, v[1]); }},
      {"index_select_noncontig", [](auto& v) { return index_select(v[0].t(), 0, v[1]); }},
      {"gather_d1", [](auto& v) { return gather(v[0], 1, v[1]); }},
      {"gather_d0", [](auto& v) { return gather(v[0], 0, v[1]); }},
      {"gather_smaller", [](auto& v) { return gather(v[0], 1, v[1]); }},
      {"gather_3d", [](auto& v) { return gather(v[0], 2, v[1]); }},
      {"gather_noncontig", [](auto& v) { return gather(v[0].t(), 0, v[1]); }},
      // integer division is true division
      {"int_div", [](auto& v) { return v[0] / v[1]; }},
      // linear algebra and the nn ops
      {"matmul_2d", [](auto& v) { return matmul(v[0], v[1]); }, kTranscend, false, kSums},
      {"matmul_bcast", [](auto& v) { return matmul(v[0], v[1]); }, kTranscend, false, kSums},
      {"matmul_linear", [](auto& v) { return matmul(v[0], v[1].t()); }, kTranscend, false, kSums},
      {"matmul_vec_left", [](auto& v) { return matmul(v[0], v[1]); }, kTranscend, false, kSums},
      {"matmul_vec_right", [](auto& v) { return matmul(v[0], v[1]); }, kTranscend, false, kSums},
      {"matmul_dot", [](auto& v) { return matmul(v[0], v[1]); }, kTranscend, false, kSums},
      {"softmax_last", [](auto& v) { return softmax(v[0], -1); }, kTranscend, false, kSums},
      {"softmax_dim0", [](auto& v) { return softmax(v[0], 0); }, kTranscend, false, kSums},
      {"log_softmax_dim1", [](auto& v) { return log_softmax(v[0], 1); }, kTranscend, false, kSums},
      {"log_softmax_large", [](auto& v) { return log_softmax(v[0], -1); }, kTranscend, false, kSums},
      {"softmax_large", [](auto& v) { return softmax(v[0], -1); }, kTranscend, false, kSums},
      {"layer_norm_affine", [](auto& v) { return layer_norm(v[0], v[1], v[2], 1e-5); }, kTranscend, false, kSums},
      {"layer_norm_plain", [](auto& v) { return layer_norm(v[0], Tensor(), Tensor(), 1e-5); }, kTranscend, false,
       kSums},
      {"rms_norm_weight", [](auto& v) { return rms_norm(v[0], v[1], 1e-5); }, kTranscend, false, kSums},
      {"rms_norm_plain", [](auto& v) { return rms_norm(v[0], Tensor(), 1e-5); }, kTranscend, false, kSums},
      {"rope", [](auto& v) { return rope_at(v[0], 3); }, kTranscend, false, kSums},
      {"rope_strided", [](auto& v) { return rope_at(v[0].transpose(1, 2), 0); }, kTranscend, false, kSums},
      {"embedding", [](auto& v) { return embedding(v[0], v[1]); }, kExact, false, kSums},
      {"cross_entropy", [](auto& v) { return cross_entropy(v[0], v[1]); }, kTranscend, false, kSums},
      {"cross_entropy_3d", [](auto& v) { return cross_entropy(v[0], v[1].to(DType::i32)); }, kTranscend, false,
       kSums},
      {"cross_entropy_ignore2", [](auto& v) { return cross_entropy(v[0], v[1], 2); }, kTranscend, false, kSums},
      // causal attention over a sweep of B, H, T and head sizes; the last two rows' queries come
      // after a KV cache's keys
      {"causal_attention_b1h1q1k1d8", attention, kTranscend, false, kSums},
      {"causal_attention_b2h3q5k5d4", attention, kTranscend, false, kSums},
      {"causal_attention_b1h2q70k70d8", attention, kTranscend, false, kSums},
      {"causal_attention_b2h1q20k20d32", attention, kTranscend, false, kSums},
      {"causal_attention_b1h2q3k9d8", attention, kTranscend, false, kSums},
      {"causal_attention_b2h2q1k13d16", attention, kTranscend, false, kSums},
      // the fused classifier: the same mean, its gradient written by the forward and scaled by the backward
      {"fused_cross_entropy", [](auto& v) { return fused_cross_entropy(v[0], v[1]); }, kTranscend, false, kSums},
      {"fused_cross_entropy_3d", [](auto& v) { return fused_cross_entropy(v[0], v[1], -1); }, kTranscend, false,
       kSums},
      // fused optimizer kernels (no gradient)
      {"adam_update", [](auto& v) { return adam_step(v, false, 0.01); }, kTranscend, false, kSums},
      {"adamw_update", [](auto& v) { return adam_step(v, true, 0.1); }, kTranscend, false, kSums},
  };
  return all;
}

std::vector<Tensor> load_inputs(const std::string& name, DType float_type, bool requires_grad) {
  std::vector<Tensor> in;
  for (const std::string& leaf : core_test::golden_inputs(name)) {
    Tensor t = golden(name + "." + leaf);
    if (is_floating(t.dtype())) {
      t = t.to(float_type);
      if (requires_grad) t.requires_grad_(true);
    }
    in.push_back(t);
  }
  return in;
}

// Compares a case's forward and (when torch has them) its gradients with the goldens.
void check_against_torch(const Case& c) {
  const std::string name = c.name;
  CAPTURE(name);
  std::vector<Tensor> in = load_inputs(name, DType::f32, true);
  Tensor out = c.f(in);
  Tensor expected = golden(name + ".out");
  CHECK(out.dtype() == expected.dtype());
  std::string diff = compare(out, expected, c.rtol, c.atol);
  CHECK_MESSAGE(diff.empty(), "forward: ", diff);
  if (!core_test::find_golden(name + ".gout")) return;
  sum(mul(out, golden(name + ".gout"))).backward();
  std::vector<std::string> leaves = core_test::golden_inputs(name);
  for (size_t k = 0; k < in.size(); ++k) {
    if (!in[k].requires_grad()) continue;
    const std::string gname = name + ".grad_" + leaves[k];
    REQUIRE_MESSAGE(in[k].grad().defined(), "no gradient for ", gname);
    std::string gdiff = compare(in[k].grad(), golden(gname), c.rtol, 1e-6);
    CHECK_MESSAGE(gdiff.empty(), gname, ": ", gdiff);
  }
}

// Float64 gradcheck of a differentiable case on its golden inputs (moved off kinks when needed).
void check_gradcheck(const Case& c) {
  const std::string name = c.name;
  CAPTURE(name);
  std::vector<Tensor> in = load_inputs(name, DType::f64, false);
  bool any = false;
  for (size_t k = 0; k < in.size(); ++k) {
    if (!is_floating(in[k].dtype())) continue;
    if (c.kinks) in[k] = add(in[k], mul(Tensor::randn(in[k].shape(), 77 + k, 0, DType::f64), 0.01));
    in[k].requires_grad_(true);
    any = true;
  }
  if (!any) return;
  std::string err = gradcheck(c.f, in);
  CHECK_MESSAGE(err.empty(), err);
}

bool differentiable(const Case& c) {
  return core_test::find_golden(std::string(c.name) + ".gout") != nullptr;
}

}  // namespace

TEST_CASE("ops: every op matches PyTorch, forward and backward") {
  for (const Case& c : cases()) check_against_torch(c);
}

TEST_CASE("ops: every golden case is covered") {
  // A case added to the generator without a C++ twin would otherwise go untested.
  std::map<std::string, bool> known;
  for (const Case& c : cases()) known[c.name] = true;
  for (const std::string& c : core_test::golden_cases()) {
    // dtype cases, casts and roundings are tests/test_dtypes.cpp's
    if (c.rfind("dt_", 0) == 0 || c == "cast" || c == "round") continue;
    CHECK_MESSAGE(known.count(c), "golden case ", c, " has no test");
  }
}

// Runs every case on `device` (inputs moved there) and compares forward and gradients with the
// cpu run: bitwise on sim (same kernels), within the case's tolerance on cuda.
void check_on_device(Device device, bool bitwise) {
  for (const Case& c : cases()) {
    const std::string name = c.name;
    CAPTURE(name);
    std::vector<Tensor> host = load_inputs(name, DType::f32, true);
    std::vector<Tensor> dev;
    for (const Tensor& t : host) {
      Tensor d = t.detach().to(device);
      if (t.requires_grad()) d.requires_grad_(true);
      dev.push_back(d);
    }
    Tensor out_h = c.f(host), out_d = c.f(dev);
    CHECK(out_d.device() == device);
    if (bitwise) CHECK(core_test::same_bits(out_h, out_d));
    else CHECK_MESSAGE(compare(out_d, out_h, c.rtol, std::max(c.atol, 1e-6)).empty(), compare(out_d, out_h, c.rtol, 1e-6));
    if (!out_h.requires_grad()) continue;
    Tensor w = Tensor::randn(out_h.shape(), 5);
    sum(mul(out_h, w)).backward();
    sum(mul(out_d, w.to(device))).backward();
    for (size_t k = 0; k < host.size(); ++k) {
      if (!host[k].requires_grad()) continue;
      CAPTURE(k);
      REQUIRE(dev[k].grad().defined());
      CHECK(dev[k].grad().device() == device);
      if (bitwise) CHECK(core_test::same_bits(host[k].grad(), dev[k].grad()));
      else CHECK(compare(dev[k].grad(), host[k].grad(), c.rtol, 1e-6).empty());
    }
  }
}

TEST_CASE("ops: every op gives the cpu's bits on sim") { check_on_device(Device::sim(), true); }

TEST_CASE("ops: every op matches the cpu on cuda") {
  GPU_CASE();
  check_on_device(Device::cuda(), false);
}

TEST_CASE("ops: float64 gradcheck of every differentiable op") {
  int checked = 0;
  for (const Case& c : cases()) {
    if (!differentiable(c)) continue;
    check_gradcheck(c);
    ++checked;
  }
  CHECK(checked > 60);
}

TEST_CASE("ops: gradcheck through broadcasting on both sides and non-contiguous grads") {
  Tensor a = Tensor::randn({4, 1, 3}, 1, 0, DType::f64).requires_grad_(true);
  Tensor b = Tensor::randn({5, 1}, 2, 0, DType::f64).requires_grad_(true);
  auto f = [](const std::vector<Tensor>& v) {
    // The gradient reaching each op arrives through a transpose, so it is a strided view.
    Tensor y = mul(add(v[0], v[1]), sub(v[1], v[0])).transpose(0, 2);
    return div(exp(tanh(y)), add(square(y), 1.0));
  };
  CHECK(gradcheck(f, {a, b}) == "");
  auto g = [](const std::vector<Tensor>& v) {
    return where(gt(v[0], Tensor::scalar(0, DType::f64)), pow(abs(v[1]) + 0.5, v[0]), sigmoid(v[0] * v[1]));
  };
  CHECK(gradcheck(g, {a, b}) == "");
}

TEST_CASE("ops: shape and range errors name the op and the shapes") {
  Tensor a = Tensor::zeros({2, 3}), b = Tensor::zeros({4});
  CHECK_THROWS_WITH_AS(add(a, b), doctest::Contains("add: shapes [2, 3] and [4] cannot be broadcast"), Error);
  CHECK_THROWS_WITH_AS(where(Tensor::zeros({2, 3}), a, a), doctest::Contains("where: condition must be bool"),
                       Error);
  CHECK_THROWS_WITH_AS(masked_fill(a, Tensor::zeros({3, 3}, DType::b8), 1.0),
                       doctest::Contains("masked_fill"), Error);
  CHECK_THROWS_WITH_AS(exp(Tensor::zeros({2}, DType::i64)), doctest::Contains("must be a floating tensor"), Error);
  CHECK_THROWS_WITH_AS(sum(a, {2}), doctest::Contains("sum: dim 2 is out of range"), Error);
  CHECK_THROWS_WITH_AS(sum(a, {1, -1}), doctest::Contains("appears twice"), Error);
  CHECK_THROWS_WITH_AS(max(Tensor::zeros({2, 0}), 1), doctest::Contains("empty"), Error);
  CHECK_THROWS_WITH_AS(max(Tensor::zeros({0})), doctest::Contains("empty"), Error);
}

TEST_CASE("ops: reductions of empty and 0-d tensors") {
  CHECK(sum(Tensor::zeros({0})).item() == 0.0);
  CHECK(sum(Tensor::ones({3, 0}), {1}).to_vector<float>() == std::vector<float>{0, 0, 0});
  CHECK(sum(Tensor::ones({0, 3}), {0}).to_vector<float>() == std::vector<float>{0, 0, 0});
  CHECK(std::isnan(mean(Tensor::zeros({0})).item()));
  Tensor s = Tensor::scalar(3.0);
  CHECK(sum(s).item() == 3.0);
  CHECK(max(s, 0).item() == 3.0);
  CHECK(argmax(s, 0).item() == 0.0);
  CHECK(max(s).item() == 3.0);
  CHECK(sum(s, {0}).shape() == Shape{});
}

TEST_CASE("ops: NaN propagates through maximum, max and argmax") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor x = core_test::f32({1, nan, 3, 2}, {4});
  Tensor y = core_test::f32({0, 0, 5, nan}, {4});
  std::vector<float> m = maximum(x, y).to_vector<float>();
  CHECK(m[0] == 1);
  CHECK(std::isnan(m[1]));
  CHECK(m[2] == 5);
  CHECK(std::isnan(m[3]));
  CHECK(std::isnan(max(x).item()));
  CHECK(std::isnan(max(x, 0).item()));
  CHECK(argmax(x, 0).item() == 1.0);
}

// ---- join and index: semantics and errors beyond the goldens ----

TEST_CASE("join: cat promotes dtypes and names the tensor at fault") {
  Tensor a = Tensor::ones({2, 3}), b = Tensor::zeros({2, 2}, DType::f64);
  Tensor c = cat({a, b}, 1);
  CHECK(c.dtype() == DType::f64);
  CHECK(c.shape() == Shape{2, 5});
  CHECK(c.to_vector<double>() == std::vector<double>{1, 1, 1, 0, 0, 1, 1, 1, 0, 0});
  CHECK_THROWS_WITH_AS(cat({a, b}, 0),
                       doctest::Contains("cat: tensor 1 has shape [2, 2] but tensor 0 has shape [2, 3]"), Error);
  CHECK_THROWS_WITH_AS(cat({a, Tensor::ones({2, 3, 1})}, 0), doctest::Contains("tensor 1 has shape [2, 3, 1]"),
                       Error);
  CHECK_THROWS_WITH_AS(cat({}, 0), doctest::Contains("non-empty"), Error);
  CHECK_THROWS_WITH_AS(cat({a, a}, 2), doctest::Contains("cat: dim 2 is out of range"), Error);
  CHECK_THROWS_WITH_AS(cat({Tensor::scalar(1)}, 0), doctest::Contains("0-d"), Error);
  CHECK_THROWS_WITH_AS(cat({a, Tensor::ones({2, 3}, DType::f32, Device::sim())}, 0),
                       doctest::Contains("tensor 1 is f32[2, 3] on sim:0"), Error);
  // Empty pieces are fine, and integer tensors concatenate.
  CHECK(cat({Tensor::zeros({0, 3}), a}, 0).shape() == Shape{2, 3});
  CHECK(cat({Tensor::arange(0, 2), Tensor::arange(5, 7)}).to_vector<int64_t>() ==
        std::vector<int64_t>{0, 1, 5, 6});
}

TEST_CASE("join: cat backward casts each gradient to its input's dtype") {
  Tensor a = Tensor::ones({2}, DType::bf16).requires_grad_(true);
  Tensor b = Tensor::ones({3}, DType::f32).requires_grad_(true);
  sum(mul(cat({a, b}), core_test::f32({1, 2, 3, 4, 5}, {5}))).backward();
  CHECK(a.grad().dtype() == DType::bf16);
  CHECK(a.grad().to_vector<float>() == std::vector<float>{1, 2});
  CHECK(b.grad().to_vector<float>() == std::vector<float>{3, 4, 5});
}

TEST_CASE("join: stack checks shapes, split gives views and checks sizes") {
  Tensor a = Tensor::ones({2, 3});
  CHECK(stack({a, a, a}, 2).shape() == Shape{2, 3, 3});
  CHECK(stack({a}, -1).shape() == Shape{2, 3, 1});
  CHECK(stack({Tensor::scalar(1), Tensor::scalar(2)}).to_vector<float>() == std::vector<float>{1, 2});
  CHECK_THROWS_WITH_AS(stack({a, Tensor::ones({3, 2})}),
                       doctest::Contains("stack: tensor 1 has shape [3, 2] but tensor 0 has shape [2, 3]"), Error);
  CHECK_THROWS_WITH_AS(stack({a, a}, 3), doctest::Contains("out of range"), Error);

  Tensor x = Tensor::arange(0, 10, 1, DType::f32).reshape({2, 5});
  auto p = split(x, 2, 1);
  REQUIRE(p.size() == 3);
  CHECK(p[0].shape() == Shape{2, 2});
  CHECK(p[2].shape() == Shape{2, 1});
  CHECK(p[1].storage() == x.storage());  // a view, not a copy
  CHECK(p[2].to_vector<float>() == std::vector<float>{4, 9});
  auto q = split(x, std::vector<int64_t>{0, 5}, 1);
  CHECK(q[0].shape() == Shape{2, 0});
  CHECK(q[1].shape() == Shape{2, 5});
  CHECK(split(x, 7, 1).size() == 1);
  CHECK(split(Tensor::zeros({0, 2}), 0, 0).size() == 1);
  CHECK_THROWS_WITH_AS(split(x, std::vector<int64_t>{2, 2}, 1),
                       doctest::Contains("split: sizes [2, 2] sum to 4 but dim 1 of f32[2, 5] on cpu has size 5"),
                       Error);
  CHECK_THROWS_WITH_AS(split(x, std::vector<int64_t>{6, -1}, 1), doctest::Contains("negative size -1"), Error);
  CHECK_THROWS_WITH_AS(split(x, 0, 1), doctest::Contains("split_size must be positive"), Error);
  CHECK_THROWS_WITH_AS(split(Tensor::scalar(1), 1), doctest::Contains("0-d"), Error);
}

TEST_CASE("index: index_select and gather take i32 indices and name bad ones") {
  Tensor x = Tensor::arange(0, 12, 1, DType::f32).reshape({3, 4});
  Tensor i32 = Tensor::from_vector<int32_t>({2, 0}, {2});
  CHECK(index_select(x, 0, i32).to_vector<float>() == std::vector<float>{8, 9, 10, 11, 0, 1, 2, 3});
  CHECK(index_select(x, -1, i32).to_vector<float>() == std::vector<float>{2, 0, 6, 4, 10, 8});
  CHECK_THROWS_WITH_AS(index_select(x, 1, core_test::i64({1, 4}, {2})),
                       doctest::Contains("index_select: index 4 at position [1] of the index tensor is out of "
                                         "range for dim 1 of size 4"),
                       Error);
  CHECK_THROWS_WITH_AS(index_select(x, 0, core_test::i64({-1}, {1})), doctest::Contains("index -1"), Error);
  CHECK_THROWS_WITH_AS(index_select(x, 0, Tensor::zeros({2})), doctest::Contains("index must be i64 or i32"),
                       Error);
  CHECK_THROWS_WITH_AS(index_select(x, 0, Tensor::zeros({1, 1}, DType::i64)), doctest::Contains("1-D"), Error);
  CHECK(index_select(x, 1, Tensor::zeros({0}, DType::i64)).shape() == Shape{3, 0});

  Tensor g32 = Tensor::from_vector<int32_t>({3, 0, 1, 1}, {2, 2});
  CHECK(gather(x, 1, g32).to_vector<float>() == std::vector<float>{3, 0, 5, 5});
  CHECK_THROWS_WITH_AS(gather(x, 1, core_test::i64({0, 1, 2, 9}, {2, 2})),
                       doctest::Contains("gather: index 9 at position [1, 1] of the index tensor is out of range "
                                         "for dim 1 of size 4"),
                       Error);
  CHECK_THROWS_WITH_AS(gather(x, 1, Tensor::zeros({4}, DType::i64)), doctest::Contains("as many dims"), Error);
  CHECK_THROWS_WITH_AS(gather(x, 1, Tensor::zeros({4, 1}, DType::i64)),
                       doctest::Contains("larger than the input f32[3, 4] on cpu in dim 0"), Error);
  CHECK_THROWS_WITH_AS(gather(x, 0, Tensor::zeros({1, 1}, DType::i64, Device::sim())),
                       doctest::Contains("gather: expected all tensors on one device"), Error);
}

TEST_CASE("index: large index_add and scatter_add backward sums repeated indices exactly") {
  // Many repeats of a few rows: the sums are integers, so any missed or doubled term shows.
  const int64_t n = 50000;
  std::vector<int64_t> ids(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) ids[size_t(i)] = (i * 7) % 5;
  Tensor idx = Tensor::from_vector(ids, {n});
  Tensor x = Tensor::zeros({5, 3}).requires_grad_(true);
  sum(index_select(x, 0, idx)).backward();
  CHECK(x.grad().to_vector<float>() == std::vector<float>(15, float(n / 5)));

  Tensor y = Tensor::zeros({3, 5}).requires_grad_(true);
  Tensor gidx = idx.reshape({1, n}).expand({3, n});
  sum(gather(y, 1, gidx)).backward();
  CHECK(y.grad().to_vector<float>() == std::vector<float>(15, float(n / 5)));
}

TEST_CASE("ops: pow gradients at a zero base or a zero exponent are finite, as torch") {
  Tensor a = core_test::f64({0, 0, 2, 0}, {4}).requires_grad_(true);
  Tensor b = core_test::f64({0, 2, 0, 0.5}, {4}).requires_grad_(true);
  sum(pow(a, b)).backward();
  // torch: d/da = [0, 0, 0, inf]; d/db = [0, 0, log 2, 0]
  std::vector<double> ga = a.grad().to_vector<double>(), gb = b.grad().to_vector<double>();
  CHECK(ga[0] == 0);
  CHECK(ga[1] == 0);
  CHECK(ga[2] == 0);
  CHECK(ga[3] == INFINITY);
  CHECK(gb[0] == 0);
  CHECK(gb[1] == 0);
  CHECK(gb[2] == doctest::Approx(std::log(2.0)));
  CHECK(gb[3] == 0);
  Tensor x = core_test::f64({0, 1.5}, {2}).requires_grad_(true);
  sum(pow(x, 0.0)).backward();
  CHECK(x.grad().to_vector<double>() == std::vector<double>{0, 0});
}
