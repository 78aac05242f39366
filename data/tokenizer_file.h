// The file `lathe tokenizer train` writes: one JSON object,
//   {"format": "lathe-bpe-tokenizer", "version": 1, "pattern": "gpt2" | "gpt4",
//    "vocab_size": N, "end_of_text": N, "merges": [[left, right], ...]}
// Token b (0..255) is byte b; merge i joins tokens left and right (both below 256 + i) into token
// 256 + i; N = 256 + the number of merges ordinary tokens, and the end-of-text token is id N (so a
// model over it has N + 1 ids). docs/tokenizer.md describes the format.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "data/pretokenizer.h"

namespace lathe::data {

inline constexpr const char* kTokenizerFormat = "lathe-bpe-tokenizer";

struct TokenizerFile {
  PretokenPattern pattern = PretokenPattern::gpt2;
  std::vector<std::pair<uint32_t, uint32_t>> merges;
};

// Written atomically (serialize/atomic_file.h).
void write_tokenizer_file(const std::string& path, const TokenizerFile& t);
// Throws lathe::Error naming the file: not JSON, another format or version, an unknown pattern, a
// merge that names a token no earlier merge made, counts that disagree.
TokenizerFile read_tokenizer_file(const std::string& path, const std::string& text);

}  // namespace lathe::data
