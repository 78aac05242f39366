// A corpus of text: one file, or every text file under a directory (recursively, sorted by path,
// concatenated), read on demand with pread. It is what `lathe train` reads bytes from and what
// `lathe tokenize` encodes, one document per file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/corpus_file.h"

namespace lathe::data {

// The bytes of a file, or of the text files under a directory, as one read-only sequence.
class TextCorpus {
 public:
  // A directory contributes its regular files (following links, each file once), skipping hidden
  // entries, other kinds of file (FIFOs, devices, sockets) and files that look binary (a NUL byte
  // in their first 8 KiB, e.g. the .dat indexes of the fortunes package). Throws lathe::Error
  // naming the path when it does not exist, cannot be opened (a loop of links, no permission), is
  // neither a regular file nor a directory (a FIFO, a device), or holds no text. Any number of
  // files is fine: none stays mapped, and at most OpenFiles::kCapacity stay open.
  static TextCorpus open(const std::string& path);

  const std::string& path() const { return path_; }
  size_t size() const { return size_; }
  size_t file_count() const { return files_.size(); }
  const std::string& file_path(size_t i) const { return files_[i].path; }
  // Where file i lies in the concatenation: [file_begin(i), file_begin(i) + file_size(i)).
  size_t file_begin(size_t i) const { return starts_[i]; }
  size_t file_size(size_t i) const { return files_[i].size; }
  // Copies bytes [begin, begin + n) of the concatenation (which may span files) into `out`.
  // Throws lathe::Error naming the file when one shrank or was replaced since open().
  void read(size_t begin, size_t n, uint8_t* out) const;
  // The whole [begin, begin + n) as a string (for samples and tests; not for the whole corpus).
  std::string text(size_t begin, size_t n) const;

 private:
  std::string path_;
  std::vector<CorpusFile> files_;
  std::unique_ptr<OpenFiles> open_files_;  // behind a pointer: the corpus moves, its lock must not
  std::vector<size_t> starts_;  // starts_[i]: offset of files_[i] in the concatenation
  size_t size_ = 0;
};

}  // namespace lathe::data
