// `lathe tokenize`: a corpus (a file, or the text files under a directory, in sorted path order)
// as token shards (data/token_shards.h). Each file is a document and begins with the
// end-of-text token, as llm.c's data scripts write them, so the stream says where documents meet.
#pragma once

#include <cstddef>
#include <cstdio>
#include <string>

#include "data/bpe_tokenizer.h"
#include "data/token_shards.h"

namespace lathe::data {

// llm.c's shard size: 100M tokens (200 MB of uint16).
inline constexpr size_t kDefaultShardTokens = 100'000'000;

// Encodes every document of `data` with `tok` on `threads` threads and writes OUT/shard_*.bin and
// OUT/tokenizer.json (creating OUT). Progress goes to `log` unless it is null.
//
// OUT is one unit. The call holds its lock (serialize/directory_lock.h; a second writer is refused,
// naming the first). OUT must be empty unless `overwrite` is given; then its shards and manifest
// are replaced and every other entry is kept (and named on `log`), but a tokenizer.json that is not
// lathe's manifest is refused. The new corpus is written whole into a directory beside OUT and
// swapped in at the end (serialize/staged_directory.h), so that a kill or an error at any instant
// leaves the old corpus whole or the new one. OUT may not be DATA, lie inside it or hold it.
// Throws lathe::Error naming the path and the system error when OUT cannot be written.
ShardManifest tokenize_corpus(const BpeTokenizer& tok, const std::string& data, const std::string& out,
                              size_t shard_tokens, int threads, std::FILE* log, bool overwrite = false);

}  // namespace lathe::data
