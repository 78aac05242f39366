// The ops of core/ops.h, each once: as a function of the module (lathe.exp(x)) and, where its
// first operand is a tensor, as a method (x.exp()), with core/ops.h's argument names; and the
// operators (+ - * / ** @, comparisons, unary -). Every call releases the GIL.
//
// python/tests/test_ops.py checks that every function the op registry covers (ref/op_registry.h,
// the list of core/ops.h that its drift test keeps whole) has a binding here.
#include <pybind11/stl.h>

#include <optional>
#include <variant>

#include "core/ops.h"
#include "core/random.h"
#include "python/bindings.h"
#include "ref/op_registry.h"

namespace lathe::python {

namespace {

// A reduction's dims: None for all, an int, or a list (core/ops.h reads an empty list as all).
std::vector<int64_t> dims_arg(const py::object& dim) {
  if (dim.is_none()) return {};
  if (py::isinstance<py::int_>(dim)) return {dim.cast<int64_t>()};
  return dim.cast<std::vector<int64_t>>();
}

// A Python number as a 0-d tensor of `like`'s dtype and device (the other operand of a comparison
// or of a number divided by a tensor).
Tensor scalar_like(double v, const Tensor& like) { return Tensor::scalar(v, like.dtype(), like.device()); }

using TensorOrNumber = std::variant<Tensor, double>;
using TensorTensorOp = Tensor (*)(const Tensor&, const Tensor&);
using TensorNumberOp = Tensor (*)(const Tensor&, double);

// x op y for y a tensor or a number: a number through the op's own scalar form where core/ops.h has
// one (`tn`), else as a 0-d tensor of x's dtype and device. The functions and the operators alike.
Tensor apply_binary(TensorTensorOp tt, TensorNumberOp tn, const Tensor& x, const TensorOrNumber& y) {
  if (const Tensor* other = std::get_if<Tensor>(&y)) return tt(x, *other);
  const double v = std::get<double>(y);
  return tn ? tn(x, v) : tt(x, scalar_like(v, x));
}

}  // namespace

void bind_core_ops(py::module_& m) {
  py::class_<Tensor> t = py::reinterpret_borrow<py::class_<Tensor>>(m.attr("Tensor"));
  py::class_<Generator>(m, "Generator", "Philox under (seed, offset), the whole state (core/random.h)")
      .def(py::init<uint64_t, uint64_t>(), py::arg("seed") = 0, py::arg("offset") = 0)
      .def_property_readonly("seed", &Generator::seed)
      .def_property_readonly("offset", &Generator::offset)
      .def("set_state", &Generator::set_state, py::arg("seed"), py::arg("offset"));

  // An op as a function and as a method of its first operand (whose name the method leaves out).
  auto op = [&](const char* name, auto fn, py::arg first, auto... rest) {
    m.def(name, fn, ReleaseGil(), first, rest...);
    t.def(name, fn, ReleaseGil(), rest...);
  };
  auto a = [](const char* n) { return py::arg(n); };

  // ---- elementwise: binary with a tensor or a number, then unary ----
  auto binary = [&](const char* name, TensorTensorOp tt, TensorNumberOp tn) {
    op(name, [tt, tn](const Tensor& x, const TensorOrNumber& y) { return apply_binary(tt, tn, x, y); }, a("input"),
       a("other"));
  };
  binary("add", add, add);
  binary("sub", sub, sub);
  binary("mul", mul, mul);
  binary("div", div, div);
  binary("pow", pow, pow);
  binary("maximum", maximum, nullptr);
  binary("minimum", minimum, nullptr);
  binary("eq", eq, nullptr);
  binary("ne", ne, nullptr);
  binary("lt", lt, nullptr);
  binary("le", le, nullptr);
  binary("gt", gt, nullptr);
  binary("ge", ge, nullptr);
  // The unary ops of one tensor and no argument, from the op registry (a new one is bound here by
  // its entry); gelu has two forms, lathe's names for them (PyTorch's gelu takes `approximate`).
  for (const ref::OpEntry& e : ref::op_registry())
    if (e.operands.least == 1 && e.operands.most == 1 && e.args.empty())
      op(e.name, [&e](const Tensor& x) { return e.call({x}, ref::OpArgs(e.name, nlohmann::json::object())); }, a("input"));
  op("gelu", gelu, a("input"));
  op("gelu_erf", gelu_erf, a("input"));
  op("softcap", softcap, a("input"), a("cap"));
  op("clamp", clamp, a("input"), py::arg("min") = py::none(), py::arg("max") = py::none());
  op("where", where, a("condition"), a("input"), a("other"));
  op("masked_fill", masked_fill, a("input"), a("mask"), a("value"));

  // ---- reductions ----
  op("sum", [](const Tensor& x, const py::object& dim, bool keepdim) { return sum(x, dims_arg(dim), keepdim); },
     a("input"), py::arg("dim") = py::none(), py::arg("keepdim") = false);
  op("mean", [](const Tensor& x, const py::object& dim, bool keepdim) { return mean(x, dims_arg(dim), keepdim); },
     a("input"), py::arg("dim") = py::none(), py::arg("keepdim") = false);
  op("var", [](const Tensor& x, const py::object& dim, bool keepdim, int64_t correction) {
       return var(x, dims_arg(dim), keepdim, correction);
     }, a("input"), py::arg("dim") = py::none(), py::arg("keepdim") = false, py::arg("correction") = 1);
  op("max", [](const Tensor& x, std::optional<int64_t> dim, bool keepdim) { return dim ? max(x, *dim, keepdim) : max(x); },
     a("input"), py::arg("dim") = py::none(), py::arg("keepdim") = false);
  op("argmax", argmax, a("input"), a("dim"), py::arg("keepdim") = false);

  // ---- linear algebra and neural-network ops ----
  op("matmul", matmul, a("input"), a("other"));
  op("softmax", softmax, a("input"), py::arg("dim") = -1);
  op("log_softmax", log_softmax, a("input"), py::arg("dim") = -1);
  op("layer_norm", [](const Tensor& x, const std::optional<Tensor>& w, const std::optional<Tensor>& b, double eps,
                      const std::optional<DType> out_dtype) {
       return layer_norm(x, w.value_or(Tensor()), b.value_or(Tensor()), eps, out_dtype);
     }, a("input"), py::arg("weight") = py::none(), py::arg("bias") = py::none(), py::arg("eps") = 1e-5,
     py::arg("out_dtype") = py::none());
  op("rms_norm", [](const Tensor& x, const std::optional<Tensor>& w, double eps, const std::optional<DType> out_dtype) {
       return rms_norm(x, w.value_or(Tensor()), eps, out_dtype);
     }, a("input"), py::arg("weight") = py::none(), py::arg("eps") = 1e-5, py::arg("out_dtype") = py::none());
  op("rope", rope, a("input"), a("cos"), a("sin"));
  op("causal_attention", causal_attention, a("q"), a("k"), a("v"), a("scale"));
  op("causal_attention_qkv", causal_attention_qkv, a("qkv"), a("n_head"), a("scale"));
  m.def("embedding", embedding, ReleaseGil(), a("weight"), a("idx"));
  op("cross_entropy", cross_entropy, a("logits"), a("targets"), py::arg("ignore_index") = -100);
  op("fused_cross_entropy", [](const Tensor& logits, const Tensor& targets, int64_t ignore_index) {
       return fused_cross_entropy(logits, targets, ignore_index);
     }, a("logits"), a("targets"), py::arg("ignore_index") = -100);
  op("dropout", dropout, a("input"), a("p"), a("training"), a("generator"));

  // ---- joining, splitting and indexing ----
  m.def("cat", cat, ReleaseGil(), a("tensors"), py::arg("dim") = 0);
  m.def("stack", stack, ReleaseGil(), a("tensors"), py::arg("dim") = 0);
  op("split", [](const Tensor& x, const py::object& size, int64_t dim) {
       return py::isinstance<py::int_>(size) ? split(x, size.cast<int64_t>(), dim)
                                             : split(x, size.cast<std::vector<int64_t>>(), dim);
     }, a("input"), a("split_size_or_sections"), py::arg("dim") = 0);
  op("index_select", index_select, a("input"), a("dim"), a("index"));
  op("gather", gather, a("input"), a("dim"), a("index"));

  // ---- operators: x op y as the functions; y op x for a number y, which commutes or becomes a tensor
  // of x's dtype and device ----
  auto arithmetic = [&](const char* dunder, const char* reflected, TensorTensorOp tt, TensorNumberOp tn, bool commutes) {
    t.def(dunder, [tt, tn](const Tensor& x, const TensorOrNumber& y) { return apply_binary(tt, tn, x, y); },
          ReleaseGil());
    t.def(reflected, [tt, tn, commutes](const Tensor& x, double v) { return commutes ? tn(x, v) : tt(scalar_like(v, x), x); },
          ReleaseGil());
  };
  arithmetic("__add__", "__radd__", add, add, true);
  arithmetic("__sub__", "__rsub__", sub, sub, false);
  arithmetic("__mul__", "__rmul__", mul, mul, true);
  arithmetic("__truediv__", "__rtruediv__", div, div, false);
  arithmetic("__pow__", "__rpow__", pow, pow, false);
  t.def("__matmul__", matmul, ReleaseGil()).def("__neg__", neg, ReleaseGil()).def("__abs__", abs, ReleaseGil());
  for (auto [dunder, fn] : std::initializer_list<std::pair<const char*, TensorTensorOp>>{
           {"__eq__", eq}, {"__ne__", ne}, {"__lt__", lt}, {"__le__", le}, {"__gt__", gt}, {"__ge__", ge}})
    t.def(dunder, [fn](const Tensor& x, const TensorOrNumber& y) { return apply_binary(fn, nullptr, x, y); },
          ReleaseGil());
  // == compares elements, so Python would make tensors unhashable; they hash by identity, as torch's.
  t.def("__hash__", [](const Tensor& x) { return py::hash(py::int_(reinterpret_cast<uintptr_t>(x.id()))); });
}

}  // namespace lathe::python
