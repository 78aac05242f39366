// `lathe._lathe`: the compiled bindings (python/bindings.h). python/lathe/__init__.py re-exports
// them as `lathe`.
#include "python/bindings.h"

#include "core/error.h"

PYBIND11_MODULE(_lathe, m) {
  namespace py = pybind11;
  m.doc() = "lathe's C++ library: tensors, autograd, models, optimizers, checkpoints, data (docs/python.md)";
  m.attr("__version__") = LATHE_VERSION;

  // lathe::Error carries a message that names the op, file, tensor, shape, dtype or device at fault:
  // Python sees it unchanged, as lathe.Error (a RuntimeError, as PyTorch's errors are).
  static py::exception<lathe::Error> error(m, "Error", PyExc_RuntimeError);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const lathe::Error& e) {
      error(e.what());
    }
  });

  lathe::python::bind_core_types(m);
  lathe::python::bind_core_tensor(m);
  lathe::python::bind_core_ops(m);
  lathe::python::bind_core_sharing(m);
  lathe::python::bind_nn_gpt(m);
  lathe::python::bind_optim(m);
  lathe::python::bind_serialize(m);
  lathe::python::bind_data(m);
  lathe::python::bind_train(m);
  lathe::python::bind_ref(m);
}
