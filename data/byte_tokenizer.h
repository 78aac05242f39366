// The byte-level tokenizer: token i is byte i, so the vocabulary is 256 and any byte string (UTF-8
// or not) survives encode then decode unchanged. It needs no training and no vocabulary file,
// which is what a from-scratch character model on a small corpus wants. It is the tokenizer of a
// byte corpus (data/text_dataset.h).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "data/tokenizer.h"

namespace lathe::data {

class ByteTokenizer final : public Tokenizer {
 public:
  static constexpr int64_t kVocabSize = 256;
  int64_t vocab_size() const override { return kVocabSize; }
  std::vector<int64_t> encode(std::string_view text) const override;
  // Throws lathe::Error naming the first id outside [0, 256).
  std::string decode(const std::vector<int64_t>& ids) const override;
  const TokenizerIdentity* identity() const override { return nullptr; }
};

}  // namespace lathe::data
