// The base of every optimizer: param groups, typed state placed by policy, and the interface a
// checkpoint writer uses to save and restore a run.
//
// Parameters. An optimizer tracks exactly the Tensors it was given (their identity, as
// Tensor::id()), in the groups it was given; nothing ever rebuilds it from a module. Parameters are
// numbered in the order they were added, over all groups: that number is the <i> of state names.
// A parameter in two groups (or twice in one) is an error. At each step, a parameter that does not
// require gradients (frozen) is skipped and never holds state; a parameter whose grad is undefined
// is skipped and its per-parameter state (its step count included) does not advance, as PyTorch.
//
// State. Each optimizer declares its state as member slots (optim/state.h, optim/param_state.h)
// whose types carry the scope and the policy for the plain and the fused path; the base keeps the
// generic loops over them. No state tensor stores "its device": at the start of every step() each
// tensor is moved (only if it is not already there) to the device its policy gives for where its
// parameter is now, so after any order of (create optimizer, Module::to, load state, step) the
// step runs with every tensor in place, and a step after the move does no more transfers than a
// fresh run's.
//
// Hyperparameters. Each optimizer keeps a typed struct per group (optim/options.h) that its update
// reads; ParamGroup::options is the JSON view of it under PyTorch's names, for callers and files.
//
// Checkpoint API (used by serialize/checkpoint):
//   kind()            "sgd", "adam", "adamw", "prodigy", "muon"; "muon+adamw" for a Composite
//   fused()           the mode, which picks each slot's policy
//   groups_json()     [{"params": [i, ...], <hyperparameters under PyTorch names>}, ...]
//   load_groups_json  restores hyperparameters (the param layout must match)
//   state_entries()   every state tensor that exists, with a stable name
//                       "param.<i>.<key>"   per-parameter (i: parameter number, key: PyTorch's)
//                       "group.<g>.<key>"   per-group (Prodigy's d, d_max, ...)
//                       "global.<key>"      per-optimizer ("step": completed step() calls)
//                     its policy (for the current mode), dtype and tensor.
//   load_state(...)   takes name -> (host bytes or Tensor) and creates each tensor directly on the
//                     device that this optimizer's policy gives for where the parameters are now.
//                     The policy stored in the file is accepted but not obeyed: a checkpoint saved
//                     by a fused run resumes correctly in a plain run and back.
//
// Several optimizers over disjoint parameters step as one through optim::Composite
// (optim/composite.h): the methods marked "virtual: a Composite routes it to its parts" are the
// ones it answers from its parts, under its own numbering of parameters and groups.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "core/tensor.h"
#include "optim/options.h"
#include "optim/param_state.h"
#include "optim/placement.h"
#include "optim/state.h"

namespace lathe::optim {

// One param group: its parameters and the JSON view of its hyperparameters under PyTorch's names
// (defaults filled in, validated; generated from the optimizer's typed options).
struct ParamGroup {
  std::vector<Tensor> params;
  std::vector<int64_t> indices;  // the parameter numbers of `params`
  nlohmann::json options;

  double number(const std::string& key) const;  // throws naming the key when absent / not a number
  bool flag(const std::string& key) const;
};

// One state tensor, as state_entries() lists it.
struct StateEntry {
  std::string name;  // "param.3.exp_avg", "group.0.d", "global.step"
  StateScope scope;
  int64_t index;     // parameter or group number; -1 for global state
  std::string key;
  Placement placement;  // the policy in force (for this optimizer's mode)
  DType dtype;
  Tensor tensor;
};

// Raw little-endian bytes in host memory (e.g. a region of a memory-mapped checkpoint).
struct HostBytes {
  const void* data = nullptr;
  Shape shape;
  DType dtype = DType::f32;
};

struct StateSource {
  std::variant<Tensor, HostBytes> value;
};

// A state name taken apart: "param.3.exp_avg" is {param, 3, "exp_avg"}, "global.step" {global, -1,
// "step"}.
struct StateName {
  StateScope scope;
  int64_t index = -1;
  std::string key;
};
// Throws naming `owner` (an optimizer's kind) and the name when it is none of the three forms.
StateName parse_state_name(const std::string& owner, const std::string& name);
// The name of (scope, index, key): the inverse of parse_state_name.
std::string state_name(StateScope scope, int64_t index, const std::string& key);

// The 16-bit copies of the parameters that a mixed-precision forward reads (nn/precision.h's weight
// cast cache, which the trainer connects): an update that can write them as it writes the
// parameters (the fused Adam/AdamW kernel) asks here for each parameter's new copy and hands it
// back after, so that no cast pass over the weights follows the step. Other updates leave the
// copies stale, to be cast again at their next use.
class ParamCopies {
 public:
  virtual ~ParamCopies() = default;
  // A tensor to receive p's updated value in the copy's 16-bit dtype, or undefined when no copy of
  // p is kept.
  virtual Tensor fresh_copy(const Tensor& p) = 0;
  // After the update: `copy` (fresh_copy's) holds p as it now is.
  virtual void updated(const Tensor& p, const Tensor& copy) = 0;
};

// An optimizer is the set of its declared state slots (StateSet: declared_slots(), declared()).
class Optimizer : public StateSet {
 public:
  virtual ~Optimizer() = default;

