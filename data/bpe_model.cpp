#include "data/bpe_model.h"

#include <algorithm>
#include <memory>
#include <string_view>
#include <unordered_map>

#include "core/error.h"

namespace lathe::data {

namespace {

// Pieces up to this many bytes are merged by rescanning every pair after each merge (quadratic,
// but a few dozen cache-friendly steps); longer ones, such as a megabyte of spaces, through
// candidate merges grouped by rank.
constexpr size_t kShortPiece = 48;

constexpr uint64_t kNoMerge = ~uint64_t(0);

// Positions in a long piece are 32-bit (a piece past 4 GiB is refused), halving its memory.
constexpr size_t kMaxPiece = ~uint32_t(0);
constexpr uint32_t kNone = ~uint32_t(0);  // in a long piece: no token starts here

// Per-thread buffers hold on to at most this many elements between pieces, so one huge piece does
// not keep its memory for the rest of the thread's life.
constexpr size_t kKeptCapacity = size_t(1) << 16;

template <class T>
void trim(std::vector<T>& v) {
  if (v.capacity() > kKeptCapacity) std::vector<T>().swap(v);
  v.clear();
}

// The candidate merges of a long piece, grouped by rank: for each rank, the positions whose pair
// may have it (an entry goes stale when a neighbour merges first, and is skipped), and a min-heap
// of the ranks that have a group. A merge only creates pairs of later rank (it joins tokens made
// before it), so ranks are drained in increasing order and a rank's group is complete when it is
// drained.
//
// A group is a chain of small blocks from one pool: a group grows without copying, and the
// blocks a drain has read go back to the pool for the candidates its merges add, so the pool
// holds about as many positions as are waiting at once. One per thread, reused from piece to
// piece: a piece of a few dozen bytes allocates nothing.
class RankGroups {
 public:
  bool empty() const { return heap_.empty(); }
  uint32_t lowest_rank() const { return uint32_t(heap_.front() >> 32); }

  void add(uint32_t rank, uint32_t position) {
    if (2 * (ranks_ + 1) > table_.size()) rehash(std::max<size_t>(64, 2 * table_.size()));
    size_t i = slot(rank);
    while (table_[i] != kEmptySlot && uint32_t(table_[i] >> 32) != rank) i = (i + 1) & (table_.size() - 1);
    if (table_[i] == kEmptySlot) {
      const uint32_t b = new_block();
      table_[i] = uint64_t(rank) << 32 | uint32_t(tails_.size());
      tails_.push_back(b);
      heads_.push_back(b);
      ++ranks_;
      heap_.push_back(table_[i]);
      std::push_heap(heap_.begin(), heap_.end(), std::greater<>());
    }
    uint32_t& tail = tails_[uint32_t(table_[i])];
    if (block(tail).count == kBlock) {
      const uint32_t b = new_block();
      block(tail).next = b;
      tail = b;
    }
    Block& b = block(tail);
    b.at[b.count++] = position;
  }

  // Takes the lowest rank's group off the heap and calls visit(position) for each of its
  // positions in the order they were added; visit may add to other groups.
  template <class Visit>
  void drain(Visit&& visit) {
    std::pop_heap(heap_.begin(), heap_.end(), std::greater<>());
    uint32_t b = heads_[uint32_t(heap_.back())];
    heap_.pop_back();
    while (b != kNoBlock) {
      for (uint32_t k = 0; k < block(b).count; ++k) visit(block(b).at[k]);
      const uint32_t next = block(b).next;
      block(b).next = free_;
      free_ = b;
      b = next;
    }
  }

  // Empty again, for the next piece.
  void reset() {
    // Every block is free again (each group was drained). After a huge piece, keep 16 MiB.
    if (chunks_.size() > 16) {
      chunks_.resize(16);
      free_ = kNoBlock;
      for (uint32_t b = 0; b < chunks_.size() * kChunk; ++b) {
        block(b).next = free_;
        free_ = b;
      }
    }
    if (table_.size() > kKeptCapacity) std::vector<uint64_t>().swap(table_);
    std::fill(table_.begin(), table_.end(), kEmptySlot);
    trim(heads_);
    trim(tails_);
    trim(heap_);
    ranks_ = 0;
  }

