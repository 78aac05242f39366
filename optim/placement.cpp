#include "optim/placement.h"

#include "core/error.h"

namespace lathe::optim {

const char* placement_name(Placement p) {
  switch (p) {
    case Placement::with_param: return "with_param";
    case Placement::host: return "host";
    case Placement::with_group: return "with_group";
  }
  return "?";
}

Placement placement_from_name(const std::string& name) {
  if (name == "with_param") return Placement::with_param;
  if (name == "host") return Placement::host;
  if (name == "with_group") return Placement::with_group;
  LATHE_FAIL("unknown state placement \"", name, "\" (expected with_param, host or with_group)");
}

const char* scope_name(StateScope s) {
  switch (s) {
    case StateScope::param: return "param";
    case StateScope::group: return "group";
    case StateScope::global: return "global";
  }
  return "?";
}

StateSpec param_state(std::string key, Placement placement, std::optional<DType> dtype,
                      std::optional<Placement> fused, bool shaped_like_param) {
  return StateSpec{std::move(key), StateScope::param, placement, fused.value_or(placement), dtype,
                   shaped_like_param};
}

StateSpec group_state(std::string key, Placement placement, DType dtype, std::optional<Placement> fused) {
  return StateSpec{std::move(key), StateScope::group, placement, fused.value_or(placement), dtype, false};
}

StateSpec global_state(std::string key, Placement placement, DType dtype, std::optional<Placement> fused) {
  return StateSpec{std::move(key), StateScope::global, placement, fused.value_or(placement), dtype, false};
}

Device placement_device(Placement p, Device owner) {
  return p == Placement::host ? Device::cpu() : owner;
}

DType state_dtype(const StateSpec& spec, DType param_dtype) {
  if (spec.dtype) return *spec.dtype;
  if (param_dtype == DType::bf16 || param_dtype == DType::f16) return DType::f32;
  return param_dtype;
}

}  // namespace lathe::optim
