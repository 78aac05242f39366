// A CPU emulator of the small part of CUDA that lathe's backend uses: one fiber per GPU thread,
// blocks run one after another, __syncthreads and warp shuffles as cooperative barriers.
// Device memory is host memory. Only for testing kernel logic without a GPU.
#pragma once

#include <ucontext.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <vector>

#include <Eigen/Core>

struct dim3 {
  unsigned x = 1, y = 1, z = 1;
  dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};
struct uint4 { unsigned x, y, z, w; };
struct uint2 { unsigned x, y; };
inline uint4 make_uint4(unsigned a, unsigned b, unsigned c, unsigned d) { return {a, b, c, d}; }

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __restrict__ __restrict
#define __shared__ static

namespace emu {

struct Fiber {
  ucontext_t ctx;
  std::vector<char> stack;
  unsigned tid = 0;
  bool done = false;
  int waiting = 0;  // 0 none, 1 block barrier, 2 warp barrier
  unsigned long long gen = 0;
};

struct State {
  dim3 block_dim, grid_dim, block_idx, thread_idx;
  std::vector<Fiber> fibers;
  ucontext_t main_ctx;
  int current = -1;
  const std::function<void()>* body = nullptr;
  unsigned long long block_gen = 0;
  std::vector<unsigned long long> warp_gen;
  std::vector<unsigned char> slots;  // 16 bytes per thread for shuffles
  std::vector<int> ballots;
  bool inside = false;
};
inline State& st() {
  static State s;
  return s;
}

inline void yield() { swapcontext(&st().fibers[size_t(st().current)].ctx, &st().main_ctx); }

inline void fiber_main() {
  State& s = st();
  (*s.body)();
  s.fibers[size_t(s.current)].done = true;
  swapcontext(&s.fibers[size_t(s.current)].ctx, &s.main_ctx);
}

[[noreturn]] inline void die(const char* msg) {
  std::fprintf(stderr, "emu: %s\n", msg);
  std::abort();
}

inline void block_barrier() {
  State& s = st();
  Fiber& f = s.fibers[size_t(s.current)];
  f.waiting = 1;
  f.gen = s.block_gen;
  while (s.block_gen == f.gen) yield();
  f.waiting = 0;
}

inline void warp_barrier() {
  State& s = st();
  Fiber& f = s.fibers[size_t(s.current)];
  const unsigned w = f.tid / 32;
  f.waiting = 2;
  f.gen = s.warp_gen[w];
  while (s.warp_gen[w] == f.gen) yield();
  f.waiting = 0;
}

// Runs body once per thread of every block.
inline void launch(dim3 grid, dim3 block, const std::function<void()>& body) {
  State& s = st();
  if (s.inside) die("nested launch");
  const unsigned nthreads = block.x * block.y * block.z;
  if (nthreads == 0 || nthreads > 1024) die("invalid block size");
  if (block.x > 1024 || block.y > 1024 || block.z > 64) die("invalid block dims");
  if (grid.x == 0 || grid.y == 0 || grid.z == 0 || grid.y > 65535 || grid.z > 65535) die("invalid grid");
  if (nthreads % 32 != 0) {
    // Partial warps are legal in CUDA; the emulator's warp barriers handle them via 'done' lanes.
  }
  s.inside = true;
  s.block_dim = block;
  s.grid_dim = grid;
  s.body = &body;
  s.fibers.resize(nthreads);
  s.warp_gen.assign((nthreads + 31) / 32, 0);
  s.slots.assign(size_t(nthreads) * 16, 0);
  s.ballots.assign(nthreads, 0);
  for (auto& f : s.fibers)
    if (f.stack.size() != 256 * 1024) f.stack.resize(256 * 1024);
  for (unsigned bz = 0; bz < grid.z; ++bz)
    for (unsigned by = 0; by < grid.y; ++by)
      for (unsigned bx = 0; bx < grid.x; ++bx) {
        s.block_idx = dim3(bx, by, bz);
        for (unsigned t = 0; t < nthreads; ++t) {
          Fiber& f = s.fibers[t];
          f.tid = t;
          f.done = false;
          f.waiting = 0;
          getcontext(&f.ctx);
          f.ctx.uc_stack.ss_sp = f.stack.data();
          f.ctx.uc_stack.ss_size = f.stack.size();
          f.ctx.uc_link = nullptr;
          makecontext(&f.ctx, fiber_main, 0);
        }
        for (;;) {
          bool all_done = true, progressed = false;
          for (unsigned t = 0; t < nthreads; ++t) {
            Fiber& f = s.fibers[t];
            if (f.done) continue;
            all_done = false;
            if (f.waiting) continue;
            s.current = int(t);
            s.thread_idx = dim3(t % block.x, (t / block.x) % block.y, t / (block.x * block.y));
            swapcontext(&s.main_ctx, &f.ctx);
            progressed = true;
          }
          if (all_done) break;
          // Release barriers whose participants all arrived.
          bool released = false;
          bool block_ready = true;
          for (auto& f : s.fibers)
            if (!f.done && f.waiting != 1) block_ready = false;
          if (block_ready) {
            ++s.block_gen;
            released = true;
            for (auto& f : s.fibers)
              if (!f.done) f.waiting = 0;
          }
          for (unsigned w = 0; w < s.warp_gen.size(); ++w) {
            bool ready = true, any = false;
            for (unsigned t = w * 32; t < std::min(nthreads, w * 32 + 32); ++t) {
              const Fiber& f = s.fibers[t];
              if (f.done) continue;
              any = true;
              if (f.waiting != 2) ready = false;
            }
            if (ready && any) {
              ++s.warp_gen[w];
              released = true;
              for (unsigned t = w * 32; t < std::min(nthreads, w * 32 + 32); ++t)
                if (!s.fibers[t].done) s.fibers[t].waiting = 0;
            }
          }
          if (!released && !progressed) die("deadlock: threads wait at barriers that never complete");
        }
      }
  s.inside = false;
  s.current = -1;
}

inline void launch(dim3 grid, dim3 block, size_t, void*, const std::function<void()>& body) {
  launch(grid, block, body);
}

}  // namespace emu

