// Files from Python: named tensors in safetensors (lathe.save / lathe.load), a GPT's weights file
// (lathe.save_model / lathe.load_model: any format `lathe sample` reads), and training checkpoints
// (lathe.save_checkpoint, lathe.Checkpoint): serialize/ (model_file.h among them) as it is, every
// write atomic, every read checked, each tensor created on the device asked for.
#include <pybind11/stl.h>
#include <pybind11_json/pybind11_json.hpp>  // nlohmann::json <-> Python objects

#include "nn/gpt.h"
#include "optim/optimizer.h"
#include "python/bindings.h"
#include "serialize/checkpoint.h"
#include "serialize/model_file.h"
#include "serialize/weights.h"

namespace lathe::python {

namespace {

}  // namespace

void bind_serialize(py::module_& m) {
  m.def("save", [](const std::string& path, const py::dict& tensors, const serialize::Metadata& metadata) {
        serialize::NamedTensors named = tensors_from_dict(tensors, "save");
        py::gil_scoped_release nogil;
        serialize::save_weights(path, named, metadata);
      }, py::arg("path"), py::arg("tensors"), py::arg("metadata") = serialize::Metadata{},
      "Writes {name: tensor} as safetensors (any device, any strides), atomically");
  m.def("load", [](const std::string& path, const py::object& device) {
        serialize::NamedTensors named;
        const Device d = device_arg(device);
        {
          py::gil_scoped_release nogil;
          named = serialize::load_weights(path, d);
        }
        return tensors_dict(named);
      }, py::arg("path"), py::kw_only(), py::arg("device") = "cpu",
      "{name: tensor} of a safetensors file, each created on `device`; a damaged file is an error naming it");
  m.def("load_metadata", [](const std::string& path) {
        serialize::Metadata metadata;
        py::gil_scoped_release nogil;
        serialize::load_weights(path, Device::cpu(), &metadata);
        return metadata;
      }, py::arg("path"));

  m.def("save_model", [](const std::string& path, const nn::GPT& model) {
        py::gil_scoped_release nogil;
        serialize::save_model(path, model);
      }, py::arg("path"), py::arg("model"), "A GPT's weights file, with its config (lathe sample reads it)");
  m.def("load_model", [](const std::string& path, const py::object& device) {
        const Device d = device_arg(device);
        py::gil_scoped_release nogil;
        return std::move(serialize::load_model(path, d).model);
      }, py::arg("path"), py::kw_only(), py::arg("device") = "cpu",
      "A GPT from a weights file, a checkpoint, a Hugging Face GPT-2 directory or an llm.c file, on `device`");

  m.def("save_checkpoint", [](const std::string& path, const nn::GPT& model, const optim::Optimizer& optimizer,
                              int64_t step, const nlohmann::json& program) {
        serialize::TrainingStateRef ref;
        ref.model = &model;
        ref.optimizer = &optimizer;
        ref.step = step;
        ref.model_description = model.config().to_json();
        ref.program = program;
        py::gil_scoped_release nogil;
        serialize::save_training_state(path, ref);
      }, py::arg("path"), py::arg("model"), py::arg("optimizer"), py::kw_only(), py::arg("step") = 0,
      py::arg("program") = nlohmann::json(nullptr),
      "The whole training state (weights, the optimizer's groups and typed state) in one file, atomically");
  py::class_<serialize::TrainingCheckpoint>(m, "Checkpoint",
                                            "A training checkpoint read and checked for a run on `device`")
      .def(py::init([](const std::string& path, const py::object& device) {
             const Device d = device_arg(device);
             py::gil_scoped_release nogil;
             return serialize::TrainingCheckpoint::read(path, d);
           }),
           py::arg("path"), py::kw_only(), py::arg("device") = "cpu")
      .def_property_readonly("path", &serialize::TrainingCheckpoint::path)
      .def_property_readonly("step", &serialize::TrainingCheckpoint::step)
      .def_property_readonly("model_config", &serialize::TrainingCheckpoint::model_description)
      .def_property_readonly("program", &serialize::TrainingCheckpoint::program)
      .def_property_readonly("optimizer_kind", &serialize::TrainingCheckpoint::optimizer_kind)
      .def("restore", [](const serialize::TrainingCheckpoint& c, nn::GPT& model, optim::Optimizer& optimizer) {
        c.restore(model, optimizer);
      }, ReleaseGil(), py::arg("model"), py::arg("optimizer"),
      "Weights into the model's parameters in place, the optimizer's groups and state where its policy puts them")
      .def("load_weights", [](const serialize::TrainingCheckpoint& c, nn::GPT& model) { c.load_weights(model); },
           ReleaseGil(), py::arg("model"));
}

}  // namespace lathe::python
