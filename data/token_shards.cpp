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
#include "serialize/atomic_file.h"
#include "serialize/checksum.h"

namespace lathe::data {

// The format is little-endian; the shards are written and mapped as the host lays out integers.
static_assert(std::endian::native == std::endian::little, "token shards assume a little-endian host");

ShardWriter::ShardWriter(std::string dir, uint64_t vocab_size, size_t shard_tokens)
    : dir_(std::move(dir)), wide_(wide_tokens(vocab_size)), shard_tokens_(shard_tokens) {
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

const std::vector<ShardRecord>& ShardWriter::finish() {
  if (!pending_.empty() || written_.empty()) flush();
  return written_;
}

void ShardWriter::flush() {
  LATHE_CHECK(pending_.size() <= size_t(INT32_MAX), "token shards: a shard holds at most 2^31 - 1 tokens");
  int32_t header[kShardHeaderInts] = {};
  header[0] = wide_ ? kShardMagic32 : kShardMagic16;
  header[1] = wide_ ? kShardVersion32 : kShardVersion16;
  header[2] = int32_t(pending_.size());
  ShardRecord record{shard_name(written_.size()), pending_.size(), ""};
  serialize::StreamingChecksum sum;
  auto write = [&](serialize::AtomicFile& f, const void* data, size_t n) {
    sum.update(data, n);
    f.write(data, n);
  };
  serialize::write_file_atomically((std::filesystem::path(dir_) / record.name).string(), [&](serialize::AtomicFile& f) {
    write(f, header, sizeof header);
    if (wide_) {
      write(f, pending_.data(), pending_.size() * 4);
    } else {
      std::vector<uint16_t> narrow(pending_.begin(), pending_.end());
      write(f, narrow.data(), narrow.size() * 2);
    }
  });
  record.checksum = serialize::checksum_hex(sum.value());
  written_.push_back(std::move(record));
  pending_.clear();
}

void TokenShards::release() noexcept {
  for (const Mapped& m : shards_) ::munmap(const_cast<uint8_t*>(m.base), m.bytes);
  shards_.clear();
}

TokenShards::~TokenShards() { release(); }

TokenShards::TokenShards(TokenShards&& o) noexcept
    : dir_(std::move(o.dir_)),
      vocab_size_(o.vocab_size_),
      shards_(std::move(o.shards_)),
      verified_(std::move(o.verified_)),
      verify_mutex_(std::move(o.verify_mutex_)),
      starts_(std::move(o.starts_)),
      total_(o.total_) {
  o.shards_.clear();
}

TokenShards& TokenShards::operator=(TokenShards&& o) noexcept {
  if (this != &o) {
    release();
    dir_ = std::move(o.dir_);
    vocab_size_ = o.vocab_size_;
    shards_ = std::move(o.shards_);
    verified_ = std::move(o.verified_);
    verify_mutex_ = std::move(o.verify_mutex_);
    starts_ = std::move(o.starts_);
    total_ = o.total_;
    o.shards_.clear();
  }
  return *this;
}

TokenShards TokenShards::open(const std::string& dir, const ShardManifest& manifest, const BpeTokenizer& tok) {
  const std::string manifest_path = shard_tokenizer_path(dir);
  // The manifest against the tokenizer it names: the stream's ids mean what this tokenizer says.
  LATHE_CHECK(manifest.tokenizer.kind == tok.identity().kind && manifest.tokenizer.checksum == tok.identity().checksum,
              manifest_path, ": the tokenizer is recorded as ", manifest.tokenizer.describe(), " (checksum ",
              manifest.tokenizer.checksum, "), but the one loaded is ", tok.identity().describe(), " (checksum ",
              tok.identity().checksum, ")");
  LATHE_CHECK(manifest.vocab_size == tok.vocab_size(), manifest_path, ": vocab_size ", manifest.vocab_size,
              ", but its tokenizer ", tok.identity().describe(), " has ", tok.vocab_size(), " ids");
  LATHE_CHECK(manifest.end_of_text == tok.end_of_text(), manifest_path, ": end_of_text ", manifest.end_of_text,
              ", but its tokenizer ", tok.identity().describe(), " has end-of-text ", tok.end_of_text());

  // The shard files: exactly the manifest's, none missing, none left over from another run.
  std::vector<std::string> present;
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator(dir, ec); !ec && it != std::filesystem::directory_iterator();
       it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (is_shard_name(name)) present.push_back(name);
  }
  LATHE_CHECK(!ec, "token shards ", dir, ": cannot list the directory: ", ec.message());
  std::sort(present.begin(), present.end());
  std::vector<std::string> listed;
  for (const ShardRecord& r : manifest.shards) listed.push_back(r.name);
  std::sort(listed.begin(), listed.end());
  for (const ShardRecord& r : manifest.shards)
    LATHE_CHECK(std::binary_search(present.begin(), present.end(), r.name), "token shard ",
                (std::filesystem::path(dir) / r.name).string(), " is missing (", manifest_path, " lists ", listed.size(),
                listed.size() == 1 ? " shard)" : " shards)");
  for (const std::string& name : present)
    LATHE_CHECK(std::binary_search(listed.begin(), listed.end(), name), "token shard ",
                (std::filesystem::path(dir) / name).string(), " is not one of the ", listed.size(), " shards ",
                manifest_path, " lists (left by another run?); run `lathe tokenize` again");

  TokenShards s;
  s.dir_ = dir;
  s.vocab_size_ = manifest.vocab_size;
  const bool wide = wide_tokens(manifest.vocab_size);
  for (const ShardRecord& r : manifest.shards) {
    const std::string path = (std::filesystem::path(dir) / r.name).string();
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
    m.checksum = r.checksum;
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
    const int32_t magic = wide ? kShardMagic32 : kShardMagic16, version = wide ? kShardVersion32 : kShardVersion16;
    LATHE_CHECK(header[0] == magic, "token shard ", path, ": magic ", header[0], ", expected ", magic, " (",
                wide ? "uint32" : "uint16", " tokens, for a vocabulary of ", manifest.vocab_size, " ids)");
    LATHE_CHECK(header[1] == version, "token shard ", path, ": version ", header[1], ", expected ", version,
                " for magic ", header[0]);
    LATHE_CHECK(header[2] >= 0 && uint64_t(header[2]) == r.tokens, "token shard ", path, ": the header says ",
                header[2], " tokens, ", manifest_path, " records ", r.tokens);
    m.tokens = size_t(header[2]);
    m.wide = wide;
    const size_t width = wide ? 4 : 2;
    LATHE_CHECK(m.bytes == kShardHeaderBytes + m.tokens * width, "token shard ", path, ": the header says ", m.tokens,
                " tokens (", kShardHeaderBytes + m.tokens * width, " bytes), the file has ", m.bytes,
                " bytes (truncated or damaged)");
    s.shards_.back() = m;
    s.starts_.push_back(s.total_);
    s.total_ += m.tokens;
  }
  s.verified_ = std::make_unique<std::atomic<bool>[]>(s.shards_.size());
  s.verify_mutex_ = std::make_unique<std::mutex>();
  return s;
}

void TokenShards::check_first_read(size_t shard) const {
  if (verified_[shard].load(std::memory_order_acquire)) return;
  const std::lock_guard<std::mutex> lock(*verify_mutex_);
  if (verified_[shard].load(std::memory_order_relaxed)) return;
  const Mapped& m = shards_[shard];
  const std::string sum = serialize::checksum_hex(serialize::checksum_bytes(m.base, m.bytes));
  LATHE_CHECK(sum == m.checksum, "token shard ", m.path, ": checksum ", sum, ", but ", shard_tokenizer_path(dir_),
              " records ", m.checksum, " (the file changed after lathe tokenize wrote it; run it again)");
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
    LATHE_CHECK(id < vocab_size_, "token shard ", m.path, ": token ", t, " is ", id, ", beyond the vocabulary of ",
                vocab_size_, " ids");
  }
  verified_[shard].store(true, std::memory_order_release);
}

void TokenShards::read(size_t begin, size_t n, int64_t* out) const {
  LATHE_CHECK(begin <= total_ && n <= total_ - begin, "token shards ", dir_, ": read of tokens [", begin, ", ",
              begin + n, ") is past the end (", total_, " tokens)");
  size_t i = size_t(std::upper_bound(starts_.begin(), starts_.end(), begin) - starts_.begin()) - 1;
  while (n > 0) {
    check_first_read(i);
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
