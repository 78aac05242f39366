#include "data/corpus_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "core/error.h"

namespace lathe::data {

FileHandle::~FileHandle() {
  if (fd_ >= 0) ::close(fd_);
}

FileHandle::FileHandle(FileHandle&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}

FileHandle& FileHandle::operator=(FileHandle&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}


namespace {

// strerror's text, lower-cased first letter so it reads inside a sentence ("no such file ...").
std::string reason(int err) {
  std::string s = std::strerror(err);
  if (!s.empty() && s[0] >= 'A' && s[0] <= 'Z' && (s.size() < 2 || s[1] < 'A' || s[1] > 'Z')) s[0] = char(s[0] - 'A' + 'a');
  return s;
}

}  // namespace

FileHandle open_regular_file(const std::string& path, const std::string& what, CorpusFile& info) {
  // Without O_NONBLOCK, opening a FIFO waits for a writer forever; for a regular file it changes
  // nothing.
  FileHandle fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  LATHE_CHECK(fd.get() >= 0, what, " ", path, ": ", reason(errno));
  struct stat st {};
  LATHE_CHECK(::fstat(fd.get(), &st) == 0, what, " ", path, ": cannot stat: ", reason(errno));
  // Checked on the open descriptor, so a path swapped between a listing and here cannot slip by.
  LATHE_CHECK(S_ISREG(st.st_mode), what, " ", path, ": is ", file_kind_name(st.st_mode), ", not a regular file");
  info.path = path;
  info.size = size_t(st.st_size);
  info.device = st.st_dev;
  info.inode = st.st_ino;
  return fd;
}

void read_exact(int fd, const CorpusFile& file, size_t offset, size_t n, uint8_t* out) {
  size_t done = 0;
  while (done < n) {
    const ssize_t got = ::pread(fd, out + done, n - done, off_t(offset + done));
    if (got < 0 && errno == EINTR) continue;
    LATHE_CHECK(got >= 0, "corpus file ", file.path, ": read of ", n, " bytes at offset ", offset,
                " failed: ", reason(errno));
    LATHE_CHECK(got > 0, "corpus file ", file.path, ": ends at byte ", offset + done, " but had ", file.size,
                " bytes when the corpus was opened (it shrank during training)");
    done += size_t(got);
  }
}

void OpenFiles::adopt(size_t index, FileHandle fd) {
  std::lock_guard<std::mutex> lock(mutex_);
  keep(index, std::move(fd));
}

int OpenFiles::keep(size_t index, FileHandle fd) {
  if (open_.size() < kCapacity) {
    open_.emplace_back(index, std::move(fd));
    return open_.back().second.get();
  }
  // Round-robin eviction: windows are drawn uniformly, so no file is likelier to come back.
  const size_t slot = next_victim_;
  next_victim_ = (next_victim_ + 1) % kCapacity;
  open_[slot] = {index, std::move(fd)};
  return open_[slot].second.get();
}

int OpenFiles::descriptor(const CorpusFile& file, size_t index) {
  for (const auto& [i, fd] : open_)
    if (i == index) return fd.get();
  CorpusFile now;
  FileHandle fd = open_regular_file(file.path, "corpus file", now);
  LATHE_CHECK(now.device == file.device && now.inode == file.inode, "corpus file ", file.path,
              ": was replaced by another file since the corpus was opened");
  LATHE_CHECK(now.size >= file.size, "corpus file ", file.path, ": has ", now.size, " bytes but had ", file.size,
              " when the corpus was opened (it shrank during training)");
  return keep(index, std::move(fd));
}

void OpenFiles::read(const CorpusFile& file, size_t index, size_t offset, size_t n, uint8_t* out) {
  std::lock_guard<std::mutex> lock(mutex_);
  read_exact(descriptor(file, index), file, offset, n, out);
}

}  // namespace lathe::data
