// PLACEHOLDER: replaced by the real `lathe bench`.
#include "examples/cli/commands.h"

namespace lathe::cli {
void add_bench_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("bench", "(not yet available)");
  cmd->callback([] { throw Error("lathe bench is not available yet"); });
}
}  // namespace lathe::cli
