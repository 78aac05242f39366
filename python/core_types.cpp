// DType and Device from Python: lathe.f32 ... lathe.b8 and lathe.Device("sim:1"); wherever a dtype or a
// device is taken, its name is accepted too.
#include <pybind11/stl.h>

#include "core/backend.h"
#include "core/error.h"
#include "core/storage.h"
#include "python/bindings.h"

namespace lathe::python {

Device device_arg(const py::handle& h) {
  if (py::isinstance<Device>(h)) return h.cast<Device>();
  if (py::isinstance<py::str>(h)) return Device::parse(h.cast<std::string>());
  throw py::type_error("expected a lathe.Device or a device name such as \"cpu\", \"sim:1\" or \"cuda:0\", got " +
                       std::string(py::str(py::type::of(h))));
}

DType dtype_arg(const py::handle& h) {
  if (py::isinstance<DType>(h)) return h.cast<DType>();
  if (py::isinstance<py::str>(h)) return dtype_from_name(h.cast<std::string>());
  throw py::type_error("expected a lathe dtype (lathe.f32, ...) or its name (\"f32\", \"bf16\", ...), got " +
                       std::string(py::str(py::type::of(h))));
}

DType dtype_arg(const py::handle& h, DType if_none) { return h.is_none() ? if_none : dtype_arg(h); }

void bind_core_types(py::module_& m) {
  py::enum_<DType> dtype(m, "DType", "Element types: f32, f64, bf16, f16, i32, i64, bool (core/dtype.h's b8)");
  for (DType t : {DType::f32, DType::f64, DType::bf16, DType::f16, DType::i32, DType::i64, DType::b8})
    dtype.value(dtype_name(t), t);
  dtype.export_values();
  dtype.def_property_readonly("itemsize", [](DType t) { return dtype_size(t); });
  dtype.def_property_readonly("is_floating_point", [](DType t) { return is_floating(t); });
  // str(lathe.f32) is "f32", the name lathe prints (prepended: pybind11's enum __str__ would answer first).
  dtype.def("__str__", [](DType t) { return std::string(dtype_name(t)); }, py::prepend());

  py::class_<Device>(m, "Device", "Where a tensor's memory lives: cpu, sim:N (an emulated accelerator) or cuda:N")
      .def(py::init(&Device::parse), py::arg("name"))
      .def_property_readonly("type", [](const Device& d) { return d.str().substr(0, d.str().find(':')); })
      .def_readonly("index", &Device::index)
      .def("__str__", &Device::str)
      .def("__repr__", [](const Device& d) { return "lathe.Device('" + d.str() + "')"; })
      .def("__eq__", [](const Device& a, const py::object& b) {
        try {
          return a == device_arg(b);
        } catch (const std::exception&) {
          return false;
        }
      })
      .def("__hash__", [](const Device& d) { return py::hash(py::str(d.str())); });

  m.def("cuda_is_available",
        [] {
          if (!backend_available(DeviceType::cuda)) return false;
          try {
            backend_for(Device::cuda());
            return true;
          } catch (const Error&) {  // built with CUDA, no GPU here
            return false;
          }
        },
        "True when lathe was built with CUDA and sees a GPU");
  m.def("synchronize", [](const py::object& device) { backend_for(device_arg(device)).synchronize(device_arg(device).index); },
        py::arg("device") = "cpu", "Waits until every kernel queued on the device has run");
  m.def(
      "memory_stats",
      [](const py::object& device) {
        const MemoryStats s = memory_stats(device_arg(device));
        py::dict d;
        d["allocated"] = s.allocated;
        d["peak_allocated"] = s.peak_allocated;
        d["reserved"] = s.reserved;
        d["num_allocs"] = s.num_allocs;
        return d;
      },
      py::arg("device") = "cpu", "The device allocator's statistics, in bytes");
  m.def("reset_peak_memory", [](const py::object& device) { reset_peak_memory(device_arg(device)); },
        py::arg("device") = "cpu");
}

}  // namespace lathe::python
