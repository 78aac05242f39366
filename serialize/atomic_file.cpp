#include "serialize/atomic_file.h"

#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>

#include "core/error.h"

namespace lathe::serialize {

namespace {

std::string sys_error() { return std::strerror(errno); }

// The directory holding `path` ("." for a bare file name).
std::string dir_of(const std::string& path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return std::string(".");
  return slash == 0 ? std::string("/") : path.substr(0, slash);
}

std::string base_of(const std::string& path) {
  size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// A name no other writer (thread or process) uses at the same time: pid, a per-process counter
// and the clock. O_EXCL still guards against a leftover file of the same name.
std::string temp_name(const std::string& dir, const std::string& base, int attempt) {
  static std::atomic<uint64_t> counter{0};
  auto ticks = std::chrono::steady_clock::now().time_since_epoch().count();
  char suffix[96];
  std::snprintf(suffix, sizeof suffix, ".tmp-%ld-%llu-%llx-%d", long(::getpid()),
                (unsigned long long)counter.fetch_add(1), (unsigned long long)ticks, attempt);
  std::string sep = dir == "/" ? "" : "/";
  return dir + sep + "." + base + suffix;
}

}  // namespace

const char* file_kind_name(mode_t mode) {
  if (S_ISREG(mode)) return "a regular file";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISLNK(mode)) return "a symbolic link";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

AtomicFile::AtomicFile(std::string path, Existing existing) : path_(std::move(path)), existing_(existing) {
  dir_ = dir_of(path_);
  std::string base = base_of(path_);
  LATHE_CHECK(!base.empty(), path_, ": cannot write a file here: the path names a directory");
  // Only a regular file is ever replaced: renaming over a device node (/dev/full as root), a FIFO
  // or a symlink would silently turn it into a regular file. lstat, so a link is seen as a link.
  // Keep the permissions of the file being replaced; a new file gets 0666 minus the umask.
  mode_t mode = 0666;
  struct stat st {};
  if (::lstat(path_.c_str(), &st) == 0) {
    LATHE_CHECK(!S_ISDIR(st.st_mode), path_, ": cannot write a file here: it is a directory");
    LATHE_CHECK(S_ISREG(st.st_mode), path_, ": refusing to replace ", file_kind_name(st.st_mode),
                " with a regular file; remove it or write elsewhere");
    LATHE_CHECK(existing_ == Existing::replace, path_, ": the file exists; nothing was written");
    mode = st.st_mode & 07777;
  }
  for (int attempt = 0; attempt < 100 && fd_ < 0; ++attempt) {
    temp_path_ = temp_name(dir_, base, attempt);
    fd_ = ::open(temp_path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
    if (fd_ < 0 && errno != EEXIST)
      LATHE_FAIL(path_, ": cannot create a temporary file in ", dir_, ": ", sys_error());
  }
  LATHE_CHECK(fd_ >= 0, path_, ": cannot create a temporary file in ", dir_,
              ": every candidate name is taken");
  if (mode != 0666) (void)::fchmod(fd_, mode);  // open() applied the umask; an old file's mode wins
}

AtomicFile::~AtomicFile() {
  if (!committed_) discard();
}

void AtomicFile::discard() noexcept {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (!temp_path_.empty()) ::unlink(temp_path_.c_str());
  temp_path_.clear();
  buffer_.clear();
}

void AtomicFile::write(const void* data, size_t nbytes) {
  LATHE_CHECK(fd_ >= 0 && !committed_, path_, ": write after the file was committed or discarded");
  const char* p = static_cast<const char*>(data);
  if (buffer_.size() + nbytes <= kBufferBytes) {
    buffer_.append(p, nbytes);
    return;
  }
  flush();
  if (nbytes >= kBufferBytes) write_through(p, nbytes);
  else buffer_.assign(p, nbytes);
}

void AtomicFile::flush() {
  write_through(buffer_.data(), buffer_.size());
  buffer_.clear();
}

void AtomicFile::write_through(const char* p, size_t nbytes) {
  while (nbytes > 0) {
    ssize_t n = ::write(fd_, p, nbytes);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      std::string why = n < 0 ? sys_error() : "no progress";
      discard();
      LATHE_FAIL(path_, ": write failed after ", written_, " bytes (", why,
                 "); the previous file is unchanged");
    }
    p += n;
    nbytes -= size_t(n);
    written_ += size_t(n);
  }
}

void AtomicFile::commit() {
  LATHE_CHECK(fd_ >= 0 && !committed_, path_, ": commit of a file already committed or discarded");
  flush();
  auto fail = [&](const char* step) {
    std::string why = sys_error();
    discard();
    LATHE_FAIL(path_, ": ", step, " failed (", why, "); the previous file is unchanged");
  };
  if (::fsync(fd_) != 0) fail("fsync");
  int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) fail("close");
  if (existing_ == Existing::replace) {
    if (::rename(temp_path_.c_str(), path_.c_str()) != 0) fail("rename");
  } else if (::renameat2(AT_FDCWD, temp_path_.c_str(), AT_FDCWD, path_.c_str(), RENAME_NOREPLACE) != 0) {
    // Where renameat2 is missing (EINVAL: the file system; ENOSYS: the kernel), link(2) refuses an
    // existing name just the same; the temporary's name is then removed.
    const bool fallback = errno == EINVAL || errno == ENOSYS || errno == ENOTSUP;
    if (!fallback || ::link(temp_path_.c_str(), path_.c_str()) != 0) {
      const int err = errno;
      discard();
      LATHE_CHECK(err != EEXIST, path_, ": the file appeared while this command wrote it (another process writes "
                  "there); nothing was replaced");
      LATHE_FAIL(path_, ": rename failed (", std::strerror(err), "); nothing was written");
    }
    ::unlink(temp_path_.c_str());
  }
  committed_ = true;
  temp_path_.clear();
  // The new file is in place; syncing the directory makes the rename durable. A failure here
  // cannot be undone (the rename happened), so it is reported but the file stays.
  int dfd = ::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) LATHE_FAIL(path_, ": written, but its directory ", dir_, " could not be opened to sync: ", sys_error());
  int rc = ::fsync(dfd);
  int err = errno;
  ::close(dfd);
  // Some file systems do not support fsync on directories; that is not a write failure.
  if (rc != 0 && err != EINVAL && err != ENOTSUP)
    LATHE_FAIL(path_, ": written, but syncing its directory ", dir_, " failed: ", std::strerror(err));
}

void write_file_atomically(const std::string& path, const std::function<void(AtomicFile&)>& fill,
                           Existing existing) {
  AtomicFile file(path, existing);
  fill(file);  // an exception here destroys `file`, which removes the temporary
  file.commit();
}

}  // namespace lathe::serialize
