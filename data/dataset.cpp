#include "data/dataset.h"

#include "core/error.h"
#include "data/text_dataset.h"
#include "data/token_dataset.h"

namespace lathe::data {

const char* split_name(Split s) { return s == Split::train ? "train" : "val"; }

std::vector<size_t> draw_window_starts(size_t split_size, int64_t block_size, int64_t batch, Generator& gen) {
  LATHE_CHECK(batch > 0, "dataset: batch size must be positive, got ", batch);
  // A window needs block_size + 1 tokens, so starts range over [0, size - block_size).
  const uint64_t choices = split_size - uint64_t(block_size);
  const uint64_t first = gen.advance(uint64_t(batch));
  std::vector<size_t> starts(static_cast<size_t>(batch));
  for (int64_t b = 0; b < batch; ++b)
    starts[size_t(b)] = size_t(philox_below(gen.seed(), first + uint64_t(b), choices));
  return starts;
}

std::unique_ptr<Dataset> open_dataset(const std::string& path, int64_t block_size) {
  if (is_token_shard_dir(path)) return std::make_unique<TokenDataset>(path, block_size);
  return std::make_unique<TextDataset>(TextCorpus::open(path), block_size);
}

}  // namespace lathe::data
