// lathe.train: the trainer of `lathe train` (train/trainer.h), its options as keyword arguments
// under their JSON names (TrainOptions: data, config, steps, lr, out, ...), with a Python callback
// after each step. The run is the command's, to the bit: same options, same metrics, same files.
//
// Ctrl-C: Python only notes a signal while C++ runs, and the run looks at that note after every
// step; KeyboardInterrupt then ends it as a kill would, with every checkpoint whole
// (lathe.train(resume=DIR) continues it).
#include <pybind11/functional.h>
#include <pybind11/stl.h>
#include <pybind11_json/pybind11_json.hpp>  // nlohmann::json <-> Python objects

#include <optional>

#include "python/bindings.h"
#include "train/trainer.h"

namespace lathe::python {

namespace {

py::dict step_dict(const train::StepResult& r) {
  py::dict d;
  d["step"] = r.step;
  d["loss"] = r.loss;
  d["lr"] = r.lr;
  d["grad_norm"] = r.grad_norm;
  d["seconds"] = r.seconds;
  d["skipped"] = r.skipped;
  d["scale"] = r.scale;
  return d;
}

// The options a run keeps are keywords under their JSON names; the four it does not keep (what to do
// this time: resume, overwrite, how often and whether to print) are arguments of their own.
py::dict run(const std::optional<std::function<void(py::dict)>>& on_step, const std::string& resume, bool overwrite,
             bool quiet, double progress_seconds, const py::kwargs& kwargs) {
  const nlohmann::json given = py::cast<nlohmann::json>(kwargs);
  std::vector<std::string> keys;
  for (const auto& [key, value] : given.items()) keys.push_back(key);
  train::TrainOptions options = train::train_options_from_json(given);
  options.resume = resume;
  options.overwrite = overwrite;
  options.quiet = quiet;
  options.progress_seconds = progress_seconds;

  train::Trainer::StepHook hook = [&](const train::StepResult& r) {
    py::gil_scoped_acquire gil;
    if (on_step) (*on_step)(step_dict(r));
    if (PyErr_CheckSignals() != 0) throw py::error_already_set();
  };
  train::TrainSummary summary;
  {
    py::gil_scoped_release nogil;
    std::optional<train::Trainer> trainer;
    if (!options.resume.empty()) {
      trainer.emplace(train::Trainer::resume(options.resume, options, keys));
    } else {
      options = train::fresh_run_options(std::move(options), keys);
      train::validate(options);
      trainer.emplace(std::move(options));
    }
    summary = trainer->run(stdout, hook);
  }
  py::dict d;
  d["steps"] = summary.steps;
  d["final_train_loss"] = summary.final_train_loss;
  d["final_val_loss"] = summary.final_val_loss;
  d["final_val_bpb"] = summary.final_val_bpb;
  d["seconds"] = summary.seconds;
  d["skipped_steps"] = summary.skipped_steps;
  return d;
}

}  // namespace

void bind_train(py::module_& m) {
  const train::TrainOptions defaults;
  m.def("train", &run, py::kw_only(), py::arg("on_step") = py::none(), py::arg("resume") = defaults.resume,
        py::arg("overwrite") = defaults.overwrite, py::arg("quiet") = defaults.quiet,
        py::arg("progress_seconds") = defaults.progress_seconds,
        "Runs `lathe train` with its options as keywords (data=, config=, steps=, lr=, out=, resume=, ...; the "
        "names of the command's flags with _ for -). on_step(dict) is called after each step with its step, "
        "loss, lr, grad_norm and seconds. Returns the run's summary.");
}

}  // namespace lathe::python
