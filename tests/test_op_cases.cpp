// The op tests, driven by the op registry (ref/op_registry.cpp), in the manner of ggml's
// test-backend-ops and PyTorch's OpInfo: every sample of every entry is checked, and nothing here
// lists an op or a sample.
//   - each golden sample against PyTorch's answer to it (tests/golden/op_samples.expected.safetensors,
//     made by tools/make_op_goldens.sh): the forward result and the gradients of the operands for
//     the bundle's grad_output, at the entry's tolerance, with its operands held strided where the
//     sample says so;
//   - a float64 finite-difference gradcheck of each golden sample that has a gradient;
//   - every sample, golden and sweep, bitwise the cpu's result and gradients on sim, and within the
//     entry's tolerance of the cpu on CUDA, where a GPU exists (and in the CUDA emulator: ctest's
//     "emu:ops: ..."), operands held strided where the sample says so.
// The bundle PyTorch answered must hold each golden sample as the registry draws it now (a sample
// changed without new goldens fails, naming it). An entry whose result no golden file can hold
// (dropout's mask comes from lathe's generator) has a check of its own here instead (own_checks()),
// as do entries that are another form of an op (bit for bit against it). A test fails when a
// function of core/ops.h or an entry of core/op_table.h's lists has no registry entry, so the lists
// cannot drift.
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
#include "ref/op_samples.h"
#include "serialize/safetensors.h"
#include "tests/gpu_cases.h"

using namespace lathe;
using core_test::compare;

namespace {

// The registry's call of `op` with `args`, for the checks of their own.
Tensor call(const char* op, const nlohmann::json& args, const std::vector<Tensor>& v) {
  const ref::OpEntry* e = ref::find_op_entry(op);
  LATHE_CHECK(e != nullptr, "no registry entry ", op);
  return e->call(v, ref::read_op_args(*e, args.is_null() ? nlohmann::json::object() : args));
}

// The bundle of golden samples lathe wrote and PyTorch's answers to it, read once.
const serialize::SafetensorsFile& samples_bundle() {
  static const serialize::SafetensorsFile f = serialize::read_safetensors(LATHE_GOLDEN_DIR "/op_samples.safetensors");
  return f;
}
const serialize::SafetensorsFile& torch_answers() {
  static const serialize::SafetensorsFile f =
      serialize::read_safetensors(LATHE_GOLDEN_DIR "/op_samples.expected.safetensors");
  return f;
}

const char* const kRegenerate = " (after changing a sample or adding an op, run tools/make_op_goldens.sh)";

// A case's tensor from `file`, a fresh copy; null when the file has none of that name.
std::optional<Tensor> case_tensor(const serialize::SafetensorsFile& file, const std::string& c, const std::string& name) {
  const Tensor* t = file.find(c + "/" + name);
  return t ? std::optional<Tensor>(t->clone()) : std::nullopt;
}

// The operands of a sample as an op receives them on `device`: floating ones in `dtype`, held
// strided when the sample says so, and collecting gradients when `grad`.
std::vector<Tensor> place(const ref::OpSample& sample, const std::vector<Tensor>& operands, DType dtype, Device device,
                          bool grad) {
  std::vector<Tensor> out;
  for (const Tensor& t : operands) {
    if (!is_floating(t.dtype())) {
      out.push_back(t.to(device));
      continue;
    }
    Tensor d = t.detach().to(dtype).to(device);
    if (sample.strided) d = ref::strided(d);
    if (grad) d.requires_grad_(true);
    out.push_back(d);
  }
  return out;
}

// Every sample of every entry, with its entry.
template <class F>
void for_each_sample(F&& f) {
  for (const ref::OpEntry& op : ref::op_registry())
    for (const ref::OpSample& sample : op.samples) f(op, sample);
}

bool is_golden(const ref::OpSample& s) { return s.use != ref::SampleUse::sweep; }

// Compares lathe's f32 answer to a golden sample with PyTorch's: the result, and the gradients for
// the bundle's grad_output. Where PyTorch computes no gradient (a constant operand), lathe's is
// absent or zero.
void check_against_torch(const ref::OpEntry& op, const ref::OpSample& sample) {
  const std::string c = ref::op_sample_case_name(op, sample, DType::f32);
  CAPTURE(c);
  const std::optional<Tensor> want = case_tensor(torch_answers(), c, "output");
  REQUIRE_MESSAGE(want.has_value(), "PyTorch has not answered ", c, kRegenerate);
  std::vector<Tensor> operands;
  for (size_t k = 0; const std::optional<Tensor> t = case_tensor(samples_bundle(), c, "input." + std::to_string(k)); ++k)
    operands.push_back(*t);
  std::vector<Tensor> x = place(sample, operands, DType::f32, Device::cpu(), true);
  if (sample.strided) {
    bool any = false;
    for (const Tensor& t : x) any = any || !t.is_contiguous();
    CHECK_MESSAGE(any, "a strided sample whose operands are all contiguous");
  }
  Tensor out = op.call(x, ref::read_op_args(op, sample.args));
  CHECK(out.dtype() == want->dtype());
  const std::string diff = compare(out, *want, op.tolerance.rtol, op.tolerance.atol);
  CHECK_MESSAGE(diff.empty(), "forward: ", diff);
  const std::optional<Tensor> gout = case_tensor(samples_bundle(), c, "grad_output");
  if (!gout) return;
  out.backward(*gout);
  for (size_t k = 0; k < x.size(); ++k) {
    if (!is_floating(x[k].dtype())) continue;
    const std::string gname = "grad.input." + std::to_string(k);
    const std::optional<Tensor> g = case_tensor(torch_answers(), c, gname);
    if (!g) {
      CHECK_MESSAGE((!x[k].grad().defined() || sum(abs(x[k].grad())).item() == 0.0), gname,
                    ": PyTorch has none, lathe a nonzero one");
      continue;
    }
    REQUIRE_MESSAGE(x[k].grad().defined(), "no gradient for ", gname);
    const std::string gdiff = compare(x[k].grad(), *g, op.tolerance.rtol, op.tolerance.atol);
    CHECK_MESSAGE(gdiff.empty(), gname, ": ", gdiff);
  }
}

// Float64 gradcheck of a golden sample on its f64 draws (moved off kinks when it sits on them),
// for the operands PyTorch computes a gradient for (not rope's tables, constants of the op).
// Returns whether the sample has a gradient to check.
bool check_gradcheck(const ref::OpEntry& op, const ref::OpSample& sample) {
  const std::string name = ref::sample_name(op, sample);
  CAPTURE(name);
  const std::string c = ref::op_sample_case_name(op, sample, DType::f32);
  std::vector<Tensor> in = ref::draw_sample(op, sample);
  bool any = false;
  for (size_t k = 0; k < in.size(); ++k) {
    if (!case_tensor(torch_answers(), c, "grad.input." + std::to_string(k))) continue;
    if (sample.kinks) in[k] = add(in[k], mul(Tensor::randn(in[k].shape(), 77 + k, 0, DType::f64), 0.01));
    in[k].requires_grad_(true);
    any = true;
  }
  if (!any) return false;
  const ref::OpArgs args = ref::read_op_args(op, sample.args);
  const std::string err = gradcheck([&](const std::vector<Tensor>& v) { return op.call(v, args); }, in);
  CHECK_MESSAGE(err.empty(), err);
  return true;
}

// Compares a run on `device` with the cpu's: the result, and after sum(out * w) the gradients;
// bitwise, or within rtol and atol.
void check_device_run(const std::vector<Tensor>& host, const Tensor& out_h, const std::vector<Tensor>& dev,
                      const Tensor& out_d, Device device, bool bitwise, double rtol, double atol) {
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
    else CHECK_MESSAGE(compare(dev[k].grad(), host[k].grad(), rtol, atol).empty(),
                       compare(dev[k].grad(), host[k].grad(), rtol, atol));
  }
}

