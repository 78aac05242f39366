#include "train/run_checkpoints.h"

#include <signal.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <regex>

#include "core/error.h"

namespace lathe::app {

namespace fs = std::filesystem;

std::string checkpoint_path(const std::string& dir, int64_t step) {
  char name[64];
  std::snprintf(name, sizeof name, "ckpt-%08lld.safetensors", (long long)step);
  return (fs::path(dir) / name).string();
}

std::vector<std::pair<int64_t, std::string>> list_checkpoints(const std::string& dir) {
  static const std::regex pattern(R"(ckpt-(\d{8,18})\.safetensors)");
  std::vector<std::pair<int64_t, std::string>> out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    std::smatch m;
    const std::string name = entry.path().filename().string();
    if (entry.is_regular_file(ec) && std::regex_match(name, m, pattern))
      out.emplace_back(std::stoll(m[1].str()), entry.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

void prune_checkpoints(const std::string& dir, int64_t keep) {
  auto all = list_checkpoints(dir);
  for (size_t i = 0; i + size_t(keep) < all.size(); ++i) {
    std::error_code ec;
    fs::remove(all[i].second, ec);  // a checkpoint that cannot be removed is only wasted space
  }
  // The temporary files of atomic writes that were killed (checkpoints, model.safetensors,
  // metrics.jsonl, loss.svg; serialize/atomic_file.cpp names them .<name>.tmp-<pid>-...): removed
  // once their process is gone, never while a live writer owns one.
  static const std::regex leftover(R"(\..+\.tmp-(\d+)-\d+-[0-9a-f]+-\d+)");
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    std::smatch m;
    const std::string name = entry.path().filename().string();
    if (!std::regex_match(name, m, leftover)) continue;
    const pid_t pid = pid_t(std::stoll(m[1].str()));
    if (::kill(pid, 0) != 0 && errno == ESRCH) fs::remove(entry.path(), ec);
  }
}

serialize::TrainingCheckpoint open_resume_checkpoint(const std::string& dir_or_file) {
  std::error_code ec;
  LATHE_CHECK(fs::exists(dir_or_file, ec), "--resume ", dir_or_file, ": no such file or directory");
  if (!fs::is_directory(dir_or_file, ec)) return serialize::TrainingCheckpoint::read(dir_or_file);
  const auto all = list_checkpoints(dir_or_file);
  LATHE_CHECK(!all.empty(), "--resume ", dir_or_file, ": no checkpoint (ckpt-<step>.safetensors) in the directory");
  try {
    return serialize::TrainingCheckpoint::read(all.back().second);
  } catch (const Error& e) {
    if (all.size() == 1) throw;
    // Never fall back silently: the user decides whether to lose the steps since the older one.
    LATHE_FAIL(e.what(), "; the newest older checkpoint is ", all[all.size() - 2].second,
               " (pass it to --resume to continue from there)");
  }
}

}  // namespace lathe::app
