// Reference case kind "op": one op, forward and optionally backward (docs/reference-cases.md).
//
// Inputs: tensors input.0, input.1, ... (the op's tensor operands in PyTorch's positional order),
// an optional grad_output, and the document {"kind": "op", "op": NAME, "args": {...}} with
// PyTorch's argument names and defaults. Outputs `output` and, when grad_output is given,
// grad.input.<k> for each floating operand k.
//
// A 16-bit case computes in f32 from its 16-bit inputs and rounds each result once: the operands
// are widened, the op runs forward and backward in f32, and `output` and the gradients are rounded
// to the case's dtype at the end. That is the rule every backend's 16-bit op follows, so a case
// tests an op's arithmetic, not a chain of intermediate roundings that no two libraries share.
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/ops.h"
#include "ref/kinds.h"
#include "serialize/json_document.h"

namespace lathe::ref {

namespace {

constexpr const char* K = "case kind \"op\": ";

// An op case computes one result from tensors of the file, but a broadcast or a product can make
// that result far larger than its inputs; no reference case needs more than this many elements.
constexpr int64_t kMaxOutputElements = int64_t(1) << 28;

// The op's "args" object. Each accessor reads one argument by PyTorch's name with PyTorch's
// default; a value of the wrong type is an error naming the op and the argument.
class OpArgs {
 public:
  OpArgs(std::string op, nlohmann::json args) : op_(std::move(op)), args_(std::move(args)) {}

  bool given(const char* name) const { return args_.contains(name) && !args_[name].is_null(); }

  int64_t integer(const char* name) const {
    LATHE_CHECK(given(name), K, "op \"", op_, "\" needs the argument \"", name, "\" (an integer)");
    return integer_value(name);
  }
  int64_t integer(const char* name, int64_t fallback) const { return given(name) ? integer_value(name) : fallback; }

  double number(const char* name) const {
    LATHE_CHECK(given(name), K, "op \"", op_, "\" needs the argument \"", name, "\" (a number)");
    return *optional_number(name);
  }
  std::optional<double> optional_number(const char* name) const {
    if (!given(name)) return std::nullopt;
    LATHE_CHECK(args_[name].is_number(), K, "op \"", op_, "\": argument \"", name, "\" must be a number, got ",
                serialize::quote_json(args_[name]));
    return args_[name].get<double>();
  }

  bool flag(const char* name, bool fallback) const {
    if (!given(name)) return fallback;
    LATHE_CHECK(args_[name].is_boolean(), K, "op \"", op_, "\": argument \"", name, "\" must be true or false, got ",
                serialize::quote_json(args_[name]));
    return args_[name].get<bool>();
  }

  // PyTorch's `dim` of a reduction: an integer, a list of integers, or null / absent for every dim
  // (returned as an empty list, which is what lathe's reductions read as "all").
  std::vector<int64_t> dims(const char* name) const {
    if (!given(name)) return {};
    const nlohmann::json& v = args_[name];
    if (v.is_number_integer()) return {v.get<int64_t>()};
    LATHE_CHECK(v.is_array() && !v.empty(), K, "op \"", op_, "\": argument \"", name,
                "\" must be an integer, a non-empty list of integers or null, got ", serialize::quote_json(v));
    std::vector<int64_t> out;
    for (const auto& d : v) {
      LATHE_CHECK(d.is_number_integer(), K, "op \"", op_, "\": argument \"", name, "\" lists ",
                  serialize::quote_json(d), ", which is not an integer");
      out.push_back(d.get<int64_t>());
    }
    return out;
  }

  std::string choice(const char* name, const std::vector<std::string>& allowed, const std::string& fallback) const {
    if (!given(name)) return fallback;
    const nlohmann::json& v = args_[name];
    for (const std::string& a : allowed)
      if (v == a) return a;
    std::string list;
    for (const std::string& a : allowed) list += (list.empty() ? "\"" : ", \"") + a + "\"";
    LATHE_FAIL(K, "op \"", op_, "\": argument \"", name, "\" must be one of ", list, ", got ", serialize::quote_json(v));
  }

 private:
  int64_t integer_value(const char* name) const {
    LATHE_CHECK(args_[name].is_number_integer(), K, "op \"", op_, "\": argument \"", name,
                "\" must be an integer, got ", serialize::quote_json(args_[name]));
    return args_[name].get<int64_t>();
  }