// Every sample of every entry on `device` against the cpu, through the registry's call: bitwise
// on sim, within the entry's tolerance on cuda. Returns the number of samples run.
int check_on_device(Device device, bool bitwise) {
  int runs = 0;
  for_each_sample([&](const ref::OpEntry& op, const ref::OpSample& sample) {
    const std::string name = ref::sample_name(op, sample) + " " + sample.args.dump();
    const std::vector<Tensor> drawn = ref::draw_sample(op, sample);
    const std::vector<Tensor> h = place(sample, drawn, DType::f32, Device::cpu(), true);
    const std::vector<Tensor> d = place(sample, drawn, DType::f32, device, true);
    std::ostringstream described;
    for (const Tensor& t : h) described << ' ' << t.desc();
    const std::string operands = described.str();
    CAPTURE(name);
    CAPTURE(operands);
    const ref::OpArgs args = ref::read_op_args(op, sample.args);
    const Tensor out_h = op.call(h, args), out_d = op.call(d, args);
    check_device_run(h, out_h, d, out_d, device, bitwise, op.tolerance.rtol, op.tolerance.atol);
    ++runs;
  });
  return runs;
}

int64_t count_samples() {
  int64_t n = 0;
  for (const ref::OpEntry& op : ref::op_registry()) n += int64_t(op.samples.size());
  return n;
}

// The entries checked here by what makes them right, beside or instead of PyTorch's answers.
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
      // The multi-tensor step is adam_update's on each parameter, bit for bit.
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

