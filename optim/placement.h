// Where optimizer state lives: every piece of state declares a placement *policy*, never a device
// (docs/design.md, "State that knows its placement, never its device"). The device of a state tensor is computed each time
// from its policy and from where its parameter (or its group's parameters) is *now*, so moving a
// model can never leave its optimizer behind.
//
//   with_param  the device of the parameter it belongs to (exp_avg, momentum_buffer, ...; group
//               and global state of this policy go with the parameters they serve);
//   host        host memory, always (the plain Adam step counter, Prodigy's d: scalars the CPU
//               reads every step, which must never cost a device read).
//   sharded     with its parameter, in the one process that owns the parameter's shard, and absent
//               from every other (ZeRO-1 data parallelism, Optimizer::shard_state). No slot declares
//               it: it is the policy that per-parameter with_param state takes while its optimizer
//               is sharded, so checkpoints and `lathe inspect` show which runs were sharded.
//
// The policies are declared by the types of the state slots (optim/state.h, optim/param_state.h);
// these names are what checkpoints store.
#pragma once

#include <cstdint>
#include <string>

namespace lathe::optim {

enum class Placement : uint8_t { with_param, host, sharded };

const char* placement_name(Placement p);                  // "with_param", "host", "sharded"
Placement placement_from_name(const std::string& name);   // throws naming the bad name

// Whose state it is: one per parameter, one per param group, or one per optimizer.
enum class StateScope : uint8_t { param, group, global };
const char* scope_name(StateScope s);  // "param", "group", "global" (the prefix of state names)

}  // namespace lathe::optim
