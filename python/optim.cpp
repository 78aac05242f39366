// lathe.optim: every optimizer of the registry (optim/registry.h) by its name, with
// PyTorch's options as keyword arguments and param groups as dicts, and its typed state as it is:
// each entry's name, scope, placement (with the parameter, on the host, sharded), dtype and tensor.
#include <pybind11/stl.h>
#include <pybind11_json/pybind11_json.hpp>  // nlohmann::json <-> Python objects

#include "optim/optimizer.h"
#include "optim/placement.h"
#include "python/bindings.h"
#include "optim/registry.h"

namespace lathe::python {

namespace {

// `params`: tensors (one group), or dicts {"params": [...], option: value, ...} (a group each).
std::unique_ptr<optim::Optimizer> make(const std::string& name, const py::iterable& params, bool fused,
                                       const py::kwargs& defaults) {
  auto opt = optim::make_optimizer(name, py::cast<nlohmann::json>(defaults), fused);
  std::vector<Tensor> plain;
  for (const py::handle& p : params) {
    if (py::isinstance<Tensor>(p)) {
      plain.push_back(p.cast<Tensor>());
      continue;
    }
    LATHE_CHECK(py::isinstance<py::dict>(p), "optimizer \"", name, "\": params holds a ",
                py::str(py::type::of(p)).cast<std::string>(), "; expected tensors or dicts {\"params\": [...], ...}");
    py::dict group = py::reinterpret_borrow<py::dict>(p);
    LATHE_CHECK(group.contains("params"), "optimizer \"", name, "\": a param group needs \"params\"");
    const std::vector<Tensor> tensors = group["params"].cast<std::vector<Tensor>>();
    nlohmann::json options = nlohmann::json::object();
    for (const auto& [k, v] : group)
      if (k.cast<std::string>() != "params") options[k.cast<std::string>()] = v.cast<nlohmann::json>();
    opt->add_param_group(tensors, options);
  }
  if (!plain.empty()) opt->add_param_group(plain);
  return opt;
}

}  // namespace

void bind_optim(py::module_& m) {
  py::module_ o = m.def_submodule("optim", "Optimizers by name: lathe.optim.make(\"adamw\", params, lr=1e-3)");
  o.def("names", [] {
    std::vector<std::string> names;
    for (const auto& k : optim::optimizer_kinds()) names.push_back(k.name);
    return names;
  });
  o.def("kinds", [] {
    py::list kinds;
    for (const auto& k : optim::optimizer_kinds()) {
      py::dict d;
      d["name"] = k.name;
      d["has_fused"] = k.has_fused;
      d["shardable"] = k.shardable;
      d["default_lr"] = k.default_lr;
      d["betas"] = k.betas;
      d["adamw_beside"] = k.adamw_beside;
      kinds.append(d);
    }
    return kinds;
  }, "each optimizer of the registry with what it can do (optim/registry.h)");
  py::class_<optim::Optimizer, std::unique_ptr<optim::Optimizer>>(o, "Optimizer")
      .def_property_readonly("kind", &optim::Optimizer::kind)
      .def_property_readonly("fused", &optim::Optimizer::fused)
      .def("step", &optim::Optimizer::step, ReleaseGil(), "One update from the parameters' current gradients")
      .def("zero_grad", &optim::Optimizer::zero_grad)
      .def_property_readonly("step_count", &optim::Optimizer::step_count)
      .def_property_readonly("param_groups", [](const optim::Optimizer& opt) { return opt.groups_json(); },
                             "each group's options (PyTorch's names) and parameter numbers")
      .def("lr", &optim::Optimizer::lr, py::arg("group") = 0)
      .def("set_lr", [](optim::Optimizer& opt, double lr, std::optional<size_t> group) {
        if (group) opt.set_lr(*group, lr);
        else opt.set_lr_all(lr);
      }, py::arg("lr"), py::arg("group") = py::none(), "one group's learning rate, or every group's")
      .def("state_dict", [](const optim::Optimizer& opt) {
        py::dict d;
        for (const auto& e : opt.state_entries()) d[py::str(e.name)] = e.tensor;
        return d;
      }, "state name (\"param.3.exp_avg\", \"group.0.d\", \"global.step\") -> the optimizer's tensor itself")
      .def("state_entries", [](const optim::Optimizer& opt) {
        py::list out;
        for (const auto& e : opt.state_entries()) {
          py::dict d;
          d["name"] = e.name;
          d["scope"] = optim::scope_name(e.scope);
          d["index"] = e.index;
          d["key"] = e.key;
          d["placement"] = optim::placement_name(e.placement);
          d["dtype"] = e.dtype;
          d["tensor"] = e.tensor;
          out.append(d);
        }
        return out;
      }, "each state tensor with its type: scope, index, key, placement and dtype (optim/state.h)");
  o.def("make", &make, py::arg("name"), py::arg("params"), py::kw_only(), py::arg("fused") = false,
        "A new optimizer over params (tensors, or param-group dicts), PyTorch's options as keywords");
}

}  // namespace lathe::python
