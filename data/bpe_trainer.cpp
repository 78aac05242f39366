#include "data/bpe_trainer.h"

#include <algorithm>
#include <queue>
#include <unordered_map>

#include "core/error.h"
#include "data/bpe_model.h"

namespace lathe::data {

namespace {

uint64_t pair_key(uint32_t left, uint32_t right) { return uint64_t(left) << 32 | right; }

struct Word {
  std::vector<uint32_t> tokens;
  uint64_t count = 0;
};

// A heap entry: the pair's count when it was pushed. Larger counts first, then smaller pairs.
struct Candidate {
  uint64_t count;
  uint64_t pair;
  bool operator<(const Candidate& o) const { return count != o.count ? count < o.count : pair > o.pair; }
};

}  // namespace

void PieceCounts::add_text(std::string_view text) {
  pretokenizer_.for_each_piece(text, 0, text.size(), [&](size_t begin, size_t end) {
    ++counts_[std::string(text.substr(begin, end - begin))];
    ++total_;
  });
}

std::vector<std::pair<std::string, uint64_t>> PieceCounts::pieces() const {
  std::vector<std::pair<std::string, uint64_t>> all(counts_.begin(), counts_.end());
  std::sort(all.begin(), all.end());  // the hash map's order is not the same everywhere
  return all;
}

std::vector<std::pair<uint32_t, uint32_t>> train_bpe_merges(const PieceCounts& counts, uint64_t vocab_size,
                                                            const std::function<void(size_t)>& progress,
                                                            BpeTrainingEnd* end) {
  LATHE_CHECK(vocab_size >= 256, "BPE training: vocab_size ", vocab_size, " is below the 256 byte tokens");
  std::vector<Word> words;
  for (const auto& [piece, n] : counts.pieces()) {
    if (piece.size() < 2) continue;  // nothing to merge in a single byte
    Word w;
    for (char c : piece) w.tokens.push_back(static_cast<unsigned char>(c));
    w.count = n;
    words.push_back(std::move(w));
  }
  std::unordered_map<uint64_t, uint64_t> pair_count;
  std::unordered_map<uint64_t, std::vector<uint32_t>> words_with;  // may list a word twice, or stale
  for (uint32_t w = 0; w < words.size(); ++w) {
    const auto& t = words[w].tokens;
    for (size_t i = 0; i + 1 < t.size(); ++i) {
      const uint64_t key = pair_key(t[i], t[i + 1]);
      pair_count[key] += words[w].count;
      words_with[key].push_back(w);
    }
  }
  std::priority_queue<Candidate> heap;
  for (const auto& [key, n] : pair_count) heap.push({n, key});

  std::vector<std::pair<uint32_t, uint32_t>> merges;
  const uint64_t wanted = vocab_size - 256;
  std::vector<uint32_t> visited(words.size(), 0);  // the merge that last rewrote each word (+1)
  std::vector<uint32_t> rewritten;
  std::vector<uint64_t> length(256, 1);  // bytes of each token
  uint64_t total_bytes = 256;
  bool full = false;  // the next merge would not fit kMaxVocabularyBytes
  while (merges.size() < wanted && !heap.empty() && !full) {
    const Candidate top = heap.top();
    heap.pop();
    const auto found = pair_count.find(top.pair);
    const uint64_t now = found == pair_count.end() ? 0 : found->second;
    if (now != top.count) {  // stale: counts only fall for pairs not made by a merge
      if (now > 0) heap.push({now, top.pair});
      continue;
    }
    const auto left = uint32_t(top.pair >> 32), right = uint32_t(top.pair);
    if (total_bytes + length[left] + length[right] > kMaxVocabularyBytes) {
      full = true;
      continue;
    }
    length.push_back(length[left] + length[right]);
    total_bytes += length.back();
    const auto merged = uint32_t(256 + merges.size());
    merges.emplace_back(left, right);
    const auto stamp = uint32_t(merges.size());
    std::unordered_map<uint64_t, uint64_t> grown;  // pairs with the new token, and their counts
    std::vector<uint32_t> holders = std::move(words_with[top.pair]);
    words_with.erase(top.pair);
    for (uint32_t w : holders) {
      if (visited[w] == stamp) continue;
      visited[w] = stamp;
      Word& word = words[w];
      auto& t = word.tokens;
      rewritten.clear();
      for (size_t i = 0; i < t.size(); ++i) {
        if (i + 1 < t.size() && t[i] == left && t[i + 1] == right) {
          rewritten.push_back(merged);
          ++i;
        } else {
          rewritten.push_back(t[i]);
        }
      }
      if (rewritten.size() == t.size()) continue;  // a stale index entry: the pair is gone from it
      for (size_t i = 0; i + 1 < t.size(); ++i) pair_count[pair_key(t[i], t[i + 1])] -= word.count;
      for (size_t i = 0; i + 1 < rewritten.size(); ++i) {
        const uint64_t key = pair_key(rewritten[i], rewritten[i + 1]);
        pair_count[key] += word.count;
        if (rewritten[i] == merged || rewritten[i + 1] == merged) {
          grown[key] = 0;
          words_with[key].push_back(w);
        }
      }
      t.swap(rewritten);
    }
    pair_count.erase(top.pair);
    for (const auto& [key, unused] : grown) heap.push({pair_count[key], key});
    if (progress && merges.size() % 256 == 0) progress(merges.size());
  }
  if (end != nullptr)
    *end = merges.size() == wanted ? BpeTrainingEnd::size_reached
           : full                  ? BpeTrainingEnd::vocabulary_bytes
                                   : BpeTrainingEnd::no_pair_left;
  return merges;
}

TrainedTokenizer train_tokenizer(const TextCorpus& corpus, uint64_t vocab_size, PretokenPattern pattern) {
  PieceCounts counts(pattern);
  for (size_t i = 0; i < corpus.file_count(); ++i) counts.add_text(corpus.text(corpus.file_begin(i), corpus.file_size(i)));
  TrainedTokenizer t;
  t.file.pattern = pattern;
  t.file.merges = train_bpe_merges(counts, vocab_size, {}, &t.end);
  t.pieces = counts.total_pieces();
  return t;
}

}  // namespace lathe::data
