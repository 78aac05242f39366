#include "serialize/file_reading.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/error.h"

namespace lathe::serialize {

FileHandle::~FileHandle() {
  if (fd >= 0) ::close(fd);
}

void read_exactly(int fd, void* dst, size_t n, uint64_t offset, const std::string& file) {
  char* p = static_cast<char*>(dst);
  while (n > 0) {
    const ssize_t got = ::pread(fd, p, n, off_t(offset));
    if (got < 0 && errno == EINTR) continue;
    LATHE_CHECK(got >= 0, file, ": read failed at byte ", offset, ": ", std::strerror(errno));
    LATHE_CHECK(got > 0, file, ": file ended at byte ", offset, " while reading (was it truncated while open?)");
    p += got;
    n -= size_t(got);
    offset += uint64_t(got);
  }
}

}  // namespace lathe::serialize
