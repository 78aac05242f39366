#include "data/text_corpus.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <set>

#include "core/error.h"

namespace lathe::data {

namespace fs = std::filesystem;

namespace {

bool is_hidden(const fs::path& p) {
  const std::string name = p.filename().string();
  return !name.empty() && name[0] == '.';
}

// A NUL byte near the start is how git and grep tell binary files from text.
bool looks_binary(int fd, const CorpusFile& f) {
  std::vector<uint8_t> head(std::min<size_t>(f.size, 8192));
  read_exact(fd, f, 0, head.size(), head.data());
  return std::memchr(head.data(), 0, head.size()) != nullptr;
}

// stat(2) of `path` following links; false when it names nothing (a dangling link). Any other
// failure (a loop of links, no permission) is an error naming the entry.
bool stat_entry(const fs::path& path, const std::string& corpus, struct stat& st) {
  if (::stat(path.c_str(), &st) == 0) return true;
  LATHE_CHECK(errno == ENOENT, "corpus ", corpus, ": ", path.string(), ": ", std::strerror(errno));
  return false;
}

// Regular files under `dir`, sorted by path, each real file once (Debian's fortunes has
// `art.u8 -> art` links that would otherwise count every fortune twice).
std::vector<std::string> files_under(const fs::path& dir) {
  std::vector<fs::path> found;
  // Links to directories are not followed: a link cycle would never end.
  std::error_code ec;
  auto it = fs::recursive_directory_iterator(dir, ec);
  LATHE_CHECK(!ec, "corpus ", dir.string(), ": cannot read the directory: ", ec.message());
  for (auto end = fs::recursive_directory_iterator(); it != end;) {
    const fs::path here = it->path();
    std::error_code kind;  // a hidden link loop is skipped like any hidden entry
    const bool directory = it->is_directory(kind) && !it->is_symlink(kind);
    if (is_hidden(here)) {
      if (directory) it.disable_recursion_pending();
    } else {
      found.push_back(here);
    }
    // Stepping on either enters `here` (a directory) or reads the next entry beside it; a failure
    // names the directory that could not be read.
    const bool entering = directory && it.recursion_pending();
    it.increment(ec);
    LATHE_CHECK(!ec, "corpus ", dir.string(), ": cannot read the directory ",
                (entering ? here : here.parent_path()).string(), ": ", ec.message());
  }
  std::sort(found.begin(), found.end());
  std::vector<std::string> files;
  std::set<std::pair<dev_t, ino_t>> seen;
  for (const fs::path& p : found) {
    struct stat st {};
    // FIFOs, devices and sockets in a directory are not text files; they are skipped like hidden
    // ones. A file that changes kind after this is caught when it is opened.
    if (!stat_entry(p, dir.string(), st) || !S_ISREG(st.st_mode)) continue;
    if (seen.insert({st.st_dev, st.st_ino}).second) files.push_back(p.string());
  }
  return files;
}

// What `path` is, without opening it (opening a tape or a terminal can have effects); its
// problems in one line.
mode_t corpus_kind(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    LATHE_CHECK(errno != ENOENT, "corpus ", path, ": no such file or directory");
    LATHE_FAIL("corpus ", path, ": cannot open: ", std::strerror(errno));
  }
  LATHE_CHECK(S_ISREG(st.st_mode) || S_ISDIR(st.st_mode), "corpus ", path, ": is ", file_kind_name(st.st_mode),
              ", not a regular file or a directory");
  return st.st_mode;
}

}  // namespace

TextCorpus TextCorpus::open(const std::string& path) {
  TextCorpus c;
  c.path_ = path;
  c.open_files_ = std::make_unique<OpenFiles>();
  if (S_ISDIR(corpus_kind(path))) {
    for (const std::string& p : files_under(path)) {
      CorpusFile f;
      FileHandle fd = open_regular_file(p, "corpus file", f);
      if (f.size == 0 || looks_binary(fd.get(), f)) continue;
      c.files_.push_back(std::move(f));
    }
    LATHE_CHECK(!c.files_.empty(), "corpus ", path, ": the directory holds no non-empty text file");
  } else {
    CorpusFile f;
    c.open_files_->adopt(0, open_regular_file(path, "corpus", f));
    c.files_.push_back(std::move(f));
  }
  for (const CorpusFile& f : c.files_) {
    c.starts_.push_back(c.size_);
    c.size_ += f.size;
  }
  LATHE_CHECK(c.size_ > 0, "corpus ", path, ": empty (0 bytes)");
  return c;
}

void TextCorpus::read(size_t begin, size_t n, uint8_t* out) const {
  LATHE_CHECK(begin <= size_ && n <= size_ - begin, "corpus ", path_, ": read of bytes [", begin, ", ",
              begin + n, ") is past its end (", size_, " bytes)");
  // The last file that starts at or before `begin`, then forward across file boundaries.
  size_t i = size_t(std::upper_bound(starts_.begin(), starts_.end(), begin) - starts_.begin()) - 1;
  while (n > 0) {
    const size_t within = begin - starts_[i];
    const size_t take = std::min(n, files_[i].size - within);
    open_files_->read(files_[i], i, within, take, out);
    out += take;
    begin += take;
    n -= take;
    ++i;
  }
}

std::string TextCorpus::text(size_t begin, size_t n) const {
  std::string s(n, '\0');
  read(begin, n, reinterpret_cast<uint8_t*>(s.data()));
  return s;
}

}  // namespace lathe::data
