// The memo of an encode call: short pieces it has already encoded, with their ids. Text repeats its
// words, so most pieces are found here, and a lookup must cost far less than merging again.
//
// One flat, linearly probed table: a slot holds the piece's hash (XXH3), its bytes and where its ids
// start in one shared array, so a lookup touches one cache line of the table and one of the ids,
// where std::unordered_map<std::string, ...> would follow a node pointer and then the string's.
// The table starts small (an encode of a few words allocates little), doubles while it is at most
// half full, and at its largest is emptied instead, which bounds its memory on any input.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace lathe::data {

class PieceCache {
 public:
  static constexpr size_t kMaxPiece = 24;  // longer pieces are rarer and not remembered
  // Appends the ids of `piece` to `out` and returns true when the piece is known.
  bool find(std::string_view piece, std::vector<uint32_t>& out) const;
  // Remembers `piece` (at most kMaxPiece bytes) -> ids[0, count).
  void add(std::string_view piece, const uint32_t* ids, size_t count);

 private:
  static constexpr size_t kInitialSlots = size_t(1) << 10;
  static constexpr size_t kMaxSlots = size_t(1) << 19;  // 20 MB of slots at most
  struct Slot {
    uint64_t hash = 0;  // 0: empty (a stored hash always has its low bit set)
    uint32_t first = 0;
    uint8_t count = 0;
    uint8_t length = 0;
    char bytes[kMaxPiece];
  };
  static uint64_t hash_of(std::string_view piece);
  void place(const Slot& s);
  void resize(size_t slots);

  std::vector<Slot> slots_;
  size_t used_ = 0;
  std::vector<uint32_t> ids_;
};

}  // namespace lathe::data
