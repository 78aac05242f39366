// Training a byte-level BPE vocabulary: count the corpus's pre-tokenized pieces, then repeatedly
// merge the most frequent adjacent pair of tokens inside the pieces.
//
// The counting is done once: a piece that occurs k times is one word with weight k. Pair counts
// are kept up to date as merges rewrite words (only the words holding the merged pair are
// touched, found through an index from pair to words), and the next pair comes off a max-heap
// whose stale entries are re-pushed with their current count when they surface. Ties go to the
// smaller (left, right), so training is deterministic. It stops at the requested size, or earlier
// when no adjacent pair is left or the next merge would take the vocabulary's tokens past
// kMaxVocabularyBytes (data/bpe_model.h: lathe refuses to load such a table).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "data/pretokenizer.h"
#include "data/text_corpus.h"
#include "data/tokenizer_file.h"

namespace lathe::data {

// Piece -> how often it occurs: the input of the merges.
class PieceCounts {
 public:
  explicit PieceCounts(PretokenPattern pattern) : pretokenizer_(pattern) {}
  void add_text(std::string_view text);
  // Every distinct piece with its count, sorted by piece (the same order on every machine).
  std::vector<std::pair<std::string, uint64_t>> pieces() const;
  uint64_t total_pieces() const { return total_; }

 private:
  Pretokenizer pretokenizer_;
  std::unordered_map<std::string, uint64_t> counts_;
  uint64_t total_ = 0;
};

// Why training stopped.
enum class BpeTrainingEnd { size_reached, no_pair_left, vocabulary_bytes };

// Merges for a vocabulary of `vocab_size` ordinary tokens (256 bytes + vocab_size - 256 merges).
// `progress(merges_done)` is called now and then; `end`, when given, says why it stopped.
std::vector<std::pair<uint32_t, uint32_t>> train_bpe_merges(const PieceCounts& counts, uint64_t vocab_size,
                                                            const std::function<void(size_t)>& progress = {},
                                                            BpeTrainingEnd* end = nullptr);

// A tokenizer trained on every file of `corpus` (each file's pieces counted apart, so that no piece
// spans two files) for `vocab_size` ordinary tokens: `lathe tokenizer train` and
// lathe.train_tokenizer (python/). write_tokenizer_file writes it.
struct TrainedTokenizer {
  TokenizerFile file;
  uint64_t pieces = 0;  // pre-tokenized pieces counted in the corpus
  BpeTrainingEnd end = BpeTrainingEnd::size_reached;
};
TrainedTokenizer train_tokenizer(const TextCorpus& corpus, uint64_t vocab_size, PretokenPattern pattern);

}  // namespace lathe::data
