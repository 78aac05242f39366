// The op tests, driven by the op registry (ref/op_registry.cpp), in the manner of ggml's
// test-backend-ops. Every entry of the registry is checked:
//   - its golden rows below, against PyTorch's golden values (tests/golden/make_core_goldens.py,
//     make_nn_op_goldens.py): the forward result and torch's gradients of sum(out * gout);
//   - a float64 finite-difference gradcheck of each differentiable golden row;
//   - bitwise the cpu's result and gradients on the sim device, for every golden row and every
//     sample of the entry's sweep (the registry's call, the entry's arguments);
//   - within tolerance of the cpu on CUDA, where a GPU exists (and in the CUDA emulator: ctest's
//     "emu:ops: ..."), the same rows and sweeps.
// A row names its registry entry first. An entry whose result no golden file can hold (dropout's
// mask comes from lathe's generator) or that is another form of an op with goldens has its own
// check here instead (own_checks()). A test fails when a function of core/ops.h, an entry of
// core/op_table.h's lists or a golden case has no registry entry or row, so the lists cannot drift.
// Broadcasting and non-contiguous inputs are rows of their own.
//
// Tolerances: f32 values within 1e-6 relative + 1e-7 absolute; ops built on a transcendental
// function (exp, log, tanh, pow, softmax, layer_norm, ...) within 1e-5 relative, and the nn ops'
// results (long sums) within 1e-6 absolute. Gradients chain a few roundings and use the same rule
// with the row's relative tolerance and 1e-6 absolute. A sweep on CUDA is held to its entry's
// tolerance (ref/op_registry.cpp).
#include <doctest/doctest.h>

#include <cmath>
#include <fstream>
#include <functional>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "core/op_table.h"
#include "core_test_util.h"
#include "ref/op_registry.h"
#include "tests/gpu_cases.h"

using namespace lathe;
using core_test::compare;
using core_test::golden;

