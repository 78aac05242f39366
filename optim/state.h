// Typed optimizer state. An optimizer (or the loss scaler) declares each piece of its state as a
// member slot; the slot's *type* carries its scope and placement policy, so the update code holds
// `exp_avg_.of(i)` or `d_.value(g)` instead of a string key, and host access is offered only by
// slots whose policy is host: reading a device-placed slot on the host does not compile.
//
//   StateSlot    the untyped half: key (PyTorch's name), scope, policy (plain and fused path),
//                element type and the stored tensors. The owner's generic loops (placement,
//                checkpoint names, load) walk the slots through this interface only.
//   StateSet     the slots an owner declared, in declaration order; a slot registers itself.
//   HostScalar   one value per group or per owner that lives on the host in every mode: the only
//                group/global slot, and the one that hands out `T&`.
//
// Per-parameter slots need the optimizer (where parameter i is now): optim/param_state.h.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "core/tensor.h"
#include "optim/placement.h"

namespace lathe::optim {

class StateSet;

class StateSlot {
 public:
  StateSlot(const StateSlot&) = delete;
  StateSlot& operator=(const StateSlot&) = delete;
  virtual ~StateSlot() = default;

  const std::string& key() const { return key_; }
  StateScope scope() const { return scope_; }
  // The policy in force for an owner in plain (fused = false) or fused mode.
  Placement placement(bool fused) const { return fused ? fused_ : plain_; }
  // True when the tensor has its parameter's shape (moments); false for state of its own shape.
  bool shaped_like_param() const { return shaped_like_param_; }
  // The element type of this state for a parameter of `param_dtype`: the declared one, or else the
  // parameter's floating type with 16-bit floats widened to f32 (f32 moments for bf16 weights).
  DType dtype_for(DType param_dtype) const;

  // Storage, for the owner's generic loops. index: parameter or group number, -1 for global.
  // An undefined tensor means "absent".
  const Tensor& get(int64_t index) const;
  Tensor& at(int64_t index);  // grows the storage as needed
  // One past the largest index that may hold a tensor (global state: 1, at index -1).
  int64_t extent() const { return int64_t(values_.size()); }

 protected:
  StateSlot(StateSet& set, StateScope scope, std::string key, Placement plain, Placement fused,
            std::optional<DType> dtype, bool shaped_like_param);

 private:
  StateScope scope_;
  std::string key_;
  Placement plain_, fused_;
  std::optional<DType> dtype_;
  bool shaped_like_param_;
  std::vector<Tensor> values_;
};

class StateSet {
 public:
  StateSet() = default;
  StateSet(const StateSet&) = delete;
  StateSet& operator=(const StateSet&) = delete;

  // Every declared slot, in declaration order.
  const std::vector<StateSlot*>& declared_slots() const { return slots_; }
  // The slot declared as (scope, key), or nullptr.
  StateSlot* declared(StateScope scope, const std::string& key) const;

 private:
  friend class StateSlot;
  void enroll(StateSlot* slot);  // rejects a second slot of the same scope and key
  std::vector<StateSlot*> slots_;
};

// A scalar of type T, one per group (Scope = group) or one per owner (Scope = global), that lives
// in host memory whatever the mode: its readers are host code, so it must never cost a device read.
template <class T, StateScope Scope>
class HostScalar : public StateSlot {
  static_assert(Scope != StateScope::param, "per-parameter state is a ParamState or ParamScalar");

 public:
  HostScalar(StateSet& set, std::string key)
      : StateSlot(set, Scope, std::move(key), Placement::host, Placement::host, dtype_of<T>(), false) {
    if constexpr (Scope == StateScope::global) reset(T{});
  }

  T& value() requires(Scope == StateScope::global) { return ref(-1); }
  T value() const requires(Scope == StateScope::global) { return cref(-1); }
  T& value(size_t group) requires(Scope == StateScope::group) { return ref(int64_t(group)); }
  T value(size_t group) const requires(Scope == StateScope::group) { return cref(int64_t(group)); }

  // (Re)creates the value in host memory.
  void reset(T v) requires(Scope == StateScope::global) { at(-1) = make(v); }
  void reset(size_t group, T v) requires(Scope == StateScope::group) { at(int64_t(group)) = make(v); }

 private:
  static Tensor make(T v) {
    Tensor t = Tensor::zeros({}, dtype_of<T>());
    t.data<T>()[0] = v;
    return t;
  }
  T& ref(int64_t index) {
    Tensor& t = at(index);
    LATHE_CHECK(t.defined(), "state \"", key(), "\" of ", scope_name(Scope), " ", index, " does not exist");
    return t.data<T>()[0];
  }
  T cref(int64_t index) const {
    const Tensor& t = get(index);
    LATHE_CHECK(t.defined(), "state \"", key(), "\" of ", scope_name(Scope), " ", index, " does not exist");
    return t.data<T>()[0];
  }
};

}  // namespace lathe::optim
