// PLACEHOLDER: replaced by the real case kind "train".
#include "examples/cli/commands.h"

namespace lathe::cli {
RefOutput run_ref_train(const serialize::SafetensorsFile&, const nlohmann::json&, Device) {
  LATHE_FAIL("case kind \"train\" is not available yet");
}
}  // namespace lathe::cli
