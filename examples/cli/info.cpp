// PLACEHOLDER: replaced by the real `lathe info`.
#include "examples/cli/commands.h"

namespace lathe::cli {
void add_info_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("info", "(not yet available)");
  cmd->callback([] { throw Error("lathe info is not available yet"); });
}
}  // namespace lathe::cli
