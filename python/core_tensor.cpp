// lathe.Tensor: a handle on a C++ lathe::Tensor (core/tensor.h), never a copy of its data. Two Python
// objects may wrap the same tensor (t.grad twice): both see the same memory, as in C++.
#include <pybind11/stl.h>

#include <optional>
#include <tuple>

#include "core/autograd.h"
#include "core/ops.h"
#include "core/tensor.h"
#include "python/bindings.h"

namespace lathe::python {

namespace {

Shape shape_arg(const py::handle& h) {
  if (py::isinstance<py::int_>(h)) return Shape{h.cast<int64_t>()};
  return h.cast<Shape>();
}

// lathe.zeros(2, 3) and lathe.zeros((2, 3)) alike, as torch.
Shape shape_of(const py::args& dims) {
  if (dims.size() == 1 && !py::isinstance<py::int_>(dims[0])) return shape_arg(dims[0]);
  Shape s;
  for (const auto& d : dims) s.push_back(d.cast<int64_t>());
  return s;
}

py::tuple as_tuple(const std::vector<int64_t>& v) { return py::cast(v); }

}  // namespace

py::dict tensors_dict(const std::vector<std::pair<std::string, Tensor>>& named) {
  py::dict d;
  for (const auto& [name, t] : named) d[py::str(name)] = t;
  return d;
}

std::vector<std::pair<std::string, Tensor>> tensors_from_dict(const py::dict& tensors, const std::string& what) {
  std::vector<std::pair<std::string, Tensor>> out;
  for (const auto& [k, v] : tensors) {
    LATHE_CHECK(py::isinstance<Tensor>(v), what, ": \"", k.cast<std::string>(), "\" is a ",
                py::str(py::type::of(v)).cast<std::string>(), ", not a lathe.Tensor");
    out.emplace_back(k.cast<std::string>(), v.cast<Tensor>());
  }
  return out;
}

void bind_core_tensor(py::module_& m) {
  py::class_<Tensor> t(m, "Tensor", py::buffer_protocol(),
                       "A view (shape, strides, offset, dtype) over memory on one device, with autograd");

  // ---- metadata ----
  t.def_property_readonly("shape", [](const Tensor& x) { return as_tuple(x.shape()); })
      .def("size", [](const Tensor& x, std::optional<int64_t> d) -> py::object {
            if (d) return py::int_(x.size(*d));
            return as_tuple(x.shape());
          }, py::arg("dim") = py::none())
      .def_property_readonly("strides", [](const Tensor& x) { return as_tuple(x.strides()); },
                             "in elements, as lathe and torch count them (NumPy's are in bytes)")
      .def("stride", [](const Tensor& x) { return as_tuple(x.strides()); })
      .def_property_readonly("storage_offset", &Tensor::offset)
      .def_property_readonly("ndim", &Tensor::dim)
      .def("dim", &Tensor::dim)
      .def("numel", &Tensor::numel)
      .def("__len__", [](const Tensor& x) {
        LATHE_CHECK(x.dim() > 0, "len() of a 0-d tensor ", x.desc());
        return x.shape()[0];
      })
      .def_property_readonly("dtype", &Tensor::dtype)
      .def_property_readonly("device", &Tensor::device)
      .def_property_readonly("nbytes", &Tensor::nbytes)
      .def("is_contiguous", &Tensor::is_contiguous)
      .def("desc", &Tensor::desc, "\"f32[2, 3] on cpu\", as lathe's errors name a tensor")
      .def("__repr__", [](const Tensor& x) {
        if (!x.defined()) return std::string("lathe.Tensor(undefined)");
        py::gil_scoped_release nogil;  // str() copies a device tensor to the host
        return x.str();
      })
      .def("version", &Tensor::version, "bumped by every in-place write through lathe (Storage::version)")
      .def("bump_version", &Tensor::bump_version, "say that the memory was written behind lathe's back (through NumPy)");

  // ---- creation ----
  auto creator = [&](const char* name, auto make, const char* doc) {
    m.def(
        name,
        [make](const py::args& dims, const py::object& dtype, const py::object& device, bool requires_grad) {
          Tensor x = make(shape_of(dims), dtype_arg(dtype, DType::f32), device_arg(device));
          if (requires_grad) x.requires_grad_();
          return x;
        },
        py::kw_only(), py::arg("dtype") = py::none(), py::arg("device") = "cpu", py::arg("requires_grad") = false, doc);
  };
  creator("empty", [](const Shape& s, DType d, Device dev) { return Tensor::empty(s, d, dev); }, "Uninitialised memory");
  creator("zeros", [](const Shape& s, DType d, Device dev) { return Tensor::zeros(s, d, dev); }, "Zeros");
  creator("ones", [](const Shape& s, DType d, Device dev) { return Tensor::ones(s, d, dev); }, "Ones");
  m.def(
      "full",
      [](const py::object& shape, double value, const py::object& dtype, const py::object& device) {
        return Tensor::full(shape_arg(shape), value, dtype_arg(dtype, DType::f32), device_arg(device));
      },
      py::arg("shape"), py::arg("fill_value"), py::kw_only(), py::arg("dtype") = py::none(), py::arg("device") = "cpu");
  m.def(
      "arange",
      [](int64_t start, std::optional<int64_t> end, int64_t step, const py::object& dtype, const py::object& device) {
        if (!end) end = start, start = 0;
        return Tensor::arange(start, *end, step, dtype_arg(dtype, DType::i64), device_arg(device));
      },
      py::arg("start"), py::arg("end") = py::none(), py::arg("step") = 1, py::kw_only(), py::arg("dtype") = py::none(),
      py::arg("device") = "cpu", "Integers start, start + step, ... below end (i64 unless dtype says otherwise)");
  // Philox under (seed, offset), the whole state: the same numbers on every device.
  using RandomFn = Tensor (*)(const Shape&, uint64_t, uint64_t, DType, Device);
  for (auto [name, make, doc] : {std::tuple<const char*, RandomFn, const char*>{"rand", &Tensor::rand, "Uniform in [0, 1)"},
                                 {"randn", &Tensor::randn, "Standard normal"}})
    m.def(
        name,
        [make](const py::object& shape, uint64_t seed, uint64_t offset, const py::object& dtype, const py::object& device) {
          return make(shape_arg(shape), seed, offset, dtype_arg(dtype, DType::f32), device_arg(device));
        },
        py::arg("shape"), py::kw_only(), py::arg("seed"), py::arg("offset") = 0, py::arg("dtype") = py::none(),
        py::arg("device") = "cpu", doc);
  m.def(
      "randint",
      [](int64_t low, int64_t high, const py::object& shape, uint64_t seed, uint64_t offset, const py::object& dtype,
         const py::object& device) {
        return Tensor::randint(low, high, shape_arg(shape), seed, offset, dtype_arg(dtype, DType::i64),
                               device_arg(device));
      },
      py::arg("low"), py::arg("high"), py::arg("shape"), py::kw_only(), py::arg("seed"), py::arg("offset") = 0,
      py::arg("dtype") = py::none(), py::arg("device") = "cpu");
  m.def("scalar_tensor", [](double v, const py::object& dtype, const py::object& device) {
        return Tensor::scalar(v, dtype_arg(dtype, DType::f32), device_arg(device));
      }, py::arg("value"), py::kw_only(), py::arg("dtype") = py::none(), py::arg("device") = "cpu");

  // ---- views: share memory; each is an autograd op ----
  t.def("view", [](const Tensor& x, const py::args& s) { return x.view(shape_of(s)); })
      .def("reshape", [](const Tensor& x, const py::args& s) { return x.reshape(shape_of(s)); })
      .def("flatten", &Tensor::flatten)
      .def("transpose", &Tensor::transpose, py::arg("dim0"), py::arg("dim1"))
      .def_property_readonly("T", [](const Tensor& x) { return x.t(); }, "the transpose of a matrix")
      .def("t", &Tensor::t)
      .def("permute", [](const Tensor& x, const py::args& d) { return x.permute(shape_of(d)); })
      .def("narrow", &Tensor::narrow, py::arg("dim"), py::arg("start"), py::arg("length"))
      .def("slice", &Tensor::slice, py::arg("dim"), py::arg("start"), py::arg("end"), py::arg("step") = 1)
      .def("select", &Tensor::select, py::arg("dim"), py::arg("index"))
      .def("expand", [](const Tensor& x, const py::args& s) { return x.expand(shape_of(s)); })
      .def("squeeze", [](const Tensor& x, std::optional<int64_t> d) { return d ? x.squeeze(*d) : x.squeeze(); },
           py::arg("dim") = py::none())
      .def("unsqueeze", &Tensor::unsqueeze, py::arg("dim"))
      .def("contiguous", &Tensor::contiguous, ReleaseGil())
      .def("detach", &Tensor::detach);

  // ---- moves and casts: t.to("sim:1"), t.to(lathe.bf16), t.to("bf16"), t.to(device, dtype) ----
  t.def(
       "to",
       [](const Tensor& x, const py::object& a, const py::object& b) {
         std::optional<Device> device;
         std::optional<DType> dtype;
         for (const py::object& o : {a, b}) {
           if (o.is_none()) continue;
           if (py::isinstance<DType>(o)) dtype = o.cast<DType>();
           else if (py::isinstance<Device>(o)) device = o.cast<Device>();
           else if (py::isinstance<py::str>(o)) {
             const std::string s = o.cast<std::string>();
             bool is_dtype = true;
             try {
               dtype_from_name(s);
             } catch (const Error&) {
               is_dtype = false;
             }
             if (is_dtype) dtype = dtype_from_name(s);
             else device = Device::parse(s);
           } else {
             throw py::type_error("to(): expected a device or a dtype (or their names), got " +
                                  std::string(py::str(py::type::of(o))));
           }
         }
         py::gil_scoped_release nogil;
         Tensor y = device ? x.to(*device) : x;
         return dtype ? y.to(*dtype) : y;
       },
       py::arg("device_or_dtype"), py::arg("dtype") = py::none())
      .def("cpu", [](const Tensor& x) { return x.to(Device::cpu()); }, ReleaseGil())
      .def("clone", &Tensor::clone, ReleaseGil())
      .def("item", [](const Tensor& x) -> py::object {
        double v;
        {
          py::gil_scoped_release nogil;
          v = x.item();
        }
        if (is_floating(x.dtype())) return py::float_(v);
        if (x.dtype() == DType::b8) return py::bool_(v != 0);
        return py::int_(int64_t(v));
      })
      .def("copy_", [](Tensor& x, const Tensor& src) { x.copy_(src); return x; }, ReleaseGil(), py::arg("src"))
      .def("fill_", [](Tensor& x, double v) { x.fill_(v); return x; }, ReleaseGil(), py::arg("value"))
      .def("zero_", [](Tensor& x) { x.zero_(); return x; }, ReleaseGil());

  // ---- autograd ----
  t.def_property(
       "requires_grad", &Tensor::requires_grad, [](Tensor& x, bool on) { x.requires_grad_(on); })
      .def("requires_grad_", [](Tensor& x, bool on) { x.requires_grad_(on); return x; }, py::arg("requires_grad") = true)
      .def_property_readonly("is_leaf", &Tensor::is_leaf)
      .def_property(
          "grad", [](const Tensor& x) -> py::object { return x.grad().defined() ? py::cast(x.grad()) : py::none(); },
          [](Tensor& x, const std::optional<Tensor>& g) { x.set_grad(g ? *g : Tensor()); })
      .def_property_readonly("grad_fn", [](const Tensor& x) -> py::object {
        return x.grad_fn() ? py::object(py::str(x.grad_fn()->name)) : py::object(py::none());
      }, "the name of the op that made this tensor, or None for a leaf")
      .def("backward", [](const Tensor& x, const std::optional<Tensor>& g, bool retain_graph) {
        x.backward(g ? *g : Tensor(), retain_graph);
      }, ReleaseGil(), py::arg("gradient") = py::none(), py::arg("retain_graph") = false);

  // with lathe.no_grad(): ... records no node in the block (gradient mode is per thread, as in C++).
  struct NoGrad {
    std::optional<NoGradGuard> guard;
  };
  py::class_<NoGrad>(m, "no_grad", "with lathe.no_grad(): no op in the block records a node")
      .def(py::init<>())
      .def("__enter__", [](NoGrad& g) { g.guard.emplace(); })
      .def("__exit__", [](NoGrad& g, const py::args&) { g.guard.reset(); });
  m.def("is_grad_enabled", &grad_enabled);
}

}  // namespace lathe::python
