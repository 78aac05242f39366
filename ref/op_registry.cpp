#include "ref/op_registry.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/ops.h"
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
  for (double& x : v) x = lo + (hi - lo) * double(gen_.next_uniform());
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

// ---------------------------------------------------------------- sweeps

using D = Draw&;
using Json = nlohmann::json;
const Json kNone = Json::object();

// Beyond an op's first sample, the shapes every backend is compared on: one element, a length that
// is no multiple of a vector or a warp, and a 2-D tensor wider than a CUDA block of 256 threads.
const std::vector<Shape> kSweepShapes = {{1}, {1031}, {5, 263}};

// A unary op: its first sample on [3, 4], then the sweep, inputs in [lo, hi].
std::vector<OpSample> unary(double lo = -2, double hi = 2, const Json& args = kNone) {
  std::vector<OpSample> out = {{"", args, [=](D d) { return Operands{d.uniform({3, 4}, lo, hi)}; }}};
  for (const Shape& s : kSweepShapes)
    out.push_back({"sweep", args, [=](D d) { return Operands{d.uniform(s, lo, hi)}; }, false});
  return out;
}

// A binary op: its first sample (two shapes), then operands of one shape and a broadcast of both.
std::vector<OpSample> binary(Shape a, Shape b, double lo_b = -2, double hi_b = 2) {
  std::vector<OpSample> out = {{"", kNone, [=](D d) { return Operands{d.uniform(a), d.uniform(b, lo_b, hi_b)}; }}};
  for (const Shape& s : kSweepShapes)
    out.push_back({"sweep", kNone, [=](D d) { return Operands{d.uniform(s), d.uniform(s, lo_b, hi_b)}; }, false});
  out.push_back(
      {"sweep", kNone, [=](D d) { return Operands{d.uniform({17, 1, 33}), d.uniform({9, 1}, lo_b, hi_b)}; }, false});
  return out;
}

// A comparison: operands drawn from a few integers (as f64), so that many pairs tie.
std::vector<OpSample> comparison() {
  auto few = [](D d, const Shape& s) { return d.ids(s, 4).to(DType::f64); };
  return {{"", kNone, [=](D d) { return Operands{few(d, {3, 4}), few(d, {4})}; }, false},
          {"sweep", kNone, [=](D d) { return Operands{few(d, {1031}), few(d, {1031})}; }, false},
          {"sweep", kNone, [=](D d) { return Operands{few(d, {17, 1, 33}), few(d, {9, 1})}; }, false}};
}

// The shapes of the reductions' sweep: a 3-D tensor and one whose rows span several CUDA blocks;
// inputs in [lo, hi].
std::vector<OpSample> reduction(const Json& first_args, const Shape& first, std::vector<Json> sweep_args,
                                double lo = -2, double hi = 2) {
  std::vector<OpSample> out = {{"", first_args, [=](D d) { return Operands{d.uniform(first, lo, hi)}; }}};
  for (const Json& a : sweep_args) {
    out.push_back({"sweep", a, [=](D d) { return Operands{d.uniform({4, 5, 6}, lo, hi)}; }, false});
    out.push_back({"sweep", a, [=](D d) { return Operands{d.uniform({3, 700, 2}, lo, hi)}; }, false});
  }
  return out;
}

// Causal attention's q, k, v [B, H, T, hs].
Operands qkv(D d, int64_t B, int64_t H, int64_t T, int64_t hs) {
  return {d.uniform({B, H, T, hs}), d.uniform({B, H, T, hs}), d.uniform({B, H, T, hs})};
}

// One Adam step's param, grad, exp_avg, exp_avg_sq of `shape` (exp_avg_sq positive).
Operands adam_operands(D d, const Shape& shape) {
  return {d.uniform(shape), d.uniform(shape), d.uniform(shape, -0.1, 0.1), d.uniform(shape, 0.0, 0.1)};
}

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

}  // namespace

