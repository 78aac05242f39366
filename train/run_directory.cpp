#include "train/run_directory.h"

#include <algorithm>
#include <filesystem>
#include <regex>

#include "core/error.h"
#include "serialize/staged_directory.h"
#include "train/run_checkpoints.h"

namespace lathe::train {

namespace fs = std::filesystem;

namespace {

// `p` absolute, without links, "." or ".." as far as it exists.
fs::path resolved(const std::string& p) {
  std::error_code ec;
  fs::path r = fs::weakly_canonical(fs::absolute(p, ec), ec);
  return ec ? fs::path(p).lexically_normal() : r;
}

bool within(const fs::path& inner, const fs::path& outer) {
  return std::mismatch(outer.begin(), outer.end(), inner.begin(), inner.end()).first == outer.end();
}

// Up to five names of `names`, for a message.
std::string some_of(std::vector<std::string> names) {
  std::sort(names.begin(), names.end());
  std::string out;
  for (size_t i = 0; i < names.size() && i < 5; ++i) out += (i ? ", " : "") + names[i];
  return names.size() > 5 ? out + ", ..." : out;
}

}  // namespace

bool is_run_entry(const std::string& name) {
  static const std::regex run(
      R"(model\.safetensors|metrics\.jsonl|loss\.svg|\.lock|ckpt-\d{8,18}\.safetensors|superseded-\d+-\d{8}T\d{6}(-\d+)?)"
      R"(|\.(model\.safetensors|metrics\.jsonl|loss\.svg|ckpt-\d{8,18}\.safetensors)\.tmp-\d+-\d+-[0-9a-f]+-\d+)");
  return std::regex_match(name, run);
}

void prepare_fresh_run_directory(const std::string& dir, bool overwrite, const std::vector<std::string>& inputs,
                                 std::optional<serialize::DirectoryLock>& lock) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  LATHE_CHECK(!ec, "--out ", dir, ": cannot create the directory: ", ec.message());
  lock.emplace(dir, "lathe train", "run directory");
  std::vector<std::string> held;
  for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator(); it.increment(ec))
    if (it->path().filename() != ".lock") held.push_back(it->path().filename().string());
  LATHE_CHECK(!ec, "--out ", dir, ": cannot list the directory: ", ec.message());
  if (held.empty()) return;
  // What a run killed before its first checkpoint leaves (its metrics so far, a temporary file) holds
  // nothing to continue or keep: a fresh run takes the directory as if it were empty.
  const bool only_a_killed_start = std::all_of(held.begin(), held.end(), [](const std::string& name) {
    return is_run_entry(name) && name != "model.safetensors" && name.rfind("ckpt-", 0) != 0 &&
           name.rfind("superseded-", 0) != 0;
  });
  if (!overwrite && !only_a_killed_start) {
    const auto checkpoints = list_checkpoints(dir);
    LATHE_CHECK(checkpoints.empty(), "--out ", dir, " already holds checkpoints of a run (newest ",
                checkpoints.empty() ? "" : checkpoints.back().second, "); continue it with --resume ", dir,
                ", choose another --out, or give --overwrite to replace that run");
    LATHE_FAIL("--out ", dir, " is not empty (", held.size(), held.size() == 1 ? " entry: " : " entries: ", some_of(held),
               "); a fresh run would write over it: choose another --out, or give --overwrite to replace the run "
               "files there (others are kept)");
  }
  const fs::path out = resolved(dir);
  for (const std::string& input : inputs) {
    if (input.empty()) continue;
    LATHE_CHECK(!within(resolved(input), out), "--out ", dir, " holds ", input,
                ", which this run reads; --overwrite would delete it: write the run to another --out");
  }
  LATHE_CHECK(!within(resolved("."), out), "--out ", dir, " is the working directory or holds it; --overwrite "
              "replaces the whole directory: choose another --out");
  // The new directory: the lock first (this process's, so that no other run slips in at the swap),
  // then every entry that is not a run's.
  serialize::StagedDirectory stage(dir, /*replace=*/true, "--out " + dir);
  std::optional<serialize::DirectoryLock> new_lock;
  new_lock.emplace(stage.path(), "lathe train", "run directory");
  stage.commit([](const std::string& name) { return !is_run_entry(name); });
  lock.reset();  // its file went with the old directory
  lock.emplace(std::move(*new_lock));
}

}  // namespace lathe::train
