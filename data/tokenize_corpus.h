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
ShardManifest tokenize_corpus(const BpeTokenizer& tok, const std::string& data, const std::string& out,
                              size_t shard_tokens, int threads, std::FILE* log);

}  // namespace lathe::data
