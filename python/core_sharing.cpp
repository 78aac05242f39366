// Sharing memory with NumPy and PyTorch without a copy, both ways:
//   np.asarray(t)          the buffer protocol (cpu tensors; bf16 has no NumPy type)
//   lathe.from_numpy(a)    any writable buffer (a NumPy array, a memoryview)
//   torch.from_dlpack(t)   DLPack (cpu and cuda tensors, every dtype)
//   lathe.from_dlpack(x)   any object with __dlpack__ (torch, NumPy, JAX, CuPy) or a DLPack capsule
// Each side keeps the other's memory alive through a reference: a lathe tensor over NumPy's memory
// holds the array's buffer (Storage::borrow), an array over lathe's holds the tensor. Strides and
// views cross as they are; what one side cannot express (negative strides, a byte stride that is
// not a whole number of elements, a byte order other than the machine's, a cuda tensor for NumPy)
// is an error saying so.
#include <dlpack/dlpack.h>
#include <pybind11/stl.h>

#include <cstring>
#include <memory>
#include <string>

#include "core/backend.h"
#include "core/tensor.h"
#include "python/bindings.h"

namespace lathe::python {

namespace {

// DLPack's code for booleans, from version 0.8 on (Debian's header is 0.6, which has none).
constexpr uint8_t kDLBoolCode = 6;

// ---- the buffer protocol ----

// The PEP 3118 format of each dtype; bf16 has none.
std::string buffer_format(DType t) {
  switch (t) {
    case DType::f32: return py::format_descriptor<float>::format();
    case DType::f64: return py::format_descriptor<double>::format();
    case DType::f16: return "e";
    case DType::i32: return py::format_descriptor<int32_t>::format();
    case DType::i64: return py::format_descriptor<int64_t>::format();
    case DType::b8: return py::format_descriptor<bool>::format();
    case DType::bf16: break;
  }
  LATHE_FAIL("bf16 has no NumPy dtype: share it through DLPack (torch.from_dlpack(t)) or convert it (t.to(lathe.f32))");
}

DType dtype_of_format(std::string f, size_t itemsize) {
  if (!f.empty() && (f[0] == '@' || f[0] == '=' || f[0] == '<')) f = f.substr(1);
  if (f.size() == 1) {
    switch (f[0]) {
      case 'f': if (itemsize == 4) return DType::f32; break;
      case 'd': if (itemsize == 8) return DType::f64; break;
      case 'e': if (itemsize == 2) return DType::f16; break;
      case '?': if (itemsize == 1) return DType::b8; break;
      case 'i': case 'l': case 'q':
        if (itemsize == 4) return DType::i32;
        if (itemsize == 8) return DType::i64;
        break;
      default: break;
    }
  }
  LATHE_FAIL("from_numpy: elements of format '", f, "' (", itemsize,
             " bytes) have no lathe dtype; lathe has f32, f64, f16, i32, i64 and bool (convert with astype)");
}

// The bytes from the first element to the end of the last, for non-negative strides in elements.
size_t span_bytes(const Shape& shape, const Strides& strides, DType t) {
  int64_t last = 0;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 0) return 0;
    last += (shape[d] - 1) * strides[d];
  }
  return size_t(last + 1) * dtype_size(t);
}

bool c_contiguous(const py::buffer_info& info) {
  py::ssize_t expected = info.itemsize;
  for (py::ssize_t d = info.ndim; d-- > 0;) {
    if (info.shape[size_t(d)] != 1 && info.strides[size_t(d)] != expected) return false;
    expected *= info.shape[size_t(d)];
  }
  return true;
}

py::buffer_info export_buffer(const Tensor& x) {
  LATHE_CHECK(x.device().is_cpu(), "NumPy reads host memory: tensor ", x.desc(), " is not on the cpu (t.to(\"cpu\") first)");
  const std::string format = buffer_format(x.dtype());
  const auto item = int64_t(dtype_size(x.dtype()));
  std::vector<py::ssize_t> shape(x.shape().begin(), x.shape().end()), strides;
  for (int64_t s : x.strides()) strides.push_back(s * item);
  // NumPy may write through the buffer: anything cached from this memory must look again.
  x.bump_version();
  return py::buffer_info(x.numel() > 0 ? x.data_ptr() : nullptr, item, format, x.dim(), shape, strides, false);
}