  virtual std::string kind() const = 0;
  bool fused() const { return fused_; }

  // Adds a group; `options` override the optimizer's defaults (unknown keys and invalid values
  // are errors naming them). Returns the group number. `names`, when given (one per parameter),
  // name the parameters in errors. Virtual: a Composite takes no new groups.
  virtual size_t add_param_group(const std::vector<Tensor>& params, const nlohmann::json& options = {},
                                 const std::vector<std::string>& names = {});
  const std::vector<ParamGroup>& param_groups() const { return groups_; }
  size_t num_params() const { return params_.size(); }
  const Tensor& param(int64_t i) const;

  // One update from the current gradients (under NoGradGuard).
  void step();
  // Clears the gradient of every tracked parameter (to none).
  void zero_grad();
  // Completed step() calls (the global "step" state, host).
  int64_t step_count() const { return completed_steps_.value(); }

  double lr(size_t group) const;
  // Validated like the option. Virtual: a Composite routes it to its parts.
  virtual void set_lr(size_t group, double value);
  void set_lr_all(double value);

  // ---- state access by name, for callers and tests (undefined Tensor when absent) ----
  // Virtual: a Composite routes them to its parts.
  virtual Tensor state(int64_t param_index, const std::string& key) const;
  virtual Tensor group_state_tensor(size_t group, const std::string& key) const;
  virtual Tensor global_state_tensor(const std::string& key) const;
  // Where the policy of `key` puts it now, for parameter / group `index` (-1 for global).
  virtual Device state_device(StateScope scope, int64_t index, const std::string& key) const;

  // ---- checkpoint API (see the header comment); virtual: a Composite routes them to its parts ----
  virtual nlohmann::json groups_json() const;
  virtual void load_groups_json(const nlohmann::json& groups);
  virtual std::vector<StateEntry> state_entries() const;
  virtual void load_state(const std::map<std::string, StateSource>& sources);
  // Throws what load_state would throw for `sources`, and changes nothing.
  virtual void check_state(const std::map<std::string, StateSource>& sources) const;

  // ---- state sharding (ZeRO-1 data parallelism, docs/design.md "Data parallelism") ----
  // From now on this optimizer keeps and updates the per-parameter state of parameters
  // [begin, end) only: its per-parameter state takes the policy `sharded`, the state of the other
  // parameters is released, and their updates are skipped (the processes that own them do them;
  // the caller gathers the updated parameters). Groups, parameters and group / global state are
  // unchanged: a sharded optimizer tracks exactly what it tracked before. An optimizer whose update
  // reads every parameter's state at once (Prodigy's d) refuses.
  // Virtual: a Composite shards each part over its share of the range.
  virtual void shard_state(int64_t begin, int64_t end);
  bool sharded() const { return shard_end_ >= 0; }
  // Whether this optimizer keeps the state of parameter i (always, unless sharded).
  bool owns(int64_t i) const { return !sharded() || (i >= shard_begin_ && i < shard_end_); }
  // Drops the per-parameter state of parameters this optimizer does not own (after a restore or a
  // checkpoint gathered the whole state here). Nothing when not sharded. Virtual: a Composite
  // routes it to its parts.
  virtual void release_unowned_state();
  // Whether the update needs the state of every parameter at once (sharding is then refused).
  virtual bool reads_all_state() const { return false; }

