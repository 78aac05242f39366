// A byte-level BPE tokenizer: a pre-tokenizer (data/pretokenizer.h), a merge table
// (data/bpe_model.h) and one special token, end-of-text, whose id follows the ordinary tokens.
// End-of-text is never produced by encode(): "<|endoftext|>" in a text is ordinary text (tiktoken's
// encode_ordinary); writers of token streams insert the id themselves between documents.
//
// Which tokenizer, by name (the TOK of the lathe commands, see load_tokenizer):
//   bytes        256 byte tokens, no merges, end-of-text 256
//   gpt2         GPT-2's vocab.bpe and encoder.json from $LATHE_GPT2_DIR, else .deps/gpt2/ of the
//                source tree (tools/fetch_gpt2_vocab.sh puts them there)
//   .../vocab.bpe  a GPT-2 vocab.bpe with encoder.json beside it (any file starting "#version")
//   FILE         a tokenizer written by `lathe tokenizer train` (data/tokenizer_file.h)
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "data/bpe_model.h"
#include "data/pretokenizer.h"
#include "data/tokenizer.h"

namespace lathe::data {

// What a tokenizer is, recorded in token shards and checkpoints so that a run decodes with, and
// resumes on, the one it was trained with. The checksum (XXH3-64 of the files' bytes) decides;
// the path only says where to find it again.
struct TokenizerIdentity {
  std::string kind;      // "bytes", "gpt2" or "bpe" (a trained file)
  std::string path;      // absolute path of the file (gpt2: of vocab.bpe); "" for bytes
  std::string checksum;  // 16 hex digits; "bytes" has a fixed one
  nlohmann::json to_json() const;
  static TokenizerIdentity from_json(const nlohmann::json& j, const std::string& what);
  std::string describe() const;  // "gpt2 (/path/vocab.bpe)"
};

class BpeTokenizer {
 public:
  BpeTokenizer(BpeModel model, PretokenPattern pattern, uint32_t end_of_text, TokenizerIdentity identity);

  // Every id a model over this tokenizer must be able to emit: the ordinary tokens and end-of-text.
  uint64_t vocab_size() const { return uint64_t(model_.size()) + 1; }
  uint32_t end_of_text() const { return end_of_text_; }
  const BpeModel& model() const { return model_; }
  const Pretokenizer& pretokenizer() const { return *pretokenizer_; }
  const TokenizerIdentity& identity() const { return identity_; }

  // The ids of `text` (any bytes). `threads` > 1 cuts large texts at piece boundaries
  // (Pretokenizer::split_points) and encodes the parts in parallel; the ids are the same.
  std::vector<uint32_t> encode(std::string_view text, int threads = 1) const;
  // Appends the ids of text[from, to) (piece boundaries of `text`) to `out`.
  void encode_range(std::string_view text, size_t from, size_t to, std::vector<uint32_t>& out) const;

  // The bytes of `ids`; end-of-text decodes to "<|endoftext|>". Throws lathe::Error naming the
  // position of the first id outside the vocabulary.
  std::string decode(const uint32_t* ids, size_t n) const;
  std::string decode(const std::vector<uint32_t>& ids) const { return decode(ids.data(), ids.size()); }
  // Bytes of one token (0 for end-of-text: it stands for no text of the corpus).
  size_t token_length(uint32_t id) const { return id < model_.size() ? model_.token_bytes(id).size() : 0; }

 private:
  BpeModel model_;
  std::unique_ptr<Pretokenizer> pretokenizer_;
  uint32_t end_of_text_;
  TokenizerIdentity identity_;
};

// A BpeTokenizer as a training run uses it (data/tokenizer.h): ids widened to int64, the identity
// always named. It refers to `tokenizer`, which must outlive it.
class BpeTokenizerView final : public Tokenizer {
 public:
  explicit BpeTokenizerView(const BpeTokenizer& tokenizer) : tokenizer_(&tokenizer) {}
  int64_t vocab_size() const override { return int64_t(tokenizer_->vocab_size()); }
  std::vector<int64_t> encode(std::string_view text) const override;
  std::string decode(const std::vector<int64_t>& ids) const override;
  const TokenizerIdentity* identity() const override { return &tokenizer_->identity(); }

 private:
  const BpeTokenizer* tokenizer_;
};

// The tokenizer a TOK names (see the top of this file). Throws lathe::Error naming the file and
// what is wrong with it.
BpeTokenizer load_tokenizer(const std::string& spec);
// The tokenizer `identity` names, checked against its checksum; `what` says who asks (a
// checkpoint, a shard directory) in the error when the file is gone or has changed.
BpeTokenizer load_tokenizer(const TokenizerIdentity& identity, const std::string& what);

// Where `gpt2` is looked for: $LATHE_GPT2_DIR, else the source tree's .deps/gpt2.
std::string gpt2_vocab_dir();

}  // namespace lathe::data