// The buffer protocol's entry point. pybind11's own (def_buffer) cannot report an error, and
// what cannot be shared must say why (bf16, a device tensor): this one sets lathe.Error with lathe's
// message. The view's format, shape and strides live in a buffer_info that pybind11's release frees.
int get_buffer(PyObject* obj, Py_buffer* view, int flags) {
  std::memset(view, 0, sizeof(Py_buffer));
  py::buffer_info* info = nullptr;
  try {
    info = new py::buffer_info(export_buffer(py::handle(obj).cast<const Tensor&>()));
  } catch (const Error& e) {
    PyErr_SetString(py::module_::import("lathe._lathe").attr("Error").ptr(), e.what());
    return -1;
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_BufferError, e.what());
    return -1;
  }
  view->obj = obj;
  view->internal = info;
  view->buf = info->ptr;
  view->itemsize = info->itemsize;
  view->len = info->itemsize * info->size;
  view->readonly = 0;
  view->ndim = 1;
  if ((flags & PyBUF_FORMAT) == PyBUF_FORMAT) view->format = const_cast<char*>(info->format.c_str());
  if ((flags & PyBUF_STRIDES) == PyBUF_STRIDES) {
    view->ndim = int(info->ndim);
    view->shape = info->shape.data();
    view->strides = info->strides.data();
  } else if (!c_contiguous(*info)) {
    delete info;
    view->obj = nullptr;
    PyErr_SetString(PyExc_BufferError, "lathe.Tensor: a strided tensor's buffer needs a consumer that reads strides");
    return -1;
  }
  Py_INCREF(obj);
  return 0;
}

// Memory another owner lends stays theirs: `owner` (a Python object: the buffer's exporter, a
// DLPack capsule's deleter) is dropped under the GIL when the last tensor over it goes, from
// whichever thread that is. After the interpreter has finalised there is nothing left to drop.
std::function<void()> hand_back(std::function<void()> drop) {
  return [drop = std::move(drop)] {
    if (!Py_IsInitialized()) return;
    py::gil_scoped_acquire gil;
    drop();
  };
}

Tensor from_buffer(const py::buffer& b) {
  auto view = std::make_shared<py::buffer_info>(b.request(/*writable=*/false));
  LATHE_CHECK(!view->readonly, "from_numpy: the array is read-only, and a lathe tensor can be written "
              "(pass a writable array, or a copy: a.copy())");
  const DType dtype = dtype_of_format(view->format, size_t(view->itemsize));
  Shape shape(view->shape.begin(), view->shape.end());
  Strides strides;
  for (size_t d = 0; d < view->strides.size(); ++d) {
    const py::ssize_t s = view->strides[d];
    LATHE_CHECK(s >= 0 && s % view->itemsize == 0, "from_numpy: strides (in bytes) ", py::str(py::cast(view->strides)).cast<std::string>(),
                " of an array of ", view->itemsize, "-byte elements are a layout lathe cannot express "
                "(lathe's strides are non-negative element counts): pass np.ascontiguousarray(a)");
    strides.push_back(shape[d] == 1 ? 0 : s / view->itemsize);
  }
  LATHE_CHECK(reinterpret_cast<uintptr_t>(view->ptr) % size_t(view->itemsize) == 0,
              "from_numpy: the array's data is not aligned to its ", view->itemsize, "-byte elements");
  const size_t nbytes = span_bytes(shape, strides, dtype);
  StoragePtr storage = Storage::borrow(view->ptr, nbytes, Device::cpu(), hand_back([view]() mutable { view.reset(); }));
  // A size-1 dim's stride is free in NumPy (any value); lathe's is taken as 0 above, which keeps
  // the span inside the buffer.
  return make_tensor(shape, strides, 0, dtype, std::move(storage));
}

// ---- DLPack ----

DLDataType dl_dtype(DType t) {
  switch (t) {
    case DType::f32: return {kDLFloat, 32, 1};
    case DType::f64: return {kDLFloat, 64, 1};
    case DType::bf16: return {kDLBfloat, 16, 1};
    case DType::f16: return {kDLFloat, 16, 1};
    case DType::i32: return {kDLInt, 32, 1};
    case DType::i64: return {kDLInt, 64, 1};
    case DType::b8: return {kDLBoolCode, 8, 1};
  }
  LATHE_FAIL("DLPack: unknown dtype");
}

