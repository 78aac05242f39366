// PLACEHOLDER: replaced by the real `lathe inspect`.
#include "examples/cli/commands.h"

namespace lathe::cli {
void add_inspect_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("inspect", "(not yet available)");
  cmd->callback([] { throw Error("lathe inspect is not available yet"); });
}
}  // namespace lathe::cli
