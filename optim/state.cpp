#include "optim/state.h"

namespace lathe::optim {

StateSlot::StateSlot(StateSet& set, StateScope scope, std::string key, Placement plain, Placement fused,
                     std::optional<DType> dtype, bool shaped_like_param)
    : scope_(scope), key_(std::move(key)), plain_(plain), fused_(fused), dtype_(dtype),
      shaped_like_param_(shaped_like_param) {
  set.enroll(this);
}

DType StateSlot::dtype_for(DType param_dtype) const {
  if (dtype_) return *dtype_;
  if (param_dtype == DType::bf16 || param_dtype == DType::f16) return DType::f32;
  return param_dtype;
}

const Tensor& StateSlot::get(int64_t index) const {
  static const Tensor absent;
  const size_t pos = index < 0 ? 0 : size_t(index);
  return pos < values_.size() ? values_[pos] : absent;
}

Tensor& StateSlot::at(int64_t index) {
  const size_t pos = index < 0 ? 0 : size_t(index);
  if (pos >= values_.size()) values_.resize(pos + 1);
  return values_[pos];
}

StateSlot* StateSet::declared(StateScope scope, const std::string& key) const {
  for (StateSlot* s : slots_)
    if (s->scope() == scope && s->key() == key) return s;
  return nullptr;
}

void StateSet::enroll(StateSlot* slot) {
  LATHE_CHECK(declared(slot->scope(), slot->key()) == nullptr, "state \"", slot->key(), "\" (",
              scope_name(slot->scope()), ") is declared twice");
  slots_.push_back(slot);
}

}  // namespace lathe::optim