DType dtype_of_dl(DLDataType t) {
  if (t.lanes == 1) {
    if (t.code == kDLFloat && t.bits == 32) return DType::f32;
    if (t.code == kDLFloat && t.bits == 64) return DType::f64;
    if (t.code == kDLFloat && t.bits == 16) return DType::f16;
    if (t.code == kDLBfloat && t.bits == 16) return DType::bf16;
    if (t.code == kDLInt && t.bits == 32) return DType::i32;
    if (t.code == kDLInt && t.bits == 64) return DType::i64;
    if (t.code == kDLBoolCode && t.bits == 8) return DType::b8;
  }
  LATHE_FAIL("from_dlpack: DLPack dtype (code ", int(t.code), ", ", int(t.bits), " bits, ", t.lanes,
             " lanes) has no lathe dtype; lathe has f32, f64, bf16, f16, i32, i64 and bool");
}

DLDevice dl_device(Device d) {
  if (d.is_cpu()) return {kDLCPU, 0};
  if (d.type == DeviceType::cuda) return {kDLCUDA, d.index};
  LATHE_FAIL("DLPack: ", d, " is lathe's emulated accelerator, which no other library can read (t.to(\"cpu\") first)");
}

Device device_of_dl(DLDevice d) {
  if (d.device_type == kDLCPU) return Device::cpu();
  if (d.device_type == kDLCUDA) return Device::cuda(d.device_id);
  LATHE_FAIL("from_dlpack: memory on DLPack device type ", int(d.device_type),
             " (lathe reads the cpu's, kDLCPU, and CUDA's, kDLCUDA)");
}

// What a capsule lends: the tensor (its memory stays alive) and the arrays DLTensor points into.
struct Exported {
  Tensor tensor;
  std::vector<int64_t> shape, strides;
  DLManagedTensor managed{};
};

// A capsule nobody consumed still owns its tensor (the protocol's rule: a consumer renames it).
void capsule_destructor(PyObject* capsule) {
  if (!PyCapsule_IsValid(capsule, "dltensor")) return;  // consumed: the consumer calls the deleter
  PyObject *type, *value, *traceback;
  PyErr_Fetch(&type, &value, &traceback);
  auto* managed = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule, "dltensor"));
  if (managed && managed->deleter) managed->deleter(managed);
  PyErr_Restore(type, value, traceback);
}

// The array API's __dlpack__(stream, max_version, dl_device, copy): the capsule is DLPack 0.x's
// "dltensor", which consumers asking for a newer version take as well; a copy is made when asked
// for, and another device is refused.
py::capsule to_dlpack(const Tensor& x, const py::object& stream, const py::object& max_version,
                      const py::object& device_asked, const py::object& copy) {
  if (!device_asked.is_none()) {
    const DLDevice here = dl_device(x.device());
    const auto asked = device_asked.cast<std::pair<int, int>>();
    LATHE_CHECK(asked.first == int(here.device_type) && asked.second == here.device_id, "__dlpack__: tensor ",
                x.desc(), " is not on DLPack device (", asked.first, ", ", asked.second, "); move it with t.to() first");
  }
  (void)max_version;
  if (!copy.is_none() && copy.cast<bool>()) return to_dlpack(x.clone(), stream, py::none(), py::none(), py::none());
  auto e = std::make_unique<Exported>();
  e->tensor = x.detach();
  e->shape.assign(x.shape().begin(), x.shape().end());
  e->strides.assign(x.strides().begin(), x.strides().end());
  DLTensor& dl = e->managed.dl_tensor;
  dl.data = x.numel() > 0 ? x.data_ptr() : nullptr;
  dl.device = dl_device(x.device());
  dl.ndim = int32_t(x.dim());
  dl.dtype = dl_dtype(x.dtype());
  dl.shape = e->shape.data();
  dl.strides = e->strides.data();
  dl.byte_offset = 0;
  e->managed.manager_ctx = e.get();
  e->managed.deleter = [](DLManagedTensor* m) { delete static_cast<Exported*>(m->manager_ctx); };
  // The consumer reads on its own stream: lathe's queued kernels must have written first.
  if (x.device().type == DeviceType::cuda) {
    py::gil_scoped_release nogil;
    backend_for(x.device()).synchronize(x.device().index);
  }
  (void)stream;
  x.bump_version();  // the consumer may write through it
  DLManagedTensor* managed = &e.release()->managed;
  return py::reinterpret_steal<py::capsule>(PyCapsule_New(managed, "dltensor", capsule_destructor));
}

