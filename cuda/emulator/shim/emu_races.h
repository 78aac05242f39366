// The emulator's race detector (README.md, "Races in shared memory"): a record per byte of shared
// memory of who last wrote it and read it, and when, in barrier epochs. Two accesses to one byte
// by different threads of a block, at least one a write, race unless a barrier orders them:
// __syncthreads between them, or __syncwarp when both threads are lanes of one warp. Shuffles,
// ballots, ldmatrix and mma synchronise a warp's lanes but order no memory (CUDA's programming
// guide promises memory order from __syncwarp only), so they end no epoch here.
//
// Epochs are values of one counter that every block start, every __syncthreads and every
// __syncwarp advances: a block's threads share the block epoch (all of them pass a block barrier
// together) and each warp has its own warp epoch. Two accesses are ordered when their block epochs
// differ, or when their threads are lanes of one warp and their warp epochs differ. A later block
// starts a new epoch, so the records never need clearing.
//
// This file is the bookkeeping alone; shim/emu_core.h feeds it the epochs and the running thread,
// and race_hooks.cpp the accesses: the compiler's ThreadSanitizer instrumentation of the emulated
// kernels calls its entry points for every load and store, and the shim's cp.async and ldmatrix
// name theirs explicitly.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace emu::race {

constexpr uint16_t kNobody = 0xFFFF;

// What one byte has seen in the current epochs. A write needs every reader it might race with,
// but two are enough to find one: the last reader, and a reader of another warp than the last
// one's (any reader of a third warp races with every writer that the last two do not).
struct ByteHistory {
  uint32_t write_block = 0, write_warp = 0;  // epochs of the last write
  uint32_t read_block = 0, read_warp = 0;    // epochs of the last read
  uint16_t writer = kNobody;
  uint16_t reader = kNobody;
  uint16_t other_warp_reader = kNobody;  // in read_block, a reader of another warp than `reader`
  uint16_t same_warp_reader = kNobody;   // in read_warp, another lane of `reader`'s warp
};

// A race found: the access that completes it and the thread whose access it races with.
struct Conflict {
  bool write;           // the new access is a write
  bool other_wrote;     // the earlier access was a write (else a read)
  unsigned other;       // the earlier access's thread (its index in the block)
  size_t offset;        // the byte, from the start of the watched range
};

class Detector {
 public:
  // The range whose accesses are checked: the whole of shared memory, static and dynamic.
  void watch(const unsigned char* base, size_t bytes) {
    base_ = base;
    history_.assign(bytes, ByteHistory{});
    span_ = bytes;
  }
  size_t offset_of(const void* p) const { return size_t(static_cast<const unsigned char*>(p) - base_); }
  // Asked at every load and store of a kernel: two loads and a comparison.
  bool watches(size_t offset) const { return offset < span_; }

  void block_started(unsigned warps) {
    block_ = advance();
    warp_.assign(warps, block_);
  }
  void block_barrier() { block_ = advance(); }
  void warp_barrier(unsigned warp) { warp_[warp] = advance(); }

  // Records `bytes` bytes from `offset` read or written by thread `tid`; the first conflict found,
  // if any, goes to *found (and the records are left as they were before that byte).
  bool access(size_t offset, size_t bytes, unsigned tid, bool write, Conflict* found) {
    const unsigned warp = tid / 32;
    const uint32_t we = warp_[warp];
    for (size_t i = offset; i < offset + bytes && i < span_; ++i) {
      ByteHistory& h = history_[i];
      unsigned other = kNobody;
      bool other_wrote = false;
      if (concurrent(h.writer, h.write_block, h.write_warp, tid, we)) {
        other = h.writer, other_wrote = true;
      } else if (write && h.read_block == block_) {
        if (h.reader / 32 != warp) other = h.reader;
        else if (h.other_warp_reader != kNobody) other = h.other_warp_reader;
        else if (h.read_warp == we && h.reader != tid) other = h.reader;
        else if (h.read_warp == we && h.same_warp_reader != kNobody) other = h.same_warp_reader;
      }
      if (other != kNobody) {
        *found = Conflict{write, other_wrote, other, i};
        return false;
      }
      if (write) {
        h.writer = uint16_t(tid), h.write_block = block_, h.write_warp = we;
      } else {
        record_read(h, tid, we);
      }
    }
    return true;
  }

 private:
  bool concurrent(uint16_t other, uint32_t other_block, uint32_t other_warp, unsigned tid, uint32_t we) const {
    return other != kNobody && other != tid && other_block == block_ && (other / 32 != tid / 32 || other_warp == we);
  }
  void record_read(ByteHistory& h, unsigned tid, uint32_t we) {
    if (h.read_block != block_) {
      h.other_warp_reader = h.same_warp_reader = kNobody;
    } else if (h.reader / 32 != tid / 32) {
      h.other_warp_reader = h.reader;
      h.same_warp_reader = kNobody;
    } else if (h.read_warp == we) {
      if (h.reader != tid) h.same_warp_reader = h.reader;
    } else {
      h.same_warp_reader = kNobody;
    }
    h.reader = uint16_t(tid), h.read_block = block_, h.read_warp = we;
  }
  // The next epoch. At 2^32 - 1 of them the records start afresh, so that no old one can match.
  uint32_t advance() {
    if (++tick_ == 0) {
      std::fill(history_.begin(), history_.end(), ByteHistory{});
      for (uint32_t& w : warp_) w = 0;
      block_ = 0;
      tick_ = 1;
    }
    return tick_;
  }

  const unsigned char* base_ = nullptr;
  size_t span_ = 0;
  std::vector<ByteHistory> history_;
  uint32_t tick_ = 0, block_ = 0;
  std::vector<uint32_t> warp_;
};

}  // namespace emu::race
