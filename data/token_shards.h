// Token shards in llm.c's format: a header of 256 little-endian int32 -- [0] the magic, [1] the
// version, [2] the token count -- then the tokens. Magic 20240520 (version 1) stores uint16
// tokens, for vocabularies up to 65,536 ids; magic 20240801 (version 7, llm.c's Llama 3 files)
// stores uint32. A directory holds DIR/shard_000000.bin, shard_000001.bin, ...; read in name
// order they are one token stream, and DIR/tokenizer.json says which tokenizer made it.
//
// The reader maps each shard read-only (mmap) instead of reading it: a corpus of gigabytes costs
// address space, not memory, and a window is a copy out of the page cache. A mapped file that
// shrinks under a reader would fault (SIGBUS) on the vanished pages; shards are written once,
// atomically (a temporary renamed over the name), so a reader only ever maps whole files.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/bpe_tokenizer.h"

namespace lathe::data {

inline constexpr int32_t kShardMagic16 = 20240520;
inline constexpr int32_t kShardVersion16 = 1;
inline constexpr int32_t kShardMagic32 = 20240801;
inline constexpr int32_t kShardVersion32 = 7;
inline constexpr size_t kShardHeaderInts = 256;
inline constexpr size_t kShardHeaderBytes = kShardHeaderInts * 4;

std::string shard_path(const std::string& dir, size_t index);  // DIR/shard_000042.bin
std::string shard_tokenizer_path(const std::string& dir);      // DIR/tokenizer.json

// What DIR/tokenizer.json records: the tokenizer and the size of the stream.
struct ShardManifest {
  TokenizerIdentity tokenizer;
  uint64_t vocab_size = 0;  // ids including end-of-text
  uint32_t end_of_text = 0;
  uint64_t documents = 0;
  uint64_t tokens = 0;
  uint64_t text_bytes = 0;  // bytes of the documents (end-of-text tokens stand for none)
  size_t shards = 0;
};
void write_shard_manifest(const std::string& dir, const ShardManifest& m);
// Throws lathe::Error naming the file when it is missing or malformed.
ShardManifest read_shard_manifest(const std::string& dir);

// Writes a token stream as shards of `shard_tokens` tokens each (the last one shorter), each file
// atomically. Tokens are uint16 when vocab_size <= 65,536, else uint32.
class ShardWriter {
 public:
  ShardWriter(std::string dir, uint64_t vocab_size, size_t shard_tokens);
  void append(const uint32_t* ids, size_t n);
  // Writes the last partial shard; returns the number of shards written.
  size_t finish();

 private:
  void flush();
  std::string dir_;
  bool wide_;
  size_t shard_tokens_;
  std::vector<uint32_t> pending_;
  size_t written_ = 0;
};

// The shards of a directory, mapped read-only, as one token stream.
class TokenShards {
 public:
  // Maps DIR/shard_*.bin in name order (the names must run 000000, 000001, ... with no gap) and
  // checks each: the header's magic and version, its token count against the file's size, every
  // token below `vocab_size`. Throws lathe::Error naming the file at fault.
  static TokenShards open(const std::string& dir, uint64_t vocab_size);
  ~TokenShards();
  TokenShards(TokenShards&&) noexcept;
  TokenShards& operator=(TokenShards&&) noexcept;

  const std::string& dir() const { return dir_; }
  size_t size() const { return total_; }  // tokens
  size_t shard_count() const { return shards_.size(); }
  // Copies tokens [begin, begin + n) of the stream (which may span shards) into `out`.
  void read(size_t begin, size_t n, int64_t* out) const;

 private:
  TokenShards() = default;
  struct Mapped {
    std::string path;
    const uint8_t* base = nullptr;  // the whole file
    size_t bytes = 0;
    size_t tokens = 0;
    bool wide = false;
  };
  std::string dir_;
  std::vector<Mapped> shards_;
  std::vector<size_t> starts_;
  size_t total_ = 0;
};

}  // namespace lathe::data
