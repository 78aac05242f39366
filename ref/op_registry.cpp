#include "ref/op_registry.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/ops.h"
#include "serialize/checksum.h"
#include "serialize/json_document.h"

namespace lathe::ref {

// ---------------------------------------------------------------- arguments

int64_t OpArgs::integer(const char* name) const {
  LATHE_CHECK(given(name), kOpCase, "op \"", op_, "\" needs the argument \"", name, "\" (an integer)");
  return integer_value(name);
}

int64_t OpArgs::integer(const char* name, int64_t fallback) const {
  return given(name) ? integer_value(name) : fallback;
}

double OpArgs::number(const char* name) const {
  LATHE_CHECK(given(name), kOpCase, "op \"", op_, "\" needs the argument \"", name, "\" (a number)");
  return *optional_number(name);
}

std::optional<double> OpArgs::optional_number(const char* name) const {
  if (!given(name)) return std::nullopt;
  LATHE_CHECK(args_[name].is_number(), kOpCase, "op \"", op_, "\": argument \"", name, "\" must be a number, got ",
              serialize::quote_json(args_[name]));
  return args_[name].get<double>();
}

bool OpArgs::flag(const char* name, bool fallback) const {
  if (!given(name)) return fallback;
  LATHE_CHECK(args_[name].is_boolean(), kOpCase, "op \"", op_, "\": argument \"", name, "\" must be true or false, got ",
              serialize::quote_json(args_[name]));
  return args_[name].get<bool>();
}

std::vector<int64_t> OpArgs::dims(const char* name) const {
  if (!given(name)) return {};
  const nlohmann::json& v = args_[name];
  if (v.is_number_integer()) return {v.get<int64_t>()};
  LATHE_CHECK(v.is_array() && !v.empty(), kOpCase, "op \"", op_, "\": argument \"", name,
              "\" must be an integer, a non-empty list of integers or null, got ", serialize::quote_json(v));
  std::vector<int64_t> out;
  for (const auto& d : v) {
    LATHE_CHECK(d.is_number_integer(), kOpCase, "op \"", op_, "\": argument \"", name, "\" lists ", serialize::quote_json(d),
                ", which is not an integer");
    out.push_back(d.get<int64_t>());
  }
  return out;
}

std::string OpArgs::choice(const char* name, const std::vector<std::string>& allowed,
                           const std::string& fallback) const {
  if (!given(name)) return fallback;
  const nlohmann::json& v = args_[name];
  for (const std::string& a : allowed)
    if (v == a) return a;
  std::string list;
  for (const std::string& a : allowed) list += (list.empty() ? "\"" : ", \"") + a + "\"";
  LATHE_FAIL(kOpCase, "op \"", op_, "\": argument \"", name, "\" must be one of ", list, ", got ", serialize::quote_json(v));
}

int64_t OpArgs::integer_value(const char* name) const {
  LATHE_CHECK(args_[name].is_number_integer(), kOpCase, "op \"", op_, "\": argument \"", name, "\" must be an integer, got ",
              serialize::quote_json(args_[name]));
  return args_[name].get<int64_t>();
}

OpArgs read_op_args(const OpEntry& op, const nlohmann::json& args) {
  LATHE_CHECK(args.is_object(), kOpCase, "\"args\" must be an object, got ", serialize::quote_json(args));
  for (const auto& [key, value] : args.items()) {
    bool known = false;
    std::string list;
    for (const char* a : op.args) {
      known = known || key == a;
      list += std::string(list.empty() ? "" : ", ") + a;
    }
    LATHE_CHECK(known, kOpCase, "op \"", op.name, "\" has no argument \"", key, "\" (",
                list.empty() ? std::string("it takes none") : "it takes " + list, ")");
  }
  return OpArgs(op.name, args);
}

// ---------------------------------------------------------------- inputs

Tensor Draw::uniform(const Shape& shape, double lo, double hi) {
  std::vector<double> v(size_t(numel_of(shape)));
  // One rounding, written out: a compiler may fuse lo + (hi - lo) u into an FMA or not (GCC does at
  // -O2 and up where the target has FMA), and a sample's draws must be the same bits in every build,
  // since the tests compare them with the bundle PyTorch answered.
  for (double& x : v) x = std::fma(hi - lo, double(gen_.next_uniform()), lo);
  return Tensor::from_vector(v, shape);
}

Tensor Draw::ids(const Shape& shape, int64_t high) {
  std::vector<int64_t> v(size_t(numel_of(shape)));
  for (int64_t& x : v) x = int64_t(gen_.next_below(uint64_t(high)));
  return Tensor::from_vector(v, shape);
}

Tensor Draw::mask(const Shape& shape) { return lt(uniform(shape, 0.0, 1.0), Tensor::zeros(shape, DType::f64) + 0.5); }

namespace {

// ---------------------------------------------------------------- result sizes

int64_t broadcast_elements(const Operands& x) {
  Shape s;
  for (const Tensor& t : x) s = broadcast_shapes(s, t.shape(), "broadcast");
  return numel_of(s);
}

int64_t matmul_elements(const Operands& x) {
  const Tensor &a = x[0], &b = x[1];
  if (a.dim() == 0 || b.dim() == 0) return 1;  // matmul itself refuses 0-d operands
  const int64_t m = a.dim() >= 2 ? a.shape()[size_t(a.dim() - 2)] : 1;
  const int64_t n = b.dim() >= 2 ? b.shape().back() : 1;
  Shape batch_a(a.shape().begin(), a.shape().end() - std::min<int64_t>(a.dim(), 2));
  Shape batch_b(b.shape().begin(), b.shape().end() - std::min<int64_t>(b.dim(), 2));
  return numel_of(broadcast_shapes(batch_a, batch_b, "matmul")) * m * n;
}

int64_t embedding_elements(const Operands& x) { return x[0].numel() * (x[1].dim() == 2 ? x[1].shape()[1] : 1); }

int64_t index_select_elements(const Operands& x) {
  const Tensor& t = x[0];
  int64_t rest = 1;  // the operand's elements per index along any one dim, at most
  for (int64_t d : t.shape()) rest = std::max(rest, d == 0 ? int64_t(0) : t.numel() / d);
  return rest * std::max<int64_t>(x[1].numel(), 1);
}

// ---------------------------------------------------------------- samples

using D = Draw&;
using Json = nlohmann::json;
using Inputs = std::function<Operands(Draw&)>;
const Json kNone = Json::object();

OpSample fixture(std::string label, Json args, Inputs f) {
  return {std::move(label), std::move(args), std::move(f), SampleUse::fixture};
}
OpSample golden(std::string label, Json args, Inputs f) {
  return {std::move(label), std::move(args), std::move(f), SampleUse::golden};
}
OpSample sweep(Json args, Inputs f) { return {"", std::move(args), std::move(f), SampleUse::sweep}; }
// A golden sample whose inputs sit on kinks or ties.
OpSample at_kinks(std::string label, Json args, Inputs f) {
  OpSample s = golden(std::move(label), std::move(args), std::move(f));
  s.kinks = true;
  return s;
}
// A golden sample whose floating operands are held non-contiguously.
OpSample strided_sample(Json args, Inputs f, std::string label = "strided") {
  OpSample s = golden(std::move(label), std::move(args), std::move(f));
  s.strided = true;
  return s;
}

std::vector<OpSample> operator+(std::vector<OpSample> a, const std::vector<OpSample>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// Fixed values that pin an op's behaviour at its kinks: 0 (relu, abs), and the bounds of the
// clamp samples (-0.5, 0.5, -0.3, 0.25); the rest of `shape` uniform in [-2, 2].
Tensor with_kinks(D d, const Shape& shape) {
  std::vector<double> v = d.uniform(shape).to_vector<double>();
  const std::vector<double> kinks = {0.0, -0.5, 0.5, -0.3, 0.25, 0.0};
  for (size_t i = 0; i < kinks.size() && i < v.size(); ++i) v[i] = kinks[i];
  return Tensor::from_vector(v, shape);
}

// One operand of `shape` holding the kinks (with_kinks).
Inputs kinked(Shape shape) {
  return [=](D d) { return Operands{with_kinks(d, shape)}; };
}

Tensor f64s(const std::vector<double>& v, const Shape& shape) { return Tensor::from_vector(v, shape); }
Tensor i64s(const std::vector<int64_t>& v, const Shape& shape) { return Tensor::from_vector(v, shape); }

// Beyond an op's golden samples, the shapes every backend is compared on: one element, a length
// that is no multiple of a vector or a warp, and a 2-D tensor wider than a CUDA block of 256 threads.
const std::vector<Shape> kSweepShapes = {{1}, {1031}, {5, 263}};

// A unary op: its fixture on [3, 4], a [4, 3] one held strided, then the sweep; inputs in [lo, hi].
std::vector<OpSample> unary(double lo = -2, double hi = 2, const Json& args = kNone) {
  std::vector<OpSample> out = {fixture("", args, [=](D d) { return Operands{d.uniform({3, 4}, lo, hi)}; }),
                               strided_sample(args, [=](D d) { return Operands{d.uniform({4, 3}, lo, hi)}; })};
  for (const Shape& s : kSweepShapes) out.push_back(sweep(args, [=](D d) { return Operands{d.uniform(s, lo, hi)}; }));
  return out;
}

// A unary op with a kink at 0: its samples, and one whose inputs hold exact zeros.
std::vector<OpSample> unary_with_kink() {
  return unary() + std::vector<OpSample>{at_kinks("kinks", kNone, kinked({3, 5}))};
}

// A binary op of PyTorch (add, sub, mul, div, pow): its fixture on two shapes, a broadcast of
// both, the operands strided, the number form (PyTorch's `scalar_arg` for the second operand,
// `scalar`), then the sweep. The second operand is drawn in [lo_b, hi_b], the first in [lo_a, hi_a].
struct BinaryRanges {
  double lo_a = -2, hi_a = 2, lo_b = -2, hi_b = 2;
};
std::vector<OpSample> binary(Shape a, Shape b, const char* scalar_arg, double scalar, BinaryRanges r = {}) {
  auto two = [=](Shape sa, Shape sb) {
    return [=](D d) { return Operands{d.uniform(sa, r.lo_a, r.hi_a), d.uniform(sb, r.lo_b, r.hi_b)}; };
  };
  std::vector<OpSample> out = {fixture("", kNone, two(a, b)), golden("bcast", kNone, two({2, 3, 4}, {3, 1})),
                               golden("zero_dim", kNone, two({3, 4}, {})),
                               strided_sample(kNone, two({4, 3}, {4, 3})),
                               golden("scalar", {{scalar_arg, scalar}},
                                      [=](D d) { return Operands{d.uniform({3, 4}, r.lo_a, r.hi_a)}; })};
  for (const Shape& s : kSweepShapes) out.push_back(sweep(kNone, two(s, s)));
  out.push_back(sweep(kNone, two({17, 1, 33}, {9, 1})));
  return out;
}

// maximum and minimum: a binary op without the number form, and operands that tie (the gradient
// is shared evenly between them).
std::vector<OpSample> extremum(Shape a, Shape b) {
  auto two = [=](Shape sa, Shape sb) { return [=](D d) { return Operands{d.uniform(sa), d.uniform(sb)}; }; };
  std::vector<OpSample> out = {
      fixture("", kNone, two(a, b)), golden("bcast", kNone, two({2, 3, 4}, {4})),
      at_kinks("ties", kNone, [](D) { return Operands{f64s({1, 2, 3, 4, -1}, {5}), f64s({1, 3, 3, 0, -1}, {5})}; })};
  for (const Shape& s : kSweepShapes) out.push_back(sweep(kNone, two(s, s)));
  return out;
}

// A comparison: operands drawn from a few integers (as f64), so that many pairs tie.
std::vector<OpSample> comparison() {
  auto few = [](D d, const Shape& s) { return d.ids(s, 4).to(DType::f64); };
  return {golden("", kNone, [=](D d) { return Operands{few(d, {3, 4}), few(d, {4})}; }),
          sweep(kNone, [=](D d) { return Operands{few(d, {1031}), few(d, {1031})}; }),
          sweep(kNone, [=](D d) { return Operands{few(d, {17, 1, 33}), few(d, {9, 1})}; })};
}

// A reduction's sweep: a 3-D tensor and one whose rows span several CUDA blocks, for each of
// `args`; inputs in [lo, hi].
std::vector<OpSample> reduction_sweep(std::vector<Json> args, double lo = -2, double hi = 2) {
  std::vector<OpSample> out;
  for (const Json& a : args) {
    out.push_back(sweep(a, [=](D d) { return Operands{d.uniform({4, 5, 6}, lo, hi)}; }));
    out.push_back(sweep(a, [=](D d) { return Operands{d.uniform({3, 700, 2}, lo, hi)}; }));
  }
  return out;
}

// One uniform operand of `shape` in [lo, hi].
Inputs one(Shape shape, double lo = -2, double hi = 2) {
  return [=](D d) { return Operands{d.uniform(shape, lo, hi)}; };
}

// A classifier's logits of `shape` [N, C] in [-3, 3] and its N targets.
Inputs class_scores(Shape shape, std::vector<int64_t> targets) {
  return [=](D d) { return Operands{d.uniform(shape, -3, 3), i64s(targets, {int64_t(targets.size())})}; };
}

// Causal attention's q, k, v [B, H, T, hs]; k and v hold Tk >= T positions (a KV cache's keys
// before the queries) when given.
Inputs qkv(int64_t B, int64_t H, int64_t T, int64_t hs, int64_t Tk = 0) {
  return [=](D d) {
    const int64_t keys = Tk ? Tk : T;
    return Operands{d.uniform({B, H, T, hs}), d.uniform({B, H, keys, hs}), d.uniform({B, H, keys, hs})};
  };
}

// x [B, H, T, hs] and the angle tables cos, sin [T, hs / 2]: any values are a fair test of the
// rotation's arithmetic.
Inputs rope_inputs(int64_t B, int64_t H, int64_t T, int64_t hs) {
  return [=](D d) {
    return Operands{d.uniform({B, H, T, hs}), d.uniform({T, hs / 2}, -1, 1), d.uniform({T, hs / 2}, -1, 1)};
  };
}

// One Adam step's param, grad, exp_avg, exp_avg_sq of `shape` (exp_avg_sq positive).
Operands adam_operands(D d, const Shape& shape) {
  return {d.uniform(shape), d.uniform(shape), d.uniform(shape, -0.1, 0.1), d.uniform(shape, 0.0, 0.1)};
}

// Several parameters' Adam operands, one after another.
Inputs adam_operands_of(std::vector<Shape> shapes) {
  return [=](D d) {
    Operands out;
    for (const Shape& s : shapes) {
      Operands one = adam_operands(d, s);
      out.insert(out.end(), one.begin(), one.end());
    }
    return out;
  };
}

// ---------------------------------------------------------------- calls

// Whether a binary op of PyTorch runs in its number form: one operand and the argument `name`
// standing for the second (torch.add(x, other=2.5)), rather than two operands.
bool number_form(const Operands& x, const OpArgs& a, const char* name) {
  if (x.size() == 1) {
    LATHE_CHECK(a.given(name), kOpCase, "op \"", a.op(), "\" takes input.1 or the argument \"", name,
                "\" (a number); the case has neither");
    return true;
  }
  LATHE_CHECK(!a.given(name), kOpCase, "op \"", a.op(), "\": the argument \"", name,
              "\" stands for input.1; give one of them, not both");
  return false;
}

// An optional operand (layer_norm's weight and bias): the k-th, or undefined when absent.
Tensor optional_operand(const Operands& x, size_t k) { return k < x.size() ? x[k] : Tensor(); }

AdamParams adam_params(const OpArgs& a) {
  AdamParams p;
  p.lr = a.optional_number("lr").value_or(1e-3);
  p.weight_decay = a.optional_number("weight_decay").value_or(0.0);
  p.decoupled_weight_decay = a.flag("decoupled_weight_decay", false);
  return p;
}

Tensor flat_cat(const std::vector<Tensor>& pieces) {
  std::vector<Tensor> flat;
  for (const Tensor& p : pieces) flat.push_back(p.reshape({-1}));
  return cat(flat);
}

constexpr OpTolerance kExact{1e-6, 1e-6};        // plain f32 arithmetic
constexpr OpTolerance kTranscend{1e-5, 1e-6};    // ops built on exp, log, tanh, pow
constexpr OpTolerance kSums{1e-5, 1e-5};         // long sums, whose order differs by backend

// What the helpers above leave open: each unlabelled sweep sample gets a label of its own ("sweep1",
// "sweep2", ...), and the fixture samples of an op outside the reference kind (the helpers' first
// samples) are golden ones, since only the kind's ops have cases in the fixtures pack.
std::vector<OpEntry> finish(std::vector<OpEntry> entries) {
  for (OpEntry& e : entries) {
    int n = 0;
    for (OpSample& s : e.samples) {
      if (s.use == SampleUse::sweep && s.label.empty()) s.label = "sweep" + std::to_string(++n);
      if (s.use == SampleUse::fixture && !e.in_ref_kind) s.use = SampleUse::golden;
    }
  }
  return entries;
}

}  // namespace

std::string sample_name(const OpEntry& op, const OpSample& sample) {
  return sample.label.empty() ? std::string(op.name) : std::string(op.name) + "." + sample.label;
}

Draw sample_draw(const OpEntry& op, const OpSample& sample) {
  const std::string name = sample_name(op, sample);
  return Draw(serialize::checksum_bytes(name.data(), name.size()));
}

Operands draw_sample(const OpEntry& op, const OpSample& sample) {
  Draw draw = sample_draw(op, sample);
  return sample.inputs(draw);
}

std::vector<DType> sample_dtypes(const OpEntry& op, const OpSample& sample) {
  bool floating = false;
  for (const Tensor& t : draw_sample(op, sample)) floating = floating || is_floating(t.dtype());
  if (op.in_ref_kind && floating) return {DType::f32, DType::f64, DType::bf16, DType::f16};
  return {DType::f32};
}

Tensor strided(const Tensor& t) {
  const int64_t d = t.dim();
  auto held_swapped = [&](int64_t a, int64_t b) { return t.transpose(a, b).contiguous().transpose(a, b); };
  if (d >= 3) return held_swapped(d - 3, d - 2);  // the last dim stays unit-strided, as rope needs
  if (d == 2) return held_swapped(0, 1);
  if (d == 1) return stack({t, t}, 1).select(1, 0);
  return t;
}

// Every op, one entry each. The fixtures pack takes the ops of the reference kind in this order.
const std::vector<OpEntry>& op_registry() {
  using A = const OpArgs&;
  using X = const Operands&;
  static const std::vector<OpEntry> entries = finish({
      {"add", true, {"add"}, Arity{1, 2}, {"other"},
       [](X x, A a) { return number_form(x, a, "other") ? add(x[0], a.number("other")) : add(x[0], x[1]); },
       binary({3, 4}, {4}, "other", 2.5), kExact, broadcast_elements},
      {"sub", true, {"sub"}, Arity{1, 2}, {"other"},
       [](X x, A a) { return number_form(x, a, "other") ? sub(x[0], a.number("other")) : sub(x[0], x[1]); },
       binary({3, 1}, {1, 5}, "other", 0.75), kExact, broadcast_elements},
      {"mul", true, {"mul"}, Arity{1, 2}, {"other"},
       [](X x, A a) { return number_form(x, a, "other") ? mul(x[0], a.number("other")) : mul(x[0], x[1]); },
       binary({2, 3, 4}, {3, 4}, "other", -1.5) +
           std::vector<OpSample>{golden("outer", kNone, [](D d) { return Operands{d.uniform({4, 1}), d.uniform({3})}; })},
       kExact, broadcast_elements},
      // True division, for integers too (PyTorch's `/`): the result is f32.
      {"div", true, {"div"}, Arity{1, 2}, {"other"},
       [](X x, A a) { return number_form(x, a, "other") ? div(x[0], a.number("other")) : div(x[0], x[1]); },
       binary({3, 4}, {3, 4}, "other", 3.0, {.lo_b = 0.5, .hi_b = 2.0}) +
           std::vector<OpSample>{golden("integers", kNone, [](D) {
             return Operands{i64s({7, -7, 9, 0, 5}, {5}), i64s({2, 2, -4, 3, 5}, {5})};
           })},
       kExact, broadcast_elements},
      {"pow", true, {"pow", "pow_scalar"}, Arity{1, 2}, {"exponent"},
       [](X x, A a) { return number_form(x, a, "exponent") ? pow(x[0], a.number("exponent")) : pow(x[0], x[1]); },
       binary({3, 4}, {3, 4}, "exponent", 2.5, {.lo_a = 0.5, .hi_a = 2.0, .lo_b = -1.5, .hi_b = 1.5}) +
           std::vector<OpSample>{golden("scalar_neg", {{"exponent", -0.5}}, one({3, 4}, 0.5, 2.0)),
                                 golden("scalar_int", {{"exponent", 3.0}}, one({3, 4}))},
       kTranscend, broadcast_elements},
      {"maximum", true, {"maximum"}, 2, {}, [](X x, A) { return maximum(x[0], x[1]); }, extremum({3, 4}, {3, 4}), kExact,
       broadcast_elements},
      {"minimum", true, {"minimum"}, 2, {}, [](X x, A) { return minimum(x[0], x[1]); }, extremum({3, 4}, {4}), kExact,
       broadcast_elements},
      {"neg", true, {"neg"}, 1, {}, [](X x, A) { return neg(x[0]); }, unary(), kExact},
      {"exp", true, {"exp"}, 1, {}, [](X x, A) { return exp(x[0]); }, unary(), kTranscend},
      {"log", true, {"log"}, 1, {}, [](X x, A) { return log(x[0]); }, unary(0.1, 3.0), kTranscend},
      {"sqrt", true, {"sqrt"}, 1, {}, [](X x, A) { return sqrt(x[0]); }, unary(0.1, 3.0), kExact},
      {"rsqrt", true, {"rsqrt"}, 1, {}, [](X x, A) { return rsqrt(x[0]); }, unary(0.1, 3.0), kTranscend},
      {"tanh", true, {"tanh"}, 1, {}, [](X x, A) { return tanh(x[0]); }, unary(), kTranscend},
      {"relu", true, {"relu"}, 1, {}, [](X x, A) { return relu(x[0]); }, unary_with_kink(), kExact},
      {"sigmoid", true, {"sigmoid"}, 1, {}, [](X x, A) { return sigmoid(x[0]); }, unary(-6, 6), kTranscend},
      {"abs", true, {"abs", "sign"}, 1, {}, [](X x, A) { return abs(x[0]); }, unary_with_kink(), kExact},
      {"square", true, {"square"}, 1, {}, [](X x, A) { return square(x[0]); }, unary(), kExact},
      {"silu", true, {"silu"}, 1, {}, [](X x, A) { return silu(x[0]); }, unary(-6, 6), kTranscend},
      // Far out, where exp(-|x|) is far below 1.
      {"log_sigmoid", true, {"log_sigmoid"}, 1, {}, [](X x, A) { return log_sigmoid(x[0]); }, unary(-8, 8), kTranscend},
      {"gelu", true, {"gelu", "gelu_erf"}, 1, {"approximate"},
       [](X x, A a) {
         return a.choice("approximate", {"none", "tanh"}, "none") == "tanh" ? gelu(x[0]) : gelu_erf(x[0]);
       },
       unary(-4, 4) + std::vector<OpSample>{fixture("tanh", {{"approximate", "tanh"}}, one({3, 4}, -4, 4)),
                                            strided_sample({{"approximate", "tanh"}}, one({3, 8}, -4, 4),
                                                           "tanh_strided")},
       kTranscend},
      {"clamp", true, {"clamp"}, 1, {"min", "max"},
       [](X x, A a) {
         LATHE_CHECK(a.given("min") || a.given("max"), kOpCase, "op \"clamp\" needs \"min\" or \"max\" (or both)");
         return clamp(x[0], a.optional_number("min"), a.optional_number("max"));
       },
       unary(-2, 2, {{"min", -0.5}, {"max", 1.0}}) +
           std::vector<OpSample>{at_kinks("kinks", {{"min", -0.5}, {"max", 0.5}}, kinked({3, 5})),
                                 at_kinks("min", {{"min", -0.3}}, kinked({3, 5})),
                                 at_kinks("max", {{"min", nullptr}, {"max", 0.25}}, kinked({3, 5})),
                                 sweep({{"max", 0.25}}, one({1031}))},
       kExact},
      {"where", true, {"where"}, 3, {}, [](X x, A) { return where(x[0], x[1], x[2]); },
       {fixture("", kNone, [](D d) { return Operands{d.mask({3, 4}), d.uniform({3, 4}), d.uniform({4})}; }),
        golden("bcast", kNone, [](D d) { return Operands{d.mask({3, 1}), d.uniform({3, 4}), d.uniform({4})}; }),
        golden("bcast_condition", kNone, [](D d) { return Operands{d.mask({4}), d.uniform({3, 4}), d.uniform({3, 1})}; }),
        sweep(kNone, [](D d) { return Operands{d.mask({5, 263}), d.uniform({5, 263}), d.uniform({263})}; })},
       kExact, broadcast_elements},
      {"masked_fill", true, {"masked_fill"}, 2, {"value"},
       [](X x, A a) { return masked_fill(x[0], x[1], a.number("value")); },
       {fixture("", {{"value", -1.5}}, [](D d) { return Operands{d.uniform({3, 4}), d.mask({4})}; }),
        golden("full_mask", {{"value", 2.5}}, [](D d) { return Operands{d.uniform({2, 3}), d.mask({2, 3})}; }),
        sweep({{"value", 2.0}}, [](D d) { return Operands{d.uniform({5, 263}), d.mask({5, 263})}; })},
       kExact, broadcast_elements},
      {"sum", true, {"sum"}, 1, {"dim", "keepdim"},
       [](X x, A a) { return sum(x[0], a.dims("dim"), a.flag("keepdim", false)); },
       std::vector<OpSample>{fixture("", {{"dim", {1}}, {"keepdim", true}}, one({3, 4, 5})),
                             golden("all", kNone, one({3, 4, 5})), golden("all_null", {{"dim", nullptr}}, one({3, 4})),
                             golden("d02", {{"dim", {0, 2}}}, one({3, 4, 5})),
                             golden("dlast", {{"dim", -1}}, one({3, 4, 5})), golden("d0", {{"dim", 0}}, one({3, 4})),
                             golden("dims_negative", {{"dim", {-1, 0}}}, one({2, 3, 4})),
                             strided_sample({{"dim", {0}}}, one({3, 4, 5}))} +
           reduction_sweep({kNone, {{"dim", {0, 2}}}, {{"dim", -2}}}),
       kSums},
      {"mean", true, {"mean"}, 1, {"dim", "keepdim"},
       [](X x, A a) { return mean(x[0], a.dims("dim"), a.flag("keepdim", false)); },
       std::vector<OpSample>{fixture("", {{"dim", {0, 2}}}, one({3, 4, 5})), golden("all", kNone, one({3, 4, 5})),
                             golden("d1", {{"dim", 1}}, one({3, 4, 5})),
                             golden("dlast_keep", {{"dim", -1}, {"keepdim", true}}, one({2, 3, 4}))} +
           reduction_sweep({kNone, {{"dim", 1}, {"keepdim", true}}}),
       kSums},
      {"var", true, {"var"}, 1, {"dim", "keepdim", "correction"},
       [](X x, A a) { return var(x[0], a.dims("dim"), a.flag("keepdim", false), a.integer("correction", 1)); },
       std::vector<OpSample>{fixture("", {{"dim", {1}}, {"correction", 1}}, one({3, 6})),
                             golden("all", kNone, one({3, 4, 5})),
                             golden("all_c0", {{"dim", nullptr}, {"correction", 0}}, one({4, 5})),
                             golden("d02_c0_keep", {{"dim", {0, 2}}, {"correction", 0}, {"keepdim", true}},
                                    one({3, 4, 5})),
                             golden("d01_keep", {{"dim", {0, 1}}, {"keepdim", true}}, one({3, 4, 2}))} +
           reduction_sweep({kNone, {{"dim", {0, 2}}, {"correction", 0}}}),
       kSums},
      {"max", true, {"max"}, 1, {"dim", "keepdim"},
       [](X x, A a) {
         if (a.given("dim")) return max(x[0], a.integer("dim"), a.flag("keepdim", false));
         LATHE_CHECK(!a.given("keepdim"), kOpCase, "op \"max\": \"keepdim\" needs a \"dim\" (max over everything has none)");
         return max(x[0]);
       },
       // Ties: max over a dim returns (and backpropagates to) the first maximum; the full max
       // shares the gradient evenly between the tied elements.
       std::vector<OpSample>{fixture("", {{"dim", 1}, {"keepdim", true}}, one({3, 5})),
                             golden("all", kNone, one({3, 4, 5})),
                             golden("dlast", {{"dim", -1}}, one({2, 3, 5})),
                             at_kinks("ties", {{"dim", 1}}, [](D) { return Operands{f64s({1, 3, 3, 2, 2, 1}, {2, 3})}; }),
                             at_kinks("all_ties", kNone, [](D) { return Operands{f64s({1, 3, 3, 2, 2, 1}, {2, 3})}; })} +
           reduction_sweep({kNone, {{"dim", 1}}}),
       kExact},
      {"matmul", true, {"matmul"}, 2, {}, [](X x, A) { return matmul(x[0], x[1]); },
       {fixture("", kNone, [](D d) { return Operands{d.uniform({2, 3, 8}), d.uniform({8, 5})}; }),
        golden("bcast", kNone, [](D d) { return Operands{d.uniform({2, 1, 3, 4}), d.uniform({5, 4, 2})}; }),
        // A linear layer's x @ W^T, W held (out, in): the second operand a transposed view.
        strided_sample(kNone, [](D d) { return Operands{d.uniform({2, 3, 20}), d.uniform({20, 17})}; }),
        golden("vector_left", kNone, [](D d) { return Operands{d.uniform({4}), d.uniform({2, 4, 3})}; }),
        golden("vector_right", kNone, [](D d) { return Operands{d.uniform({4, 5}), d.uniform({5})}; }),
        golden("dot", kNone, [](D d) { return Operands{d.uniform({6}), d.uniform({6})}; }),
        sweep(kNone, [](D d) { return Operands{d.uniform({67, 129}), d.uniform({129, 33})}; }),
        sweep(kNone, [](D d) { return Operands{d.uniform({3, 1, 5, 16}), d.uniform({2, 16, 7})}; }),
        sweep(kNone, [](D d) { return Operands{d.uniform({40}), d.uniform({40, 9})}; })},
       kSums, matmul_elements},
      // Large logits ("large"): only a max-subtracting implementation stays finite.
      {"softmax", true, {"softmax"}, 1, {"dim"}, [](X x, A a) { return softmax(x[0], a.integer("dim")); },
       std::vector<OpSample>{fixture("", {{"dim", -1}}, one({3, 7}, -4, 4)),
                             golden("d0", {{"dim", 0}}, one({4, 3}, -4, 4)),
                             golden("d1_3d", {{"dim", 1}}, one({2, 5, 3}, -4, 4)),
                             golden("large", {{"dim", -1}}, one({2, 18}, -120, 120))} +
           reduction_sweep({{{"dim", -1}}, {{"dim", 1}}}, -4, 4),
       kTranscend},
      {"log_softmax", true, {"log_softmax"}, 1, {"dim"}, [](X x, A a) { return log_softmax(x[0], a.integer("dim")); },
       std::vector<OpSample>{fixture("", {{"dim", 1}}, one({3, 7}, -4, 4)),
                             golden("dlast_3d", {{"dim", -1}}, one({2, 3, 6}, -4, 4)),
                             golden("large", {{"dim", -1}}, one({4, 35}, -120, 120))} +
           reduction_sweep({{{"dim", -1}}, {{"dim", 0}}}, -4, 4),
       kTranscend},
      // PyTorch's weight and bias are optional (None): input.1 and input.2 may be left out.
      {"layer_norm", true, {"layer_norm"}, Arity{1, 3}, {"eps"},
       [](X x, A a) {
         return layer_norm(x[0], optional_operand(x, 1), optional_operand(x, 2), a.optional_number("eps").value_or(1e-5));
       },
       {fixture("", {{"eps", 1e-5}},
                [](D d) { return Operands{d.uniform({2, 3, 8}), d.uniform({8}, 0.5, 1.5), d.uniform({8}, -0.2, 0.2)}; }),
        golden("wide", kNone, [](D d) { return Operands{d.uniform({3, 40}, -1, 3), d.uniform({40}), d.uniform({40})}; }),
        golden("plain", kNone, one({4, 6})),
        golden("vector", kNone,
               [](D d) { return Operands{d.uniform({6}), d.uniform({6}, 0.5, 1.5), d.uniform({6}, -0.2, 0.2)}; }),
        sweep(kNone,
              [](D d) {
                return Operands{d.uniform({9, 1030}), d.uniform({1030}, 0.5, 1.5), d.uniform({1030}, -0.2, 0.2)};
              })},
       kSums},
      // Repeated ids add up in the weight's gradient.
      {"embedding", true, {"embedding"}, 2, {}, [](X x, A) { return embedding(x[1], x[0]); },
       {fixture("", kNone, [](D d) { return Operands{d.ids({2, 5}, 10), d.uniform({10, 4})}; }),
        golden("repeats", kNone, [](D d) { return Operands{d.ids({9}, 3), d.uniform({3, 5})}; }),
        sweep(kNone, [](D d) { return Operands{d.ids({4, 300}, 7), d.uniform({7, 33})}; })},
       kSums, embedding_elements},
      {"cross_entropy", true, {"cross_entropy"}, 2, {"ignore_index"},
       [](X x, A a) {
         // PyTorch puts the classes at dim 1, lathe last: the two agree for [N, C] and [C].
         LATHE_CHECK(x[0].dim() == 1 || x[0].dim() == 2, kOpCase, "op \"cross_entropy\": logits must be [N, C] or [C], got ",
                     x[0].desc());
         return cross_entropy(x[0], x[1], a.integer("ignore_index", -100));
       },
       {fixture("", {{"ignore_index", 3}}, class_scores({8, 5}, {0, 3, 1, 4, 3, 2, 1, 0})),
        golden("plain", kNone, [](D d) { return Operands{d.uniform({6, 10}, -3, 3), d.ids({6}, 10)}; }),
        golden("vector", kNone, [](D d) { return Operands{d.uniform({9}, -3, 3), i64s({4}, {})}; }),
        golden("i32", kNone, [](D d) { return Operands{d.uniform({5, 7}, -3, 3), d.ids({5}, 7).to(DType::i32)}; }),
        sweep(kNone, [](D d) { return Operands{d.uniform({37, 1030}, -3, 3), d.ids({37}, 1030)}; })},
       kSums},
      // The fused classifier: cross_entropy's mean over every position of [..., C] logits, its
      // gradient written in the forward's pass. The operands stay held here, so it writes that
      // gradient beside the logits, not over them.
      {"fused_cross_entropy", false, {"fused_cross_entropy"}, 2, {"ignore_index"},
       [](X x, A a) { return fused_cross_entropy(x[0], x[1], a.integer("ignore_index", -100)); },
       {golden("", {{"ignore_index", 3}}, class_scores({8, 5}, {0, 3, 1, 4, 3, 2, 1, 0})),
        // rows longer than 16 and no multiple of it, an ignored row
        golden("wide", kNone, [](D d) { return Operands{d.uniform({5, 41}, -6, 6), i64s({40, -100, 7, 0, 7}, {5})}; }),
        golden("3d", {{"ignore_index", -1}},
               [](D d) { return Operands{d.uniform({2, 2, 19}, -4, 4), i64s({18, -1, 0, 3}, {2, 2})}; }),
        sweep(kNone, [](D d) { return Operands{d.uniform({37, 1030}, -3, 3), d.ids({37}, 1030)}; })},
       kSums},
      {"cat", true, {"cat"}, Arity{1, Arity::kAny}, {"dim"}, [](X x, A a) { return cat(x, a.integer("dim", 0)); },
       {fixture("", {{"dim", 1}}, [](D d) { return Operands{d.uniform({2, 3}), d.uniform({2, 1}), d.uniform({2, 4})}; }),
        strided_sample({{"dim", 0}}, [](D d) { return Operands{d.uniform({2, 3}), d.uniform({1, 3})}; }),
        golden("dlast_3d", {{"dim", -1}}, [](D d) { return Operands{d.uniform({2, 2, 3}), d.uniform({2, 2, 2})}; }),
        golden("default_dim", kNone, [](D d) { return Operands{d.uniform({1, 3}), d.uniform({2, 3})}; }),
        sweep({{"dim", 0}}, [](D d) { return Operands{d.uniform({300, 7}), d.uniform({1, 7})}; })},
       kExact},
      {"stack", true, {"stack"}, Arity{1, Arity::kAny}, {"dim"}, [](X x, A a) { return stack(x, a.integer("dim", 0)); },
       {fixture("", {{"dim", 0}}, [](D d) { return Operands{d.uniform({2, 3}), d.uniform({2, 3})}; }),
        golden("d1", {{"dim", 1}}, [](D d) { return Operands{d.uniform({2, 3}), d.uniform({2, 3}), d.uniform({2, 3})}; }),
        golden("dlast", {{"dim", -1}},
               [](D d) { return Operands{d.uniform({2, 3}), d.uniform({2, 3}), d.uniform({2, 3})}; }),
        sweep({{"dim", 2}}, [](D d) { return Operands{d.uniform({5, 263}), d.uniform({5, 263})}; })},
       kExact},
      // Repeated indices add up in the backward.
      {"index_select", true, {"index_select"}, 2, {"dim"},
       [](X x, A a) { return index_select(x[0], a.integer("dim"), x[1]); },
       {fixture("", {{"dim", 0}}, [](D d) { return Operands{d.uniform({5, 3}), i64s({4, 0, 4, 2}, {4})}; }),
        golden("d1", {{"dim", 1}}, [](D d) { return Operands{d.uniform({3, 5}), i64s({4, 0, 4, 2}, {4})}; }),
        golden("3d", {{"dim", 1}}, [](D d) { return Operands{d.uniform({2, 4, 3}), i64s({1, 1, 3, 0, 1}, {5})}; }),
        strided_sample({{"dim", 0}}, [](D d) { return Operands{d.uniform({4, 3}), i64s({2, 0, 2}, {3})}; }),
        sweep({{"dim", 1}}, [](D d) { return Operands{d.uniform({6, 300}), d.ids({500}, 300)}; })},
       kSums, index_select_elements},
      {"gather", true, {"gather"}, 2, {"dim"}, [](X x, A a) { return gather(x[0], a.integer("dim"), x[1]); },
       {fixture("", {{"dim", 1}}, [](D d) { return Operands{d.uniform({3, 4}), d.ids({3, 6}, 4)}; }),
        golden("d0", {{"dim", 0}},
               [](D d) { return Operands{d.uniform({3, 4}), i64s({0, 2, 2, 1, 1, 1, 0, 2}, {2, 4})}; }),
        golden("smaller", {{"dim", 1}},
               [](D d) { return Operands{d.uniform({4, 5}), i64s({4, 4, 0, 1, 2, 3}, {2, 3})}; }),
        golden("3d", {{"dim", 2}}, [](D d) { return Operands{d.uniform({2, 3, 4}), d.ids({2, 3, 6}, 4)}; }),
        strided_sample({{"dim", 0}}, [](D d) { return Operands{d.uniform({4, 3}), i64s({3, 0, 1, 3, 3, 2}, {2, 3})}; }),
        sweep({{"dim", 0}}, [](D d) { return Operands{d.uniform({9, 300}), d.ids({700, 300}, 9)}; })},
       kSums},
      // torch.nn.functional.scaled_dot_product_attention on [B, H, T, hs]: lathe has the causal one.
      {"scaled_dot_product_attention", true, {"causal_attention"}, 3, {"is_causal", "scale"},
       [](X x, A a) {
         LATHE_CHECK(a.flag("is_causal", false), kOpCase,
                     "op \"scaled_dot_product_attention\": lathe computes the causal one; give \"is_causal\": true");
         LATHE_CHECK(x[0].dim() == 4, kOpCase, "op \"scaled_dot_product_attention\": input.0 ", x[0].desc(),
                     " must be [B, H, T, head_size]");
         // torch's is_causal aligns a longer k and v with q's first position, lathe's causal_attention
         // with its last (the queries after a KV cache): only equal lengths mean the same thing.
         LATHE_CHECK(x[1].shape() == x[0].shape() && x[2].shape() == x[0].shape(), kOpCase,
                     "op \"scaled_dot_product_attention\": input.1 ", x[1].desc(), " and input.2 ", x[2].desc(),
                     " must have input.0's shape ", x[0].desc());
         const double scale = a.optional_number("scale").value_or(1.0 / std::sqrt(double(x[0].size(3))));
         return causal_attention(x[0], x[1], x[2], scale);
       },
       // T = 70: two of lathe's 64-query blocks, the second cut short.
       {fixture("", {{"is_causal", true}}, qkv(2, 2, 5, 8)),
        golden("scale", {{"is_causal", true}, {"scale", 0.5}}, qkv(1, 2, 5, 4)),
        golden("b1h1t1d8", {{"is_causal", true}}, qkv(1, 1, 1, 8)),
        golden("b1h2t70d8", {{"is_causal", true}}, qkv(1, 2, 70, 8)),
        golden("b2h1t20d32", {{"is_causal", true}}, qkv(2, 1, 20, 32)),
        sweep({{"is_causal", true}, {"scale", 0.2}}, qkv(1, 2, 70, 16)), sweep({{"is_causal", true}}, qkv(2, 1, 33, 64)),
        sweep({{"is_causal", true}}, qkv(1, 1, 17, 128))},
       kSums},

      // The ops below have no case of the reference kind: PyTorch has no such function (softcap,
      // squared_relu, rope, queries after a KV cache), has it under another form (rms_norm only
      // from PyTorch 2.4, split's tuple, the optimizers' kernels, dropout's generator), or the kind
      // does not take it yet.
      {"eq", false, {"eq"}, 2, {}, [](X x, A) { return eq(x[0], x[1]); }, comparison(), kExact, broadcast_elements},
      {"ne", false, {"ne"}, 2, {}, [](X x, A) { return ne(x[0], x[1]); }, comparison(), kExact, broadcast_elements},
      {"lt", false, {"lt"}, 2, {}, [](X x, A) { return lt(x[0], x[1]); }, comparison(), kExact, broadcast_elements},
      {"le", false, {"le"}, 2, {}, [](X x, A) { return le(x[0], x[1]); }, comparison(), kExact, broadcast_elements},
      {"gt", false, {"gt"}, 2, {}, [](X x, A) { return gt(x[0], x[1]); }, comparison(), kExact, broadcast_elements},
      {"ge", false, {"ge"}, 2, {}, [](X x, A) { return ge(x[0], x[1]); }, comparison(), kExact, broadcast_elements},
      {"squared_relu", false, {"squared_relu"}, 1, {}, [](X x, A) { return squared_relu(x[0]); }, unary_with_kink(),
       kExact},
      // Past the cap, where tanh bends.
      {"softcap", false, {"softcap"}, 1, {"cap"}, [](X x, A a) { return softcap(x[0], a.number("cap")); },
       unary(-6, 6, {{"cap", 2.0}}), kTranscend},
      {"argmax", false, {"argmax"}, 1, {"dim", "keepdim"},
       [](X x, A a) { return argmax(x[0], a.integer("dim"), a.flag("keepdim", false)); },
       std::vector<OpSample>{golden("", {{"dim", 1}}, one({3, 4, 5})),
                             golden("d0_keep", {{"dim", 0}, {"keepdim", true}}, one({3, 4, 5})),
                             golden("ties", {{"dim", 1}}, [](D) { return Operands{f64s({1, 3, 3, 2, 2, 1}, {2, 3})}; })} +
           reduction_sweep({{{"dim", 1}}, {{"dim", 0}, {"keepdim", true}}}),
       kExact},
      // The pieces flattened and joined, so that one tensor holds them.
      {"split", false, {"split"}, 1, {"split_size_or_sections", "dim"},
       [](X x, A a) {
         const int64_t dim = a.integer("dim", 0);
         return flat_cat(a.given("split_size_or_sections") && a.dims("split_size_or_sections").size() > 1
                             ? split(x[0], a.dims("split_size_or_sections"), dim)
                             : split(x[0], a.integer("split_size_or_sections"), dim));
       },
       {golden("", {{"split_size_or_sections", 2}}, one({5, 3})),
        golden("sections", {{"split_size_or_sections", {1, 3, 1}}, {"dim", 1}}, one({2, 5})),
        sweep({{"split_size_or_sections", {100, 3, 160}}, {"dim", 1}}, one({5, 263}))},
       kExact},
      // rms_norm as torch.nn.functional.rms_norm computes it (PyTorch 2.4 on); the weight optional.
      {"rms_norm", false, {"rms_norm"}, Arity{1, 2}, {"eps"},
       [](X x, A a) { return rms_norm(x[0], optional_operand(x, 1), a.optional_number("eps").value_or(1e-5)); },
       {golden("", kNone, [](D d) { return Operands{d.uniform({2, 3, 8}), d.uniform({8}, 0.5, 1.5)}; }),
        golden("wide", {{"eps", 1e-5}}, [](D d) { return Operands{d.uniform({2, 3, 40}, -1, 3), d.uniform({40})}; }),
        golden("plain", kNone, one({4, 6})),
        sweep(kNone, [](D d) { return Operands{d.uniform({9, 1030}), d.uniform({1030}, 0.5, 1.5)}; })},
       kSums},
      // The rotate-half convention (Llama's rotate_half, GPT-NeoX); the tables are constants of
      // the op (no gradient).
      {"rope", false, {"rope"}, 3, {}, [](X x, A) { return rope(x[0], x[1], x[2]); },
       {golden("", kNone, rope_inputs(2, 3, 5, 8)), strided_sample(kNone, rope_inputs(2, 3, 5, 8)),
        sweep(kNone, rope_inputs(1, 2, 70, 64))},
       kTranscend},
      // lathe's causal attention: k and v may be longer than q, the queries coming after a KV
      // cache's keys (query i at position Tk - Tq + i), which PyTorch's is_causal does not mean.
      {"causal_attention", false, {"causal_attention"}, 3, {"scale"},
       [](X x, A a) {
         const double scale = a.optional_number("scale").value_or(1.0 / std::sqrt(double(x[0].size(3))));
         return causal_attention(x[0], x[1], x[2], scale);
       },
       {golden("", kNone, qkv(1, 2, 3, 8, 9)), golden("b2h2q1k13d16", {{"scale", 0.3}}, qkv(2, 2, 1, 16, 13)),
        sweep(kNone, qkv(1, 1, 17, 32, 50))},
       kSums},
      // q, k and v side by side in one [B, T, 3C] tensor.
      {"causal_attention_qkv", false, {"causal_attention_qkv"}, 1, {"n_head", "scale"},
       [](X x, A a) { return causal_attention_qkv(x[0], a.integer("n_head"), a.number("scale")); },
       {golden("", {{"n_head", 2}, {"scale", 0.35}}, one({2, 5, 3 * 16})),
        sweep({{"n_head", 3}, {"scale", 0.125}}, one({1, 70, 3 * 96}))},
       kSums},
      // Inverted dropout with lathe's Philox generator at `seed`: the mask depends on the seed, the
      // generator's offset (0) and the element's index only, so every backend draws the same one.
      // PyTorch has another generator: tests/test_op_cases.cpp checks it by what it means.
      {"dropout", false, {"dropout"}, 1, {"p", "training", "seed"},
       [](X x, A a) {
         Generator gen(uint64_t(a.integer("seed", 0)));
         return dropout(x[0], a.optional_number("p").value_or(0.5), a.flag("training", true), gen);
       },
       {sweep({{"p", 0.25}, {"seed", 7}}, one({3, 4})), sweep({{"p", 0.5}, {"seed", 8}}, one({5, 263}))}, kExact},
      // One Adam step (step `step`) of param, grad, exp_avg, exp_avg_sq, on copies: the updated
      // parameter and moments, flattened and joined. No gradient.
      {"adam_update", false, {"adam_update"}, 4, {"lr", "weight_decay", "decoupled_weight_decay", "step"},
       [](X x, A a) {
         Tensor p = x[0].detach().clone(), m = x[2].detach().clone(), s = x[3].detach().clone();
         adam_update(p, x[1].detach(), m, s, Tensor(), double(a.integer("step", 1)), adam_params(a));
         return flat_cat({p, m, s});
       },
       {golden("", {{"lr", 1e-2}, {"weight_decay", 0.01}, {"step", 3}}, adam_operands_of({{3, 4}})),
        golden("adamw", {{"lr", 1e-2}, {"weight_decay", 0.1}, {"decoupled_weight_decay", true}, {"step", 3}},
               adam_operands_of({{3, 7}})),
        sweep({{"lr", 1e-2}, {"weight_decay", 0.1}, {"decoupled_weight_decay", true}, {"step", 5}},
              adam_operands_of({{5, 263}}))},
       kTranscend},
      // The same step over several parameters at once (each four operands, in adam_update's order),
      // with the step counters on the parameters' device: the parameters, then the exp_avgs, then
      // the exp_avg_sqs, flattened and joined.
      {"adam_update_multi", false, {"adam_update_multi"}, Arity{4, Arity::kAny},
       {"lr", "weight_decay", "decoupled_weight_decay", "step"},
       [](X x, A a) {
         LATHE_CHECK(x.size() % 4 == 0, kOpCase,
                     "op \"adam_update_multi\" takes param, grad, exp_avg, exp_avg_sq per parameter");
         std::vector<Tensor> p, g, m, s, steps;
         for (size_t i = 0; i < x.size(); i += 4) {
           p.push_back(x[i].detach().clone());
           g.push_back(x[i + 1].detach());
           m.push_back(x[i + 2].detach().clone());
           s.push_back(x[i + 3].detach().clone());
           steps.push_back(Tensor::full({1}, double(a.integer("step", 1) - 1), DType::f32, x[i].device()));
         }
         adam_update_multi(p, g, m, s, {}, steps, adam_params(a));
         std::vector<Tensor> out = p;
         out.insert(out.end(), m.begin(), m.end());
         out.insert(out.end(), s.begin(), s.end());
         return flat_cat(out);
       },
       {golden("", {{"lr", 1e-2}, {"weight_decay", 0.01}, {"step", 3}}, adam_operands_of({{3, 4}, {7}})),
        sweep({{"lr", 1e-2}, {"weight_decay", 0.1}, {"decoupled_weight_decay", true}, {"step", 5}},
              adam_operands_of({{5, 263}, {1}}))},
       kTranscend},
  });
  return entries;
}

const OpEntry* find_op_entry(std::string_view name) {
  for (const OpEntry& e : op_registry())
    if (name == e.name) return &e;
  return nullptr;
}

}  // namespace lathe::ref