TEST_CASE("ops: every golden sample matches PyTorch, forward and backward") {
  int checked = 0;
  for_each_sample([&](const ref::OpEntry& op, const ref::OpSample& sample) {
    if (!is_golden(sample)) return;
    check_against_torch(op, sample);
    ++checked;
  });
  CHECK(checked > 0);
}

TEST_CASE("ops: the bundle PyTorch answered holds every golden sample as the registry draws it") {
  // A sample changed (shape, range, arguments) or added without new goldens would otherwise be
  // checked against PyTorch's answer to other inputs, or not at all.
  std::set<std::string> cases;
  for_each_sample([&](const ref::OpEntry& op, const ref::OpSample& sample) {
    if (!is_golden(sample)) return;
    for (const ref::OpSampleCase& c : ref::op_sample_cases(op, sample)) {
      CAPTURE(c.name);
      CHECK_MESSAGE(cases.insert(c.name).second, "two samples are called ", c.name);
      for (const auto& [name, t] : c.tensors) {
        const std::optional<Tensor> held = case_tensor(samples_bundle(), c.name, name);
        CHECK_MESSAGE((held && core_test::same_bits(*held, t)), c.name, "/", name,
                      " is not in the bundle as the registry draws it", kRegenerate);
      }
      CHECK_MESSAGE(case_tensor(torch_answers(), c.name, "output").has_value(), "PyTorch has not answered ", c.name,
                    kRegenerate);
    }
  });
  for (const auto& [name, t] : samples_bundle().tensors)
    CHECK_MESSAGE(cases.count(name.substr(0, name.find('/'))), "the bundle holds ", name,
                  ", which no golden sample draws", kRegenerate);
}

TEST_CASE("ops: every op of core/ops.h and core/op_table.h has a registry entry, and every entry its checks") {
  const std::set<std::string> functions = functions_of_ops_h(), table = op_table_entries();
  REQUIRE(functions.size() > 50);  // the header was read
  std::set<std::string> covered;
  for (const ref::OpEntry& e : ref::op_registry()) {
    const std::string op = e.name;
    CHECK_MESSAGE(!e.covers.empty(), "registry entry ", op, " covers nothing");
    CHECK_MESSAGE(!e.samples.empty(), "registry entry ", op, " has no sample");
    for (const std::string name : e.covers) {
      CHECK_MESSAGE((functions.count(name) || table.count(name)), "registry entry ", op, " covers \"", name,
                    "\", which is neither a function of core/ops.h nor an entry of core/op_table.h");
      covered.insert(name);
    }
    // Each entry has golden samples (PyTorch answers them) or a check of its own.
    bool golden = false, fixture = false;
    for (const ref::OpSample& s : e.samples) {
      golden = golden || is_golden(s);
      fixture = fixture || s.use == ref::SampleUse::fixture;
    }
    CHECK_MESSAGE((golden || own_checks().count(op)), "registry entry ", op,
                  " has no golden sample (ref/op_registry.cpp) and no check of its own here");
    // The fixtures pack takes an op of the reference kind from its fixture samples.
    CHECK_MESSAGE(fixture == e.in_ref_kind, "registry entry ", op,
                  (e.in_ref_kind ? " is an op of the reference kind without a fixture sample"
                                 : " has a fixture sample but is no op of the reference kind"));
  }
  for (const std::string& f : functions)
    CHECK_MESSAGE(covered.count(f), "core/ops.h declares ", f,
                  ", which no entry of the op registry (ref/op_registry.cpp) covers");
  for (const std::string& t : table) {
    const std::string forward = t.size() > 9 && t.ends_with("_backward") ? t.substr(0, t.size() - 9) : t;
    CHECK_MESSAGE(covered.count(forward), "core/op_table.h lists ", t, ", which no entry of the op registry covers");
  }
  for (const auto& [name, check] : own_checks())
    CHECK_MESSAGE(ref::find_op_entry(name) != nullptr, "own check of ", name, ", which is no registry entry");
}

TEST_CASE("ops: the entries with checks of their own pass them") {
  for (const auto& [name, check] : own_checks()) {
    CAPTURE(name);
    check();
  }
}

TEST_CASE("ops: every sample gives the cpu's bits on sim") {
  CHECK(check_on_device(Device::sim(), true) == count_samples());
}

TEST_CASE("ops: every sample matches the cpu on cuda") {
  GPU_CASE();
  CHECK(check_on_device(Device::cuda(), false) == count_samples());
}

TEST_CASE("ops: float64 gradcheck of every golden sample with a gradient") {
  int checked = 0;
  for_each_sample([&](const ref::OpEntry& op, const ref::OpSample& sample) {
    if (is_golden(sample) && check_gradcheck(op, sample)) ++checked;
  });
  CHECK(checked > 0);
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
