// Replacing a file so that readers (and a crash) only ever see the old or the new whole file.
//
// The new contents go to a temporary file in the target's directory (same file system, so the
// final rename is atomic), are flushed to disk with fsync, and the temporary is renamed over the
// target; the directory is then fsynced so the rename itself survives a power loss. On any error
// the temporary is removed and the previous file is left untouched, byte for byte. A target that
// exists and is not a regular file (a device, a FIFO, a symlink) is refused, never replaced.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <functional>
#include <string>

namespace lathe::serialize {

// What a write does to a file already at its path: replace it (atomically), or refuse it -- at the
// start, and at the commit again (renameat2's RENAME_NOREPLACE, or link(2) where the file system
// lacks it), so that of two writers started at once on a new path exactly one creates it.
enum class Existing { replace, refuse };

// An open temporary file that becomes `path` on commit(). Destroying it uncommitted (an exception
// while writing) removes the temporary. Errors are lathe::Error naming `path` and the system error.
class AtomicFile {
 public:
  explicit AtomicFile(std::string path, Existing existing = Existing::replace);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  // Buffered: small writes are gathered into one system call per kBufferBytes (a file of many
  // small tensors is not a write each); the buffer reaches the file by commit() at the latest.
  void write(const void* data, size_t nbytes);
  // fsync, close, rename over the target, fsync the directory. Call once, after the last write.
  void commit();

  const std::string& path() const { return path_; }
  const std::string& temp_path() const { return temp_path_; }

 private:
  void discard() noexcept;  // closes and removes the temporary
  void write_through(const char* p, size_t nbytes);  // one loop of write(2)
  void flush();

  static constexpr size_t kBufferBytes = size_t(1) << 20;
  std::string path_;
  std::string dir_;
  std::string temp_path_;
  int fd_ = -1;
  size_t written_ = 0;  // bytes that reached the file
  Existing existing_;
  std::string buffer_;  // bytes written but not yet passed to the file
  bool committed_ = false;
};

// "a FIFO (named pipe)", "a symbolic link", "a character device", ... for a file mode (from stat
// or lstat), for messages that say what a path is instead of a regular file.
const char* file_kind_name(mode_t mode);

// Runs `fill` on a fresh AtomicFile for `path` and commits it when `fill` returns; if `fill` throws,
// the temporary is removed and the exception propagates with the old file intact.
void write_file_atomically(const std::string& path, const std::function<void(AtomicFile&)>& fill,
                           Existing existing = Existing::replace);

}  // namespace lathe::serialize
