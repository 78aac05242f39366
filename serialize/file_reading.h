#pragma once
// What the readers of this layer (safetensors, llm.c's model files) share to read a file: a
// descriptor that closes itself, and reads of exactly n bytes at an offset.

#include <cstddef>
#include <cstdint>
#include <string>

namespace lathe::serialize {

// An open file descriptor (or -1), closed when it goes out of scope.
struct FileHandle {
  int fd = -1;
  FileHandle() = default;
  FileHandle(const FileHandle&) = delete;
  FileHandle& operator=(const FileHandle&) = delete;
  ~FileHandle();
};

// Reads exactly n bytes of `fd` at `offset` into dst. Throws lathe::Error naming `file` and the byte
// where the read failed or the file ended (it was truncated while open).
void read_exactly(int fd, void* dst, size_t n, uint64_t offset, const std::string& file);

}  // namespace lathe::serialize
