// lathe.ref: the reference harness as a library (ref/, docs/reference-cases.md): run a case, from
// its file or from a document and tensors made in Python; check results with `lathe ref --check`'s
// verdicts and report; write the fixtures pack. python/lathe/ref.py iterates the pack, and
// python/lathe/pytest_plugin.py turns it into a parametrized fixture.
#include <pybind11/stl.h>
#include <pybind11_json/pybind11_json.hpp>  // nlohmann::json <-> Python objects

#include "python/bindings.h"
#include "ref/case_registry.h"
#include "ref/fixtures.h"
#include "ref/op_registry.h"
#include "ref/result_check.h"
#include "serialize/safetensors.h"

namespace lathe::python {

namespace {

// A case or a result: a safetensors file's path, or {name: tensor} made in Python (`what` names it
// in messages, as a path would).
serialize::SafetensorsFile tensors_file(const py::object& source, const char* what) {
  if (py::isinstance<py::str>(source)) {
    const std::string path = source.cast<std::string>();
    py::gil_scoped_release nogil;
    return serialize::read_safetensors(path);
  }
  serialize::SafetensorsFile f;
  f.path = what;
  for (auto& [name, t] : tensors_from_dict(source.cast<py::dict>(), what)) f.tensors.emplace_back(name, t.to(Device::cpu()));
  return f;
}

py::dict verdict_dict(const ref::TensorVerdict& v) {
  py::dict d;
  d["name"] = v.name;
  d["pass"] = v.pass;
  d["problem"] = v.problem;
  d["elements"] = v.elements;
  d["mismatched"] = v.mismatched;
  d["max_abs_diff"] = v.max_abs_diff;
  d["worst_ratio"] = v.worst_ratio;
  d["line"] = ref::format_verdict(v);
  return d;
}

}  // namespace

void bind_ref(py::module_& m) {
  py::module_ r = m.def_submodule("_ref", "The reference harness (ref/): lathe.ref wraps it");
  r.def("run", [](const py::object& case_source, const py::object& document, const py::object& device) {
        serialize::SafetensorsFile c = tensors_file(case_source.is_none() ? py::dict() : case_source, "the case's tensors");
        if (!document.is_none()) c.metadata["case"] = document.cast<nlohmann::json>().dump();
        const Device d = device_arg(device);
        ref::RefOutput out;
        {
          py::gil_scoped_release nogil;
          out = ref::run_reference_case(c, d);
        }
        return py::make_tuple(tensors_dict(out.tensors), out.result);
      }, py::arg("case"), py::arg("document"), py::arg("device"));
  r.def("check", [](const py::object& got, const py::object& want, std::optional<double> rtol,
                    std::optional<double> atol, bool equal_nan) {
        ref::CheckOptions options;
        LATHE_CHECK(rtol.has_value() == atol.has_value(), "lathe.ref.check: give both rtol and atol, or neither");
        if (rtol) {
          LATHE_CHECK(*rtol >= 0 && *atol >= 0, "lathe.ref.check: rtol and atol must be numbers >= 0, got ", *rtol,
                      " and ", *atol);
          options.tolerance = ref::Tolerance{*rtol, *atol};
        }
        options.equal_nan = equal_nan;
        const serialize::SafetensorsFile g = tensors_file(got, "got"), w = tensors_file(want, "want");
        ref::CheckReport report;
        {
          py::gil_scoped_release nogil;
          report = ref::check_report(ref::check_results(g, w, options));
        }
        py::list verdicts;
        for (const auto& v : report.verdicts) verdicts.append(verdict_dict(v));
        return py::make_tuple(report.pass, report.text, verdicts);
      }, py::arg("got"), py::arg("want"), py::arg("rtol"), py::arg("atol"), py::arg("equal_nan"));
  r.def("ops", [] {
        py::list out;
        for (const ref::OpEntry& e : ref::op_registry()) {
          py::dict d;
          d["name"] = e.name;
          d["ref_kind"] = e.in_ref_kind;
          d["operands"] = py::make_tuple(e.operands.least,
                                         e.operands.most == ref::Arity::kAny ? py::object(py::none()) : py::int_(e.operands.most));
          py::list args;
          for (const char* arg : e.args) args.append(arg);
          d["args"] = args;
          out.append(d);
        }
        return out;
      });
  r.def("write_fixtures", [](const std::string& dir, const py::object& device) {
        const Device d = device_arg(device);
        py::gil_scoped_release nogil;
        return ref::write_fixtures(dir, d).cases;
      }, py::arg("dir"), py::arg("device") = "cpu");
}

}  // namespace lathe::python
