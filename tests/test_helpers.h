// Small helpers shared by the test suites: the message of an expected error, a JSON-lines file,
// and running the built `lathe` program (LATHE_CLI_PATH) the way a user does, through the shell.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"

namespace lathe::testing {

// The message of the lathe::Error that `f` throws; "" when it throws none.
inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// One JSON value per line of a file (metrics.jsonl).
inline std::vector<nlohmann::json> read_jsonl(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::vector<nlohmann::json> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(nlohmann::json::parse(line));
  return lines;
}

struct Run {
  int code;            // exit status; -1 when the program did not exit normally
  std::string output;  // stdout and stderr together
};

// Runs `lathe ARGS` (ARGS as a shell would split them).
inline Run run_lathe(const std::string& args) {
  const std::filesystem::path out =
      std::filesystem::temp_directory_path() / ("lathe_test_run_" + std::to_string(::getpid()) + ".txt");
  const std::string cmd = std::string("'") + LATHE_CLI_PATH + "' " + args + " > '" + out.string() + "' 2>&1";
  const int status = std::system(cmd.c_str());
  std::ifstream in(out);
  std::stringstream ss;
  ss << in.rdbuf();
  std::error_code ec;
  std::filesystem::remove(out, ec);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, ss.str()};
}

}  // namespace lathe::testing