Tensor from_dlpack(const py::object& source) {
  py::object capsule = source;
  if (py::hasattr(source, "__dlpack__")) {
    const py::tuple where = source.attr("__dlpack_device__")();
    // A CUDA producer is asked (stream 1, the legacy default stream) to have its writes ordered
    // before that stream's work. lathe's own stream is non-blocking and does not wait for it: the
    // caller synchronises the producer first (docs/python.md). Not yet run on a GPU.
    capsule = where[0].cast<int>() == kDLCUDA ? source.attr("__dlpack__")(py::arg("stream") = 1)
                                              : source.attr("__dlpack__")();
  }
  LATHE_CHECK(PyCapsule_IsValid(capsule.ptr(), "dltensor"),
              "from_dlpack: expected an object with __dlpack__ (a torch tensor, a NumPy array) or an unconsumed "
              "DLPack capsule, got ", py::str(py::type::of(source)).cast<std::string>());
  auto* managed = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule.ptr(), "dltensor"));
  const DLTensor& dl = managed->dl_tensor;
  // Whatever is wrong below, the producer's memory goes back: the capsule is consumed first.
  PyCapsule_SetName(capsule.ptr(), "used_dltensor");
  auto give_back = hand_back([managed] {
    if (managed->deleter) managed->deleter(managed);
  });
  try {
    const DType dtype = dtype_of_dl(dl.dtype);
    const Device device = device_of_dl(dl.device);
    Shape shape(dl.shape, dl.shape + dl.ndim);
    Strides strides(shape.size());
    if (dl.strides) {
      for (int d = 0; d < dl.ndim; ++d) {
        LATHE_CHECK(dl.strides[d] >= 0 || shape[d] <= 1, "from_dlpack: negative stride ", dl.strides[d], " in dim ", d,
                    " of a ", dtype_name(dtype), shape_str(shape), " tensor: a layout lathe cannot express");
        strides[d] = shape[d] <= 1 ? 0 : dl.strides[d];
      }
    } else {  // compact row-major
      int64_t s = 1;
      for (int d = dl.ndim - 1; d >= 0; --d) strides[d] = s, s *= shape[d];
    }
    LATHE_CHECK(dl.byte_offset % dtype_size(dtype) == 0, "from_dlpack: byte offset ", dl.byte_offset,
                " is not a whole number of ", dtype_name(dtype), " elements");
    char* data = static_cast<char*>(dl.data) + dl.byte_offset;
    StoragePtr storage = Storage::borrow(data, span_bytes(shape, strides, dtype), device, give_back);
    give_back = nullptr;  // the storage hands it back now
    if (device.type == DeviceType::cuda) backend_for(device);  // a clear error where lathe has no such GPU
    return make_tensor(shape, strides, 0, dtype, std::move(storage));
  } catch (...) {
    if (give_back) give_back();
    throw;
  }
}

}  // namespace

void bind_core_sharing(py::module_& m) {
  py::class_<Tensor> t = py::reinterpret_borrow<py::class_<Tensor>>(m.attr("Tensor"));
  // pybind11's buffer slots with get_buffer in place of its own (py::buffer_protocol() made them).
  reinterpret_cast<PyTypeObject*>(t.ptr())->tp_as_buffer->bf_getbuffer = &get_buffer;
  t.def("__dlpack__", &to_dlpack, py::kw_only(), py::arg("stream") = py::none(), py::arg("max_version") = py::none(),
        py::arg("dl_device") = py::none(), py::arg("copy") = py::none(),
        "A DLPack capsule over this tensor's memory (the tensor stays alive until the consumer is done)");
  t.def("__dlpack_device__", [](const Tensor& x) {
    const DLDevice d = dl_device(x.device());
    return py::make_tuple(int(d.device_type), d.device_id);
  });
  m.def("from_numpy", &from_buffer, py::arg("array"),
        "A tensor over a NumPy array's memory (or any writable buffer's), no copy: writes show on both sides");
  m.def("from_dlpack", &from_dlpack, py::arg("source"),
        "A tensor over the memory of any object with __dlpack__ (torch, NumPy, JAX, CuPy), no copy");
}

}  // namespace lathe::python
