// A fresh directory under the system temp dir for one test, removed with everything in it when
// the TempDir goes out of scope. Names carry the process id and a counter, so test processes that
// ctest runs in parallel never share one.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace lathe::testing {

struct TempDir {
  std::filesystem::path path;

  explicit TempDir(const std::string& name = "dir") {
    static std::atomic<int> counter{0};
    path = std::filesystem::temp_directory_path() /
           ("lathe_test_" + name + "_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  // The path of `name` inside the directory.
  std::string file(const std::string& name) const { return (path / name).string(); }
  // Writes `bytes` to `rel` (creating its parent directories) and returns its path.
  std::string write(const std::string& rel, const std::string& bytes) const {
    const std::filesystem::path p = path / rel;
    std::filesystem::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << bytes;
    return p.string();
  }
  // The names of the directory's entries, sorted (to check that no temporary file is left behind).
  std::vector<std::string> entries() const {
    std::vector<std::string> out;
    for (const auto& e : std::filesystem::directory_iterator(path)) out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
  }
};

}  // namespace lathe::testing
