// lathe: train, sample, benchmark and check GPT models. `lathe --help` lists the commands.
#include <cerrno>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>

#include "core/error.h"
#include "core/format.h"
#include "examples/cli/commands.h"
#include "train/distributed/agreement.h"

namespace {

// Whether everything written to stdout reached it. Output that vanished (a full disk, a closed
// terminal, `> /dev/full`) must not end in exit 0: a script would take the empty file for a
// result. Returns the reason, or "" when all is well.
std::string stdout_failure() {
  std::cout.flush();
  errno = 0;
  const bool flushed = std::fflush(stdout) == 0;
  const int err = errno;
  if (flushed && !std::ferror(stdout) && std::cout.good()) return "";
  // A failure during an earlier, implicit flush leaves the error flag but no errno to read now.
  return err != 0 ? std::strerror(err) : "a write failed";
}

// `text` is an integer written in decimal that fits in T (no sign for an unsigned T).
template <class T>
bool is_decimal(const std::string& text) {
  T value{};
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value, 10);
  return !text.empty() && text[0] != '+' && ec == std::errc() && ptr == end;
}

// CLI11 converts an empty value to 0, wraps "-1" into an unsigned option and saturates a number
// past the type's range: each would run with a value the user never typed. So every numeric
// option of every command has its text checked before CLI11 converts it; CLI11 names the option
// in the error. (Hex, which CLI11 would take, is refused too: counts are written in decimal.)
void check_numeric_options(CLI::App& app) {
  const CLI::Validator signed_integer([](std::string& s) { return is_decimal<int64_t>(s) ? "" : "not a decimal integer in range: '" + s + "'"; }, "INT");
  const CLI::Validator unsigned_integer([](std::string& s) { return is_decimal<uint64_t>(s) ? "" : "not a non-negative decimal integer in range: '" + s + "'"; }, "UINT");
  const CLI::Validator number([](std::string& s) { return s.empty() ? "empty value, expected a number" : ""; }, "FLOAT");
  for (CLI::App* command : app.get_subcommands([](CLI::App*) { return true; })) {
    for (CLI::Option* option : command->get_options()) {
      const std::string type = option->get_type_name();
      if (type == "INT") option->check(signed_integer);
      else if (type == "UINT") option->check(unsigned_integer);
      else if (type == "FLOAT") option->check(number);
    }
    check_numeric_options(*command);  // nested commands (lathe tokenizer train) too
  }
}

// Exit status 0, unless stdout lost what was written to it.
int finish() {
  if (const std::string why = stdout_failure(); !why.empty()) {
    std::fprintf(stderr, "lathe: cannot write to standard output: %s\n", why.c_str());
    return 1;
  }
  return 0;
}

}  // namespace

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
  lathe::cli::add_tokenizer_command(app);
  lathe::cli::add_tokenize_command(app);
  lathe::cli::add_convert_command(app);
  lathe::cli::add_eval_command(app);
  lathe::cli::add_chat_command(app);
  check_numeric_options(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) {  // --help, --version
      app.exit(e);
      return finish();
    }
    // One line, like every other lathe error; CLI11's own message names the option and the value.
    std::fprintf(stderr, "lathe: %s (see --help)\n", lathe::printable(e.what()).c_str());
    return 2;
  } catch (const lathe::cli::NegativeVerdict&) {
    finish();
    return 1;
  } catch (const lathe::dist::CollectiveError& e) {
    // Every process of a data parallel run raised it: rank 0 says it for all of them.
    if (e.print_here) std::fprintf(stderr, "lathe: %s\n", lathe::printable(e.what()).c_str());
    return e.exit_code;
  } catch (const lathe::cli::UsageError& e) {
    std::fprintf(stderr, "lathe: %s\n", lathe::printable(e.what()).c_str());
    return 2;
  } catch (const lathe::Error& e) {
    std::fprintf(stderr, "lathe: %s\n", lathe::printable(e.what()).c_str());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "lathe: %s\n", lathe::printable(e.what()).c_str());
    return 1;
  }
  return finish();
}
