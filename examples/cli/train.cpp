// PLACEHOLDER: replaced by the real `lathe train`.
#include "examples/cli/commands.h"

namespace lathe::cli {
void add_train_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("train", "(not yet available)");
  cmd->callback([] { throw Error("lathe train is not available yet"); });
}
}  // namespace lathe::cli
