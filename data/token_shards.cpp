#include "data/token_shards.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "core/error.h"
#include "data/corpus_file.h"
#include "serialize/atomic_file.h"
#include "serialize/json_document.h"

namespace lathe::data {

// The format is little-endian; the shards are written and mapped as the host lays out integers.
static_assert(std::endian::native == std::endian::little, "token shards assume a little-endian host");

namespace {

constexpr const char* kManifestFormat = "lathe-token-shards";

bool is_shard_name(const std::string& name) {
  return name.size() == 16 && name.rfind("shard_", 0) == 0 && name.substr(12) == ".bin" &&
         std::all_of(name.begin() + 6, name.begin() + 12, [](char c) { return c >= '0' && c <= '9'; });
}

}  // namespace

std::string shard_path(const std::string& dir, size_t index) {
  char name[32];
  std::snprintf(name, sizeof name, "shard_%06zu.bin", index);
  return (std::filesystem::path(dir) / name).string();
}

std::string shard_tokenizer_path(const std::string& dir) { return (std::filesystem::path(dir) / "tokenizer.json").string(); }

void write_shard_manifest(const std::string& dir, const ShardManifest& m) {
  const nlohmann::json j = {{"format", kManifestFormat}, {"tokenizer", m.tokenizer.to_json()},
                            {"vocab_size", m.vocab_size}, {"end_of_text", m.end_of_text},
                            {"documents", m.documents},   {"tokens", m.tokens},
                            {"text_bytes", m.text_bytes}, {"shards", m.shards}};
  const std::string text = j.dump(2) + "\n";
  serialize::write_file_atomically(shard_tokenizer_path(dir),
                                   [&](serialize::AtomicFile& f) { f.write(text.data(), text.size()); });
}

ShardManifest read_shard_manifest(const std::string& dir) {
  const std::string path = shard_tokenizer_path(dir);
  struct stat st {};
  LATHE_CHECK(::stat(path.c_str(), &st) == 0 || errno != ENOENT, "token shards ", dir, ": no ", path,
              " (write shards with `lathe tokenize`)");
  CorpusFile info;
  FileHandle fd = open_regular_file(path, "token shard manifest", info);
  std::string text(info.size, '\0');
  read_exact(fd.get(), info, 0, info.size, reinterpret_cast<uint8_t*>(text.data()));
  const nlohmann::json j = serialize::parse_json_document(text, path);
  try {
    LATHE_CHECK(j.at("format") == kManifestFormat, path, ": format ", serialize::quote_json(j.at("format")),
                ", expected \"", kManifestFormat, "\"");
    ShardManifest m;
    m.tokenizer = TokenizerIdentity::from_json(j.at("tokenizer"), path);
    m.vocab_size = j.at("vocab_size").get<uint64_t>();
    m.end_of_text = j.at("end_of_text").get<uint32_t>();
    m.documents = j.at("documents").get<uint64_t>();
    m.tokens = j.at("tokens").get<uint64_t>();
    m.text_bytes = j.at("text_bytes").get<uint64_t>();
    m.shards = j.at("shards").get<size_t>();
    return m;
  } catch (const nlohmann::json::exception& e) {
    LATHE_FAIL(path, ": ", e.what());
  }
}

ShardWriter::ShardWriter(std::string dir, uint64_t vocab_size, size_t shard_tokens)
    : dir_(std::move(dir)), wide_(vocab_size > 65536), shard_tokens_(shard_tokens) {
  LATHE_CHECK(shard_tokens_ > 0, "token shards: the shard size must be positive");
  LATHE_CHECK(vocab_size <= (uint64_t(1) << 32), "token shards: vocabulary of ", vocab_size,
              " ids does not fit uint32 tokens");
  pending_.reserve(std::min<size_t>(shard_tokens_, size_t(1) << 24));
}

void ShardWriter::append(const uint32_t* ids, size_t n) {
  while (n > 0) {
    const size_t take = std::min(n, shard_tokens_ - pending_.size());
    pending_.insert(pending_.end(), ids, ids + take);
    ids += take;
    n -= take;
    if (pending_.size() == shard_tokens_) flush();
  }
}

size_t ShardWriter::finish() {
  if (!pending_.empty() || written_ == 0) flush();
  return written_;
}

void ShardWriter::flush() {
  LATHE_CHECK(pending_.size() <= size_t(INT32_MAX), "token shards: a shard holds at most 2^31 - 1 tokens");
  int32_t header[kShardHeaderInts] = {};
  header[0] = wide_ ? kShardMagic32 : kShardMagic16;
  header[1] = wide_ ? kShardVersion32 : kShardVersion16;
  header[2] = int32_t(pending_.size());
  serialize::write_file_atomically(shard_path(dir_, written_), [&](serialize::AtomicFile& f) {
    f.write(header, sizeof header);
    if (wide_) {
      f.write(pending_.data(), pending_.size() * 4);
    } else {
      std::vector<uint16_t> narrow(pending_.begin(), pending_.end());
      f.write(narrow.data(), narrow.size() * 2);
    }
  });
  pending_.clear();
  ++written_;
}

TokenShards::~TokenShards() {
  for (const Mapped& m : shards_) ::munmap(const_cast<uint8_t*>(m.base), m.bytes);
}

TokenShards::TokenShards(TokenShards&& o) noexcept
    : dir_(std::move(o.dir_)), shards_(std::move(o.shards_)), starts_(std::move(o.starts_)), total_(o.total_) {
  o.shards_.clear();
}

TokenShards& TokenShards::operator=(TokenShards&& o) noexcept {
  if (this != &o) {
    for (const Mapped& m : shards_) ::munmap(const_cast<uint8_t*>(m.base), m.bytes);
    dir_ = std::move(o.dir_);
    shards_ = std::move(o.shards_);
    starts_ = std::move(o.starts_);
    total_ = o.total_;
    o.shards_.clear();
  }
  return *this;
}

TokenShards TokenShards::open(const std::string& dir, uint64_t vocab_size) {
  TokenShards s;
  s.dir_ = dir;
  std::vector<std::string> names;
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator(dir, ec); !ec && it != std::filesystem::directory_iterator();
       it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (is_shard_name(name)) names.push_back(name);
  }
  LATHE_CHECK(!ec, "token shards ", dir, ": cannot list the directory: ", ec.message());
  std::sort(names.begin(), names.end());
  LATHE_CHECK(!names.empty(), "token shards ", dir, ": no shard_*.bin files (write them with `lathe tokenize`)");
  for (size_t i = 0; i < names.size(); ++i) {
    const std::string path = shard_path(dir, i);
    LATHE_CHECK(std::filesystem::path(path).filename() == names[i], "token shard ", shard_path(dir, i),
                " is missing (the shards must be numbered from 000000 with no gap; found ", names[i], ")");
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    LATHE_CHECK(fd >= 0, "token shard ", path, ": ", std::strerror(errno));
    struct stat st {};
    const bool stat_ok = ::fstat(fd, &st) == 0;
    if (!stat_ok || !S_ISREG(st.st_mode)) {
      ::close(fd);
      LATHE_CHECK(stat_ok, "token shard ", path, ": cannot stat: ", std::strerror(errno));
      LATHE_FAIL("token shard ", path, ": is ", serialize::file_kind_name(st.st_mode), ", not a regular file");
    }
    Mapped m;
    m.path = path;
    m.bytes = size_t(st.st_size);
    if (m.bytes < kShardHeaderBytes) {
      ::close(fd);
      LATHE_FAIL("token shard ", path, ": ", m.bytes, " bytes, shorter than the ", kShardHeaderBytes, "-byte header");
    }
    void* base = ::mmap(nullptr, m.bytes, PROT_READ, MAP_SHARED, fd, 0);
    const int map_errno = errno;
    ::close(fd);  // the mapping keeps the file
    LATHE_CHECK(base != MAP_FAILED, "token shard ", path, ": cannot map: ", std::strerror(map_errno));
    m.base = static_cast<const uint8_t*>(base);
    s.shards_.push_back(m);  // unmapped by the destructor from here on, whatever fails below

    int32_t header[3];
    std::memcpy(header, m.base, sizeof header);
    m.wide = header[0] == kShardMagic32;
    LATHE_CHECK(header[0] == kShardMagic16 || header[0] == kShardMagic32, "token shard ", path, ": magic ", header[0],
                ", expected ", kShardMagic16, " (uint16 tokens) or ", kShardMagic32, " (uint32 tokens)");
    const int32_t version = m.wide ? kShardVersion32 : kShardVersion16;
    LATHE_CHECK(header[1] == version, "token shard ", path, ": version ", header[1], ", expected ", version,
                " for magic ", header[0]);
    LATHE_CHECK(header[2] >= 0, "token shard ", path, ": negative token count ", header[2]);
    m.tokens = size_t(header[2]);
    const size_t width = m.wide ? 4 : 2;
    LATHE_CHECK(m.bytes == kShardHeaderBytes + m.tokens * width, "token shard ", path, ": the header says ", m.tokens,
                " tokens (", kShardHeaderBytes + m.tokens * width, " bytes), the file has ", m.bytes,
                " bytes (truncated or damaged)");
    // Every token is checked once here, so that a batch can never index past the embedding.
    const uint8_t* data = m.base + kShardHeaderBytes;
    for (size_t t = 0; t < m.tokens; ++t) {
      uint32_t id;
      if (m.wide) {
        std::memcpy(&id, data + 4 * t, 4);
      } else {
        uint16_t narrow;
        std::memcpy(&narrow, data + 2 * t, 2);
        id = narrow;
      }
      LATHE_CHECK(id < vocab_size, "token shard ", path, ": token ", t, " is ", id, ", beyond the vocabulary of ",
                  vocab_size, " ids");
    }
    s.shards_.back() = m;
    s.starts_.push_back(s.total_);
    s.total_ += m.tokens;
  }
  return s;
}

void TokenShards::read(size_t begin, size_t n, int64_t* out) const {
  LATHE_CHECK(begin <= total_ && n <= total_ - begin, "token shards ", dir_, ": read of tokens [", begin, ", ",
              begin + n, ") is past the end (", total_, " tokens)");
  size_t i = size_t(std::upper_bound(starts_.begin(), starts_.end(), begin) - starts_.begin()) - 1;
  while (n > 0) {
    const Mapped& m = shards_[i];
    const size_t within = begin - starts_[i];
    const size_t take = std::min(n, m.tokens - within);
    const uint8_t* data = m.base + kShardHeaderBytes;
    for (size_t t = 0; t < take; ++t) {
      if (m.wide) {
        uint32_t id;
        std::memcpy(&id, data + 4 * (within + t), 4);
        out[t] = id;
      } else {
        uint16_t id;
        std::memcpy(&id, data + 2 * (within + t), 2);
        out[t] = id;
      }
    }
    out += take;
    begin += take;
    n -= take;
    ++i;
  }
}

}  // namespace lathe::data