  std::string op_;
  nlohmann::json args_;
};

using Operands = std::vector<Tensor>;

constexpr int kOneOrMore = -1;  // the operand count of cat and stack

struct OpEntry {
  const char* name;
  int operands;                    // how many tensor operands, or kOneOrMore
  std::vector<const char*> args;   // the arguments it takes, PyTorch's names
  Tensor (*run)(const Operands& x, const OpArgs& a);
  // The number of elements of the result, for the ops whose result can outgrow their operands
  // (broadcasts, products, lookups); null for the others.
  int64_t (*result_elements)(const Operands& x) = nullptr;
};

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

int64_t embedding_elements(const Operands& x) {
  return x[0].numel() * (x[1].dim() == 2 ? x[1].shape()[1] : 1);
}

int64_t index_select_elements(const Operands& x) {
  const Tensor& t = x[0];
  int64_t rest = 1;  // the operand's elements per index along any one dim, at most
  for (int64_t d : t.shape()) rest = std::max(rest, d == 0 ? int64_t(0) : t.numel() / d);
  return rest * std::max<int64_t>(x[1].numel(), 1);
}

// Every op of the kind, one line each: name, operands, arguments, the call into core/ops.h.
const std::vector<OpEntry>& op_entries() {
  using A = const OpArgs&;
  using X = const Operands&;
  static const std::vector<OpEntry> entries = {
      {"add", 2, {}, [](X x, A) { return add(x[0], x[1]); }, broadcast_elements},
      {"sub", 2, {}, [](X x, A) { return sub(x[0], x[1]); }, broadcast_elements},
      {"mul", 2, {}, [](X x, A) { return mul(x[0], x[1]); }, broadcast_elements},
      {"div", 2, {}, [](X x, A) { return div(x[0], x[1]); }, broadcast_elements},
      {"pow", 2, {}, [](X x, A) { return pow(x[0], x[1]); }, broadcast_elements},
      {"maximum", 2, {}, [](X x, A) { return maximum(x[0], x[1]); }, broadcast_elements},
      {"minimum", 2, {}, [](X x, A) { return minimum(x[0], x[1]); }, broadcast_elements},
      {"neg", 1, {}, [](X x, A) { return neg(x[0]); }},
      {"exp", 1, {}, [](X x, A) { return exp(x[0]); }},
      {"log", 1, {}, [](X x, A) { return log(x[0]); }},
      {"sqrt", 1, {}, [](X x, A) { return sqrt(x[0]); }},
      {"rsqrt", 1, {}, [](X x, A) { return rsqrt(x[0]); }},
      {"tanh", 1, {}, [](X x, A) { return tanh(x[0]); }},
      {"relu", 1, {}, [](X x, A) { return relu(x[0]); }},
      {"sigmoid", 1, {}, [](X x, A) { return sigmoid(x[0]); }},
      {"abs", 1, {}, [](X x, A) { return abs(x[0]); }},
      {"square", 1, {}, [](X x, A) { return square(x[0]); }},
      {"silu", 1, {}, [](X x, A) { return silu(x[0]); }},
      {"gelu", 1, {"approximate"},
       [](X x, A a) { return a.choice("approximate", {"none", "tanh"}, "none") == "tanh" ? gelu(x[0]) : gelu_erf(x[0]); }},
      {"clamp", 1, {"min", "max"},
       [](X x, A a) {
         LATHE_CHECK(a.given("min") || a.given("max"), K, "op \"clamp\" needs \"min\" or \"max\" (or both)");
         return clamp(x[0], a.optional_number("min"), a.optional_number("max"));
       }},
      {"where", 3, {}, [](X x, A) { return where(x[0], x[1], x[2]); }, broadcast_elements},
      {"masked_fill", 2, {"value"}, [](X x, A a) { return masked_fill(x[0], x[1], a.number("value")); },
       broadcast_elements},
      {"sum", 1, {"dim", "keepdim"}, [](X x, A a) { return sum(x[0], a.dims("dim"), a.flag("keepdim", false)); }},
      {"mean", 1, {"dim", "keepdim"}, [](X x, A a) { return mean(x[0], a.dims("dim"), a.flag("keepdim", false)); }},
      {"var", 1, {"dim", "keepdim", "correction"},
       [](X x, A a) { return var(x[0], a.dims("dim"), a.flag("keepdim", false), a.integer("correction", 1)); }},
      {"max", 1, {"dim", "keepdim"},
       [](X x, A a) {
         if (a.given("dim")) return max(x[0], a.integer("dim"), a.flag("keepdim", false));
         LATHE_CHECK(!a.given("keepdim"), K, "op \"max\": \"keepdim\" needs a \"dim\" (max over everything has none)");
         return max(x[0]);
       }},
      {"matmul", 2, {}, [](X x, A) { return matmul(x[0], x[1]); }, matmul_elements},
      {"softmax", 1, {"dim"}, [](X x, A a) { return softmax(x[0], a.integer("dim")); }},
      {"log_softmax", 1, {"dim"}, [](X x, A a) { return log_softmax(x[0], a.integer("dim")); }},
      {"layer_norm", 3, {"eps"},
       [](X x, A a) { return layer_norm(x[0], x[1], x[2], a.optional_number("eps").value_or(1e-5)); }},
      {"embedding", 2, {}, [](X x, A) { return embedding(x[1], x[0]); }, embedding_elements},
      {"cross_entropy", 2, {"ignore_index"},
       [](X x, A a) {
         // PyTorch puts the classes at dim 1, lathe last: the two agree for [N, C] and [C].
         LATHE_CHECK(x[0].dim() == 1 || x[0].dim() == 2, K, "op \"cross_entropy\": logits must be [N, C] or [C], got ",
                     x[0].desc());
         return cross_entropy(x[0], x[1], a.integer("ignore_index", -100));
       }},
      {"cat", kOneOrMore, {"dim"}, [](X x, A a) { return cat(x, a.integer("dim", 0)); }},
      {"stack", kOneOrMore, {"dim"}, [](X x, A a) { return stack(x, a.integer("dim", 0)); }},
      {"index_select", 2, {"dim"}, [](X x, A a) { return index_select(x[0], a.integer("dim"), x[1]); },
       index_select_elements},
      {"gather", 2, {"dim"}, [](X x, A a) { return gather(x[0], a.integer("dim"), x[1]); }},
      // torch.nn.functional.scaled_dot_product_attention on [B, H, T, hs]: lathe has the causal one.
      {"scaled_dot_product_attention", 3, {"is_causal", "scale"},
       [](X x, A a) {
         LATHE_CHECK(a.flag("is_causal", false), K,
                     "op \"scaled_dot_product_attention\": lathe computes the causal one; give \"is_causal\": true");
         LATHE_CHECK(x[0].dim() == 4, K, "op \"scaled_dot_product_attention\": input.0 ", x[0].desc(),
                     " must be [B, H, T, head_size]");
         // torch's is_causal aligns a longer k and v with q's first position, lathe's causal_attention
         // with its last (the queries after a KV cache): only equal lengths mean the same thing.
         LATHE_CHECK(x[1].shape() == x[0].shape() && x[2].shape() == x[0].shape(), K,
                     "op \"scaled_dot_product_attention\": input.1 ", x[1].desc(), " and input.2 ", x[2].desc(),
                     " must have input.0's shape ", x[0].desc());
         const double scale = a.optional_number("scale").value_or(1.0 / std::sqrt(double(x[0].size(3))));
         return causal_attention(x[0], x[1], x[2], scale);
       }},
  };
  return entries;
}

std::string op_names() {
  std::string out;
  for (const OpEntry& e : op_entries()) out += std::string(out.empty() ? "" : " ") + e.name;
  return out;
}

const OpEntry& find_op(const nlohmann::json& spec) {
  LATHE_CHECK(spec.contains("op") && spec["op"].is_string(), K, "the case document needs \"op\" (a string: ",
              op_names(), ")");
  const std::string name = spec["op"];
  for (const OpEntry& e : op_entries())
    if (name == e.name) return e;
  LATHE_FAIL(K, "unknown op \"", name, "\" (the ops are: ", op_names(), ")");
}

OpArgs read_args(const OpEntry& op, const nlohmann::json& spec) {
  if (!spec.contains("args")) return OpArgs(op.name, nlohmann::json::object());
  const nlohmann::json& args = spec["args"];
  LATHE_CHECK(args.is_object(), K, "\"args\" must be an object, got ", serialize::quote_json(args));
  for (const auto& [key, value] : args.items()) {
    bool known = false;
    std::string list;
    for (const char* a : op.args) {
      known = known || key == a;
      list += std::string(list.empty() ? "" : ", ") + a;
    }
    LATHE_CHECK(known, K, "op \"", op.name, "\" has no argument \"", key, "\" (",
                list.empty() ? std::string("it takes none") : "it takes " + list, ")");
  }
  return OpArgs(op.name, args);
}

// "7" -> 7; anything else (sign, empty, leading zero, too long) -> -1.
int64_t operand_index(const std::string& s) {
  if (s.empty() || s.size() > 6 || (s.size() > 1 && s[0] == '0')) return -1;
  for (char ch : s)
    if (ch < '0' || ch > '9') return -1;
  return std::stoll(s);
}

// The case's operands in order; any tensor but input.<k> and grad_output is an error.
Operands read_operands(const serialize::SafetensorsFile& c, const OpEntry& op) {
  std::vector<const Tensor*> by_index;
  for (const auto& [name, t] : c.tensors) {
    if (name == "grad_output") continue;
    const int64_t k = name.rfind("input.", 0) == 0 ? operand_index(name.substr(6)) : -1;
    LATHE_CHECK(k >= 0, K, "unexpected tensor \"", name, "\" (expected input.<k> and grad_output)");
    if (size_t(k) >= by_index.size()) by_index.resize(size_t(k) + 1, nullptr);
    by_index[size_t(k)] = &t;
  }
  const int64_t n = int64_t(by_index.size());
  for (int64_t k = 0; k < n; ++k)
    LATHE_CHECK(by_index[size_t(k)], K, "operands must be numbered input.0 .. input.", n - 1, " but input.", k,
                " is missing");
  if (op.operands == kOneOrMore)
    LATHE_CHECK(n >= 1, K, "op \"", op.name, "\" takes one or more tensor operands (input.0, input.1, ...), the case has none");
  else
    LATHE_CHECK(n == op.operands, K, "op \"", op.name, "\" takes ", op.operands, " tensor operand",
                op.operands == 1 ? "" : "s", " (input.0 .. input.", op.operands - 1, "), the case has ", n);
  Operands out;
  for (const Tensor* t : by_index) out.push_back(*t);
  return out;
}

// The one floating dtype of the case's floating operands (f32 when it has none); operands of two
// floating dtypes are an error naming both, since PyTorch's type promotion is not what a
// reference case of one dtype means to test.
DType case_dtype(const Operands& x) {
  std::optional<size_t> first;
  for (size_t k = 0; k < x.size(); ++k) {
    if (!is_floating(x[k].dtype())) continue;
    if (!first) first = k;
    LATHE_CHECK(x[k].dtype() == x[*first].dtype(), K, "floating operands of one dtype expected, but input.", *first,
                " is ", x[*first].desc(), " and input.", k, " is ", x[k].desc());
  }
  return first ? x[*first].dtype() : DType::f32;
}

bool is_16_bit(DType t) { return t == DType::bf16 || t == DType::f16; }

}  // namespace

RefOutput run_op_case(const serialize::SafetensorsFile& c, const nlohmann::json& spec, Device device) {
  const OpEntry& op = find_op(spec);
  const OpArgs args = read_args(op, spec);
  const Operands given = read_operands(c, op);
  const DType dtype = case_dtype(given);
  const DType compute = is_16_bit(dtype) ? DType::f32 : dtype;
  if (op.result_elements) {
    const int64_t n = op.result_elements(given);
    LATHE_CHECK(n <= kMaxOutputElements, K, "op \"", op.name, "\": the result would hold ", n,
                " elements, more than the limit of ", kMaxOutputElements, " of an op case");
  }

  // Floating operands become leaves that collect gradients, widened to f32 in a 16-bit case.
  Operands x;
  for (const Tensor& t : given) {
    Tensor on_device = t.to(device);
    if (is_floating(t.dtype())) on_device = on_device.to(compute).detach().requires_grad_(true);
    x.push_back(on_device);
  }
  Tensor y = op.run(x, args);

  RefOutput out;
  const bool floating_result = is_floating(y.dtype());
  out.tensors.emplace_back("output", floating_result ? y.detach().to(dtype) : y.detach());
  const Tensor* g = c.find("grad_output");
  if (!g) return out;

  LATHE_CHECK(floating_result, K, "op \"", op.name, "\": the output ", y.desc(),
              " is not floating, so the case can have no grad_output");
  LATHE_CHECK(g->shape() == y.shape(), K, "grad_output ", g->desc(), " must have the shape of the output ",
              shape_str(y.shape()));
  LATHE_CHECK(g->dtype() == dtype, K, "grad_output ", g->desc(), " must have the case's dtype ", dtype_name(dtype));
  y.backward(g->to(device).to(compute));
  for (size_t k = 0; k < x.size(); ++k) {
    if (!is_floating(given[k].dtype())) continue;
    // An operand the result does not depend on gets a zero gradient, where PyTorch has None.
    const Tensor grad = x[k].grad().defined() ? x[k].grad() : Tensor::zeros(x[k].shape(), compute, device);
    out.tensors.emplace_back("grad.input." + std::to_string(k), grad.to(dtype));
  }
  return out;
}

}  // namespace lathe::ref
