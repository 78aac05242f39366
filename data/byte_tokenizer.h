// The byte-level tokenizer: token i is byte i, so the vocabulary is 256 and any byte string (UTF-8
// or not) survives encode then decode unchanged. It needs no training and no vocabulary file,
// which is what a from-scratch character model on a small corpus wants.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace lathe::data {

class ByteTokenizer {
 public:
  static constexpr int64_t kVocabSize = 256;
  std::vector<int64_t> encode(std::string_view text) const;
  // Throws lathe::Error naming the first id outside [0, 256).
  std::string decode(const std::vector<int64_t>& ids) const;
};

}  // namespace lathe::data