 private:
  static constexpr uint32_t kBlock = 62;    // positions per block: a block is 256 bytes
  static constexpr uint32_t kChunk = 4096;  // blocks per allocation: 1 MiB
  static constexpr uint32_t kNoBlock = ~uint32_t(0);
  static constexpr uint64_t kEmptySlot = ~uint64_t(0);
  struct Block {
    uint32_t next = kNoBlock;
    uint32_t count = 0;
    uint32_t at[kBlock];
  };

  Block& block(uint32_t b) { return chunks_[b / kChunk][b % kChunk]; }
  uint32_t new_block() {
    if (free_ == kNoBlock) {  // a new chunk, its blocks chained onto the free list
      chunks_.push_back(std::make_unique<Block[]>(kChunk));
      for (uint32_t k = kChunk; k-- > 0;) {
        chunks_.back()[k].next = free_;
        free_ = uint32_t((chunks_.size() - 1) * kChunk + k);
      }
    }
    const uint32_t b = free_;
    free_ = block(b).next;
    block(b).next = kNoBlock;
    block(b).count = 0;
    return b;
  }
  size_t slot(uint32_t rank) const { return size_t((uint64_t(rank) * 0x9E3779B97F4A7C15ull) >> 32) & (table_.size() - 1); }
  void rehash(size_t size) {
    std::vector<uint64_t> old(size, kEmptySlot);
    old.swap(table_);
    for (uint64_t e : old) {
      if (e == kEmptySlot) continue;
      size_t i = slot(uint32_t(e >> 32));
      while (table_[i] != kEmptySlot) i = (i + 1) & (table_.size() - 1);
      table_[i] = e;
    }
  }

