// DIR/tokenizer.json, the manifest of a directory of token shards (data/token_shards.h): which
// tokenizer made the stream, its size, and every shard with its token count and checksum, so that
// a reader trusts exactly the files `lathe tokenize` wrote and nothing else.
//
//   {"format": "lathe-token-shards", "version": 2, "state": "complete",
//    "tokenizer": {"kind": "bpe", "path": "/abs/tok.json", "checksum": "<16 hex>"},
//    "vocab_size": 4097, "end_of_text": 4096, "documents": 12, "tokens": 150000, "text_bytes": 610000,
//    "shards": 2,
//    "files": [{"name": "shard_000000.bin", "tokens": 100000, "checksum": "<16 hex>"}, ...]}
//
// A file's checksum is XXH3-64 (serialize/checksum.h) of all its bytes, header included.
//
// While `lathe tokenize` rewrites a directory the manifest says so instead:
//   {"format": "lathe-token-shards", "version": 2, "state": "writing", "writer": "lathe tokenize (process 4242)"}
// It is written (atomically, durably) before the first old shard is removed and replaced by the
// complete manifest after the last new shard is durable, so a directory whose writer was killed
// is refused by name rather than read half old, half new.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/bpe_tokenizer.h"

namespace lathe::data {

inline constexpr const char* kShardManifestFormat = "lathe-token-shards";
inline constexpr int kShardManifestVersion = 2;

struct ShardRecord {
  std::string name;      // "shard_000000.bin", in DIR
  uint64_t tokens = 0;
  std::string checksum;  // XXH3-64 of the whole file, 16 hex digits
};

struct ShardManifest {
  TokenizerIdentity tokenizer;
  uint64_t vocab_size = 0;  // ids including end-of-text
  uint32_t end_of_text = 0;
  uint64_t documents = 0;
  uint64_t tokens = 0;
  uint64_t text_bytes = 0;  // bytes of the documents (end-of-text tokens stand for none)
  std::vector<ShardRecord> shards;  // in stream order
};

std::string shard_name(size_t index);                          // shard_000042.bin
std::string shard_path(const std::string& dir, size_t index);  // DIR/shard_000042.bin
std::string shard_tokenizer_path(const std::string& dir);      // DIR/tokenizer.json
// Whether a file name is a shard's: "shard_", decimal digits, ".bin" (any number of digits, so
// that every shard of any writer is found).
bool is_shard_name(const std::string& name);

// The complete manifest, written atomically.
void write_shard_manifest(const std::string& dir, const ShardManifest& m);
// The manifest of a directory being rewritten by `writer` ("lathe tokenize (process 4242)").
void write_writing_manifest(const std::string& dir, const std::string& writer);

// The complete manifest of DIR, checked in itself: every field present with the right type, the
// shards named shard_000000.bin, shard_000001.bin, ... in order, their tokens adding up to
// "tokens". Throws lathe::Error naming the file and the field; a directory being rewritten (or
// whose writer was killed) and a manifest of an older lathe (without per-shard records) are
// errors that say to run `lathe tokenize` again.
ShardManifest read_shard_manifest(const std::string& dir);

// Refuses (lathe::Error naming the file and `flag`) a DIR/tokenizer.json that is not a manifest of
// lathe's of any version or state, which `lathe tokenize` would otherwise replace: another
// program's tokenizer.json, a file that is not JSON, something that is not a regular file. No
// such file is fine.
void check_manifest_replaceable(const std::string& dir, const std::string& flag);

}  // namespace lathe::data
