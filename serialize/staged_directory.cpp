#include "serialize/staged_directory.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "core/error.h"

namespace lathe::serialize {

namespace {

namespace fs = std::filesystem;

// The target's parent and base name ("out/" is the directory "out").
std::pair<fs::path, std::string> split(const std::string& target) {
  std::string t = target;
  while (t.size() > 1 && t.back() == '/') t.pop_back();
  const fs::path p(t);
  return {p.parent_path().empty() ? fs::path(".") : p.parent_path(), p.filename().string()};
}

std::string stage_prefix(const std::string& base) { return "." + base + ".stage-"; }
std::string old_prefix(const std::string& base) { return "." + base + ".old-"; }
// The temporary directories of earlier lathe versions (".NAME.tmp-<pid>-<n>", never locked).
std::string legacy_prefix(const std::string& base) { return "." + base + ".tmp-"; }

std::string unique_suffix() {
  static std::atomic<uint64_t> counter{0};
  return std::to_string(::getpid()) + "-" + std::to_string(counter.fetch_add(1));
}

// The process id in "<prefix><pid>-<n>", or -1.
long pid_in(const std::string& name, const std::string& prefix) {
  if (name.rfind(prefix, 0) != 0) return -1;
  char* end = nullptr;
  const long pid = std::strtol(name.c_str() + prefix.size(), &end, 10);
  return end != name.c_str() + prefix.size() && *end == '-' && pid > 0 ? pid : -1;
}

bool process_alive(long pid) { return ::kill(pid_t(pid), 0) == 0 || errno == EPERM; }

// Whether no process holds the directory's lock (a writer holds its stage's from creation on).
bool unheld(const fs::path& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return false;
  const bool free = ::flock(fd, LOCK_EX | LOCK_NB) == 0;
  ::close(fd);
  return free;
}

void sync_directory(const fs::path& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  (void)::fsync(fd);  // EINVAL where the file system cannot sync a directory: nothing to do then
  ::close(fd);
}

// renameat2 as glibc 2.28 and later have it; a file system without it answers EINVAL (or the
// kernel ENOSYS), and the caller falls back to rename(2).
bool rename_with(const fs::path& from, const fs::path& to, unsigned flags, int* err) {
  if (::renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), flags) == 0) return true;
  *err = errno;
  return false;
}
bool unsupported(int err) { return err == EINVAL || err == ENOSYS || err == ENOTSUP; }

// `from` (an entry of the old directory) into `to` (the stage): hard links for files, recursively
// for directories, symbolic links as links; a copy where the file system refuses a hard link.
void carry_over(const fs::path& from, const fs::path& to, const std::string& what) {
  std::error_code ec;
  const fs::file_status st = fs::symlink_status(from, ec);
  if (fs::is_directory(st) || fs::is_regular_file(st) || fs::is_symlink(st)) {
    const auto common = fs::copy_options::recursive | fs::copy_options::copy_symlinks;
    fs::copy(from, to, common | fs::copy_options::create_hard_links, ec);
    if (ec) {
      fs::remove_all(to, ec);
      fs::copy(from, to, common, ec);
    }
  } else if (::link(from.c_str(), to.c_str()) != 0) {  // a FIFO, a socket, a device node: the same inode
    ec = std::error_code(errno, std::generic_category());
  }
  LATHE_CHECK(!ec, what, ": cannot carry ", from.string(), " over into the new directory: ", ec.message(),
              "; nothing was replaced");
}

}  // namespace