namespace {

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

constexpr double kExact = 1e-6;       // relative tolerance of plain f32 arithmetic
constexpr double kTranscend = 1e-5;   // relative tolerance of ops built on exp/log/tanh/pow

constexpr double kSums = 1e-6;        // absolute tolerance of results that are long sums

// A golden row: the registry entry it checks, the golden case it reads, the op's call on the
// case's inputs.
struct Case {
  const char* op;
  const char* name;
  Fn f;
  double rtol = kExact;
  // Inputs sit on a kink or a tie (relu at 0, clamp at a bound, equal maxima): the gradcheck
  // runs on slightly moved inputs, where finite differences are meaningful.
  bool kinks = false;
  double atol = 1e-7;  // of the forward result
};

// The registry's call of `op` with `args`, for rows that run an op as the registry does.
Tensor call(const char* op, const nlohmann::json& args, const std::vector<Tensor>& v) {
  const ref::OpEntry* e = ref::find_op_entry(op);
  LATHE_CHECK(e != nullptr, "no registry entry ", op);
  return e->call(v, ref::read_op_args(*e, args.is_null() ? nlohmann::json::object() : args));
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
  return call("rope", {}, {x, place(c), place(s)});
}

// softmax(q k^T / sqrt(head size) + causal mask) v of the inputs q, k, v.
Tensor attention(const std::vector<Tensor>& v) {
  return causal_attention(v[0], v[1], v[2], 1.0 / std::sqrt(double(v[0].size(3))));
}

// The golden rows: the registry entry each checks, its case under the generator's name, and the
// call; v holds the inputs in the generator's order. A new op's row names its entry first.
const std::vector<Case>& cases() {
  static const std::vector<Case> all = {
      // binary, broadcasting
      {"add", "add_bcast", [](auto& v) { return v[0] + v[1]; }},
      {"sub", "sub_bcast", [](auto& v) { return v[0] - v[1]; }},
      {"mul", "mul_bcast", [](auto& v) { return v[0] * v[1]; }},
      {"div", "div_bcast", [](auto& v) { return v[0] / v[1]; }},
      {"pow", "pow_bcast", [](auto& v) { return pow(v[0], v[1]); }, kTranscend},
      {"maximum", "maximum_bcast", [](auto& v) { return maximum(v[0], v[1]); }},
      {"minimum", "minimum_bcast", [](auto& v) { return minimum(v[0], v[1]); }},
      {"maximum", "maximum_ties", [](auto& v) { return maximum(v[0], v[1]); }, kExact, true},
      {"minimum", "minimum_ties", [](auto& v) { return minimum(v[0], v[1]); }, kExact, true},
      {"mul", "mul_outer", [](auto& v) { return v[0] * v[1]; }},
      {"add", "add_noncontig", [](auto& v) { return v[0].t() + v[1]; }},
      {"mul", "mul_noncontig", [](auto& v) { return v[0].slice(1, 0, 8, 2) * v[1].t(); }},
      {"div", "div_noncontig", [](auto& v) { return v[0].t() / v[1]; }},
      // comparisons
      {"eq", "eq_bcast", [](auto& v) { return call("eq", {}, v); }},
      {"ne", "ne_bcast", [](auto& v) { return call("ne", {}, v); }},
      {"lt", "lt_bcast", [](auto& v) { return call("lt", {}, v); }},
      {"le", "le_bcast", [](auto& v) { return call("le", {}, v); }},
      {"gt", "gt_bcast", [](auto& v) { return call("gt", {}, v); }},
      {"ge", "ge_bcast", [](auto& v) { return call("ge", {}, v); }},
      // scalar forms
      {"add", "add_scalar", [](auto& v) { return v[0] + 2.5; }},
      {"sub", "sub_scalar", [](auto& v) { return v[0] - 0.75; }},
      {"mul", "mul_scalar", [](auto& v) { return v[0] * -1.5; }},
      {"div", "div_scalar", [](auto& v) { return v[0] / 3.0; }},
      {"pow", "pow_scalar", [](auto& v) { return pow(v[0], 2.5); }, kTranscend},
      {"pow", "pow_scalar_neg", [](auto& v) { return pow(v[0], -0.5); }, kTranscend},
      {"pow", "pow_scalar_int", [](auto& v) { return pow(v[0], 3.0); }, kTranscend},
      // unary
      {"neg", "neg", [](auto& v) { return -v[0]; }},
      {"exp", "exp", [](auto& v) { return exp(v[0]); }, kTranscend},
      {"log", "log", [](auto& v) { return log(v[0]); }, kTranscend},
      {"sqrt", "sqrt", [](auto& v) { return sqrt(v[0]); }},
      {"rsqrt", "rsqrt", [](auto& v) { return rsqrt(v[0]); }, kTranscend},
      {"tanh", "tanh", [](auto& v) { return tanh(v[0]); }, kTranscend},
      {"gelu", "gelu", [](auto& v) { return gelu(v[0]); }, kTranscend},
      {"relu", "relu", [](auto& v) { return relu(v[0]); }, kExact, true},
      {"sigmoid", "sigmoid", [](auto& v) { return sigmoid(v[0]); }, kTranscend},
      {"silu", "silu", [](auto& v) { return silu(v[0]); }, kTranscend},
      {"log_sigmoid", "log_sigmoid", [](auto& v) { return log_sigmoid(v[0]); }, kTranscend},
      {"gelu", "gelu_erf", [](auto& v) { return gelu_erf(v[0]); }, kTranscend},
      {"squared_relu", "squared_relu", [](auto& v) { return call("squared_relu", {}, v); }},
      {"softcap", "softcap", [](auto& v) { return call("softcap", {{"cap", 2.0}}, v); }, kTranscend},
      {"abs", "abs", [](auto& v) { return abs(v[0]); }, kExact, true},
      {"square", "square", [](auto& v) { return square(v[0]); }},
      {"clamp", "clamp", [](auto& v) { return clamp(v[0], -0.5, 0.5); }, kExact, true},
      {"clamp", "clamp_lo", [](auto& v) { return clamp(v[0], -0.3, std::nullopt); }, kExact, true},
      {"clamp", "clamp_hi", [](auto& v) { return clamp(v[0], std::nullopt, 0.2); }, kExact, true},
      {"exp", "exp_noncontig", [](auto& v) { return exp(v[0].t()); }, kTranscend},
      {"gelu", "gelu_noncontig", [](auto& v) { return gelu(v[0].slice(1, 1, 8, 2)); }, kTranscend},
      {"tanh", "tanh_noncontig", [](auto& v) { return tanh(v[0].t()); }, kTranscend},
      // selection
      {"where", "where_bcast", [](auto& v) { return where(v[0], v[1], v[2]); }},
      {"masked_fill", "masked_fill", [](auto& v) { return masked_fill(v[0], v[1], -2.0); }},
      // reductions
      {"sum", "sum_all", [](auto& v) { return sum(v[0]); }},
      {"sum", "sum_d02", [](auto& v) { return sum(v[0], {0, 2}); }},
      {"sum", "sum_d1_keep", [](auto& v) { return sum(v[0], {1}, true); }},
      {"sum", "sum_dlast", [](auto& v) { return sum(v[0], {-1}); }},
      {"sum", "sum_noncontig", [](auto& v) { return sum(v[0].transpose(0, 2), {0}); }},
      {"mean", "mean_all", [](auto& v) { return mean(v[0]); }},
      {"mean", "mean_d1", [](auto& v) { return mean(v[0], {1}); }},
      {"mean", "mean_d02_keep", [](auto& v) { return mean(v[0], {0, 2}, true); }},
      {"max", "max_d1", [](auto& v) { return max(v[0], 1); }},
      {"max", "max_dlast_keep", [](auto& v) { return max(v[0], -1, true); }},
      {"argmax", "argmax_d1", [](auto& v) { return call("argmax", {{"dim", 1}}, v); }},
      {"argmax", "argmax_d0_keep", [](auto& v) { return call("argmax", {{"dim", 0}, {"keepdim", true}}, v); }},
      {"max", "max_full", [](auto& v) { return max(v[0]); }},
      {"max", "max_d1_ties", [](auto& v) { return max(v[0], 1); }, kExact, true},
      {"argmax", "argmax_d1_ties", [](auto& v) { return argmax(v[0], 1); }},
      {"max", "max_full_ties", [](auto& v) { return max(v[0]); }, kExact, true},
      {"var", "var_all", [](auto& v) { return var(v[0]); }},
      {"var", "var_d1", [](auto& v) { return var(v[0], {1}); }},
      {"var", "var_d02_c0_keep", [](auto& v) { return var(v[0], {0, 2}, true, 0); }},
      // joining and splitting
      {"cat", "cat_d1", [](auto& v) { return cat({v[0], v[1], v[2]}, 1); }},
      {"cat", "cat_d0_noncontig", [](auto& v) { return cat({v[0].t(), v[1]}, 0); }},
      {"cat", "cat_dlast_3d", [](auto& v) { return cat({v[0], v[1]}, -1); }},
      {"stack", "stack_d0", [](auto& v) { return stack({v[0], v[1]}, 0); }},
      {"stack", "stack_d1", [](auto& v) { return stack({v[0], v[1], v[2]}, 1); }},
      {"stack", "stack_dlast", [](auto& v) { return stack({v[0], v[1]}, -1); }},
      {"split", "split_size", [](auto& v) {
         auto p = split(v[0], 2, 0);
         std::vector<Tensor> flat;
         for (size_t i = p.size(); i-- > 0;) flat.push_back(p[i].reshape({-1}));
         return cat(flat);
       }},
      {"split", "split_sizes", [](auto& v) {
         auto p = split(v[0], std::vector<int64_t>{1, 3, 1}, 1);
         std::vector<Tensor> flat;
         for (size_t i = p.size(); i-- > 0;) flat.push_back(p[i].reshape({-1}));
         return cat(flat);
       }},
      // indexing
      {"index_select", "index_select_d1", [](auto& v) { return index_select(v[0], 1, v[1]); }},
      {"index_select", "index_select_d0", [](auto& v) { return index_select(v[0], 0, v[1]); }},
      {"index_select", "index_select_3d", [](auto& v) { return index_select(v[0], 1, v[1]); }},
      {"index_select", "index_select_noncontig", [](auto& v) { return index_select(v[0].t(), 0, v[1]); }},
      {"gather", "gather_d1", [](auto& v) { return gather(v[0], 1, v[1]); }},
      {"gather", "gather_d0", [](auto& v) { return gather(v[0], 0, v[1]); }},
      {"gather", "gather_smaller", [](auto& v) { return gather(v[0], 1, v[1]); }},
      {"gather", "gather_3d", [](auto& v) { return gather(v[0], 2, v[1]); }},
      {"gather", "gather_noncontig", [](auto& v) { return gather(v[0].t(), 0, v[1]); }},
      // integer division is true division
      {"div", "int_div", [](auto& v) { return v[0] / v[1]; }},
      // linear algebra and the nn ops
      {"matmul", "matmul_2d", [](auto& v) { return matmul(v[0], v[1]); }, kTranscend, false, kSums},
      {"matmul", "matmul_bcast", [](auto& v) { return matmul(v[0], v[1]); }, kTranscend, false, kSums},
      {"matmul", "matmul_linear", [](auto& v) { return matmul(v[0], v[1].t()); }, kTranscend, false, kSums},
      {"matmul", "matmul_vec_left", [](auto& v) { return matmul(v[0], v[1]); }, kTranscend, false, kSums},
      {"matmul", "matmul_vec_right", [](auto& v) { return matmul(v[0], v[1]); }, kTranscend, false, kSums},
      {"matmul", "matmul_dot", [](auto& v) { return matmul(v[0], v[1]); }, kTranscend, false, kSums},
      {"softmax", "softmax_last", [](auto& v) { return softmax(v[0], -1); }, kTranscend, false, kSums},
      {"softmax", "softmax_dim0", [](auto& v) { return softmax(v[0], 0); }, kTranscend, false, kSums},
      {"log_softmax", "log_softmax_dim1", [](auto& v) { return log_softmax(v[0], 1); }, kTranscend, false, kSums},
      {"log_softmax", "log_softmax_large", [](auto& v) { return log_softmax(v[0], -1); }, kTranscend, false, kSums},
      {"softmax", "softmax_large", [](auto& v) { return softmax(v[0], -1); }, kTranscend, false, kSums},
      {"layer_norm", "layer_norm_affine", [](auto& v) { return layer_norm(v[0], v[1], v[2], 1e-5); }, kTranscend, false, kSums},
      {"layer_norm", "layer_norm_plain", [](auto& v) { return layer_norm(v[0], Tensor(), Tensor(), 1e-5); }, kTranscend, false,
       kSums},
      {"rms_norm", "rms_norm_weight", [](auto& v) { return call("rms_norm", {{"eps", 1e-5}}, v); }, kTranscend, false,
       kSums},
      {"rms_norm", "rms_norm_plain", [](auto& v) { return rms_norm(v[0], Tensor(), 1e-5); }, kTranscend, false, kSums},
      {"rope", "rope", [](auto& v) { return rope_at(v[0], 3); }, kTranscend, false, kSums},
      {"rope", "rope_strided", [](auto& v) { return rope_at(v[0].transpose(1, 2), 0); }, kTranscend, false, kSums},
      {"embedding", "embedding", [](auto& v) { return embedding(v[0], v[1]); }, kExact, false, kSums},
      {"cross_entropy", "cross_entropy", [](auto& v) { return cross_entropy(v[0], v[1]); }, kTranscend, false, kSums},
      {"cross_entropy", "cross_entropy_3d", [](auto& v) { return cross_entropy(v[0], v[1].to(DType::i32)); }, kTranscend, false,
       kSums},
      {"cross_entropy", "cross_entropy_ignore2", [](auto& v) { return cross_entropy(v[0], v[1], 2); }, kTranscend, false, kSums},
      // causal attention over a sweep of B, H, T and head sizes; the last two rows' queries come
      // after a KV cache's keys
      {"scaled_dot_product_attention", "causal_attention_b1h1q1k1d8", attention, kTranscend, false, kSums},
      {"scaled_dot_product_attention", "causal_attention_b2h3q5k5d4", attention, kTranscend, false, kSums},
      {"scaled_dot_product_attention", "causal_attention_b1h2q70k70d8", attention, kTranscend, false, kSums},
      {"scaled_dot_product_attention", "causal_attention_b2h1q20k20d32", attention, kTranscend, false, kSums},
      {"scaled_dot_product_attention", "causal_attention_b1h2q3k9d8", attention, kTranscend, false, kSums},
      {"scaled_dot_product_attention", "causal_attention_b2h2q1k13d16", attention, kTranscend, false, kSums},
      // the fused classifier: the same mean, its gradient written by the forward and scaled by the backward
      {"fused_cross_entropy", "fused_cross_entropy", [](auto& v) { return fused_cross_entropy(v[0], v[1]); }, kTranscend,
       false, kSums},
      {"fused_cross_entropy", "fused_cross_entropy_3d", [](auto& v) { return fused_cross_entropy(v[0], v[1], -1); },
       kTranscend, false, kSums},
      // fused optimizer kernels (no gradient)
      {"adam_update", "adam_update",
       [](auto& v) { return call("adam_update", {{"lr", 1e-2}, {"weight_decay", 0.01}, {"step", 3}}, v); }, kTranscend,
       false, kSums},
      {"adam_update", "adamw_update", [](auto& v) {
         return call("adam_update", {{"lr", 1e-2}, {"weight_decay", 0.1}, {"decoupled_weight_decay", true}, {"step", 3}}, v);
       }, kTranscend, false, kSums},
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

// A sample of a registry entry's sweep on `device`: its operands drawn under `seed`, floating ones
// in f32 and collecting gradients, and its arguments.
struct SweepInputs {
  std::vector<Tensor> operands;
  ref::OpArgs args;
};

SweepInputs sweep_inputs(const ref::OpEntry& op, const ref::OpSample& sample, uint64_t seed, Device device) {
  ref::Draw draw(seed);
  std::vector<Tensor> operands;
  for (const Tensor& t : sample.inputs(draw)) {
    Tensor d = t.to(device);
    if (is_floating(t.dtype())) d = d.to(DType::f32).requires_grad_(true);
    operands.push_back(d);
  }
  return {operands, ref::read_op_args(op, sample.args)};
}

// Compares a run on `device` with the cpu's: the result, and after sum(out * w) the gradients;
// bitwise, or within rtol and atol.
void check_device_run(const std::vector<Tensor>& host, const Tensor& out_h, const std::vector<Tensor>& dev,
                      const Tensor& out_d, Device device, bool bitwise, double rtol, double atol, double grad_atol) {
  CHECK(out_d.device() == device);
  CHECK(out_d.dtype() == out_h.dtype());
  if (bitwise) CHECK(core_test::same_bits(out_h, out_d));
  else CHECK_MESSAGE(compare(out_d, out_h, rtol, atol).empty(), compare(out_d, out_h, rtol, atol));
  if (!out_h.requires_grad()) return;
  Tensor w = Tensor::randn(out_h.shape(), 5);
  sum(mul(out_h, w)).backward();
  sum(mul(out_d, w.to(device))).backward();
  for (size_t k = 0; k < host.size(); ++k) {
    if (!host[k].requires_grad()) continue;
    CAPTURE(k);
    // An operand that is a constant of the op (rope's angle tables) has no gradient on either.
    REQUIRE(dev[k].grad().defined() == host[k].grad().defined());
    if (!host[k].grad().defined()) continue;
    CHECK(dev[k].grad().device() == device);
    if (bitwise) CHECK(core_test::same_bits(host[k].grad(), dev[k].grad()));
    else CHECK_MESSAGE(compare(dev[k].grad(), host[k].grad(), rtol, grad_atol).empty(),
                       compare(dev[k].grad(), host[k].grad(), rtol, grad_atol));
  }
}

// Every sample of every entry's sweep on `device` against the cpu, through the registry's call:
// bitwise on sim, within the entry's tolerance on cuda. Returns the number of samples run.
int check_sweeps_on_device(Device device, bool bitwise) {
  int runs = 0;
  for (const ref::OpEntry& op : ref::op_registry()) {
    uint64_t seed = 500;
    for (const ref::OpSample& sample : op.sweep) {
      SweepInputs h = sweep_inputs(op, sample, seed, Device::cpu());
      SweepInputs d = sweep_inputs(op, sample, seed, device);
      ++seed;
      const std::string name = std::string(op.name) + " " + sample.args.dump();
      std::ostringstream described;
      for (const Tensor& t : h.operands) described << ' ' << t.desc();
      const std::string operands = described.str();
      CAPTURE(name);
      CAPTURE(operands);
      Tensor out_h = op.call(h.operands, h.args), out_d = op.call(d.operands, d.args);
      check_device_run(h.operands, out_h, d.operands, out_d, device, bitwise, op.tolerance.rtol, op.tolerance.atol,
                       op.tolerance.atol);
      ++runs;
    }
  }
  return runs;
}

// The entries checked here rather than by golden rows, each by what makes it right.
const std::map<std::string, std::function<void()>>& own_checks() {
  static const std::map<std::string, std::function<void()>> checks = {
      // Dropout's mask comes from lathe's generator, which PyTorch does not have: the check is what
      // inverted dropout means. Every output element is 0 or x / (1 - p) (x * (1 / (1 - p)) exactly,
      // as the kernel scales), the kept fraction is 1 - p within five standard deviations of a
      // binomial draw, the gradient is gout scaled where kept and 0 where dropped, the same seed
      // gives the same mask and another seed another, and out of training (or at p = 0) it is x.
      {"dropout",
       [] {
         const double p = 0.3;
         const int64_t n = 40000;
         Tensor x = Tensor::rand({n}, 11) + 0.5;  // no zero among the inputs
         x.requires_grad_(true);
         auto run = [&](int64_t seed, bool training, double prob) {
           return call("dropout", {{"p", prob}, {"training", training}, {"seed", seed}}, {x});
         };
         Tensor y = run(3, true, p);
         const std::vector<float> xs = x.detach().to_vector<float>(), ys = y.detach().to_vector<float>();
         const float scale = float(1.0 / (1.0 - p));
         int64_t kept = 0, wrong = 0;
         for (size_t i = 0; i < xs.size(); ++i) {
           if (ys[i] != 0) ++kept;
           if (ys[i] != 0 && ys[i] != xs[i] * scale) ++wrong;
         }
         CHECK(wrong == 0);
         const double sd = std::sqrt(p * (1 - p) / double(n));
         CHECK(std::abs(double(kept) / double(n) - (1 - p)) < 5 * sd);
         Tensor g = Tensor::randn({n}, 12);
         sum(mul(y, g)).backward();
         const std::vector<float> gx = x.grad().to_vector<float>(), gs = g.to_vector<float>();
         int64_t bad_grad = 0;
         for (size_t i = 0; i < xs.size(); ++i)
           if (gx[i] != (ys[i] != 0 ? gs[i] * scale : 0.0f)) ++bad_grad;
         CHECK(bad_grad == 0);
         CHECK(core_test::same_bits(run(3, true, p), y));
         CHECK_FALSE(core_test::same_bits(run(4, true, p), y));
         CHECK(core_test::same_bits(run(3, false, p), x));
         CHECK(core_test::same_bits(run(3, true, 0.0), x));
       }},
      // q, k and v side by side: causal_attention on the three head views, bit for bit (its golden
      // rows are causal_attention's), forward and gradient.
      {"causal_attention_qkv",
       [] {
         const int64_t B = 2, T = 7, H = 3, hs = 8, C = H * hs;
         Tensor a = Tensor::randn({B, T, 3 * C}, 21).requires_grad_(true);
         Tensor b = a.detach().clone().requires_grad_(true);
         const Tensor ya = call("causal_attention_qkv", {{"n_head", H}, {"scale", 0.3}}, {a});
         auto heads = [&](int64_t part) { return b.slice(2, part * C, (part + 1) * C).reshape({B, T, H, hs}).transpose(1, 2); };
         const Tensor yb = causal_attention(heads(0), heads(1), heads(2), 0.3).transpose(1, 2).reshape({B, T, C});
         CHECK(core_test::same_bits(ya, yb));
         Tensor g = Tensor::randn({B, T, C}, 22);
         sum(mul(ya, g)).backward();
         sum(mul(yb, g)).backward();
         CHECK(core_test::same_bits(a.grad(), b.grad()));
       }},
      // The multi-tensor step is adam_update's (its golden rows) on each parameter, bit for bit.
      {"adam_update_multi",
       [] {
         const nlohmann::json args = {{"lr", 1e-2}, {"weight_decay", 0.1}, {"decoupled_weight_decay", true}, {"step", 4}};
         ref::Draw draw(31);
         std::vector<Tensor> first, second;
         for (const Shape& s : {Shape{3, 5}, Shape{17}}) {
           std::vector<Tensor> v = {draw.uniform(s).to(DType::f32), draw.uniform(s).to(DType::f32),
                                    draw.uniform(s, -0.1, 0.1).to(DType::f32), draw.uniform(s, 0, 0.1).to(DType::f32)};
           (first.empty() ? first : second) = v;
         }
         std::vector<Tensor> both = first;
         both.insert(both.end(), second.begin(), second.end());
         const Tensor multi = call("adam_update_multi", args, both);
         const Tensor a = call("adam_update", args, first), b = call("adam_update", args, second);
         // adam_update returns (p, m, v) of one parameter; the multi call (p..., m..., v...).
         const int64_t na = first[0].numel(), nb = second[0].numel();
         std::vector<Tensor> want;
         for (int64_t part = 0; part < 3; ++part) {
           want.push_back(a.slice(0, part * na, (part + 1) * na));
           want.push_back(b.slice(0, part * nb, (part + 1) * nb));
         }
         CHECK(core_test::same_bits(multi, cat(want)));
       }},
  };
  return checks;
}

// The names of the functions core/ops.h declares (operators and the operand checks aside).
std::set<std::string> functions_of_ops_h() {
  std::ifstream in(LATHE_GOLDEN_DIR "/../../core/ops.h");  // tests/golden/ -> the repository
  REQUIRE(in.good());
  std::stringstream text;
  text << in.rdbuf();
  const std::string s = text.str();
  const std::regex decl(R"(^(?:inline )?(?:Tensor|void|std::vector<Tensor>) ([a-z_0-9]+)\()", std::regex::multiline);
  std::set<std::string> names;
  for (auto it = std::sregex_iterator(s.begin(), s.end(), decl); it != std::sregex_iterator(); ++it) {
    const std::string name = (*it)[1];
    if (name.rfind("check_", 0) != 0) names.insert(name);
  }
  return names;
}

// The entries of core/op_table.h's lists, unary and binary, as the lists name them (pow_scalar's
// kernel is called "pow" in messages).
std::set<std::string> op_table_entries() {
#define LATHE_TABLE_NAME_(entry) #entry,
  const std::vector<std::string> names = {LATHE_UNARY_OPS(LATHE_TABLE_NAME_) LATHE_BINARY_OPS(LATHE_TABLE_NAME_)};
#undef LATHE_TABLE_NAME_
  return {names.begin(), names.end()};
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

TEST_CASE("ops: every op of core/ops.h and core/op_table.h has a registry entry, and every entry its checks") {
  const std::set<std::string> functions = functions_of_ops_h(), table = op_table_entries();
  REQUIRE(functions.size() > 50);  // the header was read
  std::set<std::string> covered;
  for (const ref::OpEntry& e : ref::op_registry()) {
    const std::string op = e.name;
    CHECK_MESSAGE(!e.covers.empty(), "registry entry ", op, " covers nothing");
    CHECK_MESSAGE(!e.sweep.empty(), "registry entry ", op, " has no sweep");
    for (const std::string name : e.covers) {
      CHECK_MESSAGE((functions.count(name) || table.count(name)), "registry entry ", op, " covers \"", name,
                    "\", which is neither a function of core/ops.h nor an entry of core/op_table.h");
      covered.insert(name);
    }
  }
  for (const std::string& f : functions)
    CHECK_MESSAGE(covered.count(f), "core/ops.h declares ", f, ", which no entry of the op registry (ref/op_registry.cpp) covers");
  for (const std::string& t : table) {
    const std::string forward = t.size() > 9 && t.ends_with("_backward") ? t.substr(0, t.size() - 9) : t;
    CHECK_MESSAGE(covered.count(forward), "core/op_table.h lists ", t, ", which no entry of the op registry covers");
  }

  // Each entry has golden rows against PyTorch or a check of its own, and each row an entry.
  std::map<std::string, int> rows;
  for (const Case& c : cases()) {
    CHECK_MESSAGE(ref::find_op_entry(c.op) != nullptr, "golden row ", std::string(c.name), " names no registry entry \"",
                  std::string(c.op), "\"");
    ++rows[c.op];
  }
  for (const ref::OpEntry& e : ref::op_registry())
    CHECK_MESSAGE((rows.count(e.name) || own_checks().count(e.name)), "registry entry ", std::string(e.name),
                  " has no golden row in tests/test_op_cases.cpp and no check of its own");
  for (const auto& [name, check] : own_checks())
    CHECK_MESSAGE(ref::find_op_entry(name) != nullptr, "own check of ", name, ", which is no registry entry");
}

TEST_CASE("ops: the entries without golden rows pass their own checks") {
  for (const auto& [name, check] : own_checks()) {
    CAPTURE(name);
    check();
  }
}

// Runs every golden row on `device` (inputs moved there) and compares forward and gradients with
// the cpu run: bitwise on sim (same kernels), within the row's tolerance on cuda; then every
// sample of every registry entry's sweep the same way.
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
    check_device_run(host, out_h, dev, out_d, device, bitwise, c.rtol, std::max(c.atol, 1e-6), 1e-6);
  }
  CHECK(check_sweeps_on_device(device, bitwise) > 100);
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
