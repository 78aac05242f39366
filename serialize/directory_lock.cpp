#include "serialize/directory_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "core/error.h"

namespace lathe::serialize {

namespace {

// "4242 lathe train" -> ("4242", "lathe train"); a lock file of an older lathe holds the pid alone.
std::pair<std::string, std::string> read_holder(int fd, const std::string& program) {
  char buf[128] = {};
  const ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
  std::string text = n > 0 ? std::string(buf, size_t(n)) : std::string();
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  if (text.empty()) return {"unknown", program};
  const size_t space = text.find(' ');
  if (space == std::string::npos) return {text, program};
  return {text.substr(0, space), text.substr(space + 1)};
}

}  // namespace

std::string DirectoryLock::lock_path(const std::string& dir) { return (std::filesystem::path(dir) / ".lock").string(); }

DirectoryLock::DirectoryLock(const std::string& dir, const std::string& program, const std::string& what) {
  const std::string path = lock_path(dir);
  // The lock file a holder locked may be replaced under it (a directory swapped whole by
  // serialize/staged_directory.h brings its own, locked by the same holder): a lock is only taken
  // once the file locked is still the one at `path`, or a process that opened the old file could
  // lock it after the holder let go and believe it holds the directory.
  for (int attempt = 0;; ++attempt) {
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    LATHE_CHECK(fd_ >= 0, path, ": cannot open the ", what, "'s lock file: ", std::strerror(errno));
    if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      const int err = errno;
      const auto [pid, holder] = read_holder(fd_, program);
      ::close(fd_);
      fd_ = -1;
      LATHE_CHECK(err != EWOULDBLOCK, "--out ", dir, ": another ", holder, " (process ", pid, ") is using this ", what,
                  " (", path, "); wait for it to end or choose another --out");
      LATHE_FAIL(path, ": cannot lock the ", what, ": ", std::strerror(err));
    }
    struct stat held {}, now {};
    if (::fstat(fd_, &held) == 0 && ::stat(path.c_str(), &now) == 0 && held.st_ino == now.st_ino &&
        held.st_dev == now.st_dev)
      break;
    ::close(fd_);
    fd_ = -1;
    LATHE_CHECK(attempt < 100, path, ": the ", what, "'s lock file keeps being replaced; is another program writing it?");
  }
  // Who holds it, for the message above; the lock itself is the flock, not the file's content.
  const std::string holder = std::to_string(::getpid()) + " " + program + "\n";
  if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, holder.data(), holder.size(), 0) != ssize_t(holder.size())) {
    // Only the message of a refused second program loses its process id.
  }
}

DirectoryLock::~DirectoryLock() {
  if (fd_ >= 0) ::close(fd_);  // closing the descriptor releases the flock
}

}  // namespace lathe::serialize