// ---- device built-ins ----
#define threadIdx (::emu::st().thread_idx)
#define blockIdx (::emu::st().block_idx)
#define blockDim (::emu::st().block_dim)
#define gridDim (::emu::st().grid_dim)

inline void __syncthreads() { emu::block_barrier(); }
inline void __threadfence_system() {}

template <class V>
inline V __shfl_xor_sync(unsigned, V v, int mask) {
  static_assert(sizeof(V) <= 16);
  emu::State& s = emu::st();
  const unsigned me = s.fibers[size_t(s.current)].tid;
  std::memcpy(&s.slots[size_t(me) * 16], &v, sizeof(V));
  emu::warp_barrier();
  const unsigned partner = (me & ~31u) | ((me & 31u) ^ unsigned(mask));
  V r;
  std::memcpy(&r, &s.slots[size_t(partner) * 16], sizeof(V));
  emu::warp_barrier();
  return r;
}

inline unsigned __ballot_sync(unsigned, int pred) {
  emu::State& s = emu::st();
  const unsigned me = s.fibers[size_t(s.current)].tid;
  s.ballots[me] = pred ? 1 : 0;
  emu::warp_barrier();
  unsigned mask = 0;
  const unsigned base = me & ~31u;
  for (unsigned l = 0; l < 32 && base + l < s.ballots.size(); ++l)
    if (s.ballots[base + l]) mask |= 1u << l;
  emu::warp_barrier();
  return mask;
}

inline int __popc(unsigned v) { return __builtin_popcount(v); }
inline unsigned __umulhi(unsigned a, unsigned b) { return unsigned((uint64_t(a) * b) >> 32); }
inline double __dadd_rn(double a, double b) { return a + b; }
inline double __dsub_rn(double a, double b) { return a - b; }
inline double __dmul_rn(double a, double b) { return a * b; }
inline float __int_as_float(int v) { float f; std::memcpy(&f, &v, 4); return f; }
inline double __longlong_as_double(long long v) { double d; std::memcpy(&d, &v, 8); return d; }
inline int atomicAdd(int* p, int v) { int old = *p; *p += v; return old; }
inline int atomicCAS(int* p, int cmp, int v) { int old = *p; if (old == cmp) *p = v; return old; }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline double __ddiv_rn(double a, double b) { return a / b; }
