#include "optim/placement.h"

#include "core/error.h"

namespace lathe::optim {

const char* placement_name(Placement p) {
  switch (p) {
    case Placement::with_param: return "with_param";
    case Placement::host: return "host";
    case Placement::sharded: return "sharded";
  }
  return "?";
}

Placement placement_from_name(const std::string& name) {
  if (name == "with_param") return Placement::with_param;
  if (name == "host") return Placement::host;
  if (name == "sharded") return Placement::sharded;
  LATHE_FAIL("unknown state placement \"", name, "\" (expected with_param, host or sharded)");
}

const char* scope_name(StateScope s) {
  switch (s) {
    case StateScope::param: return "param";
    case StateScope::group: return "group";
    case StateScope::global: return "global";
  }
  return "?";
}

}  // namespace lathe::optim
