#include "train/run_checkpoints.h"

#include <signal.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <regex>

#include "core/error.h"

namespace lathe::train {

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

namespace {

bool same_file(const std::string& a, const std::string& b) {
  std::error_code ec;
  const bool same = fs::equivalent(a, b, ec);
  return !ec && same;
}

bool is_protected(const std::string& path, const std::vector<std::string>& protect) {
  return std::any_of(protect.begin(), protect.end(), [&](const std::string& p) { return same_file(path, p); });
}

// "<UTC date>T<time>": folders of moved-aside checkpoints sort by when they were moved.
std::string utc_stamp() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y%m%dT%H%M%S", &tm);
  return buf;
}

}  // namespace

void prune_checkpoints(const std::string& dir, int64_t keep, const std::vector<std::string>& protect) {
  auto all = list_checkpoints(dir);
  for (size_t i = 0; i + size_t(keep) < all.size(); ++i) {
    if (is_protected(all[i].second, protect)) continue;
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

std::string move_aside_superseded(const std::string& dir, int64_t step, const std::string& resumed_from) {
  std::error_code ec;
  // A checkpoint resumed from another directory says nothing about the lineage of DIR's.
  const bool same_dir = same_file(fs::absolute(resumed_from, ec).parent_path().string(), dir);
  std::vector<std::string> moving;
  for (const auto& [s, path] : list_checkpoints(dir))
    if ((s > step || !same_dir) && !same_file(path, resumed_from)) moving.push_back(path);
  if (moving.empty()) return "";
  const std::string base = (fs::path(dir) / ("superseded-" + std::to_string(step) + "-" + utc_stamp())).string();
  std::string aside = base;
  for (int n = 2; fs::exists(aside, ec); ++n) aside = base + "-" + std::to_string(n);
  fs::create_directory(aside, ec);
  LATHE_CHECK(!ec, aside, ": cannot create the directory for superseded checkpoints: ", ec.message());
  for (const std::string& path : moving) {
    fs::rename(path, fs::path(aside) / fs::path(path).filename(), ec);
    LATHE_CHECK(!ec, path, ": cannot move the superseded checkpoint into ", aside, ": ", ec.message());
  }
  return aside;
}

serialize::TrainingCheckpoint open_resume_checkpoint(const std::string& dir_or_file,
                                                     const serialize::TrainingCheckpoint::TargetOf& target_of) {
  std::error_code ec;
  // exists() clears ec for a plain missing path and sets it for a real fault (a symlink loop).
  LATHE_CHECK(fs::exists(dir_or_file, ec), "--resume ", dir_or_file, ": ",
              ec ? ec.message() : std::string("no such file or directory"));
  if (!fs::is_directory(dir_or_file, ec)) return serialize::TrainingCheckpoint::read(dir_or_file, target_of);
  const auto all = list_checkpoints(dir_or_file);
  LATHE_CHECK(!all.empty(), "--resume ", dir_or_file, ": no checkpoint (ckpt-<step>.safetensors) in the directory");
  try {
    return serialize::TrainingCheckpoint::read(all.back().second, target_of);
  } catch (const Error& e) {
    if (all.size() == 1) throw;
    // Never fall back silently: the user decides whether to lose the steps since the older one.
    LATHE_FAIL(e.what(), "; the newest older checkpoint is ", all[all.size() - 2].second,
               " (pass it to --resume to continue from there)");
  }
}

}  // namespace lathe::train
