#pragma once
// Emulator stand-in for the PTX instructions of cuda/mma.cuh (cuda/emulator/README.md): the same
// functions as warp-collective C++. A GPU thread is a fiber here, so a lane cannot read another
// lane's registers; each instruction therefore publishes this lane's operands in a per-thread
// slot, meets the other 31 lanes at the warp barrier, computes its own result from everyone's
// slots, and meets them again before a slot is reused.
//
// The layouts are the PTX ISA's ("Matrix Fragments for mma.m16n8k16", "ldmatrix"); with
// g = lane / 4 and t = lane % 4:
//   mma A:  a[0] = A[g][2t, 2t+1]   a[1] = A[g+8][2t, 2t+1]   a[2] = A[g][2t+8, 2t+9]   a[3] = A[g+8][2t+8, 2t+9]
//   mma B:  b0 = B[2t, 2t+1][g]     b1 = B[2t+8, 2t+9][g]
//   mma C:  c[0], c[1] = C[g][2t, 2t+1]   c[2], c[3] = C[g+8][2t, 2t+1]
//   ldmatrix.x4: lanes 8i .. 8i+7 give the row addresses of matrix i; lane l receives in register
//   i the elements (l/4, 2(l%4)) and (l/4, 2(l%4)+1) of matrix i; with .trans (2(l%4), l/4) and
//   (2(l%4)+1, l/4).
// Each register holds two 16-bit elements, the first in its low half.
//
// The product is computed in f32 from the exact 16-bit values, summed over k = 0 .. 15 in order
// with fused multiply-adds onto C. A tensor core's summation order and internal rounding are not
// specified, so tests compare with tolerances, not bits.
//
// cp.async copies are deferred: each thread keeps its uncommitted copies and its committed groups,
// and cp_async_wait<N> performs all but the newest N groups. On a GPU the destination's bytes may
// change at any moment between the issue and the wait, so here they turn to 0xFF (NaN) at the
// issue: a kernel that reads shared memory before waiting for the copy that fills it reads NaN,
// and so does a warp still reading a stage that another warp has already begun to refill (a
// missing barrier before the refill).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstring>
#include <deque>
#include <source_location>
#include <type_traits>
#include <vector>

#include "emu_core.h"

namespace lathe::cuda {
using bf16_t = __nv_bfloat16;
using f16_t = __half;
}  // namespace lathe::cuda

namespace emu::mma {

struct LaneSlot {
  const unsigned char* addr = nullptr;
  uint32_t a[4] = {}, b[2] = {};
};

EMU_ACCESSOR Array<LaneSlot>& slots() {
  static Array<LaneSlot> s;
  const size_t n = st().fibers.size();
  if (s.size() < n) s.resize(n);
  return s;
}
inline unsigned thread_id() { return me().tid; }

template <class T>
inline float to_float(uint16_t bits) {
  T v;
  std::memcpy(&v, &bits, 2);
  if constexpr (std::is_same_v<T, __nv_bfloat16>) return __bfloat162float(v);
  else return __half2float(v);
}
inline uint16_t half_of(uint32_t reg, int hi) { return uint16_t(hi ? reg >> 16 : reg & 0xffffu); }

// Element (row, col) of an mma operand, read from the slots of the lane that holds it.
template <class T>
inline float a_element(const LaneSlot* warp, int row, int col) {
  const int lane = (row % 8) * 4 + (col % 8) / 2;
  const int reg = (row >= 8 ? 1 : 0) + (col >= 8 ? 2 : 0);
  return to_float<T>(half_of(warp[lane].a[reg], col % 2));
}
template <class T>
inline float b_element(const LaneSlot* warp, int k, int n) {
  const int lane = n * 4 + (k % 8) / 2;
  return to_float<T>(half_of(warp[lane].b[k >= 8 ? 1 : 0], k % 2));
}

// This thread's pending cp.async copies.
struct Copy {
  void* dst;
  const void* src;
  int bytes;
  bool fill;
};
struct Pending {
  std::vector<Copy> open;               // issued since the last commit
  std::deque<std::vector<Copy>> groups;  // committed, oldest first
  unsigned long long block = 0;          // the block that issued them (State::block_serial)
};
inline Pending& pending() {
  static std::vector<Pending> p;
  const size_t n = st().fibers.size();
  if (p.size() < n) p.resize(n);
  Pending& mine = p[thread_id()];
  // Copies left in flight by a thread of an earlier block would land in this block's memory.
  if (mine.block != st().block_serial) {
    if (!mine.open.empty() || !mine.groups.empty())
      die("a thread ended with cp.async copies in flight: wait for them (cp_async_wait<0>) before it returns");
    mine.block = st().block_serial;
  }
  return mine;
}
// The copies land: writes to shared memory by the waiting thread, as of its wait (other threads
// see them after the barrier that follows it).
EMU_UNCHECKED inline void perform(const std::vector<Copy>& group, const std::source_location& where) {
  for (const Copy& c : group) {
    race::write(c.dst, size_t(c.bytes), where);
    if (c.fill) std::memcpy(c.dst, c.src, size_t(c.bytes));
    else std::memset(c.dst, 0, size_t(c.bytes));
  }
}
// A copy issued: its destination may change from now until the wait, a write as of the issue
// (a warp still reading that stage without a barrier before the refill races with it).
EMU_UNCHECKED inline void issue(void* dst, const void* src, int bytes, bool fill, const std::source_location& where) {
  race::write(dst, size_t(bytes), where);
  std::memset(dst, 0xFF, size_t(bytes));
  pending().open.push_back({dst, src, bytes, fill});
}

}  // namespace emu::mma

