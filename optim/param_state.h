// Per-parameter optimizer state slots (see optim/state.h for the untyped half). The slot type
// declares the policy for the plain and the fused path; tensors are created and placed on the
// device that policy gives for where parameter i is *now*.
//
//   ParamState<Plain, Fused>       a tensor per parameter (exp_avg, momentum_buffer, Prodigy's s)
//   ParamScalar<T, Plain, Fused>   one value of type T per parameter (Adam's step); host(i) hands
//                                  out a T& and compiles only when the plain policy is host
#pragma once

#include "optim/state.h"

namespace lathe::optim {

class Optimizer;

// Whether the state has its parameter's shape (created as zeros like it) or a shape of its own
// (set explicitly, e.g. Prodigy's sliced s and p0).
enum class ParamShape : bool { like_param, own };

// The non-template half: creation and placement need the optimizer.
class ParamSlot : public StateSlot {
 protected:
  ParamSlot(Optimizer& owner, std::string key, Placement plain, Placement fused, std::optional<DType> dtype,
            bool shaped_like_param);
  Tensor* find_at(int64_t i);  // nullptr when absent
  // Created as zeros (the parameter's shape, or a scalar for own-shaped state) when absent.
  Tensor& zeros_at(int64_t i);
  // `value` converted to this slot's dtype and placed by policy; never aliases `value`.
  Tensor& store(int64_t i, const Tensor& value);
  bool owner_fused() const;

 private:
  Optimizer& owner_;
};

template <Placement Plain = Placement::with_param, Placement Fused = Plain>
class ParamState : public ParamSlot {
 public:
  ParamState(Optimizer& owner, std::string key, ParamShape shape = ParamShape::like_param)
      : ParamSlot(owner, std::move(key), Plain, Fused, std::nullopt, shape == ParamShape::like_param) {}

  Tensor* find(int64_t i) { return find_at(i); }
  Tensor& of(int64_t i) { return zeros_at(i); }
  Tensor& set(int64_t i, const Tensor& value) { return store(i, value); }
};

template <class T, Placement Plain, Placement Fused = Plain>
class ParamScalar : public ParamSlot {
 public:
  ParamScalar(Optimizer& owner, std::string key)
      : ParamSlot(owner, std::move(key), Plain, Fused, dtype_of<T>(), /*shaped_like_param=*/false) {}

  // The tensor, wherever the policy in force puts it (for kernels that read it on the device).
  Tensor& of(int64_t i) { return zeros_at(i); }
  // The value in host memory: only a slot declared host in the plain path has one, and only while
  // the optimizer runs that path.
  T& host(int64_t i) requires(Plain == Placement::host) {
    if constexpr (Fused != Placement::host)
      LATHE_CHECK(!owner_fused(), "state \"", key(), "\" is with its parameter in a fused step; no host access");
    return zeros_at(i).template data<T>()[0];
  }
};

}  // namespace lathe::optim
