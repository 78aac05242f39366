#include "data/piece_cache.h"

#include <xxhash.h>

#include <cstring>

namespace lathe::data {

uint64_t PieceCache::hash_of(std::string_view piece) { return XXH3_64bits(piece.data(), piece.size()) | 1; }

bool PieceCache::find(std::string_view piece, std::vector<uint32_t>& out) const {
  if (slots_.empty()) return false;
  const uint64_t h = hash_of(piece);
  const size_t mask = slots_.size() - 1;
  for (size_t i = size_t(h) & mask;; i = (i + 1) & mask) {
    const Slot& s = slots_[i];
    if (s.hash == 0) return false;
    if (s.hash == h && s.length == piece.size() && std::memcmp(s.bytes, piece.data(), piece.size()) == 0) {
      out.insert(out.end(), ids_.begin() + s.first, ids_.begin() + s.first + s.count);
      return true;
    }
  }
}

void PieceCache::place(const Slot& s) {
  const size_t mask = slots_.size() - 1;
  size_t i = size_t(s.hash) & mask;
  while (slots_[i].hash != 0) i = (i + 1) & mask;
  slots_[i] = s;
}

void PieceCache::resize(size_t slots) {
  std::vector<Slot> old(slots);
  old.swap(slots_);
  for (const Slot& s : old)
    if (s.hash != 0) place(s);
}

void PieceCache::add(std::string_view piece, const uint32_t* ids, size_t count) {
  if (piece.size() > kMaxPiece) return;
  if (2 * (used_ + 1) > slots_.size()) {
    if (slots_.size() < kMaxSlots) {
      resize(slots_.empty() ? kInitialSlots : 2 * slots_.size());
    } else {
      slots_.assign(slots_.size(), Slot{});
      used_ = 0;
      ids_.clear();
    }
  }
  Slot s;
  s.hash = hash_of(piece);
  s.first = uint32_t(ids_.size());
  s.count = uint8_t(count);  // a piece of n bytes has at most n ids
  s.length = uint8_t(piece.size());
  std::memcpy(s.bytes, piece.data(), piece.size());
  place(s);
  ++used_;
  ids_.insert(ids_.end(), ids, ids + count);
}

}  // namespace lathe::data