namespace lathe::cuda {

template <class T>
EMU_UNCHECKED inline void mma_16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  static_assert(std::is_same_v<T, bf16_t> || std::is_same_v<T, f16_t>, "mma_16816 multiplies bf16 or f16");
  auto& slots = emu::mma::slots();
  const unsigned me = emu::mma::thread_id();
  for (int i = 0; i < 4; ++i) slots[me].a[i] = a[i];
  slots[me].b[0] = b0;
  slots[me].b[1] = b1;
  emu::warp_barrier(0xffffffffu, "mma.sync");
  const emu::mma::LaneSlot* warp = &slots[me & ~31u];
  const int g = int(me % 32) / 4, t = int(me % 4);
  for (int i = 0; i < 4; ++i) {
    const int row = g + (i >= 2 ? 8 : 0), col = 2 * t + (i % 2);
    float acc = d[i];
    for (int k = 0; k < 16; ++k)
      acc = std::fma(emu::mma::a_element<T>(warp, row, k), emu::mma::b_element<T>(warp, k, col), acc);
    d[i] = acc;
  }
  emu::warp_barrier(0xffffffffu, "mma.sync");
}

namespace emu_detail {
// Each lane's 16-byte row is its read of shared memory (checked by the race detector as that
// lane's); the lanes then gather their elements from every lane's rows, unchecked.
EMU_UNCHECKED inline void ldmatrix(uint32_t (&r)[4], const void* row, bool trans, const std::source_location& where) {
  auto& slots = emu::mma::slots();
  const unsigned me = emu::mma::thread_id();
  emu::race::read(row, 16, where);
  slots[me].addr = static_cast<const unsigned char*>(row);
  emu::warp_barrier(0xffffffffu, "ldmatrix");
  const emu::mma::LaneSlot* warp = &slots[me & ~31u];
  const int l = int(me % 32);
  for (int i = 0; i < 4; ++i) {
    uint16_t e[2];
    for (int j = 0; j < 2; ++j) {
      // Element (row, col) of matrix i: `row` from the address lane 8i + row gave.
      const int mrow = trans ? 2 * (l % 4) + j : l / 4, mcol = trans ? l / 4 : 2 * (l % 4) + j;
      std::memcpy(&e[j], warp[8 * i + mrow].addr + 2 * mcol, 2);
    }
    r[i] = uint32_t(e[0]) | (uint32_t(e[1]) << 16);
  }
  emu::warp_barrier(0xffffffffu, "ldmatrix");
}
}  // namespace emu_detail

// The calls the race detector sees name the kernel's line (`where`, the caller's).
inline void ldmatrix_x4(uint32_t (&r)[4], const void* row,
                        std::source_location where = std::source_location::current()) {
  emu_detail::ldmatrix(r, row, false, where);
}
inline void ldmatrix_x4_trans(uint32_t (&r)[4], const void* row,
                              std::source_location where = std::source_location::current()) {
  emu_detail::ldmatrix(r, row, true, where);
}

template <class T>
inline uint32_t pack_rn(float lo, float hi) {
  T l, h;
  if constexpr (std::is_same_v<T, bf16_t>) l = __float2bfloat16_rn(lo), h = __float2bfloat16_rn(hi);
  else l = __float2half_rn(lo), h = __float2half_rn(hi);
  uint16_t lb, hb;
  std::memcpy(&lb, &l, 2);
  std::memcpy(&hb, &h, 2);
  return uint32_t(lb) | (uint32_t(hb) << 16);
}

inline void cp_async_16(void* dst, const void* src, bool fill,
                        std::source_location where = std::source_location::current()) {
  emu::mma::issue(dst, src, 16, fill, where);
}
inline void cp_async_4(void* dst, const void* src, bool fill,
                       std::source_location where = std::source_location::current()) {
  emu::mma::issue(dst, src, 4, fill, where);
}
inline void cp_async_commit() {
  emu::mma::Pending& p = emu::mma::pending();
  p.groups.push_back(std::move(p.open));
  p.open.clear();
}
template <int N>
inline void cp_async_wait(std::source_location where = std::source_location::current()) {
  emu::mma::Pending& p = emu::mma::pending();
  while (p.groups.size() > size_t(N)) {
    emu::mma::perform(p.groups.front(), where);
    p.groups.pop_front();
  }
}

}  // namespace lathe::cuda
