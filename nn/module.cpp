#include "nn/module.h"

#include <cstring>
#include <set>
#include <unordered_map>

#include "core/autograd.h"

namespace lathe::nn {

namespace {

// Parameters grouped by identity: each distinct tensor with every name it is registered under.
struct ParamGroup {
  Tensor* param;
  std::vector<std::string> names;
};

std::vector<ParamGroup> group_by_identity(const std::vector<std::pair<std::string, Tensor*>>& entries) {
  std::vector<ParamGroup> groups;
  std::unordered_map<TensorImpl*, size_t> index;
  for (const auto& [name, p] : entries) {
    auto [it, fresh] = index.emplace(p->id(), groups.size());
    if (fresh) groups.push_back({p, {}});
    groups[it->second].names.push_back(name);
  }
  return groups;
}

// Bitwise equality of two tensors' values after casting b to a's dtype, on the host.
bool same_values(const Tensor& a, const Tensor& b) {
  NoGradGuard no_grad;
  Tensor ha = a.detach().to(Device::cpu()).contiguous();
  Tensor hb = b.detach().to(Device::cpu()).to(a.dtype()).contiguous();
  return ha.shape() == hb.shape() && std::memcmp(ha.data_ptr(), hb.data_ptr(), ha.nbytes()) == 0;
}

std::string join(const std::vector<std::string>& xs) {
  std::string s;
  for (const auto& x : xs) s += (s.empty() ? "" : ", ") + x;
  return s;
}

}  // namespace

void Module::register_parameter(const std::string& name, Tensor* p) {
  LATHE_CHECK(name.find('.') == std::string::npos, "Module: parameter name \"", name, "\" must not contain '.'");
  for (const auto& [n, _] : params_) LATHE_CHECK(n != name, "Module: parameter \"", name, "\" registered twice");
  if (p->defined() && is_floating(p->dtype()) && !p->requires_grad()) p->requires_grad_(true);
  params_.emplace_back(name, p);
}

void Module::register_module(const std::string& name, Module* m) {
  for (const auto& [n, _] : children_) LATHE_CHECK(n != name, "Module: submodule \"", name, "\" registered twice");
  children_.emplace_back(name, m);
}

void Module::collect(const std::string& prefix, std::vector<std::pair<std::string, Tensor*>>& out) const {
  for (const auto& [name, p] : params_)
    if (p->defined()) out.emplace_back(prefix + name, p);
  for (const auto& [name, m] : children_) m->collect(prefix + name + ".", out);
}

NamedTensors Module::state_dict() const {
  std::vector<std::pair<std::string, Tensor*>> entries;
  collect("", entries);
  NamedTensors out;
  out.reserve(entries.size());
  for (const auto& [name, p] : entries) out.emplace_back(name, *p);
  return out;
}

NamedTensors Module::named_parameters() const {
  std::vector<std::pair<std::string, Tensor*>> entries;
  collect("", entries);
  NamedTensors out;
  for (const auto& g : group_by_identity(entries)) out.emplace_back(g.names.front(), *g.param);
  return out;
}

std::vector<Tensor> Module::parameters() const {
  std::vector<Tensor> out;
  for (auto& [_, p] : named_parameters()) out.push_back(p);
  return out;
}

int64_t Module::num_params() const {
  int64_t n = 0;
  for (const auto& p : parameters()) n += p.numel();
  return n;
}

void Module::load_state_dict(const std::map<std::string, Tensor>& state, bool strict) {
  load_state_dict(NamedTensors(state.begin(), state.end()), strict);
}

void Module::load_state_dict(const NamedTensors& state, bool strict) {
  std::vector<std::pair<std::string, Tensor*>> entries;
  collect("", entries);
  const std::vector<ParamGroup> groups = group_by_identity(entries);

  std::map<std::string, const Tensor*> given;
  for (const auto& [key, t] : state) {
    LATHE_CHECK(given.emplace(key, &t).second, "load_state_dict: key \"", key, "\" is given twice");
    LATHE_CHECK(t.defined(), "load_state_dict: key \"", key, "\" holds an undefined tensor");
  }

  // Check everything first, so that a failed load changes nothing.
  std::vector<std::string> missing, unexpected, bad_shapes;
  std::set<std::string> known;
  for (const auto& g : groups) {
    bool found = false;
    for (const auto& name : g.names) {
      known.insert(name);
      auto it = given.find(name);
      if (it == given.end()) continue;
      found = true;
      if (it->second->shape() != g.param->shape())
        bad_shapes.push_back("\"" + name + "\": expected " + shape_str(g.param->shape()) + ", got " +
                             shape_str(it->second->shape()));
    }
    if (!found) {
      std::string m = g.names.front();
      for (size_t i = 1; i < g.names.size(); ++i) m += " (or " + g.names[i] + ")";
      missing.push_back(m);
    }
  }
  for (const auto& [key, _] : given)
    if (!known.count(key) && !ignored_state_key(key)) unexpected.push_back(key);

  LATHE_CHECK(bad_shapes.empty(), "load_state_dict: shape mismatch for ", join(bad_shapes));
  if (strict && (!missing.empty() || !unexpected.empty())) {
    std::string msg = "load_state_dict (strict):";
    if (!missing.empty()) msg += " missing keys: " + join(missing) + ";";
    if (!unexpected.empty()) msg += " unexpected keys: " + join(unexpected) + ";";
    msg.pop_back();
    LATHE_FAIL(msg);
  }
  for (const auto& g : groups) {
    const Tensor* first = nullptr;
    std::string first_name;
    for (const auto& name : g.names) {
      auto it = given.find(name);
      if (it == given.end()) continue;
      if (!first) {
        first = it->second;
        first_name = name;
      } else {
        LATHE_CHECK(same_values(*first, *it->second), "load_state_dict: \"", first_name, "\" and \"", name,
                    "\" name one tied parameter but hold different values");
      }
    }
  }

  NoGradGuard no_grad;
  for (const auto& g : groups)
    for (const auto& name : g.names) {
      auto it = given.find(name);
      if (it == given.end()) continue;
      g.param->copy_(*it->second);
      break;
    }
}

Module& Module::to(Device device) {
  NoGradGuard no_grad;
  for (Tensor& p : parameters()) {
    Tensor grad = p.grad();
    if (p.device() != device) {
      p.set_grad(Tensor());
      p.set_data(p.detach().to(device));
    }
    if (grad.defined() && grad.device() != device) grad = grad.to(device);
    if (grad.defined()) p.set_grad(grad);
  }
  return *this;
}

Module& Module::to(DType dtype) {
  LATHE_CHECK(is_floating(dtype), "Module::to: dtype must be floating, got ", dtype_name(dtype));
  NoGradGuard no_grad;
  for (Tensor& p : parameters()) {
    if (!is_floating(p.dtype()) || p.dtype() == dtype) continue;
    Tensor grad = p.grad();
    p.set_grad(Tensor());
    p.set_data(p.detach().to(dtype));
    if (grad.defined()) p.set_grad(grad.to(dtype));
  }
  return *this;
}

Module& Module::train(bool on) {
  training_ = on;
  for (auto& [_, m] : children_) m->train(on);
  return *this;
}

void Module::zero_grad() {
  for (Tensor& p : parameters()) p.set_grad(Tensor());
}

}  // namespace lathe::nn
