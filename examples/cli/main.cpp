// lathe: train, sample, benchmark and check GPT models. `lathe --help` lists the commands.
#include <cstdio>
#include <iostream>

#include "core/error.h"
#include "examples/cli/commands.h"

int main(int argc, char** argv) {
  CLI::App app{"lathe: a small deep-learning framework; train and sample GPT models, check them against references"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("lathe ") + LATHE_VERSION);
  lathe::cli::add_info_command(app);
  lathe::cli::add_ref_command(app);
  lathe::cli::add_train_command(app);
  lathe::cli::add_sample_command(app);
  lathe::cli::add_bench_command(app);
  lathe::cli::add_inspect_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    // One line, like every other lathe error; CLI11's own message names the option and the value.
    std::fprintf(stderr, "lathe: %s (see --help)\n", e.what());
    return 2;
  } catch (const lathe::cli::UsageError& e) {
    std::fprintf(stderr, "lathe: %s\n", e.what());
    return 2;
  } catch (const lathe::Error& e) {
    std::fprintf(stderr, "lathe: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "lathe: %s\n", e.what());
    return 1;
  }
  return 0;
}
