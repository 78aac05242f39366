// Where optimizer state lives: every piece of state declares a placement *policy*, never a device
// (DESIGN.md, "The idea that sets it apart"). The device of a state tensor is computed each time
// from its policy and from where its parameter (or its group's parameters) is *now*, so moving a
// model can never leave its optimizer behind.
//
//   with_param  the device of the parameter it belongs to (exp_avg, momentum_buffer, ...);
//   host        host memory, always (the plain Adam step counter, Prodigy's d in the plain path:
//               scalars the CPU reads every step, which must never cost a device read);
//   with_group  the device of the group's parameters (Prodigy's scalars in a capturable step).
//
// A schema declares each piece of state once, with a policy for the plain path and one for the
// fused/capturable path; the optimizer's mode picks which applies.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/dtype.h"

namespace lathe::optim {

enum class Placement : uint8_t { with_param, host, with_group };

const char* placement_name(Placement p);                  // "with_param", "host", "with_group"
Placement placement_from_name(const std::string& name);   // throws naming the bad name

// Whose state it is: one per parameter, one per param group, or one per optimizer.
enum class StateScope : uint8_t { param, group, global };
const char* scope_name(StateScope s);  // "param", "group", "global" (the prefix of state names)

struct StateSpec {
  std::string key;  // PyTorch's key name ("exp_avg", "step", "d", ...)
  StateScope scope = StateScope::param;
  Placement placement = Placement::with_param;        // plain path
  Placement fused_placement = Placement::with_param;  // fused / capturable path
  // Element type; nullopt means "the parameter's floating type, with 16-bit floats widened to
  // f32" (f32 moments for a bf16 parameter).
  std::optional<DType> dtype;
  // True when the tensor has its parameter's shape (moments); false for state of its own shape
  // (Prodigy's sliced s and p0, counters).
  bool shaped_like_param = true;

  Placement placement_for(bool fused) const { return fused ? fused_placement : placement; }
};

using StateSchema = std::vector<StateSpec>;

// Schema builders; `fused` defaults to the plain policy.
StateSpec param_state(std::string key, Placement placement, std::optional<DType> dtype = std::nullopt,
                      std::optional<Placement> fused = std::nullopt, bool shaped_like_param = true);
StateSpec group_state(std::string key, Placement placement, DType dtype,
                      std::optional<Placement> fused = std::nullopt);
StateSpec global_state(std::string key, Placement placement, DType dtype,
                       std::optional<Placement> fused = std::nullopt);

// The device a policy means, given the device of the owner (the parameter for param state, the
// group's parameters for group and global state).
Device placement_device(Placement p, Device owner);

// The dtype a spec gives to state of a parameter of dtype `param_dtype`.
DType state_dtype(const StateSpec& spec, DType param_dtype);

}  // namespace lathe::optim
