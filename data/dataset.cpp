#include "data/dataset.h"

#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "data/token_shards.h"
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

namespace {

// Whether `path` is a file that starts as one of llm.c's token shards: its magic and version.
bool starts_like_a_shard(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return false;
  std::ifstream in(path, std::ios::binary);
  int32_t head[2] = {0, 0};
  in.read(reinterpret_cast<char*>(head), sizeof head);
  return in.gcount() == sizeof head && ((head[0] == kShardMagic16 && head[1] == kShardVersion16) ||
                                        (head[0] == kShardMagic32 && head[1] == kShardVersion32));
}

bool holds_shard_files(const std::string& dir) {
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator(dir, ec); !ec && it != std::filesystem::directory_iterator();
       it.increment(ec))
    if (is_shard_name(it->path().filename().string())) return true;
  return false;
}

}  // namespace

std::unique_ptr<Dataset> open_dataset(const std::string& path, int64_t block_size) {
  // One shard alone is not a corpus of bytes: its tokens need their manifest and tokenizer.
  LATHE_CHECK(!starts_like_a_shard(path), "--data ", path, " is a token shard (llm.c's format) of `lathe tokenize`; "
              "give the directory that holds it and its tokenizer.json");
  if (is_token_shard_dir(path)) {
    try {
      return std::make_unique<TokenDataset>(path, block_size);
    } catch (const Error& e) {
      if (holds_shard_files(path)) throw;
      // A tokenizer.json alone made it a shard directory: say so, it may be a text corpus.
      LATHE_FAIL(e.what(), " (", path, " holds a tokenizer.json and no shards, and was taken for a directory of token "
                 "shards; a text corpus given as --data must not hold a tokenizer.json)");
    }
  }
  return std::make_unique<TextDataset>(TextCorpus::open(path), block_size);
}

}  // namespace lathe::data
