// What a training run draws batches from: a stream of token ids split into train (the first 90%)
// and validation (the last 10%), as nanoGPT cuts it, and random windows of it. A batch is B windows
// of block_size + 1 consecutive tokens: x is the first block_size, y the last block_size (x
// shifted by one). Window starts depend only on the generator's (seed, offset), so a checkpoint
// that stores those two integers replays the same batches after a restart.
//
// Two datasets implement it: bytes of a text corpus (data/text_dataset.h) and token shards
// (data/token_dataset.h); open_dataset picks one for a path. A training run sees only this
// interface: the tokenizer of the ids (the byte tokenizer is one with 256 ids), what to call the
// data in messages, and a fingerprint that the ranks of a data parallel run compare.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/random.h"
#include "core/tensor.h"
#include "data/tokenizer.h"

namespace lathe::data {

enum class Split : uint8_t { train, val };
const char* split_name(Split s);

// x and y: i64 [batch, block_size] token ids on the requested device; y[b, t] = x[b, t + 1].
struct Batch {
  Tensor x, y;
};

// What a training run draws batches from: a byte corpus (TextDataset) or token shards
// (TokenDataset). Both split their stream into train (the first 90%) and validation (the
// last 10%) and draw windows the same way (draw_window_starts).
class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual int64_t block_size() const = 0;
  // Tokens in the split (bytes, for a byte corpus).
  virtual size_t split_size(Split s) const = 0;
  // A batch of `batch` random windows of the split, as tensors on `device`.
  virtual Batch sample(Split s, int64_t batch, Generator& gen, Device device = Device::cpu()) const = 0;
  // The stream's length in tokens: a resumed run checks it, since another length draws other windows.
  virtual size_t stream_size() const = 0;
  // Bytes of text per token of the validation split, so that a validation loss in nats per token
  // converts to bits per byte and runs with different tokenizers compare (1 for a byte corpus).
  virtual double val_bytes_per_token() const = 0;
  // One line for the log: what the data is and how it splits.
  virtual std::string describe() const = 0;
  // The tokenizer of the stream's ids: the byte tokenizer for a byte corpus, the shards' own for
  // token shards. It samples text from a model and is the one a checkpoint records.
  virtual const Tokenizer& tokenizer() const = 0;
  // For messages: what the data is ("corpus", "token shards") and what its stream counts ("bytes",
  // "tokens").
  virtual const char* kind() const = 0;
  virtual const char* unit() const = 0;
  // One line that differs where the data differ, for the processes of a data parallel run to
  // compare (train/distributed/agreement.h). A byte corpus is read whole for it.
  virtual std::string fingerprint() const = 0;
};

// The data at `path`: token shards when it is a directory of them (is_token_shard_dir in
// data/token_dataset.h), else a text corpus of bytes (a file, or a directory of files). Throws
// lathe::Error naming the path and what is wrong, as the datasets' constructors do.
std::unique_ptr<Dataset> open_dataset(const std::string& path, int64_t block_size);

// Start offsets (relative to the split) of `batch` windows of block_size + 1 tokens in a split of
// `split_size` tokens; reserves `batch` draws of `gen`. The starts depend only on the generator's
// (seed, offset).
std::vector<size_t> draw_window_starts(size_t split_size, int64_t block_size, int64_t batch, Generator& gen);

}  // namespace lathe::data
