// Training data from token shards (data/token_shards.h), the counterpart of TextDataset for
// `lathe train --data DIR` when DIR holds shard_*.bin and tokenizer.json.
//
// The shards in name order are one stream; its first 90% of tokens are the training split and the
// last 10% the validation split, as a byte corpus is cut (so validation is the end of the last
// documents, never text the model trained on). Windows are drawn exactly as from a byte corpus.
// The tokenizer named in tokenizer.json is loaded and checked against its checksum, and the
// directory against the manifest (TokenShards::open): samples decode with it, and the validation
// split's byte count (the sum of its tokens' lengths) turns a loss per token into bits per byte.
// Each shard's checksum is checked when it is first read: at opening for the validation split's
// (its bytes are counted then), during training for the others.
#pragma once

#include <memory>
#include <string>

#include "data/bpe_tokenizer.h"
#include "data/text_dataset.h"
#include "data/token_shards.h"

namespace lathe::data {

// Whether `path` is a directory of token shards: it holds tokenizer.json or a shard_*.bin.
bool is_token_shard_dir(const std::string& path);

class TokenDataset : public Dataset {
 public:
  // Throws lathe::Error naming the directory or the file at fault: no tokenizer.json or one that
  // disagrees with the directory or the tokenizer, a tokenizer that is gone or changed, a bad
  // shard, a stream shorter than a window in either split.
  TokenDataset(const std::string& dir, int64_t block_size);

  const BpeTokenizer& bpe_tokenizer() const { return *tokenizer_; }
  const ShardManifest& manifest() const { return manifest_; }
  int64_t block_size() const override { return block_size_; }
  size_t split_size(Split s) const override { return s == Split::train ? train_size_ : shards_.size() - train_size_; }
  size_t stream_size() const override { return shards_.size(); }
  double val_bytes_per_token() const override { return double(val_bytes_) / double(split_size(Split::val)); }
  std::string describe() const override;
  const Tokenizer& tokenizer() const override { return tokenizer_view_; }
  const char* kind() const override { return "token shards"; }
  const char* unit() const override { return "tokens"; }
  // The stream's length, the tokenizer's checksum and describe()'s line.
  std::string fingerprint() const override;
  Batch sample(Split s, int64_t batch, Generator& gen, Device device = Device::cpu()) const override;

 private:
  ShardManifest manifest_;
  std::unique_ptr<BpeTokenizer> tokenizer_;
  BpeTokenizerView tokenizer_view_;
  TokenShards shards_;
  int64_t block_size_;
  size_t train_size_;
  size_t val_bytes_ = 0;  // the text the validation tokens stand for, in bytes
};

}  // namespace lathe::data