  // Where the update may write the parameters' 16-bit copies (null: nowhere; not owned). Virtual: a
  // Composite routes it to its parts.
  virtual void set_param_copies(ParamCopies* copies) { copies_ = copies; }

 protected:
  explicit Optimizer(bool fused) : fused_(fused) {}

  // Options, implemented by TypedOptimizer from the optimizer's option list.
  // The canonical JSON view of `overrides` read over the defaults; throws on any bad option.
  virtual nlohmann::json checked_options(const nlohmann::json& overrides) const = 0;
  // Keeps the typed copy of group g's options (`canonical` is checked_options' result).
  virtual void store_options(size_t group, const nlohmann::json& canonical) = 0;
  // The update itself; state is already where its policy says.
  virtual void update() = 0;
  // Called once per new group after it was added (group state initialisation).
  virtual void init_group_state(size_t /*group*/) {}
  // Refuses a parameter this optimizer cannot update (Muon: anything but a matrix); `what` names it
  // ("parameter 2 of the new group (f32[4] on cpu)", or its name when the caller gave one).
  virtual void check_param(const Tensor& /*p*/, const std::string& /*what*/) const {}

  // Parameters that take part in this step: trainable, with a gradient, and (when the state is
  // sharded) owned by this optimizer.
  bool participates(const Tensor& p) const;
  // Appends a group of parameters that no group holds yet (checked) under `options` as they are
  // (already canonical); returns its number. add_param_group's last step, and how a Composite
  // mirrors its parts' groups.
  size_t append_group(const std::vector<Tensor>& params, nlohmann::json options);

  std::vector<ParamGroup> groups_;
  ParamCopies* copies_ = nullptr;

 private:
  friend class ParamSlot;  // creates and places per-parameter state through the helpers below

  const StateSlot& slot(StateScope scope, const std::string& key) const;  // throws when undeclared
  Device owner_device(StateScope scope, int64_t index) const;
  Device target_device(const StateSlot& slot, int64_t index) const;
  DType target_dtype(const StateSlot& slot, int64_t index) const;
  Tensor placed(const StateSlot& slot, int64_t index, const Tensor& value) const;
  // Moves every state tensor whose device differs from its policy's (after a Module::to).
  void place_state();

  // One entry of load_state's sources, checked against this optimizer's slots and parameters.
  struct CheckedState {
    StateName where;
    StateSlot* slot;
    const StateSource* src;
  };
  std::vector<CheckedState> checked_state(const std::map<std::string, StateSource>& sources) const;

  bool fused_;
  std::vector<Tensor> params_;
  std::map<TensorImpl*, int64_t> index_of_;
  // Completed steps: counted on the host in every mode, so counting costs no device traffic.
  HostScalar<int64_t, StateScope::global> completed_steps_{*this, "step"};
  // The owned parameter range of a sharded optimizer; shard_end_ < 0: not sharded.
  int64_t shard_begin_ = 0, shard_end_ = -1;
};

// The typed half of an optimizer: its options struct O per group, generated from its option list.
template <class O>
class TypedOptimizer : public Optimizer {
 protected:
  // `name` names the optimizer in errors (kind() is not callable while constructing).
  TypedOptimizer(const char* name, const OptionList<O>& list, const nlohmann::json& defaults, bool fused)
      : Optimizer(fused), name_(name), list_(list), defaults_(list.parse(name, defaults, list.defaults())) {}

  const O& options(size_t group) const { return typed_.at(group); }
  // The optimizer's own options (the constructor's), which groups override.
  const O& defaults() const { return defaults_; }

  nlohmann::json checked_options(const nlohmann::json& overrides) const override {
    return list_.to_json(list_.parse(name_, overrides, defaults_));
  }
  void store_options(size_t group, const nlohmann::json& canonical) override {
    if (typed_.size() <= group) typed_.resize(group + 1);
    typed_[group] = list_.parse(name_, canonical, defaults_);
  }

 private:
  const char* name_;
  const OptionList<O>& list_;
  O defaults_;
  std::vector<O> typed_;
};

}  // namespace lathe::optim
