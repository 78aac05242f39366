// Module: the base of every layer. It owns named parameters and submodules, registered in order,
// so that names come out hierarchical and stable ("transformer.h.0.attn.c_attn.weight", as
// nanoGPT's state_dict has them) and weights move between lathe and PyTorch without renaming.
//
// A module registers the addresses of its Tensor members and of its submodule members, so a
// module can neither be copied nor moved (the addresses would dangle): hold models by value where
// they are built, or through std::unique_ptr.
//
// Parameter identity is what optimizers hold on to. Two names may refer to one parameter (GPT's
// lm_head.weight is transformer.wte.weight): parameters() and named_parameters() list it once,
// under its first name; state_dict() lists every name, as PyTorch does. to() and
// load_state_dict() change parameters in place (Tensor::set_data / copy_), never replace them.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace lathe::nn {

// Name -> tensor in registration order (the same type as serialize::NamedTensors).
using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

class Module {
 public:
  Module() = default;
  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;
  Module(Module&&) = delete;
  Module& operator=(Module&&) = delete;

  // Every distinct parameter, tied ones once, in registration order.
  std::vector<Tensor> parameters() const;
  NamedTensors named_parameters() const;
  // Every (name, parameter) pair including every name of a tied parameter: what a checkpoint holds.
  NamedTensors state_dict() const;

  // Copies `state` into the parameters (values converted to each parameter's dtype and device;
  // parameter identity is kept). A tied parameter is satisfied by any of its names; when several
  // are given they must hold equal values. Strict: every parameter must be given and every key
  // must be known, else one error lists all missing and all unexpected keys. A shape mismatch is
  // always an error naming the key and both shapes. Nothing is changed when an error is thrown.
  void load_state_dict(const NamedTensors& state, bool strict = true);
  void load_state_dict(const std::map<std::string, Tensor>& state, bool strict = true);

  // Moves (or casts) every parameter, and its gradient, in place.
  Module& to(Device device);
  Module& to(DType dtype);  // floating parameters only, as torch's Module.to(dtype)

  // Training mode switches dropout on; it applies to the whole tree.
  Module& train(bool on = true);
  Module& eval() { return train(false); }
  bool is_training() const { return training_; }

  // Clears every gradient (to none, as PyTorch's zero_grad(set_to_none=True)).
  void zero_grad();

  // Number of elements over distinct parameters.
  int64_t num_params() const;

 protected:
  // Registers a member tensor as a parameter (it is made to require gradients). `p` must outlive
  // the module: pass the address of a member.
  void register_parameter(const std::string& name, Tensor* p);
  void register_module(const std::string& name, Module* m);
  // Keys a load ignores without complaint (buffers that other frameworks save, e.g. nanoGPT's
  // causal-mask buffers). Asked with the full key.
  virtual bool ignored_state_key(const std::string& key) const { return false; }

 private:
  // Every (name, parameter address) pair in order, with `prefix` prepended.
  void collect(const std::string& prefix, std::vector<std::pair<std::string, Tensor*>>& out) const;

  std::vector<std::pair<std::string, Tensor*>> params_;
  std::vector<std::pair<std::string, Module*>> children_;
  bool training_ = true;
};

// A numbered list of submodules ("h.0", "h.1", ...), as torch.nn.ModuleList.
template <class M>
class ModuleList : public Module {
 public:
  template <class... Args>
  M& emplace_back(Args&&... args) {
    items_.push_back(std::make_unique<M>(std::forward<Args>(args)...));
    register_module(std::to_string(items_.size() - 1), items_.back().get());
    return *items_.back();
  }
  size_t size() const { return items_.size(); }
  M& operator[](size_t i) { return *items_.at(i); }
  const M& operator[](size_t i) const { return *items_.at(i); }

 private:
  std::vector<std::unique_ptr<M>> items_;
};

}  // namespace lathe::nn
