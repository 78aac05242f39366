// Training data for a byte-level language model: a corpus of text files read on demand with pread,
// split into train and validation bytes, and random windows drawn from a lathe::Generator.
//
// The corpus is one file, or every text file under a directory (recursively, sorted by path,
// concatenated). The last 10% of its bytes are the validation split, as nanoGPT cuts it. A batch
// is B windows of block_size + 1 consecutive bytes: x is the first block_size, y the last
// block_size (x shifted by one). Window starts depend only on the generator's (seed, offset), so
// a checkpoint that stores those two integers replays the same batches after a restart.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/random.h"
#include "core/tensor.h"
#include "train/corpus_file.h"

namespace lathe::app {

// The bytes of a file, or of the text files under a directory, as one read-only sequence.
class TextCorpus {
 public:
  // A directory contributes its regular files (following links, each file once), skipping hidden
  // entries, other kinds of file (FIFOs, devices, sockets) and files that look binary (a NUL byte
  // in their first 8 KiB, e.g. the .dat indexes of the fortunes package). Throws lathe::Error
  // naming the path when it does not exist, cannot be opened (a loop of links, no permission), is
  // neither a regular file nor a directory (a FIFO, a device), or holds no text. Any number of
  // files is fine: none stays mapped, and at most OpenFiles::kCapacity stay open.
  static TextCorpus open(const std::string& path);

  const std::string& path() const { return path_; }
  size_t size() const { return size_; }
  size_t file_count() const { return files_.size(); }
  const std::string& file_path(size_t i) const { return files_[i].path; }
  // Where file i lies in the concatenation: [file_begin(i), file_begin(i) + file_size(i)).
  size_t file_begin(size_t i) const { return starts_[i]; }
  size_t file_size(size_t i) const { return files_[i].size; }
  // Copies bytes [begin, begin + n) of the concatenation (which may span files) into `out`.
  // Throws lathe::Error naming the file when one shrank or was replaced since open().
  void read(size_t begin, size_t n, uint8_t* out) const;
  // The whole [begin, begin + n) as a string (for samples and tests; not for the whole corpus).
  std::string text(size_t begin, size_t n) const;

 private:
  std::string path_;
  std::vector<CorpusFile> files_;
  std::unique_ptr<OpenFiles> open_files_;  // behind a pointer: the corpus moves, its lock must not
  std::vector<size_t> starts_;  // starts_[i]: offset of files_[i] in the concatenation
  size_t size_ = 0;
};

enum class Split : uint8_t { train, val };
const char* split_name(Split s);

// x and y: i64 [batch, block_size] token ids on the requested device; y[b, t] = x[b, t + 1].
struct Batch {
  Tensor x, y;
};

// What the trainer draws batches from: a byte corpus (TextDataset) or token shards
// (train/token_dataset.h). Both split their stream into train (the first 90%) and validation (the
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
};

// Start offsets (relative to the split) of `batch` windows of block_size + 1 tokens in a split of
// `split_size` tokens; reserves `batch` draws of `gen`. The starts depend only on the generator's
// (seed, offset).
std::vector<size_t> draw_window_starts(size_t split_size, int64_t block_size, int64_t batch, Generator& gen);

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

  // Start offsets (relative to the split) of `batch` windows; reserves `batch` draws of `gen`.
  std::vector<size_t> window_starts(Split s, int64_t batch, Generator& gen) const;
  Batch sample(Split s, int64_t batch, Generator& gen, Device device = Device::cpu()) const override;

 private:
  TextCorpus corpus_;
  int64_t block_size_;
  size_t train_size_;
};

}  // namespace lathe::app
