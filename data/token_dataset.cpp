#include "data/token_dataset.h"

#include <filesystem>

#include "core/error.h"

namespace lathe::data {

bool is_token_shard_dir(const std::string& path) {
  // Any sign of shards decides, so that a damaged directory (shard_000000.bin lost) is reported as
  // such rather than read as a text corpus of its tokenizer.json.
  std::error_code ec;
  if (!std::filesystem::is_directory(path, ec)) return false;
  if (std::filesystem::exists(shard_tokenizer_path(path), ec)) return true;
  for (auto it = std::filesystem::directory_iterator(path, ec); !ec && it != std::filesystem::directory_iterator();
       it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (is_shard_name(name)) return true;
  }
  return false;
}

TokenDataset::TokenDataset(const std::string& dir, int64_t block_size)
    : manifest_(read_shard_manifest(dir)),
      tokenizer_(std::make_unique<BpeTokenizer>(load_tokenizer(manifest_.tokenizer, "token shards " + dir))),
      tokenizer_view_(*tokenizer_),
      shards_(TokenShards::open(dir, manifest_, *tokenizer_)),
      block_size_(block_size) {
  LATHE_CHECK(block_size_ > 0, "TokenDataset: block_size must be positive, got ", block_size_);
  const size_t n = shards_.size();
  const size_t window = size_t(block_size_) + 1;
  train_size_ = n - n / 10;
  LATHE_CHECK(train_size_ >= window && n - train_size_ >= window, "token shards ", dir, ": ", n,
              " tokens split into train ", train_size_, " and val ", n - train_size_,
              " (the last 10%); each split needs at least one window of ", window, " tokens (block_size ",
              block_size_, " + 1)");
  // One pass over the validation tokens, once: how much text they stand for.
  std::vector<int64_t> chunk;
  const size_t step = size_t(1) << 20;
  for (size_t at = train_size_; at < n; at += step) {
    chunk.resize(std::min(step, n - at));
    shards_.read(at, chunk.size(), chunk.data());
    for (int64_t id : chunk) val_bytes_ += tokenizer_->token_length(uint32_t(id));
  }
}

std::string TokenDataset::describe() const {
  return "token shards " + shards_.dir() + ": " + std::to_string(shards_.shard_count()) +
         (shards_.shard_count() == 1 ? " shard, " : " shards, ") + std::to_string(shards_.size()) +
         " tokens of " + tokenizer_->identity().describe() + ", " + std::to_string(tokenizer_->vocab_size()) +
         " ids (train " + std::to_string(split_size(Split::train)) + " tokens, val " +
         std::to_string(split_size(Split::val)) + " tokens, " + std::to_string(val_bytes_per_token()).substr(0, 5) +
         " bytes/token in val)";
}

std::string TokenDataset::fingerprint() const {
  return "token shards of " + std::to_string(stream_size()) + " tokens of tokenizer " + tokenizer_->identity().checksum +
         " (" + describe() + ")";
}

Batch TokenDataset::sample(Split s, int64_t batch, Generator& gen, Device device) const {
  const std::vector<size_t> starts = draw_window_starts(split_size(s), block_size_, batch, gen);
  const size_t T = size_t(block_size_);
  const size_t begin = s == Split::train ? 0 : train_size_;
  std::vector<int64_t> window(T + 1);
  std::vector<int64_t> x(size_t(batch) * T), y(size_t(batch) * T);
  for (size_t b = 0; b < starts.size(); ++b) {
    shards_.read(begin + starts[b], T + 1, window.data());
    std::copy(window.begin(), window.end() - 1, x.begin() + std::ptrdiff_t(b * T));
    std::copy(window.begin() + 1, window.end(), y.begin() + std::ptrdiff_t(b * T));
  }
  const Shape shape{batch, block_size_};
  return {Tensor::from_vector(x, shape, device), Tensor::from_vector(y, shape, device)};
}

}  // namespace lathe::data
