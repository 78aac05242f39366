// Token shards in llm.c's format: a header of 256 little-endian int32 -- [0] the magic, [1] the
// version, [2] the token count -- then the tokens. Magic 20240520 (version 1) stores uint16
// tokens, for vocabularies up to 65,536 ids; magic 20240801 (version 7, llm.c's Llama 3 files)
// stores uint32. A directory holds DIR/shard_000000.bin, shard_000001.bin, ...; read in name
// order they are one token stream, and DIR/tokenizer.json (data/shard_manifest.h) says which
// tokenizer made it and lists every shard with its token count and checksum.
//
// The reader maps each shard read-only (mmap) instead of reading it: a corpus of gigabytes costs
// address space, not memory, and a window is a copy out of the page cache. A mapped file that
// shrinks under a reader would fault (SIGBUS) on the vanished pages; shards are written once,
// atomically (a temporary renamed over the name), so a reader only ever maps whole files.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "data/bpe_tokenizer.h"
#include "data/shard_manifest.h"

namespace lathe::data {

inline constexpr int32_t kShardMagic16 = 20240520;
inline constexpr int32_t kShardVersion16 = 1;
inline constexpr int32_t kShardMagic32 = 20240801;
inline constexpr int32_t kShardVersion32 = 7;
inline constexpr size_t kShardHeaderInts = 256;
inline constexpr size_t kShardHeaderBytes = kShardHeaderInts * 4;

// Whether a vocabulary of `vocab_size` ids needs uint32 tokens (the second magic).
inline bool wide_tokens(uint64_t vocab_size) { return vocab_size > 65536; }

// Writes a token stream as shards of `shard_tokens` tokens each (the last one shorter), each file
// atomically, and keeps the record of each (name, tokens, checksum) for the manifest. Tokens are
// uint16 when vocab_size <= 65,536, else uint32.
class ShardWriter {
 public:
  ShardWriter(std::string dir, uint64_t vocab_size, size_t shard_tokens);
  void append(const uint32_t* ids, size_t n);
  // Writes the last partial shard; returns the records of all shards written.
  const std::vector<ShardRecord>& finish();

 private:
  void flush();
  std::string dir_;
  bool wide_;
  size_t shard_tokens_;
  std::vector<uint32_t> pending_;
  std::vector<ShardRecord> written_;
};

// The shards of a directory, mapped read-only, as one token stream.
class TokenShards {
 public:
  // Maps the shards `manifest` lists (read from `dir` by read_shard_manifest) and checks the
  // directory against it and against `tok`, the tokenizer it names: vocab_size, end-of-text and
  // kind; the shard files, none missing and no other shard_*.bin; each header's magic (the token
  // width of the vocabulary), version and token count against the manifest's and the file's size.
  // Each shard's checksum and its tokens (every one below vocab_size, so that a batch never
  // indexes past the embedding) are checked when the shard is first read: opening costs no pass
  // over the data. Throws lathe::Error naming the file or field at fault and what was expected.
  static TokenShards open(const std::string& dir, const ShardManifest& manifest, const BpeTokenizer& tok);
  ~TokenShards();
  TokenShards(TokenShards&&) noexcept;
  TokenShards& operator=(TokenShards&&) noexcept;

  const std::string& dir() const { return dir_; }
  size_t size() const { return total_; }  // tokens
  size_t shard_count() const { return shards_.size(); }
  // Copies tokens [begin, begin + n) of the stream (which may span shards) into `out`. The first
  // read of a shard checks it (see open) and throws lathe::Error naming it when it is damaged, on
  // that and every later read. Safe to call from several threads at once.
  void read(size_t begin, size_t n, int64_t* out) const;

 private:
  TokenShards() = default;
  struct Mapped {
    std::string path;
    const uint8_t* base = nullptr;  // the whole file
    size_t bytes = 0;
    size_t tokens = 0;
    bool wide = false;
    std::string checksum;  // the manifest's
  };
  void check_first_read(size_t shard) const;
  void release() noexcept;
  std::string dir_;
  uint64_t vocab_size_ = 0;
  std::vector<Mapped> shards_;
  // Whether each shard has been checked; checks run one at a time under the mutex. (Held by
  // pointer so that the object moves.)
  std::unique_ptr<std::atomic<bool>[]> verified_;
  std::unique_ptr<std::mutex> verify_mutex_;
  std::vector<size_t> starts_;
  size_t total_ = 0;
};

}  // namespace lathe::data
