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
// OUT is one unit: the call holds its lock (serialize/directory_lock.h; a second writer is
// refused, naming the first), replaces the manifest with a "writing" one before it removes any
// old shard (every shard_*.bin and every temporary file of a killed writer), and writes the new
// manifest last, so that a kill at any instant leaves either the old corpus whole or a directory
// every reader refuses. Files in OUT that are not lathe's are left, and named on `log`; a
// tokenizer.json that is not lathe's manifest is refused. OUT may not be DATA, lie inside it or
// hold it. Throws lathe::Error naming the path and the system error when OUT cannot be written.
ShardManifest tokenize_corpus(const BpeTokenizer& tok, const std::string& data, const std::string& out,
                              size_t shard_tokens, int threads, std::FILE* log);

}  // namespace lathe::data