void clear_stale_stages(const std::string& target) {
  const auto [parent, base] = split(target);
  std::error_code ec;
  const bool target_missing = !fs::exists(fs::symlink_status(fs::path(parent) / base, ec));
  for (auto it = fs::directory_iterator(parent, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
    const std::string name = it->path().filename().string();
    std::error_code e;
    if (!it->is_directory(e) || it->is_symlink(e)) continue;
    long pid = pid_in(name, stage_prefix(base));
    if (pid > 0 || (pid = pid_in(name, legacy_prefix(base))) > 0) {
      if (!process_alive(pid) && unheld(it->path())) fs::remove_all(it->path(), e);
    } else if ((pid = pid_in(name, old_prefix(base))) > 0 && !process_alive(pid)) {
      // The fallback swap was killed between its two renames: the old directory is the whole one.
      if (target_missing) ::rename(it->path().c_str(), (fs::path(parent) / base).c_str());
      else fs::remove_all(it->path(), e);
    }
  }
}

StagedDirectory::StagedDirectory(std::string target, bool replace, std::string what)
    : target_(std::move(target)), what_(std::move(what)), replace_(replace) {
  while (target_.size() > 1 && target_.back() == '/') target_.pop_back();
  LATHE_CHECK(!target_.empty(), what_, ": the output directory must be named, got an empty path");
  const auto [parent, base] = split(target_);
  clear_stale_stages(target_);
  stage_ = (parent / (stage_prefix(base) + unique_suffix())).string();
  LATHE_CHECK(::mkdir(stage_.c_str(), 0777) == 0, what_, ": cannot create a directory beside ", target_, " to write into: ",
              std::strerror(errno));
  lock_fd_ = ::open(stage_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (lock_fd_ < 0 || ::flock(lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    const std::string why = std::strerror(errno);
    std::error_code ec;
    fs::remove_all(stage_, ec);
    LATHE_FAIL(what_, ": cannot lock the directory it writes into (", stage_, "): ", why);
  }
}

StagedDirectory::~StagedDirectory() {
  if (!committed_) {
    std::error_code ec;
    fs::remove_all(stage_, ec);
  }
  if (lock_fd_ >= 0) ::close(lock_fd_);
}

void StagedDirectory::commit(const std::function<bool(const std::string&)>& keep) {
  LATHE_CHECK(!committed_, what_, ": the directory was already committed");
  const auto [parent, base] = split(target_);
  struct stat st {};
  const bool exists = ::lstat(target_.c_str(), &st) == 0;
  LATHE_CHECK(exists || errno == ENOENT, what_, ": ", target_, ": ", std::strerror(errno));
  int err = 0;
  if (!exists) {
    if (!rename_with(stage_, target_, RENAME_NOREPLACE, &err) && unsupported(err)) {
      err = 0;
      if (::access(target_.c_str(), F_OK) == 0) err = EEXIST;
      else if (::rename(stage_.c_str(), target_.c_str()) != 0) err = errno;
    }
    LATHE_CHECK(err != EEXIST && err != ENOTEMPTY, what_, ": ", target_,
                " appeared while this command wrote it (another process writes there); nothing was replaced");
    LATHE_CHECK(err == 0, what_, ": cannot move the written directory into place at ", target_, ": ", std::strerror(err));
  } else {
    LATHE_CHECK(S_ISDIR(st.st_mode), what_, ": ", target_, " is not a directory; nothing was replaced");
    LATHE_CHECK(replace_, what_, ": ", target_, " appeared while this command wrote it (another process writes there); "
                "nothing was replaced");
    if (keep) {
      std::error_code ec;
      for (auto it = fs::directory_iterator(target_, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
        const std::string name = it->path().filename().string();
        std::error_code e;
        if (keep(name) && !fs::exists(fs::symlink_status(fs::path(stage_) / name, e)))
          carry_over(it->path(), fs::path(stage_) / name, what_);
      }
      LATHE_CHECK(!ec, what_, ": cannot list ", target_, ": ", ec.message(), "; nothing was replaced");
    }
    (void)::chmod(stage_.c_str(), st.st_mode & 07777);  // the directory keeps its permissions
    sync_directory(stage_);
    if (rename_with(stage_, target_, RENAME_EXCHANGE, &err)) {
      // The old directory is under the stage's name now.
    } else {
      LATHE_CHECK(unsupported(err), what_, ": cannot put the written directory in place of ", target_, ": ",
                  std::strerror(err), "; nothing was replaced");
      const std::string old = (parent / (old_prefix(base) + unique_suffix())).string();
      LATHE_CHECK(::rename(target_.c_str(), old.c_str()) == 0, what_, ": cannot move ", target_, " aside: ",
                  std::strerror(errno), "; nothing was replaced");
      if (::rename(stage_.c_str(), target_.c_str()) != 0) {
        const std::string why = std::strerror(errno);
        (void)::rename(old.c_str(), target_.c_str());
        LATHE_FAIL(what_, ": cannot move the written directory into place at ", target_, ": ", why,
                   "; nothing was replaced");
      }
      stage_ = old;
    }
  }
  committed_ = true;
  sync_directory(parent);
  std::error_code ec;
  if (exists) fs::remove_all(stage_, ec);  // the old content; a kill here leaves it to the next writer
}

}  // namespace lathe::serialize
