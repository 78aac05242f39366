// The compiled half of `import lathe`: one bind_* per file, each exposing one layer of the C++
// library as it is (python/module.cpp calls them in order). The bindings hold no logic of their own:
// they convert arguments, release the GIL around every call that runs kernels, and turn lathe's
// errors into `lathe.Error` with lathe's message.
#pragma once

#include <pybind11/pybind11.h>

#include <string>
#include <utility>
#include <vector>

#include "core/device.h"
#include "core/dtype.h"
#include "core/tensor.h"

namespace lathe::python {

namespace py = pybind11;

// Calls into lathe that run kernels drop the GIL for their duration (other Python threads run, and
// a C++ thread's release of NumPy memory can take it back).
using ReleaseGil = py::call_guard<py::gil_scoped_release>;

// A device given as lathe.Device or as its name ("cpu", "sim:1", "cuda:0").
Device device_arg(const py::handle& h);
// A dtype given as lathe.DType (lathe.f32) or as its name ("f32", "bf16").
DType dtype_arg(const py::handle& h);
// Named tensors (a model's parameters, a file's tensors) as a dict in their order; the tensors are
// handles, not copies.
py::dict tensors_dict(const std::vector<std::pair<std::string, Tensor>>& named);
// And back: {name: tensor} from Python, in its order; a value that is no lathe.Tensor is an error
// naming `what` (the call: "save", "got") and the key.
std::vector<std::pair<std::string, Tensor>> tensors_from_dict(const py::dict& tensors, const std::string& what);
// A dtype given as a DType, its name, or None for `if_none`.
DType dtype_arg(const py::handle& h, DType if_none);

void bind_core_types(py::module_& m);    // core_types.cpp: DType, Device, memory statistics
void bind_core_tensor(py::module_& m);   // core_tensor.cpp: Tensor, creation, views, autograd
void bind_core_ops(py::module_& m);      // core_ops.cpp: the functions of core/ops.h and the operators
void bind_core_sharing(py::module_& m);  // core_sharing.cpp: the buffer protocol and DLPack
void bind_nn_gpt(py::module_& m);        // nn_gpt.cpp: lathe.GPT
void bind_optim(py::module_& m);         // optim.cpp: lathe.optim, every optimizer by name
void bind_serialize(py::module_& m);     // serialize.cpp: safetensors, weights files, checkpoints
void bind_data(py::module_& m);          // data.cpp: tokenizers, token shards, datasets
void bind_train(py::module_& m);
void bind_ref(py::module_& m);           // ref.cpp: the reference harness (lathe.ref)         // train.cpp: lathe.train, the command's trainer

}  // namespace lathe::python
