// PLACEHOLDER: replaced by the real case kind "optim".
#include "examples/cli/commands.h"

namespace lathe::cli {
RefOutput run_ref_optim(const serialize::SafetensorsFile&, const nlohmann::json&, Device) {
  LATHE_FAIL("case kind \"optim\" is not available yet");
}
}  // namespace lathe::cli
