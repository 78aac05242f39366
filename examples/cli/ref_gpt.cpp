// PLACEHOLDER: replaced by the real case kind "gpt".
#include "examples/cli/commands.h"

namespace lathe::cli {
RefOutput run_ref_gpt(const serialize::SafetensorsFile&, const nlohmann::json&, Device) {
  LATHE_FAIL("case kind \"gpt\" is not available yet");
}
}  // namespace lathe::cli