  std::vector<std::unique_ptr<Block[]>> chunks_;  // the pool, allocated a chunk at a time; never moved
  uint32_t free_ = kNoBlock;                        // the free blocks, chained by next
  std::vector<uint64_t> table_;  // (rank << 32 | group), linearly probed
  std::vector<uint32_t> heads_, tails_;  // each group's first and last block
  std::vector<uint64_t> heap_;   // (rank << 32 | group) of the groups not yet drained
  size_t ranks_ = 0;
};

}  // namespace

void PairIndex::reserve(size_t n) {
  size_t capacity = 16;
  shift_ = 60;
  while (capacity < 2 * n + 1) {  // at most half full: probes stay short
    capacity *= 2;
    --shift_;
  }
  keys_.assign(capacity, kEmpty);
  values_.assign(capacity, kAbsent);
  mask_ = capacity - 1;
}

uint64_t PairIndex::insert(uint64_t key, uint64_t value) {
  size_t i = slot(key);
  for (; keys_[i] != kEmpty; i = (i + 1) & mask_)
    if (keys_[i] == key) return values_[i];
  keys_[i] = key;
  values_[i] = value;
  return kAbsent;
}

BpeModel::BpeModel(std::array<uint32_t, 256> byte_ids, std::vector<BpeMerge> merges, std::vector<std::string> token_bytes)
    : byte_ids_(byte_ids), merges_(std::move(merges)), token_bytes_(std::move(token_bytes)) {
  const size_t n = token_bytes_.size();
  LATHE_CHECK(n == 256 + merges_.size(), "BPE vocabulary: ", n, " tokens, but 256 byte tokens and ", merges_.size(),
              " merges make ", 256 + merges_.size());
  uint64_t total = 0;
  lengths_.reserve(n);
  for (const std::string& t : token_bytes_) {
    total += t.size();
    lengths_.push_back(uint32_t(t.size()));  // within the bound checked next
  }
  LATHE_CHECK(total <= kMaxVocabularyBytes, "BPE vocabulary: its tokens hold ", total, " bytes, past the limit of ",
              kMaxVocabularyBytes, " (64 MiB)");
  // maker[id]: the merge that makes token id; kByte for a byte token, kNotYet before its merge.
  constexpr uint32_t kByte = ~uint32_t(0), kNotYet = ~uint32_t(0) - 1;
  std::vector<uint32_t> maker(n, kNotYet);
  for (int b = 0; b < 256; ++b) {
    LATHE_CHECK(byte_ids_[b] < n && token_bytes_[byte_ids_[b]] == std::string(1, char(b)), "BPE vocabulary: byte ", b,
                " has no token of its own");
    maker[byte_ids_[b]] = kByte;
  }
  ranks_.reserve(merges_.size());
  for (size_t r = 0; r < merges_.size(); ++r) {
    const BpeMerge& m = merges_[r];
    LATHE_CHECK(m.left < n && m.right < n && m.merged < n, "BPE vocabulary: merge ", r, " names a token past ", n);
    for (const uint32_t part : {m.left, m.right})
      LATHE_CHECK(maker[part] != kNotYet, "BPE vocabulary: merge ", r, " (", m.left, ", ", m.right, ") joins token ",
                  part, ", which neither a byte nor an earlier merge makes");
    LATHE_CHECK(maker[m.merged] == kNotYet, "BPE vocabulary: merge ", r, " (", m.left, ", ", m.right, ") makes token ",
                m.merged, ", which ",
                maker[m.merged] == kByte ? std::string("is a byte token")
                                         : "merge " + std::to_string(maker[m.merged]) + " already makes");
    maker[m.merged] = uint32_t(r);
    LATHE_CHECK(token_bytes_[m.merged] == token_bytes_[m.left] + token_bytes_[m.right], "BPE vocabulary: merge ", r,
                " (", m.left, ", ", m.right, ") -> ", m.merged, " does not join the bytes of its two tokens");
    const uint64_t first = ranks_.insert(uint64_t(m.left) << 32 | m.right, uint64_t(r) << 32 | m.merged);
    LATHE_CHECK(first == PairIndex::kAbsent, "BPE vocabulary: merge ", r, " repeats the pair (", m.left, ", ", m.right,
                ") of merge ", first >> 32);
  }
  // Two merges making the same bytes (possible only where ids are given, as in a trained file).
  std::unordered_map<std::string_view, uint32_t> made;
  made.reserve(merges_.size());
  for (size_t r = 0; r < merges_.size(); ++r) {
    const auto [it, fresh] = made.emplace(token_bytes_[merges_[r].merged], uint32_t(r));
    LATHE_CHECK(fresh, "BPE vocabulary: merge ", r, " (", merges_[r].left, ", ", merges_[r].right,
                ") makes the same bytes as merge ", it->second, " (", merges_[it->second].left, ", ",
                merges_[it->second].right, "): a token made twice");
  }
}

BpeModel BpeModel::bytes_only() { return from_merges({}); }

BpeModel BpeModel::from_merges(const std::vector<std::pair<uint32_t, uint32_t>>& pairs) {
  // Lengths first: a table whose tokens would not fit is refused before their bytes exist.
  std::vector<uint64_t> length(256 + pairs.size(), 1);
  uint64_t total = 256;
  for (size_t i = 0; i < pairs.size(); ++i) {
    const uint32_t id = uint32_t(256 + i);
    const auto [l, r] = pairs[i];
    LATHE_CHECK(l < id && r < id, "BPE vocabulary: merge ", i, " (", l, ", ", r, ") uses a token made by no earlier merge");
    length[id] = length[l] + length[r];  // each at most the bound: no overflow
    total += length[id];
    LATHE_CHECK(total <= kMaxVocabularyBytes, "BPE vocabulary: merge ", i, " (", l, ", ", r, ") makes a token of ", length[id],
                " bytes, which brings the vocabulary's tokens to ", total, " bytes, past the limit of ",
                kMaxVocabularyBytes, " (64 MiB)");
  }
  std::array<uint32_t, 256> byte_ids{};
  std::vector<std::string> bytes(256 + pairs.size());
  for (uint32_t b = 0; b < 256; ++b) {
    byte_ids[b] = b;
    bytes[b] = std::string(1, char(b));
  }
  std::vector<BpeMerge> merges(pairs.size());
  for (size_t i = 0; i < pairs.size(); ++i) {
    const uint32_t id = uint32_t(256 + i);
    const auto [l, r] = pairs[i];
    merges[i] = {l, r, id};
    bytes[id].reserve(length[id]);
    bytes[id] = bytes[l];
    bytes[id] += bytes[r];
  }
  return BpeModel(byte_ids, std::move(merges), std::move(bytes));
}

void BpeModel::encode_piece(std::string_view piece, std::vector<uint32_t>& out) const {
  LATHE_CHECK(piece.size() < kMaxPiece, "BPE: a piece of ", piece.size(),
              " bytes (one match of the pre-tokenizer, such as a run of whitespace) is past the 4 GiB one piece may have");
  thread_local std::vector<uint32_t> parts;
  parts.clear();
  parts.reserve(piece.size());
  for (char c : piece) parts.push_back(byte_ids_[static_cast<unsigned char>(c)]);
  if (parts.size() > 1) {
    if (parts.size() <= kShortPiece) encode_short(parts);
    else encode_long(parts);
  }
  out.insert(out.end(), parts.begin(), parts.end());
  trim(parts);
}

void BpeModel::encode_short(std::vector<uint32_t>& parts) const {
  // ranks[i]: the merge of (parts[i], parts[i + 1]); only the two neighbours of a merge change.
  uint64_t ranks[kShortPiece];
  size_t n = parts.size();
  for (size_t i = 0; i + 1 < n; ++i) ranks[i] = lookup(parts[i], parts[i + 1]);
  while (n > 1) {
    size_t best = 0;
    for (size_t i = 1; i + 1 < n; ++i)
      if (ranks[i] < ranks[best]) best = i;  // strict: the leftmost of equal ranks
    if (ranks[best] == kNoMerge) break;
    parts[best] = uint32_t(ranks[best]);
    for (size_t i = best + 1; i + 1 < n; ++i) {
      parts[i] = parts[i + 1];
      ranks[i] = ranks[i + 1];
    }
    --n;
    if (best + 1 < n) ranks[best] = lookup(parts[best], parts[best + 1]);
    if (best > 0) ranks[best - 1] = lookup(parts[best - 1], parts[best]);
  }
  parts.resize(n);
}

void BpeModel::encode_long(std::vector<uint32_t>& parts) const {
  // The piece as a list of tokens, each covering bytes [i, i + its length): parts[i] is the token
  // starting at i (kNone inside a token), its right neighbour starts at i + length, and
  // start[e] is where the token ending at byte e begins, which finds the left neighbour. The
  // candidate merges are grouped by rank and drained lowest rank first, each group in the order
  // its positions were added, which is left to right: the group of a pair (x, y) is filled by
  // one drain only, that of the merge making the later of x and y (or, for two bytes, by the
  // first scan), because no token is made twice; that drain adds (m, y) at the positions it merges
  // and (x, m) at their left neighbours, both increasing when its own group was. So occurrences of
  // a pair of two equal tokens ("aaa") merge leftmost first, as GPT-2's bpe() merges them (those
  // of two different tokens never overlap). Time: linear in the piece. Memory: 8 bytes per byte
  // of the piece for the list, and 4 per waiting candidate (at most about one per byte).
  const auto n = uint32_t(parts.size());
  thread_local std::vector<uint32_t> start;
  thread_local RankGroups groups;
  start.clear();
  start.reserve(n);
  for (uint32_t i = 0; i < n; ++i) start.push_back(i);
  auto add = [&](uint32_t i) {  // the pair of the token at i and its right neighbour, if it merges
    const uint32_t j = i + lengths_[parts[i]];
    if (j >= n) return;
    const uint64_t r = lookup(parts[i], parts[j]);
    if (r != kNoMerge) groups.add(uint32_t(r >> 32), i);
  };
  auto merge_at = [&](const BpeMerge& m, uint32_t i) {
    if (parts[i] != m.left) return;  // stale: the token at i changed, or is gone
    const uint32_t j = i + lengths_[m.left];
    if (j >= n || parts[j] != m.right) return;  // stale: its neighbour changed
    parts[i] = m.merged;
    parts[j] = kNone;
    start[j + lengths_[m.right] - 1] = i;
    add(i);
    if (i > 0) add(start[i - 1]);
  };
  for (uint32_t i = 0; i + 1 < n; ++i) add(i);
  while (!groups.empty()) {
    const BpeMerge& m = merges_[groups.lowest_rank()];
    groups.drain([&](uint32_t i) { merge_at(m, i); });
  }
  uint32_t w = 0;
  for (uint32_t i = 0; i < n; i += lengths_[parts[i]]) parts[w++] = parts[i];
  parts.resize(w);
  trim(start);
  groups.reset();
}

}  // namespace lathe::data
