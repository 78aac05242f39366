// A tokenizer as a training run uses it, whichever kind its data has: the byte tokenizer of a byte
// corpus (data/byte_tokenizer.h, 256 ids) or the BPE tokenizer of token shards
// (data/bpe_tokenizer.h, through BpeTokenizerView). Ids are a model's token ids (int64).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace lathe::data {

struct TokenizerIdentity;

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  // Every id a model over this tokenizer must be able to emit.
  virtual int64_t vocab_size() const = 0;
  virtual std::vector<int64_t> encode(std::string_view text) const = 0;
  // Throws lathe::Error naming the position or value of the first id outside the vocabulary.
  virtual std::string decode(const std::vector<int64_t>& ids) const = 0;
  // What checkpoints and weights record, so that a run resumes, fine-tunes and samples with the
  // tokenizer it was trained with; null for the byte tokenizer, which is no file and is recorded
  // as nothing.
  virtual const TokenizerIdentity* identity() const = 0;

  // For messages: "bytes", or the identity's description ("gpt2 (/path/vocab.bpe)").
  std::string describe() const;
  // The identity's checksum; "" for bytes.
  std::string checksum() const;
};

}  // namespace lathe::data
