// Training data for a byte-level language model: the bytes of a text corpus (data/text_corpus.h)
// are the tokens, split and drawn as every dataset is (data/dataset.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "data/byte_tokenizer.h"
#include "data/dataset.h"
#include "data/text_corpus.h"

namespace lathe::data {

class TextDataset : public Dataset {
 public:
  static constexpr double kValFraction = 0.1;

  // Throws lathe::Error naming the corpus path and the sizes when the corpus, or either split,
  // is shorter than one window (block_size + 1 bytes).
  TextDataset(TextCorpus corpus, int64_t block_size);

  const TextCorpus& corpus() const { return corpus_; }
  int64_t block_size() const override { return block_size_; }
  size_t split_begin(Split s) const { return s == Split::train ? 0 : train_size_; }
  size_t split_size(Split s) const override { return s == Split::train ? train_size_ : corpus_.size() - train_size_; }
  size_t stream_size() const override { return corpus_.size(); }
  double val_bytes_per_token() const override { return 1.0; }
  std::string describe() const override;
  const Tokenizer& tokenizer() const override { return tokenizer_; }
  const char* kind() const override { return "corpus"; }
  const char* unit() const override { return "bytes"; }
  // The corpus's size and the checksum of all its bytes.
  std::string fingerprint() const override;

  // Start offsets (relative to the split) of `batch` windows; reserves `batch` draws of `gen`.
  std::vector<size_t> window_starts(Split s, int64_t batch, Generator& gen) const;
  Batch sample(Split s, int64_t batch, Generator& gen, Device device = Device::cpu()) const override;

 private:
  TextCorpus corpus_;
  ByteTokenizer tokenizer_;
  int64_t block_size_;
  size_t train_size_;
};

}  // namespace lathe::data
