// The files of a text corpus, read with pread(2) into the caller's buffer.
//
// Reading copies instead of mapping for two reasons. A file that shrinks while it is mapped turns
// the next touch of a vanished page into SIGBUS, which no error handling can catch; a short pread
// is an ordinary error naming the file. And one mapping per file runs into the kernel's map count
// (about 65,000) on a corpus of many small files; a few cached descriptors do not.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "serialize/atomic_file.h"

namespace lathe::data {

// What a corpus file was when it was opened: its size and identity, so that a reopen can tell a
// file that was replaced or shrank from the one the corpus was built on.
struct CorpusFile {
  std::string path;
  size_t size = 0;
  dev_t device = 0;
  ino_t inode = 0;
};

// An open file descriptor, closed when it goes out of scope.
class FileHandle {
 public:
  FileHandle() = default;
  explicit FileHandle(int fd) : fd_(fd) {}
  ~FileHandle();
  FileHandle(FileHandle&& other) noexcept;
  FileHandle& operator=(FileHandle&& other) noexcept;
  FileHandle(const FileHandle&) = delete;
  FileHandle& operator=(const FileHandle&) = delete;
  int get() const { return fd_; }

 private:
  int fd_ = -1;
};

// serialize::file_kind_name names what a path is ("a FIFO (named pipe)", ...) in the messages here.
using serialize::file_kind_name;

// Opens `path` as a regular file without blocking (a FIFO would otherwise wait for a writer) and
// returns it with its size and identity. Throws lathe::Error "<what> <path>: ..." naming the
// reason (no such file, a loop of symbolic links, ...) or what the file is instead.
FileHandle open_regular_file(const std::string& path, const std::string& what, CorpusFile& info);

// Reads exactly bytes [offset, offset + n) of `file` through `fd`. Throws lathe::Error naming the
// file when it ends early (it shrank after it was opened) or the read fails.
void read_exact(int fd, const CorpusFile& file, size_t offset, size_t n, uint8_t* out);

// A few open descriptors of a corpus's files, reopened on demand: a corpus of any number of files
// holds at most kCapacity open at once. Thread-safe. Each reopen checks that the path still names the same
// file, no shorter than it was.
class OpenFiles {
 public:
  static constexpr size_t kCapacity = 16;
  // Keeps `fd`, already open on `files[index]`, for later reads.
  void adopt(size_t index, FileHandle fd);
  void read(const CorpusFile& file, size_t index, size_t offset, size_t n, uint8_t* out);

 private:
  int descriptor(const CorpusFile& file, size_t index);  // callers hold mutex_
  int keep(size_t index, FileHandle fd);                  // callers hold mutex_
  std::mutex mutex_;  // reads are const on the corpus; evaluation may share it
  std::vector<std::pair<size_t, FileHandle>> open_;
  size_t next_victim_ = 0;
};

}  // namespace lathe::data
