// PLACEHOLDER: replaced by the real `lathe sample`.
#include "examples/cli/commands.h"

namespace lathe::cli {
void add_sample_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("sample", "(not yet available)");
  cmd->callback([] { throw Error("lathe sample is not available yet"); });
}
}  // namespace lathe::cli
