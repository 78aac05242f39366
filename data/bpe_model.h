// The merge table of a byte-level BPE and the one operation it exists for: turning one piece of
// pre-tokenized text into token ids.
//
// Every byte has a token (byte_ids: a trained vocabulary uses id b for byte b; GPT-2's encoder.json
// numbers them in its own order). A merge (left, right) -> merged has a rank, its index in the
// table; encoding a piece starts from its bytes' tokens and repeatedly merges the adjacent pair of
// lowest rank, leftmost first, until no adjacent pair has a merge. That is GPT-2's bpe() (merge
// every occurrence of the best pair, left to right) expressed one merge at a time: a merge only
// joins tokens that earlier merges made (the table is refused otherwise), so a pair that a merge
// creates always ranks after that merge, and the two orders agree.
//
// A table is checked whole before it is used: every merge joins a byte token or the token of an
// earlier merge, no pair is merged twice, no token is made twice, and the bytes of all tokens
// together stay within kMaxVocabularyBytes. Each merge can double the longest token, so without
// that bound a file of a few hundred bytes would describe tokens of terabytes.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace lathe::data {

// The most bytes all ordinary tokens of one vocabulary may hold together. GPT-2's 50,256 tokens
// hold 320,814 bytes; a vocabulary of a million tokens of 64 bytes on average still fits.
inline constexpr uint64_t kMaxVocabularyBytes = uint64_t(64) << 20;

struct BpeMerge {
  uint32_t left = 0, right = 0, merged = 0;
};

// The merge table's index: (left, right) -> (rank << 32 | merged), in one flat array probed
// linearly. Encoding looks a pair up for every merge it tries, and std::unordered_map follows a
// pointer to a separately allocated node for each lookup, a cache miss in a table of 50,000
// merges; here a lookup is one hash and, almost always, one cache line.
class PairIndex {
 public:
  static constexpr uint64_t kAbsent = ~uint64_t(0);
  void reserve(size_t n);
  // Adds key -> value and returns kAbsent, or returns the value the key already has (and keeps it).
  uint64_t insert(uint64_t key, uint64_t value);
  uint64_t find(uint64_t key) const {
    for (size_t i = slot(key);; i = (i + 1) & mask_) {
      if (keys_[i] == key) return values_[i];
      if (keys_[i] == kEmpty) return kAbsent;
    }
  }

 private:
  static constexpr uint64_t kEmpty = ~uint64_t(0);  // no pair of 32-bit ids is (2^32 - 1, 2^32 - 1)
  size_t slot(uint64_t key) const { return size_t((key * 0x9E3779B97F4A7C15ull) >> shift_); }
  std::vector<uint64_t> keys_, values_;
  size_t mask_ = 0;
  int shift_ = 64;
};

class BpeModel {
 public:
  // token_bytes[id]: what token `id` decodes to, for every ordinary token (the end-of-text token
  // is not in it). Throws lathe::Error naming the merge at fault when the table breaks a rule
  // above, an id is out of range, or a merge's bytes are not the concatenation of its parts.
  BpeModel(std::array<uint32_t, 256> byte_ids, std::vector<BpeMerge> merges, std::vector<std::string> token_bytes);

  // The byte-level vocabulary with no merges: token b is byte b.
  static BpeModel bytes_only();
  // A trained vocabulary: token b is byte b, merge i makes token 256 + i. The tokens' lengths are
  // added up before any token's bytes are built, so a table past kMaxVocabularyBytes is refused
  // without allocating them.
  static BpeModel from_merges(const std::vector<std::pair<uint32_t, uint32_t>>& merges);

  size_t size() const { return token_bytes_.size(); }  // ordinary tokens
  const std::vector<BpeMerge>& merges() const { return merges_; }
  const std::string& token_bytes(uint32_t id) const { return token_bytes_[id]; }

  // Appends the tokens of `piece` to `out`. Memory: about 12 bytes per byte of the piece (see
  // encode_long), whatever the table. A piece of 4 GiB or more is refused.
  void encode_piece(std::string_view piece, std::vector<uint32_t>& out) const;

 private:
  // (rank << 32 | merged) of the pair (left, right), or ~0 when the pair has no merge.
  uint64_t lookup(uint32_t left, uint32_t right) const {
    return ranks_.find(uint64_t(left) << 32 | right);
  }
  void encode_short(std::vector<uint32_t>& parts) const;
  void encode_long(std::vector<uint32_t>& parts) const;

  std::array<uint32_t, 256> byte_ids_{};
  std::vector<BpeMerge> merges_;
  std::vector<std::string> token_bytes_;
  std::vector<uint32_t> lengths_;  // bytes of each token, where encoding looks them up
  PairIndex ranks_;
};

}  // namespace lathe::data
