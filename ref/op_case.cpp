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
#include "ref/op_registry.h"
#include "serialize/json_document.h"

namespace lathe::ref {

namespace {

// An op case computes one result from tensors of the file, but a broadcast or a product can make
// that result far larger than its inputs; no reference case needs more than this many elements.
constexpr int64_t kMaxOutputElements = int64_t(1) << 28;

// The ops of the kind: the entries of the op registry (ref/op_registry.cpp) marked in_ref_kind.
std::string op_names() {
  std::string out;
  for (const OpEntry& e : op_registry())
    if (e.in_ref_kind) out += std::string(out.empty() ? "" : " ") + e.name;
  return out;
}

const OpEntry& find_op(const nlohmann::json& spec) {
  LATHE_CHECK(spec.contains("op") && spec["op"].is_string(), kOpCase, "the case document needs \"op\" (a string: ",
              op_names(), ")");
  const std::string name = spec["op"];
  const OpEntry* e = find_op_entry(name);
  LATHE_CHECK(e && e->in_ref_kind, kOpCase, "unknown op \"", name, "\" (the ops are: ", op_names(), ")");
  return *e;
}

OpArgs read_args(const OpEntry& op, const nlohmann::json& spec) {
  return read_op_args(op, spec.contains("args") ? spec["args"] : nlohmann::json::object());
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
    LATHE_CHECK(k >= 0, kOpCase, "unexpected tensor \"", name, "\" (expected input.<k> and grad_output)");
    if (size_t(k) >= by_index.size()) by_index.resize(size_t(k) + 1, nullptr);
    by_index[size_t(k)] = &t;
  }
  const int64_t n = int64_t(by_index.size());
  for (int64_t k = 0; k < n; ++k)
    LATHE_CHECK(by_index[size_t(k)], kOpCase, "operands must be numbered input.0 .. input.", n - 1, " but input.", k,
                " is missing");
  const Arity& arity = op.operands;
  if (arity.most == Arity::kAny)
    LATHE_CHECK(n >= arity.least, kOpCase, "op \"", op.name, "\" takes ",
                arity.least == 1 ? std::string("one") : std::to_string(arity.least),
                " or more tensor operands (input.0, input.1, ...), the case has ", n);
  else if (arity.least == arity.most)
    LATHE_CHECK(n == arity.most, kOpCase, "op \"", op.name, "\" takes ", arity.most, " tensor operand",
                arity.most == 1 ? "" : "s", " (input.0 .. input.", arity.most - 1, "), the case has ", n);
  else
    LATHE_CHECK(n >= arity.least && n <= arity.most, kOpCase, "op \"", op.name, "\" takes ", arity.least, " to ",
                arity.most, " tensor operands (input.0 .. input.", arity.most - 1, "), the case has ", n);
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
    LATHE_CHECK(x[k].dtype() == x[*first].dtype(), kOpCase, "floating operands of one dtype expected, but input.", *first,
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
    LATHE_CHECK(n <= kMaxOutputElements, kOpCase, "op \"", op.name, "\": the result would hold ", n,
                " elements, more than the limit of ", kMaxOutputElements, " of an op case");
  }

  // Floating operands become leaves that collect gradients, widened to f32 in a 16-bit case.
  Operands x;
  for (const Tensor& t : given) {
    Tensor on_device = t.to(device);
    if (is_floating(t.dtype())) on_device = on_device.to(compute).detach().requires_grad_(true);
    x.push_back(on_device);
  }
  Tensor y = op.call(x, args);

  RefOutput out;
  const bool floating_result = is_floating(y.dtype());
  out.tensors.emplace_back("output", floating_result ? y.detach().to(dtype) : y.detach());
  const Tensor* g = c.find("grad_output");
  if (!g) return out;

  LATHE_CHECK(floating_result, kOpCase, "op \"", op.name, "\": the output ", y.desc(),
              " is not floating, so the case can have no grad_output");
  LATHE_CHECK(g->shape() == y.shape(), kOpCase, "grad_output ", g->desc(), " must have the shape of the output ",
              shape_str(y.shape()));
  LATHE_CHECK(g->dtype() == dtype, kOpCase, "grad_output ", g->desc(), " must have the case's dtype ", dtype_name(dtype));
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
