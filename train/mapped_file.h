// A read-only memory map of a whole file. The corpus reads its bytes through maps, so a corpus of
// gigabytes costs address space and page cache, not process memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace lathe::app {

class MappedFile {
 public:
  // Maps `path`; throws lathe::Error naming the path when it cannot be opened or mapped.
  // An empty file is valid and maps nothing.
  explicit MappedFile(const std::string& path);
  ~MappedFile();
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  void release();
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace lathe::app
