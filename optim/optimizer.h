// The base of every optimizer: param groups, state typed by placement policy, and the interface a
// checkpoint writer uses to save and restore a run.
//
// Parameters. An optimizer tracks exactly the Tensors it was given (their identity, as
// Tensor::id()), in the groups it was given; nothing ever rebuilds it from a module. Parameters are
// numbered in the order they were added, over all groups: that number is the <i> of state names.
// A parameter in two groups (or twice in one) is an error. At each step, a parameter that does not
// require gradients (frozen) is skipped and never holds state; a parameter whose grad is undefined
// is skipped and its per-parameter state (its step count included) does not advance, as PyTorch.
//
// State. Each optimizer declares a StateSchema (optim/placement.h): per-parameter, per-group and
// global state, each with a policy for the plain path and one for the fused path. No state tensor
// stores "its device": at the start of every step() each tensor is moved (only if it is not already
// there) to the device its policy gives for where its parameter is now, so after any order of
// (create optimizer, Module::to, load state, step) the step runs with every tensor in place, and a
// step after the move does no more transfers than a fresh run's.
//
// Checkpoint API (used by serialize/checkpoint):
//   kind()            "sgd", "adam", "adamw", "prodigy"
//   fused()           the mode, which picks each spec's policy
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
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "core/tensor.h"
#include "optim/placement.h"

namespace lathe::optim {

// One param group: its parameters and its hyperparameters under PyTorch's names (defaults filled
// in and validated by the optimizer).
struct ParamGroup {
  std::vector<Tensor> params;
  std::vector<int64_t> indices;  // the parameter numbers of `params`
  nlohmann::json options;

  double number(const std::string& key) const;  // throws naming the key when absent / not a number
  bool flag(const std::string& key) const;
  int64_t integer(const std::string& key) const;
  std::pair<double, double> pair(const std::string& key) const;  // e.g. betas
  bool is_null(const std::string& key) const;  // e.g. Prodigy's beta3 = None
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
  std::optional<Placement> saved_placement;  // what the writer recorded; informational
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  virtual std::string kind() const = 0;
  bool fused() const { return fused_; }
  // The declared state, including the base's global "step".
  const StateSchema& state_schema() const { return schema_; }

  // Adds a group; `options` override the optimizer's defaults (unknown keys and invalid values
  // are errors naming them). Returns the group number.
  size_t add_param_group(const std::vector<Tensor>& params, const nlohmann::json& options = {});
  const std::vector<ParamGroup>& param_groups() const { return groups_; }
  size_t num_params() const { return params_.size(); }
  const Tensor& param(int64_t i) const;

  // One update from the current gradients (under NoGradGuard).
  void step();
  // Clears the gradient of every tracked parameter (to none).
  void zero_grad();
  // Completed step() calls (the global "step" state, host).
  int64_t step_count() const;

  double lr(size_t group) const;
  void set_lr(size_t group, double value);  // validated like the option
  void set_lr_all(double value);

  // ---- state access (undefined Tensor when absent) ----
  Tensor state(int64_t param_index, const std::string& key) const;
  Tensor group_state_tensor(size_t group, const std::string& key) const;
  Tensor global_state_tensor(const std::string& key) const;
  // Where the policy of `key` puts it now, for parameter / group `index` (-1 for global).
  Device state_device(StateScope scope, int64_t index, const std::string& key) const;

  // ---- checkpoint API (see the header comment) ----
  nlohmann::json groups_json() const;
  void load_groups_json(const nlohmann::json& groups);
  std::vector<StateEntry> state_entries() const;
  void load_state(const std::map<std::string, StateSource>& sources);

 protected:
  Optimizer(nlohmann::json defaults, StateSchema schema, bool fused);

  // Fills defaults in `options` and checks every value; errors name the option and the value.
  virtual void validate_options(nlohmann::json& options) const = 0;
  // The update itself; state is already where its policy says.
  virtual void update() = 0;
  // Called once per new group after it was added (group state initialisation).
  virtual void init_group_state(size_t /*group*/) {}

  const StateSpec& spec(StateScope scope, const std::string& key) const;
  // The per-parameter state `key`, or nullptr when absent.
  Tensor* find_state(int64_t param_index, const std::string& key);
  // Stores `value` as state `key` of parameter i, converted to the spec's dtype and placed by
  // policy; returns the stored tensor.
  Tensor& set_state(int64_t param_index, const std::string& key, const Tensor& value);
  // The state `key` of parameter i, created as zeros of the parameter's shape when absent.
  Tensor& state_or_zeros(int64_t param_index, const std::string& key);
  Tensor& group_state_ref(size_t group, const std::string& key);
  void set_group_state(size_t group, const std::string& key, const Tensor& value);
  Tensor& global_state_ref(const std::string& key);
  void set_global_state(const std::string& key, const Tensor& value);

  // Parameters that take part in this step: trainable and with a gradient.
  static bool participates(const Tensor& p);

  std::vector<ParamGroup> groups_;

 private:
  Device owner_device(StateScope scope, int64_t index) const;
  Device target_device(const StateSpec& spec, int64_t index) const;
  Tensor placed(const StateSpec& spec, int64_t index, const Tensor& value) const;
  // Moves every state tensor whose device differs from its policy's (after a Module::to).
  void place_state();

  nlohmann::json defaults_;
  StateSchema schema_;
  bool fused_;
  std::vector<Tensor> params_;
  std::map<TensorImpl*, int64_t> index_of_;
  std::vector<std::map<std::string, Tensor>> param_state_;
  std::vector<std::map<std::string, Tensor>> group_state_;
  std::map<std::string, Tensor> global_state_;
};

// Checks shared by optimizers' validate_options: errors name the optimizer, option and value.
void check_lr(const char* opt, double lr);
void check_nonnegative(const char* opt, const char* option, double value);
void check_beta(const char* opt, const char* option, double value);  // in [0, 1)
void check_positive(const char* opt, const char* option, double value);
// Fills `options` with every default that it lacks and rejects keys not in `defaults`.
void merge_defaults(const char* opt, nlohmann::json& options, const nlohmann::json& defaults);

}  // namespace lathe::optim