// Every op, one entry each. The ops of the reference kind come first in the fixtures pack's order
// (a pack's inputs depend on the order of its cases); the others may sit anywhere.
const std::vector<OpEntry>& op_registry() {
  using A = const OpArgs&;
  using X = const Operands&;
  static const std::vector<OpEntry> entries = {
      {"add", true, {"add"}, 2, {}, [](X x, A) { return add(x[0], x[1]); }, binary({3, 4}, {4}), kExact,
       broadcast_elements},
      {"sub", true, {"sub"}, 2, {}, [](X x, A) { return sub(x[0], x[1]); }, binary({3, 1}, {1, 5}), kExact,
       broadcast_elements},
      {"mul", true, {"mul"}, 2, {}, [](X x, A) { return mul(x[0], x[1]); }, binary({2, 3, 4}, {3, 4}), kExact,
       broadcast_elements},
      {"div", true, {"div"}, 2, {}, [](X x, A) { return div(x[0], x[1]); }, binary({3, 4}, {3, 4}, 0.5, 2.0), kExact,
       broadcast_elements},
      {"pow", true, {"pow", "pow_scalar"}, 2, {}, [](X x, A) { return pow(x[0], x[1]); },
       [] {
         std::vector<OpSample> s = {
             {"", kNone, [](D d) { return Operands{d.uniform({3, 4}, 0.5, 2.0), d.uniform({3, 4}, -1.5, 1.5)}; }}};
         s.push_back({"sweep", kNone,
                      [](D d) { return Operands{d.uniform({1031}, 0.5, 2.0), d.uniform({1031}, -1.5, 1.5)}; }, false});
         return s;
       }(),
       kTranscend, broadcast_elements},
      {"maximum", true, {"maximum"}, 2, {}, [](X x, A) { return maximum(x[0], x[1]); }, binary({3, 4}, {3, 4}), kExact,
       broadcast_elements},
      {"minimum", true, {"minimum"}, 2, {}, [](X x, A) { return minimum(x[0], x[1]); }, binary({3, 4}, {4}), kExact,
       broadcast_elements},
      {"neg", true, {"neg"}, 1, {}, [](X x, A) { return neg(x[0]); }, unary(), kExact},
      {"exp", true, {"exp"}, 1, {}, [](X x, A) { return exp(x[0]); }, unary(), kTranscend},
      {"log", true, {"log"}, 1, {}, [](X x, A) { return log(x[0]); }, unary(0.1, 3.0), kTranscend},
      {"sqrt", true, {"sqrt"}, 1, {}, [](X x, A) { return sqrt(x[0]); }, unary(0.1, 3.0), kExact},
      {"rsqrt", true, {"rsqrt"}, 1, {}, [](X x, A) { return rsqrt(x[0]); }, unary(0.1, 3.0), kTranscend},
      {"tanh", true, {"tanh"}, 1, {}, [](X x, A) { return tanh(x[0]); }, unary(), kTranscend},
      {"relu", true, {"relu"}, 1, {}, [](X x, A) { return relu(x[0]); }, unary(), kExact},
      {"sigmoid", true, {"sigmoid"}, 1, {}, [](X x, A) { return sigmoid(x[0]); }, unary(), kTranscend},
      {"abs", true, {"abs", "sign"}, 1, {}, [](X x, A) { return abs(x[0]); }, unary(), kExact},
      {"square", true, {"square"}, 1, {}, [](X x, A) { return square(x[0]); }, unary(), kExact},
      {"silu", true, {"silu"}, 1, {}, [](X x, A) { return silu(x[0]); }, unary(), kTranscend},
      {"log_sigmoid", true, {"log_sigmoid"}, 1, {}, [](X x, A) { return log_sigmoid(x[0]); }, unary(-8, 8), kTranscend},
      {"gelu", true, {"gelu", "gelu_erf"}, 1, {"approximate"},
       [](X x, A a) {
         return a.choice("approximate", {"none", "tanh"}, "none") == "tanh" ? gelu(x[0]) : gelu_erf(x[0]);
       },
       [] {
         std::vector<OpSample> s = unary(-3, 3);
         std::vector<OpSample> t = unary(-3, 3, {{"approximate", "tanh"}});
         t[0].name = "tanh";
         s.insert(s.begin() + 1, t.begin(), t.end());
         return s;
       }(),
       kTranscend},
      {"clamp", true, {"clamp"}, 1, {"min", "max"},
       [](X x, A a) {
         LATHE_CHECK(a.given("min") || a.given("max"), kOpCase, "op \"clamp\" needs \"min\" or \"max\" (or both)");
         return clamp(x[0], a.optional_number("min"), a.optional_number("max"));
       },
       [] {
         std::vector<OpSample> s = unary(-2, 2, {{"min", -0.5}, {"max", 1.0}});
         s.push_back({"sweep", {{"max", 0.25}}, [](D d) { return Operands{d.uniform({1031})}; }, false});
         return s;
       }(),
       kExact},
      {"where", true, {"where"}, 3, {}, [](X x, A) { return where(x[0], x[1], x[2]); },
       {{"", kNone, [](D d) { return Operands{d.mask({3, 4}), d.uniform({3, 4}), d.uniform({4})}; }},
        {"sweep", kNone, [](D d) { return Operands{d.mask({5, 263}), d.uniform({5, 263}), d.uniform({263})}; }, false}},
       kExact, broadcast_elements},
      {"masked_fill", true, {"masked_fill"}, 2, {"value"},
       [](X x, A a) { return masked_fill(x[0], x[1], a.number("value")); },
       {{"", {{"value", -1.5}}, [](D d) { return Operands{d.uniform({3, 4}), d.mask({4})}; }},
        {"sweep", {{"value", 2.0}}, [](D d) { return Operands{d.uniform({5, 263}), d.mask({5, 263})}; }, false}},
       kExact, broadcast_elements},
      {"sum", true, {"sum"}, 1, {"dim", "keepdim"},
       [](X x, A a) { return sum(x[0], a.dims("dim"), a.flag("keepdim", false)); },
       reduction({{"dim", {1}}, {"keepdim", true}}, {3, 4, 5}, {kNone, {{"dim", {0, 2}}}, {{"dim", -2}}}), kSums},
      {"mean", true, {"mean"}, 1, {"dim", "keepdim"},
       [](X x, A a) { return mean(x[0], a.dims("dim"), a.flag("keepdim", false)); },
       reduction({{"dim", {0, 2}}}, {3, 4, 5}, {kNone, {{"dim", 1}, {"keepdim", true}}}), kSums},
      {"var", true, {"var"}, 1, {"dim", "keepdim", "correction"},
       [](X x, A a) { return var(x[0], a.dims("dim"), a.flag("keepdim", false), a.integer("correction", 1)); },
       reduction({{"dim", {1}}, {"correction", 1}}, {3, 6}, {kNone, {{"dim", {0, 2}}, {"correction", 0}}}), kSums},
      {"max", true, {"max"}, 1, {"dim", "keepdim"},
       [](X x, A a) {
         if (a.given("dim")) return max(x[0], a.integer("dim"), a.flag("keepdim", false));
         LATHE_CHECK(!a.given("keepdim"), kOpCase, "op \"max\": \"keepdim\" needs a \"dim\" (max over everything has none)");
         return max(x[0]);
       },
       reduction({{"dim", 1}, {"keepdim", true}}, {3, 5}, {kNone, {{"dim", 1}}}), kExact},
      {"matmul", true, {"matmul"}, 2, {}, [](X x, A) { return matmul(x[0], x[1]); },
       {{"", kNone, [](D d) { return Operands{d.uniform({2, 3, 8}), d.uniform({8, 5})}; }},
        {"sweep", kNone, [](D d) { return Operands{d.uniform({67, 129}), d.uniform({129, 33})}; }, false},
        {"sweep", kNone, [](D d) { return Operands{d.uniform({3, 1, 5, 16}), d.uniform({2, 16, 7})}; }, false},
        {"sweep", kNone, [](D d) { return Operands{d.uniform({40}), d.uniform({40, 9})}; }, false}},
       kSums, matmul_elements},
      {"softmax", true, {"softmax"}, 1, {"dim"}, [](X x, A a) { return softmax(x[0], a.integer("dim")); },
       reduction({{"dim", -1}}, {3, 7}, {{{"dim", -1}}, {{"dim", 1}}}, -4, 4), kTranscend},
      {"log_softmax", true, {"log_softmax"}, 1, {"dim"}, [](X x, A a) { return log_softmax(x[0], a.integer("dim")); },
       reduction({{"dim", 1}}, {3, 7}, {{{"dim", -1}}, {{"dim", 0}}}, -4, 4), kTranscend},
      {"layer_norm", true, {"layer_norm"}, 3, {"eps"},
       [](X x, A a) { return layer_norm(x[0], x[1], x[2], a.optional_number("eps").value_or(1e-5)); },
       {{"", {{"eps", 1e-5}},
         [](D d) { return Operands{d.uniform({2, 3, 8}), d.uniform({8}, 0.5, 1.5), d.uniform({8}, -0.2, 0.2)}; }},
        {"sweep", kNone,
         [](D d) { return Operands{d.uniform({9, 1030}), d.uniform({1030}, 0.5, 1.5), d.uniform({1030}, -0.2, 0.2)}; },
         false}},
       kSums},
      {"embedding", true, {"embedding"}, 2, {}, [](X x, A) { return embedding(x[1], x[0]); },
       {{"", kNone, [](D d) { return Operands{d.ids({2, 5}, 10), d.uniform({10, 4})}; }},
        {"sweep", kNone, [](D d) { return Operands{d.ids({4, 300}, 7), d.uniform({7, 33})}; }, false}},
       kSums, embedding_elements},
      {"cross_entropy", true, {"cross_entropy"}, 2, {"ignore_index"},
       [](X x, A a) {
         // PyTorch puts the classes at dim 1, lathe last: the two agree for [N, C] and [C].
         LATHE_CHECK(x[0].dim() == 1 || x[0].dim() == 2, kOpCase, "op \"cross_entropy\": logits must be [N, C] or [C], got ",
                     x[0].desc());
         return cross_entropy(x[0], x[1], a.integer("ignore_index", -100));
       },
       {{"", {{"ignore_index", 3}}, [](D d) { return Operands{d.uniform({8, 5}, -3, 3), d.ids({8}, 5)}; }},
        {"sweep", kNone, [](D d) { return Operands{d.uniform({37, 1030}, -3, 3), d.ids({37}, 1030)}; }, false}},
       kSums},
      // The fused classifier: cross_entropy's mean, its gradient written in the forward's pass. The
      // operands stay held here, so it writes that gradient beside the logits, not over them.
      {"fused_cross_entropy", false, {"fused_cross_entropy"}, 2, {"ignore_index"},
       [](X x, A a) { return fused_cross_entropy(x[0], x[1], a.integer("ignore_index", -100)); },
       {{"", {{"ignore_index", 3}}, [](D d) { return Operands{d.uniform({8, 5}, -3, 3), d.ids({8}, 5)}; }},
        {"sweep", kNone, [](D d) { return Operands{d.uniform({37, 1030}, -3, 3), d.ids({37}, 1030)}; }, false}},
       kSums},
      {"cat", true, {"cat"}, kOneOrMore, {"dim"}, [](X x, A a) { return cat(x, a.integer("dim", 0)); },
       {{"", {{"dim", 1}}, [](D d) { return Operands{d.uniform({2, 3}), d.uniform({2, 1}), d.uniform({2, 4})}; }},
        {"sweep", {{"dim", 0}}, [](D d) { return Operands{d.uniform({300, 7}), d.uniform({1, 7})}; }, false}},
       kExact},
      {"stack", true, {"stack"}, kOneOrMore, {"dim"}, [](X x, A a) { return stack(x, a.integer("dim", 0)); },
       {{"", {{"dim", 0}}, [](D d) { return Operands{d.uniform({2, 3}), d.uniform({2, 3})}; }},
        {"sweep", {{"dim", 2}}, [](D d) { return Operands{d.uniform({5, 263}), d.uniform({5, 263})}; }, false}},
       kExact},
      {"index_select", true, {"index_select"}, 2, {"dim"},
       [](X x, A a) { return index_select(x[0], a.integer("dim"), x[1]); },
       {{"", {{"dim", 0}}, [](D d) { return Operands{d.uniform({5, 3}), Tensor::from_vector<int64_t>({4, 0, 4, 2}, {4})}; }},
        {"sweep", {{"dim", 1}}, [](D d) { return Operands{d.uniform({6, 300}), d.ids({500}, 300)}; }, false}},
       kSums, index_select_elements},
      {"gather", true, {"gather"}, 2, {"dim"}, [](X x, A a) { return gather(x[0], a.integer("dim"), x[1]); },
       {{"", {{"dim", 1}}, [](D d) { return Operands{d.uniform({3, 4}), d.ids({3, 6}, 4)}; }},
        {"sweep", {{"dim", 0}}, [](D d) { return Operands{d.uniform({9, 300}), d.ids({700, 300}, 9)}; }, false}},
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
       {{"", {{"is_causal", true}}, [](D d) { return qkv(d, 2, 2, 5, 8); }},
        {"b1h1t1d8", {{"is_causal", true}}, [](D d) { return qkv(d, 1, 1, 1, 8); }, false},
        {"b1h2t70d16", {{"is_causal", true}, {"scale", 0.2}}, [](D d) { return qkv(d, 1, 2, 70, 16); }, false},
        {"b2h1t33d64", {{"is_causal", true}}, [](D d) { return qkv(d, 2, 1, 33, 64); }, false},
        {"b1h1t17d128", {{"is_causal", true}}, [](D d) { return qkv(d, 1, 1, 17, 128); }, false}},
       kSums},

      // The ops below have no case of the reference kind: PyTorch has no such function (softcap,
      // squared_relu, rope), has it under another form (rms_norm only from PyTorch 2.4, split's
      // tuple, the optimizers' kernels, dropout's generator), or the kind does not take it yet.
      {"eq", false, {"eq"}, 2, {}, [](X x, A) { return eq(x[0], x[1]); }, comparison(), kExact, broadcast_elements},
      {"ne", false, {"ne"}, 2, {}, [](X x, A) { return ne(x[0], x[1]); }, comparison(), kExact, broadcast_elements},
      {"lt", false, {"lt"}, 2, {}, [](X x, A) { return lt(x[0], x[1]); }, comparison(), kExact, broadcast_elements},
      {"le", false, {"le"}, 2, {}, [](X x, A) { return le(x[0], x[1]); }, comparison(), kExact, broadcast_elements},
      {"gt", false, {"gt"}, 2, {}, [](X x, A) { return gt(x[0], x[1]); }, comparison(), kExact, broadcast_elements},
      {"ge", false, {"ge"}, 2, {}, [](X x, A) { return ge(x[0], x[1]); }, comparison(), kExact, broadcast_elements},
      {"squared_relu", false, {"squared_relu"}, 1, {}, [](X x, A) { return squared_relu(x[0]); }, unary(), kExact},
      {"softcap", false, {"softcap"}, 1, {"cap"}, [](X x, A a) { return softcap(x[0], a.number("cap")); },
       unary(-6, 6, {{"cap", 2.0}}), kTranscend},
      {"argmax", false, {"argmax"}, 1, {"dim", "keepdim"},
       [](X x, A a) { return argmax(x[0], a.integer("dim"), a.flag("keepdim", false)); },
       reduction({{"dim", 1}}, {3, 5}, {{{"dim", 1}}, {{"dim", 0}, {"keepdim", true}}}), kExact},
      {"split", false, {"split"}, 1, {"split_size_or_sections", "dim"},
       [](X x, A a) {
         const int64_t dim = a.integer("dim", 0);
         return flat_cat(a.given("split_size_or_sections") && a.dims("split_size_or_sections").size() > 1
                             ? split(x[0], a.dims("split_size_or_sections"), dim)
                             : split(x[0], a.integer("split_size_or_sections"), dim));
       },
       {{"", {{"split_size_or_sections", 2}}, [](D d) { return Operands{d.uniform({5, 3})}; }},
        {"sweep", {{"split_size_or_sections", {100, 3, 160}}, {"dim", 1}}, [](D d) { return Operands{d.uniform({5, 263})}; },
         false}},
       kExact},
      {"rms_norm", false, {"rms_norm"}, 2, {"eps"},
       [](X x, A a) { return rms_norm(x[0], x[1], a.optional_number("eps").value_or(1e-5)); },
       {{"", kNone, [](D d) { return Operands{d.uniform({2, 3, 8}), d.uniform({8}, 0.5, 1.5)}; }},
        {"sweep", kNone, [](D d) { return Operands{d.uniform({9, 1030}), d.uniform({1030}, 0.5, 1.5)}; }, false}},
       kSums},
      // x [B, H, T, D] and the angle tables cos, sin [T, D / 2]; any values are a fair test of the
      // rotation's arithmetic.
      {"rope", false, {"rope"}, 3, {}, [](X x, A) { return rope(x[0], x[1], x[2]); },
       {{"", kNone, [](D d) { return Operands{d.uniform({2, 3, 5, 8}), d.uniform({5, 4}, -1, 1), d.uniform({5, 4}, -1, 1)}; }},
        {"sweep", kNone,
         [](D d) { return Operands{d.uniform({1, 2, 70, 64}), d.uniform({70, 32}, -1, 1), d.uniform({70, 32}, -1, 1)}; },
         false}},
       kTranscend},
      // q, k and v side by side in one [B, T, 3C] tensor.
      {"causal_attention_qkv", false, {"causal_attention_qkv"}, 1, {"n_head", "scale"},
       [](X x, A a) { return causal_attention_qkv(x[0], a.integer("n_head"), a.number("scale")); },
       {{"", {{"n_head", 2}, {"scale", 0.35}}, [](D d) { return Operands{d.uniform({2, 5, 3 * 16})}; }},
        {"sweep", {{"n_head", 3}, {"scale", 0.125}}, [](D d) { return Operands{d.uniform({1, 70, 3 * 96})}; }, false}},
       kSums},
      // Inverted dropout with lathe's Philox generator at `seed`: the mask depends on the seed, the
      // generator's offset (0) and the element's index only, so every backend draws the same one.
      {"dropout", false, {"dropout"}, 1, {"p", "training", "seed"},
       [](X x, A a) {
         Generator gen(uint64_t(a.integer("seed", 0)));
         return dropout(x[0], a.optional_number("p").value_or(0.5), a.flag("training", true), gen);
       },
       {{"", {{"p", 0.25}, {"seed", 7}}, [](D d) { return Operands{d.uniform({3, 4})}; }},
        {"sweep", {{"p", 0.5}, {"seed", 8}}, [](D d) { return Operands{d.uniform({5, 263})}; }, false}},
       kExact},
      // One Adam step (step `step`) of param, grad, exp_avg, exp_avg_sq, on copies: the updated
      // parameter and moments, flattened and joined. No gradient.
      {"adam_update", false, {"adam_update"}, 4, {"lr", "weight_decay", "decoupled_weight_decay", "step"},
       [](X x, A a) {
         Tensor p = x[0].detach().clone(), m = x[2].detach().clone(), s = x[3].detach().clone();
         adam_update(p, x[1].detach(), m, s, Tensor(), double(a.integer("step", 1)), adam_params(a));
         return flat_cat({p, m, s});
       },
       {{"", {{"lr", 1e-2}, {"weight_decay", 0.01}, {"step", 3}}, [](D d) { return adam_operands(d, {3, 4}); }},
        {"sweep", {{"lr", 1e-2}, {"weight_decay", 0.1}, {"decoupled_weight_decay", true}, {"step", 5}},
         [](D d) { return adam_operands(d, {5, 263}); }, false}},
       kTranscend},
      // The same step over several parameters at once (each four operands, in adam_update's order),
      // with the step counters on the parameters' device.
      {"adam_update_multi", false, {"adam_update_multi"}, kOneOrMore,
       {"lr", "weight_decay", "decoupled_weight_decay", "step"},
       [](X x, A a) {
         LATHE_CHECK(x.size() % 4 == 0, kOpCase, "op \"adam_update_multi\" takes param, grad, exp_avg, exp_avg_sq per parameter");
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
       {{"", {{"lr", 1e-2}, {"weight_decay", 0.01}, {"step", 3}},
         [](D d) {
           Operands a = adam_operands(d, {3, 4}), b = adam_operands(d, {7});
           a.insert(a.end(), b.begin(), b.end());
           return a;
         }},
        {"sweep", {{"lr", 1e-2}, {"weight_decay", 0.1}, {"decoupled_weight_decay", true}, {"step", 5}},
         [](D d) {
           Operands a = adam_operands(d, {5, 263}), b = adam_operands(d, {1});
           a.insert(a.end(), b.begin(), b.end());
           return a;
         },
         false}},
       kTranscend},
  };
  return entries;
}

const OpEntry* find_op_entry(std::string_view name) {
  for (const OpEntry& e : op_registry())
    if (name == e.name) return &e;
  return nullptr;
}

}  // namespace lathe::ref
