#include "data/bpe_model.h"

#include <queue>

#include "core/error.h"

namespace lathe::data {

namespace {

// Pieces up to this many bytes are merged by rescanning every pair after each merge (quadratic,
// but a few dozen cache-friendly steps); longer ones, such as a megabyte of spaces, through a heap.
constexpr size_t kShortPiece = 48;

constexpr uint64_t kNoMerge = ~uint64_t(0);

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

void PairIndex::insert(uint64_t key, uint64_t value) {
  size_t i = slot(key);
  for (; keys_[i] != kEmpty; i = (i + 1) & mask_)
    if (keys_[i] == key) return;
  keys_[i] = key;
  values_[i] = value;
}

BpeModel::BpeModel(std::array<uint32_t, 256> byte_ids, std::vector<BpeMerge> merges, std::vector<std::string> token_bytes)
    : byte_ids_(byte_ids), merges_(std::move(merges)), token_bytes_(std::move(token_bytes)) {
  const size_t n = token_bytes_.size();
  for (int b = 0; b < 256; ++b)
    LATHE_CHECK(byte_ids_[b] < n && token_bytes_[byte_ids_[b]] == std::string(1, char(b)), "BPE vocabulary: byte ", b,
                " has no token of its own");
  ranks_.reserve(merges_.size());
  for (size_t r = 0; r < merges_.size(); ++r) {
    const BpeMerge& m = merges_[r];
    LATHE_CHECK(m.left < n && m.right < n && m.merged < n, "BPE vocabulary: merge ", r, " names a token past ", n);
    LATHE_CHECK(token_bytes_[m.merged] == token_bytes_[m.left] + token_bytes_[m.right], "BPE vocabulary: merge ", r,
                " (", m.left, ", ", m.right, ") -> ", m.merged, " does not join the bytes of its two tokens");
    // A pair listed twice keeps its first (best) rank, as GPT-2's bpe_ranks dict would not: a
    // well-formed table has no duplicates, and the first is what a merge loop would use.
    ranks_.insert(uint64_t(m.left) << 32 | m.right, uint64_t(r) << 32 | m.merged);
  }
}

BpeModel BpeModel::bytes_only() { return from_merges({}); }

BpeModel BpeModel::from_merges(const std::vector<std::pair<uint32_t, uint32_t>>& pairs) {
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
    LATHE_CHECK(l < id && r < id, "BPE merge ", i, " (", l, ", ", r, ") uses a token made by no earlier merge");
    merges[i] = {l, r, id};
    bytes[id] = bytes[l] + bytes[r];
  }
  return BpeModel(byte_ids, std::move(merges), std::move(bytes));
}

void BpeModel::encode_piece(std::string_view piece, std::vector<uint32_t>& out) const {
  thread_local std::vector<uint32_t> parts;
  parts.clear();
  for (char c : piece) parts.push_back(byte_ids_[static_cast<unsigned char>(c)]);
  if (parts.size() > 1) {
    if (parts.size() <= kShortPiece) encode_short(parts);
    else encode_long(parts);
  }
  out.insert(out.end(), parts.begin(), parts.end());
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
  // A doubly linked list over the parts and a min-heap of (rank, position) of candidate merges.
  // Positions are the original indices, so the smallest position is the leftmost pair. An entry is
  // stale when its left part was merged away or its pair changed since it was pushed; it is
  // skipped when it comes up.
  const size_t n = parts.size();
  std::vector<size_t> prev(n), next(n);
  std::vector<bool> alive(n, true);
  for (size_t i = 0; i < n; ++i) {
    prev[i] = i - 1;  // wraps to SIZE_MAX for the first
    next[i] = i + 1;
  }
  using Entry = std::pair<uint64_t, size_t>;  // (rank << 32 | merged, left position)
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> heap;
  auto push = [&](size_t i) {
    if (i < n && next[i] < n) {
      const uint64_t r = lookup(parts[i], parts[next[i]]);
      if (r != kNoMerge) heap.emplace(r, i);
    }
  };
  for (size_t i = 0; i + 1 < n; ++i) push(i);
  while (!heap.empty()) {
    const auto [r, i] = heap.top();
    heap.pop();
    if (!alive[i] || next[i] >= n || lookup(parts[i], parts[next[i]]) != r) continue;
    const size_t j = next[i];
    parts[i] = uint32_t(r);
    alive[j] = false;
    next[i] = next[j];
    if (next[j] < n) prev[next[j]] = i;
    push(i);
    if (prev[i] < n) push(prev[i]);
  }
  size_t w = 0;
  for (size_t i = 0; i < n; i = next[i]) parts[w++] = parts[i];
  parts.resize(w);
}

}  // namespace lathe::data
