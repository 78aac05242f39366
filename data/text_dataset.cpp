#include "data/text_dataset.h"

#include <algorithm>

#include "core/error.h"
#include "core/format.h"
#include "serialize/checksum.h"

namespace lathe::data {

TextDataset::TextDataset(TextCorpus corpus, int64_t block_size)
    : corpus_(std::move(corpus)), block_size_(block_size) {
  LATHE_CHECK(block_size_ > 0, "TextDataset: block_size must be positive, got ", block_size_);
  const size_t n = corpus_.size();
  const size_t window = size_t(block_size_) + 1;
  // nanoGPT's cut: train = data[:int(n * 0.9)], computed in integers so it is exact.
  train_size_ = n - n / 10;
  LATHE_CHECK(n >= window, "corpus ", corpus_.path(), ": ", n, " bytes is shorter than one window of ",
              window, " bytes (block_size ", block_size_, " + 1)");
  LATHE_CHECK(train_size_ >= window && n - train_size_ >= window, "corpus ", corpus_.path(), ": ", n,
              " bytes split into train ", train_size_, " and val ", n - train_size_,
              " (the last 10%); each split needs at least one window of ", window,
              " bytes (block_size ", block_size_, " + 1)");
}

std::vector<size_t> TextDataset::window_starts(Split s, int64_t batch, Generator& gen) const {
  return draw_window_starts(split_size(s), block_size_, batch, gen);
}

std::string TextDataset::describe() const {
  const size_t n = corpus_.file_count();
  return "corpus " + corpus_.path() + ": " + std::to_string(n) + (n == 1 ? " file, " : " files, ") +
         format_bytes(corpus_.size()) + " (train " + std::to_string(split_size(Split::train)) + " bytes, val " +
         std::to_string(split_size(Split::val)) + " bytes)";
}

std::string TextDataset::fingerprint() const {
  // The checksums of 1 MiB pieces, checksummed in turn: the whole corpus, read once.
  constexpr size_t kPiece = size_t(1) << 20;
  std::vector<uint8_t> piece(kPiece);
  std::vector<uint64_t> sums;
  for (size_t at = 0; at < corpus_.size(); at += kPiece) {
    const size_t n = std::min(kPiece, corpus_.size() - at);
    corpus_.read(at, n, piece.data());
    sums.push_back(serialize::checksum_bytes(piece.data(), n));
  }
  const uint64_t sum = serialize::checksum_bytes(sums.data(), sums.size() * sizeof(uint64_t));
  return "a corpus of " + std::to_string(corpus_.size()) + " bytes with checksum " + serialize::checksum_hex(sum);
}

Batch TextDataset::sample(Split s, int64_t batch, Generator& gen, Device device) const {
  const std::vector<size_t> starts = window_starts(s, batch, gen);
  const size_t T = size_t(block_size_);
  std::vector<uint8_t> window(T + 1);
  std::vector<int64_t> x(size_t(batch) * T), y(size_t(batch) * T);
  for (size_t b = 0; b < starts.size(); ++b) {
    corpus_.read(split_begin(s) + starts[b], T + 1, window.data());
    for (size_t t = 0; t < T; ++t) {
      x[b * T + t] = window[t];
      y[b * T + t] = window[t + 1];
    }
  }
  const Shape shape{batch, block_size_};
  return {Tensor::from_vector(x, shape, device), Tensor::from_vector(y, shape, device)};
}

}  // namespace lathe::data
