// The CUDA emulator's core (cuda/emulator/README.md): a launch runs every block of the grid one
// after another, each thread of a block as a fiber on its own stack, so that
// __syncthreads, __syncwarp and the warp shuffles are cooperative barriers between fibers; one warp
// runs at a time, up to its next __syncthreads, so that a missing block barrier shows.
// Device memory is host memory. For testing kernel logic without a GPU: indexing, reductions,
// barriers, launch shapes and limits; not timing, occupancy or races between blocks.
//
// Where CUDA has a limit or a rule whose breach the GPU reports only as a failed launch or
// garbage, the emulator stops the program with a message naming the kernel (see die()): launch
// shapes and an H100's shared memory limits, shuffles that read a lane which has exited,
// barriers that can never complete.
#pragma once

#include <signal.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <random>
#include <source_location>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <Eigen/Core>

#include "emu_races.h"

// ---- CUDA's qualifiers: the host compiler builds device code as plain C++ ----
#define __global__
#define __device__
#define __host__
#define __constant__
#define __forceinline__ inline
#define __restrict__ __restrict
#define __align__(n) alignas(n)
#define __launch_bounds__(...)
// rewrite_cuda.py turns declarations of shared memory into ::emu::block_shared; one it cannot
// parse stays shared through `static`, without the fill of each new block.
#define __shared__ static

struct dim3 {
  unsigned x = 1, y = 1, z = 1;
  constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};

// ---- vector types, with CUDA's sizes and alignments ----
#define EMU_VECTOR_TYPES_(T, name, a2, a4)                                                      \
  struct name##1 { T x; };                                                                       \
  struct alignas(a2) name##2 { T x, y; };                                                        \
  struct name##3 { T x, y, z; };                                                                 \
  struct alignas(a4) name##4 { T x, y, z, w; };                                                  \
  inline constexpr name##1 make_##name##1(T x) { return {x}; }                                  \
  inline constexpr name##2 make_##name##2(T x, T y) { return {x, y}; }                          \
  inline constexpr name##3 make_##name##3(T x, T y, T z) { return {x, y, z}; }                  \
  inline constexpr name##4 make_##name##4(T x, T y, T z, T w) { return {x, y, z, w}; }
EMU_VECTOR_TYPES_(signed char, char, 2, 4)
EMU_VECTOR_TYPES_(unsigned char, uchar, 2, 4)
EMU_VECTOR_TYPES_(short, short, 4, 8)
EMU_VECTOR_TYPES_(unsigned short, ushort, 4, 8)
EMU_VECTOR_TYPES_(int, int, 8, 16)
EMU_VECTOR_TYPES_(unsigned, uint, 8, 16)
EMU_VECTOR_TYPES_(long long, longlong, 16, 16)
EMU_VECTOR_TYPES_(unsigned long long, ulonglong, 16, 16)
EMU_VECTOR_TYPES_(float, float, 8, 16)
EMU_VECTOR_TYPES_(double, double, 16, 16)
#undef EMU_VECTOR_TYPES_

constexpr int warpSize = 32;

namespace emu {

// ---- the race detector (emu_races.h): what it needs from here ----
// The emulated kernels compile with the compiler's ThreadSanitizer instrumentation, which calls
// race_hooks.cpp for every load and store. The emulator's own code is left out of it
// (EMU_UNCHECKED): the scheduler, whose bookkeeping through the hooks made the emulated cases 1.6
// times as slow again, and what touches shared memory on the kernel's behalf (the fill of a new
// block's arrays, the atomics, the gathers of ldmatrix and the landing of cp.async), which names
// its accesses itself.
#if defined(__SANITIZE_THREAD__)
#define EMU_UNCHECKED __attribute__((no_sanitize_thread))
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define EMU_UNCHECKED __attribute__((no_sanitize("thread")))
#endif
#endif
#ifndef EMU_UNCHECKED
#define EMU_UNCHECKED
#endif
namespace race {
// A plain global, not a function's static: the hooks reach it at every load and store without a
// guard's check.
inline Detector detector;
// The accesses the shim makes for a kernel (race_hooks.cpp): checked as the running thread's, a
// report naming the kernel's line `where`.
void read(const void* p, size_t bytes, const std::source_location& where);
void write(const void* p, size_t bytes, const std::source_location& where);
}  // namespace race

// An H100's limits (CUDA's programming guide, compute capability 9.0).
constexpr unsigned kMaxThreadsPerBlock = 1024;
constexpr size_t kSharedPerBlockDefault = 48 * 1024;   // without cudaFuncSetAttribute
constexpr size_t kSharedPerBlockOptin = 227 * 1024;    // the most a kernel may opt in to
constexpr size_t kFiberStack = 256 * 1024;

// ---- fibers: a stack, and where its thread stopped ----
// On x86-64 a switch saves the callee-saved registers and the floating-point control words on the
// stack it leaves and loads them from the one it enters, in a dozen instructions. Elsewhere it is
// ucontext's swapcontext, which also makes a system call for the signal mask: on x86-64 that call
// was 85% of the emulator's time.
#if defined(__x86_64__)
struct Context {
  void* sp = nullptr;
};
// Saves this context's registers on its stack and *from = its stack pointer, then resumes `to`.
__attribute__((naked, noinline)) inline void switch_stack(void** /*from: rdi*/, void* /*to: rsi*/) {
  asm volatile(
      "pushq %rbp\n\tpushq %rbx\n\tpushq %r12\n\tpushq %r13\n\tpushq %r14\n\tpushq %r15\n\t"
      "subq $8, %rsp\n\tstmxcsr (%rsp)\n\tfnstcw 4(%rsp)\n\t"
      "movq %rsp, (%rdi)\n\tmovq %rsi, %rsp\n\t"
      "ldmxcsr (%rsp)\n\tfldcw 4(%rsp)\n\taddq $8, %rsp\n\t"
      "popq %r15\n\tpopq %r14\n\tpopq %r13\n\tpopq %r12\n\tpopq %rbx\n\tpopq %rbp\n\tret");
}
// A context that enters `entry` on a fresh stack: what switch_stack pops, below entry's address.
EMU_UNCHECKED inline void start_context(Context& c, char* stack, size_t size, void (*entry)()) {
  auto* p = reinterpret_cast<uint64_t*>((reinterpret_cast<uintptr_t>(stack) + size) & ~uintptr_t(15));
  *--p = 0;                                   // entry's own return address: it never returns
  *--p = reinterpret_cast<uintptr_t>(entry);  // taken by ret, leaving the stack as a call does
  for (int r = 0; r < 6; ++r) *--p = 0;       // rbp, rbx, r12-r15
  *--p = 0x037F'0000'1F80ull;                 // MXCSR 0x1F80 and the x87 control word 0x037F: the defaults
  c.sp = p;
}
EMU_UNCHECKED inline void switch_context(Context& from, Context& to) {
  switch_stack(&from.sp, to.sp);
}
#else
struct Context {
  ucontext_t uc;
};
EMU_UNCHECKED inline void start_context(Context& c, char* stack, size_t size, void (*entry)()) {
  getcontext(&c.uc);
  c.uc.uc_stack.ss_sp = stack;
  c.uc.uc_stack.ss_size = size;
  c.uc.uc_link = nullptr;
  makecontext(&c.uc, entry, 0);
}
EMU_UNCHECKED inline void switch_context(Context& from, Context& to) {
  swapcontext(&from.uc, &to.uc);
}
#endif

// The scheduler's accessors: inlined wherever they are called and never instrumented, so that the
// scheduler's bookkeeping, read at every step, stays out of the race detector's hooks (a
// std::vector's operator[] is an instrumented call even from the scheduler's own functions: with
// them the emulated cases took 2.5 times as long as without the detector, now 1.7).
#define EMU_ACCESSOR EMU_UNCHECKED __attribute__((always_inline)) inline

// A growable array of the scheduler's state whose elements are reached through EMU_ACCESSORs.
template <class T>
class Array {
 public:
  EMU_ACCESSOR T& operator[](size_t i) { return data_[i]; }
  EMU_ACCESSOR const T& operator[](size_t i) const { return data_[i]; }
  EMU_ACCESSOR size_t size() const { return size_; }
  void resize(size_t n) { items_.resize(n), refresh(); }
  void assign(size_t n, const T& v) { items_.assign(n, v), refresh(); }
  void clear() { items_.clear(), refresh(); }
  void push_back(const T& v) { items_.push_back(v), refresh(); }

 private:
  void refresh() { data_ = items_.data(), size_ = items_.size(); }
  std::vector<T> items_;
  T* data_ = nullptr;
  size_t size_ = 0;
};

struct Fiber {
  Context ctx;
  char* stack = nullptr;  // mmap'd, with a guard page below
  unsigned tid = 0;
  bool done = false;
  int waiting = 0;        // 0 running, 1 at a block barrier, 2 at a warp barrier
  unsigned warp_mask = 0;  // the lanes a warp barrier waits for
  bool orders_memory = false;  // the warp barrier it waits at is __syncwarp (not a shuffle's)
  unsigned long long gen = 0;
};

struct State {
  dim3 block_dim, grid_dim, block_idx, thread_idx;
  Array<Fiber> fibers;
  unsigned nthreads = 0;
  Context main_ctx;
  int current = -1;
  const std::function<void()>* body = nullptr;
  const char* kernel = "";
  unsigned long long block_gen = 0;
  Array<unsigned long long> warp_gen;
  Array<unsigned char> slots;  // 16 bytes per thread: what a shuffle or ballot exchanges
  unsigned long long block_serial = 0;  // counts every block of every launch
  Array<unsigned> order;                // the threads in the order they run: warp by warp
  int active_warp = -1;                 // the warp a round runs (-1: none chosen yet)
  int round_pos = -1;                   // the running thread's place in `order`
  bool inside = false;
  unsigned char* dynamic = nullptr;     // this launch's dynamic shared memory
  size_t dynamic_bytes = 0;
  std::map<std::string, size_t> max_dynamic_shared;  // cudaFuncSetAttribute, by kernel name
};
EMU_ACCESSOR State& st() {
  static State s;
  return s;
}

// Stops the program with a message that names the kernel, and the block and thread that were
// running: what the GPU reports, if at all, as a failed launch or a wrong result.
[[noreturn]] __attribute__((format(printf, 1, 2))) inline void die(const char* fmt, ...) {
  State& s = st();
  std::fprintf(stderr, "emu: ");
  if (s.inside) std::fprintf(stderr, "%s: ", s.kernel);
  va_list ap;
  va_start(ap, fmt);
  std::vfprintf(stderr, fmt, ap);
  va_end(ap);
  if (s.inside && s.current >= 0)
    std::fprintf(stderr, " (block (%u, %u, %u), thread (%u, %u, %u))", s.block_idx.x, s.block_idx.y, s.block_idx.z,
                 s.thread_idx.x, s.thread_idx.y, s.thread_idx.z);
  std::fprintf(stderr, "\n");
  std::fflush(stderr);
  std::abort();
}

// A wild access inside a kernel (device memory is host memory; dynamic shared memory ends at a
// guard page) faults; say where before dying.
inline void on_fault(int sig) {
  State& s = st();
  char buf[512];
  const int n = s.inside
      ? std::snprintf(buf, sizeof buf,
                      "emu: %s: %s in block (%u, %u, %u), thread (%u, %u, %u): an access out of bounds "
                      "(device memory, or past the launch's %zu bytes of dynamic shared memory)\n",
                      s.kernel, sig == SIGSEGV ? "segmentation fault" : "bus error", s.block_idx.x, s.block_idx.y,
                      s.block_idx.z, s.thread_idx.x, s.thread_idx.y, s.thread_idx.z, s.dynamic_bytes)
      : 0;
  if (n > 0) (void)!::write(2, buf, size_t(std::min(n, int(sizeof buf) - 1)));
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

// Installed for the span of each launch and restored after it: a test framework that installs its
// own handlers per test case (doctest does) keeps them outside kernels, and the emulator's is the
// one that answers inside them.
class FaultHandlerScope {
 public:
  FaultHandlerScope() {
    // The handler runs on its own stack: a fiber's may be the one that overflowed.
    static std::vector<char> alt(64 * 1024);
    static const bool stack_set = [] {
      stack_t ss{};
      ss.ss_sp = alt.data();
      ss.ss_size = alt.size();
      return ::sigaltstack(&ss, nullptr) == 0;
    }();
    (void)stack_set;
    struct sigaction sa {};
    sa.sa_handler = on_fault;
    sa.sa_flags = SA_ONSTACK;
    ::sigaction(SIGSEGV, &sa, &old_segv_);
    ::sigaction(SIGBUS, &sa, &old_bus_);
  }
  ~FaultHandlerScope() {
    ::sigaction(SIGSEGV, &old_segv_, nullptr);
    ::sigaction(SIGBUS, &old_bus_, nullptr);
  }
  FaultHandlerScope(const FaultHandlerScope&) = delete;
  FaultHandlerScope& operator=(const FaultHandlerScope&) = delete;

 private:
  struct sigaction old_segv_ {}, old_bus_ {};
};

EMU_UNCHECKED inline char* map_stack() {
  const size_t page = size_t(::sysconf(_SC_PAGESIZE));
  void* p = ::mmap(nullptr, kFiberStack + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
  if (p == MAP_FAILED) die("cannot map a fiber stack");
  ::mprotect(p, page, PROT_NONE);  // an overflow faults instead of writing into the next stack
  return static_cast<char*>(p) + page;
}

EMU_ACCESSOR Fiber& me() { return st().fibers[size_t(st().current)]; }

// The scheduler runs one warp at a time, as far as it can go: a round runs each runnable lane of
// the warp once, a thread that stops hands over to the next lane directly and the last one to the
// scheduler, which releases the warp's barrier (a shuffle, ldmatrix, mma) when it is complete and
// lets the same warp go on. Only when it waits at __syncthreads (or is done) does the next warp run.
// So no warp sees another's writes to shared memory before a block barrier orders them: a missing
// barrier reads the 0xFF fill (NaN) or data of the wrong stage, whichever way the data flows,
// because the warps run first to last in even blocks, last to first (lanes reversed too) in odd
// ones, and in a random order per barrier interval under LATHE_EMU_SCHEDULE=random[:SEED].
EMU_ACCESSOR unsigned thread_at(unsigned k) { return st().order[k]; }
EMU_UNCHECKED inline int next_runnable(int after) {
  const State& s = st();
  for (unsigned k = unsigned(after + 1); k < s.nthreads; ++k) {
    const unsigned t = s.order[k];
    if (s.active_warp >= 0 && int(t / 32) != s.active_warp) continue;
    const Fiber& f = s.fibers[t];
    if (!f.done && !f.waiting) return int(k);
  }
  return -1;
}
EMU_UNCHECKED inline Fiber& enter(int k) {
  State& s = st();
  const unsigned t = thread_at(unsigned(k));
  s.round_pos = k;
  s.current = int(t);
  // Field by field: dim3's constructor would be an instrumented call here (EMU_ACCESSOR).
  s.thread_idx.x = t % s.block_dim.x;
  s.thread_idx.y = t / s.block_dim.x % s.block_dim.y;
  s.thread_idx.z = t / (s.block_dim.x * s.block_dim.y);
  return s.fibers[t];
}
// The calling thread stops (at a barrier, or for good): on to the next thread of the round.
EMU_UNCHECKED inline void yield() {
  Context* from;
  Context* to;
  {
    State& s = st();
    const int k = next_runnable(s.round_pos);
    from = &me().ctx;
    to = k >= 0 ? &enter(k).ctx : &s.main_ctx;
  }
  switch_context(*from, *to);
}

EMU_UNCHECKED inline void fiber_main() {
  (*st().body)();
  me().done = true;
  yield();
}

EMU_UNCHECKED inline void block_barrier() {
  State& s = st();
  Fiber& f = me();
  f.waiting = 1;
  f.gen = s.block_gen;
  while (s.block_gen == f.gen) yield();
}

// The lanes of the calling thread's warp that exist (a block's last warp may be partial).
EMU_ACCESSOR unsigned warp_lanes(unsigned warp) {
  const unsigned first = warp * 32, left = st().nthreads - first, n = left < 32 ? left : 32;
  return n == 32 ? 0xffffffffu : (1u << n) - 1;
}

// Waits until every lane of `mask` in the warp waits here too. A lane of the mask that has exited
// can never arrive: on a GPU that hangs or reads garbage, here it is an error. Only __syncwarp
// orders the lanes' memory accesses (`orders_memory`); a shuffle's, ldmatrix's or mma's barrier
// meets the lanes to exchange registers.
EMU_UNCHECKED inline void warp_barrier(unsigned mask, const char* what, bool orders_memory = false) {
  State& s = st();
  Fiber& f = me();
  const unsigned warp = f.tid / 32;
  mask &= warp_lanes(warp);
  if (!(mask >> (f.tid % 32) & 1u)) die("%s: the calling lane %u is not in its mask 0x%08x", what, f.tid % 32, mask);
  f.waiting = 2;
  f.warp_mask = mask;
  f.orders_memory = orders_memory;
  f.gen = s.warp_gen[warp];
  while (s.warp_gen[warp] == f.gen) yield();
}

// Releases __syncthreads when every live thread waits there; true when it did.
EMU_UNCHECKED inline bool release_block_barrier() {
  State& s = st();
  for (unsigned t = 0; t < s.nthreads; ++t)
    if (!s.fibers[t].done && s.fibers[t].waiting != 1) return false;
  ++s.block_gen;
  for (unsigned t = 0; t < s.nthreads; ++t) s.fibers[t].waiting = 0;
  race::detector.block_barrier();
  return true;
}

// Releases warp `w`'s barrier when every lane of its mask waits there with that mask; true when it did.
EMU_UNCHECKED inline bool release_warp_barrier(unsigned w) {
  State& s = st();
  // The first waiting lane's mask decides; every lane of it must wait with the same mask.
  unsigned mask = 0;
  bool orders_memory = false;
  for (unsigned l = 0; l < 32 && w * 32 + l < s.nthreads; ++l) {
    const Fiber& f = s.fibers[w * 32 + l];
    if (f.waiting == 2) {
      mask = f.warp_mask;
      orders_memory = f.orders_memory;
      break;
    }
  }
  if (mask == 0) return false;
  for (unsigned l = 0; l < 32; ++l) {
    if (!(mask >> l & 1u)) continue;
    const Fiber& f = s.fibers[w * 32 + l];
    if (f.done) {
      s.current = -1;
      die("in block (%u, %u, %u), warp %u: a warp-synchronous call (__shfl_*_sync, __syncwarp, __ballot_sync) "
          "names lane %u in its mask 0x%08x, but that lane has exited",
          s.block_idx.x, s.block_idx.y, s.block_idx.z, w, l, mask);
    }
    if (f.waiting != 2 || f.warp_mask != mask) return false;
  }
  ++s.warp_gen[w];
  for (unsigned l = 0; l < 32; ++l)
    if (mask >> l & 1u) s.fibers[w * 32 + l].waiting = 0;
  if (orders_memory) race::detector.warp_barrier(w);
  return true;
}

// LATHE_EMU_SCHEDULE: unset or "warps" (first to last in even blocks, last to first in odd ones),
// or "random" / "random:SEED" (a random order of warps for each interval between block barriers).
struct Schedule {
  bool random = false;
  std::mt19937_64 rng;
  Schedule() {
    const char* v = std::getenv("LATHE_EMU_SCHEDULE");
    const std::string text = v ? v : "warps";
    if (text == "warps") return;
    if (text.rfind("random", 0) == 0) {
      random = true;
      unsigned long long seed = 0;
      if (text.size() > 6) {
        char* end = nullptr;
        seed = std::strtoull(text.c_str() + 7, &end, 10);
        if (text[6] != ':' || *end != '\0') die("LATHE_EMU_SCHEDULE=%s: expected warps, random or random:SEED", v);
      }
      rng.seed(seed);
      return;
    }
    die("LATHE_EMU_SCHEDULE=%s: expected warps, random or random:SEED", v);
  }
};
inline Schedule& schedule() {
  static Schedule sch;
  return sch;
}

// The order the block's threads run in until its next block barrier.
EMU_UNCHECKED inline void order_threads(bool backward) {
  State& s = st();
  const unsigned warps = (s.nthreads + 31) / 32;
  std::vector<unsigned> warp_order(warps);
  for (unsigned w = 0; w < warps; ++w) warp_order[w] = backward ? warps - 1 - w : w;
  if (schedule().random) std::shuffle(warp_order.begin(), warp_order.end(), schedule().rng);
  s.order.clear();
  for (unsigned w : warp_order) {
    const unsigned first = w * 32, n = std::min(32u, s.nthreads - first);
    for (unsigned l = 0; l < n; ++l) s.order.push_back(first + (backward ? n - 1 - l : l));
  }
}

// Runs `body` once per thread of every block, the threads of a block as fibers taken warp by warp.
EMU_UNCHECKED inline void run_grid(dim3 grid, dim3 block, const std::function<void()>& body) {
  State& s = st();
  const unsigned n = block.x * block.y * block.z;
  s.grid_dim = grid;
  s.block_dim = block;
  s.nthreads = n;
  s.body = &body;
  if (s.fibers.size() < n) s.fibers.resize(n);
  for (unsigned t = 0; t < n; ++t)
    if (!s.fibers[t].stack) s.fibers[t].stack = map_stack();
  s.warp_gen.assign((n + 31) / 32, 0);
  s.slots.assign(size_t(n) * 16, 0);
  for (unsigned bz = 0; bz < grid.z; ++bz)
    for (unsigned by = 0; by < grid.y; ++by)
      for (unsigned bx = 0; bx < grid.x; ++bx) {
        s.block_idx = dim3(bx, by, bz);
        ++s.block_serial;
        if (s.dynamic_bytes) std::memset(s.dynamic, 0xFF, s.dynamic_bytes);
        race::detector.block_started(unsigned(s.warp_gen.size()));
        for (unsigned t = 0; t < n; ++t) {
          Fiber& f = s.fibers[t];
          f.tid = t;
          f.done = false;
          f.waiting = 0;
          start_context(f.ctx, f.stack, kFiberStack, fiber_main);
        }
        const bool backward = (bx + grid.x * (by + grid.y * bz)) & 1;
        order_threads(backward);
        for (;;) {
          // The first warp in this interval's order that can run, as far as it can go.
          s.active_warp = -1;
          const int first = next_runnable(-1);
          if (first >= 0) {
            const unsigned w = s.order[first] / 32;
            s.active_warp = int(w);
            switch_context(s.main_ctx, enter(first).ctx);  // back when the warp's round is over
            release_warp_barrier(w);
            continue;
          }
          bool all_done = true;
          for (unsigned t = 0; t < n && all_done; ++t) all_done = s.fibers[t].done;
          if (all_done) break;
          if (release_block_barrier()) {
            if (schedule().random) order_threads(backward);
            continue;
          }
          bool released = false;
          for (unsigned w = 0; w < s.warp_gen.size(); ++w) released = release_warp_barrier(w) || released;
          if (!released) {
            s.current = -1;
            die("deadlock: in block (%u, %u, %u) some threads wait at __syncthreads and others at a warp barrier, "
                "or a warp barrier's lanes disagree on its mask",
                bx, by, bz);
          }
        }
      }
  s.current = -1;
}

// A kernel as written before <<<, or as cudaFuncSetAttribute's first argument, without spaces and
// `&`: the emulator knows a kernel by this name (it has no address for a template whose arguments
// the launch deduces).
inline std::string kernel_key(const char* text) {
  std::string key;
  for (const char* c = text; *c; ++c)
    if (*c != ' ' && *c != '&') key += *c;
  return key;
}

// What <<<grid, block, shmem, stream>>> says.
struct LaunchConfig {
  dim3 grid, block;
  size_t shmem;
  LaunchConfig(dim3 g, dim3 b, size_t bytes = 0, void* = nullptr) : grid(g), block(b), shmem(bytes) {}
};

// The launch limits CUDA checks (a breach is a failed launch there), then the grid.
inline void check_launch(const char* kernel, const LaunchConfig& c) {
  State& s = st();
  const dim3 g = c.grid, b = c.block;
  const unsigned long long threads = 1ull * b.x * b.y * b.z;
  if (threads == 0 || b.x > 1024 || b.y > 1024 || b.z > 64 || threads > kMaxThreadsPerBlock)
    die("%s: block (%u, %u, %u): at most 1024 threads, x and y at most 1024, z at most 64", kernel, b.x, b.y, b.z);
  if (g.x == 0 || g.y == 0 || g.z == 0 || g.x > 2147483647u || g.y > 65535 || g.z > 65535)
    die("%s: grid (%u, %u, %u): every dimension at least 1, x at most 2^31 - 1, y and z at most 65535", kernel, g.x,
        g.y, g.z);
  if (c.shmem > kSharedPerBlockOptin)
    die("%s: %zu bytes of dynamic shared memory: an H100 has at most %zu (227 KB) per block", kernel, c.shmem,
        kSharedPerBlockOptin);
  if (c.shmem > kSharedPerBlockDefault) {
    const auto it = s.max_dynamic_shared.find(kernel_key(kernel));
    const size_t allowed = it == s.max_dynamic_shared.end() ? kSharedPerBlockDefault : it->second;
    if (c.shmem > allowed)
      die("%s: %zu bytes of dynamic shared memory, but the kernel allows %zu: above 48 KB a launch needs "
          "cudaFuncSetAttribute(%s, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes) first",
          kernel, c.shmem, allowed, kernel);
  }
}

// Shared memory, one mapping: every `__shared__` declaration's buffer first (each placed at its
// first use, for good), then the launch's dynamic shared memory, whose end touches a guard page so
// that an access past the launch's bytes (rounded up to 16) faults. One range, which the race
// detector watches.
class SharedMemory {
 public:
  static SharedMemory& get() {
    static SharedMemory m;
    return m;
  }
  unsigned char* dynamic(size_t bytes) const { return dynamic_end_ - (bytes + 15) / 16 * 16; }
  unsigned char* place(size_t bytes, size_t align) {
    used_ = (used_ + align - 1) / align * align;
    if (used_ + bytes > kStaticBytes)
      die("the kernels' __shared__ declarations need more than the emulator's %zu bytes for them "
          "(kStaticBytes, shim/emu_core.h)", kStaticBytes);
    unsigned char* p = base_ + used_;
    used_ += bytes;
    return p;
  }

 private:
  static constexpr size_t kStaticBytes = 256 * 1024;
  SharedMemory() {
    const size_t page = size_t(::sysconf(_SC_PAGESIZE));
    const size_t dynamic = (kSharedPerBlockOptin + page - 1) / page * page;
    void* p = ::mmap(nullptr, kStaticBytes + dynamic + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1,
                     0);
    if (p == MAP_FAILED) die("cannot map shared memory");
    base_ = static_cast<unsigned char*>(p);
    dynamic_end_ = base_ + kStaticBytes + dynamic;
    ::mprotect(dynamic_end_, page, PROT_NONE);
    race::detector.watch(base_, kStaticBytes + dynamic);
  }
  unsigned char* base_ = nullptr;
  unsigned char* dynamic_end_ = nullptr;
  size_t used_ = 0;
};

template <class F, class... A>
void launch(const char* kernel, const LaunchConfig& c, F&& call, A&&... args) {
  State& s = st();
  if (s.inside) die("a launch inside a kernel (dynamic parallelism) is not emulated");
  const FaultHandlerScope fault_handler;
  s.kernel = kernel;
  check_launch(kernel, c);
  // The arguments are evaluated and copied once, as a launch copies them to the device.
  auto saved = std::make_tuple(std::decay_t<A>(std::forward<A>(args))...);
  const std::function<void()> body = [&] { std::apply(call, saved); };
  s.inside = true;
  s.dynamic_bytes = c.shmem;
  s.dynamic = SharedMemory::get().dynamic(c.shmem);
  static const bool trace = std::getenv("LATHE_EMU_TRACE") != nullptr;
  const auto t0 = std::chrono::steady_clock::now();
  run_grid(c.grid, c.block, body);
  if (trace)
    std::fprintf(stderr, "emu: %s grid (%u, %u, %u) block (%u, %u, %u) shared %zu: %.1f ms\n", kernel, c.grid.x,
                 c.grid.y, c.grid.z, c.block.x, c.block.y, c.block.z, c.shmem,
                 std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  s.inside = false;
  s.dynamic_bytes = 0;
}

template <class T>
T* dynamic_shared() {
  return reinterpret_cast<T*>(st().dynamic);
}

// One `__shared__` declaration (Id from rewrite_cuda.py): one buffer in shared memory, filled
// with 0xFF bytes (NaN in every float type) when a block first reaches it. The fill stands for the
// block's start, before any thread's access, so the race detector does not see it.
template <class T, unsigned long long Id>
EMU_UNCHECKED T& block_shared() {
  static unsigned char* const storage = SharedMemory::get().place(sizeof(T), std::max<size_t>(alignof(T), 128));
  static unsigned long long filled_for = 0;
  State& s = st();
  if (filled_for != s.block_serial) {
    std::memset(storage, 0xFF, sizeof(T));
    filled_for = s.block_serial;
  }
  return *reinterpret_cast<T*>(storage);
}

// A warp shuffle: every lane of `mask` publishes its value, then reads lane src(lane) of the
// same warp (a lane outside [0, 32) reads its own value, as CUDA's rules for width and deltas
// say).
template <class V, class Src>
EMU_UNCHECKED V shuffle(unsigned mask, V v, Src src, const char* what) {
  static_assert(sizeof(V) <= 16, "a shuffled value has at most 16 bytes here");
  State& s = st();
  const unsigned tid = me().tid, lane = tid % 32, base = tid - lane;
  std::memcpy(&s.slots[size_t(tid) * 16], &v, sizeof(V));
  warp_barrier(mask, what);
  const int from = src(int(lane));
  V r = v;
  if (from >= 0 && from < 32 && unsigned(from) != lane) {
    const unsigned m = mask & warp_lanes(tid / 32);
    if (!(m >> from & 1u))
      die("%s reads lane %d, which is not in the mask 0x%08x (or does not exist): its value is undefined", what, from,
          m);
    std::memcpy(&r, &s.slots[size_t(base + unsigned(from)) * 16], sizeof(V));
  }
  warp_barrier(mask, what);
  return r;
}

}  // namespace emu

// ---- device built-ins ----
#define threadIdx (::emu::st().thread_idx)
#define blockIdx (::emu::st().block_idx)
#define blockDim (::emu::st().block_dim)
#define gridDim (::emu::st().grid_dim)

inline void __syncthreads() { emu::block_barrier(); }
inline void __syncwarp(unsigned mask = 0xffffffffu) { emu::warp_barrier(mask, "__syncwarp", true); }
inline void __threadfence() {}
inline void __threadfence_block() {}
inline void __threadfence_system() {}
[[noreturn]] inline void __trap() { emu::die("__trap()"); }

// Shuffles: width divides the warp into segments of `width` lanes (a power of two up to 32).
template <class V>
inline V __shfl_sync(unsigned mask, V v, int src_lane, int width = 32) {
  return emu::shuffle(mask, v, [&](int lane) { return (lane / width) * width + (src_lane % width + width) % width; },
                      "__shfl_sync");
}
template <class V>
inline V __shfl_up_sync(unsigned mask, V v, unsigned delta, int width = 32) {
  return emu::shuffle(mask, v, [&](int lane) { return lane % width >= int(delta) ? lane - int(delta) : lane; },
                      "__shfl_up_sync");
}
template <class V>
inline V __shfl_down_sync(unsigned mask, V v, unsigned delta, int width = 32) {
  return emu::shuffle(mask, v, [&](int lane) { return lane % width + int(delta) < width ? lane + int(delta) : lane; },
                      "__shfl_down_sync");
}
template <class V>
inline V __shfl_xor_sync(unsigned mask, V v, int lane_mask, int width = 32) {
  // A source in a later segment than the caller's reads the caller's own value.
  return emu::shuffle(mask, v, [&](int lane) {
    const int src = lane ^ lane_mask;
    return src / width > lane / width ? lane : src;
  }, "__shfl_xor_sync");
}

EMU_UNCHECKED inline unsigned __ballot_sync(unsigned mask, int pred) {
  emu::State& s = emu::st();
  const unsigned tid = emu::me().tid, base = tid - tid % 32;
  s.slots[size_t(tid) * 16] = pred ? 1 : 0;
  emu::warp_barrier(mask, "__ballot_sync");
  const unsigned m = mask & emu::warp_lanes(tid / 32);
  unsigned r = 0;
  for (unsigned l = 0; l < 32; ++l)
    if ((m >> l & 1u) && s.slots[size_t(base + l) * 16]) r |= 1u << l;
  emu::warp_barrier(mask, "__ballot_sync");
  return r;
}
inline int __any_sync(unsigned mask, int pred) { return __ballot_sync(mask, pred) != 0; }
inline int __all_sync(unsigned mask, int pred) {
  return __ballot_sync(mask, pred) == (mask & emu::warp_lanes(emu::me().tid / 32));
}
inline unsigned __activemask() {
  const emu::State& s = emu::st();
  const unsigned base = emu::me().tid / 32 * 32;
  unsigned r = 0;
  for (unsigned l = 0; l < 32 && base + l < s.nthreads; ++l)
    if (!s.fibers[base + l].done) r |= 1u << l;
  return r;
}

// Read-only loads through the texture path: plain loads here.
template <class T>
inline T __ldg(const T* p) { return *p; }

// Atomics: fibers never run at the same time, so read-modify-write is atomic as written. Atomics
// do not race with each other, so the race detector does not see them.
template <class T>
EMU_UNCHECKED inline T atomicAdd(T* p, T v) {
  T old = *p;
  *p = old + v;
  return old;
}
template <class T>
inline T atomicSub(T* p, T v) { return atomicAdd(p, T(-v)); }
template <class T>
EMU_UNCHECKED inline T atomicMax(T* p, T v) {
  T old = *p;
  *p = old < v ? v : old;
  return old;
}
template <class T>
EMU_UNCHECKED inline T atomicMin(T* p, T v) {
  T old = *p;
  *p = v < old ? v : old;
  return old;
}
template <class T>
EMU_UNCHECKED inline T atomicExch(T* p, T v) {
  T old = *p;
  *p = v;
  return old;
}
template <class T>
EMU_UNCHECKED inline T atomicCAS(T* p, T cmp, T v) {
  T old = *p;
  if (old == cmp) *p = v;
  return old;
}

// ---- integer and bit intrinsics ----
inline int __popc(unsigned v) { return __builtin_popcount(v); }
inline int __popcll(unsigned long long v) { return __builtin_popcountll(v); }
inline int __clz(int v) { return v == 0 ? 32 : __builtin_clz(unsigned(v)); }
inline int __ffs(int v) { return __builtin_ffs(v); }
inline unsigned __brev(unsigned v) {
  unsigned r = 0;
  for (int i = 0; i < 32; ++i) r |= ((v >> i) & 1u) << (31 - i);
  return r;
}
inline unsigned __umulhi(unsigned a, unsigned b) { return unsigned((uint64_t(a) * b) >> 32); }
inline long long clock64() { return static_cast<long long>(std::chrono::steady_clock::now().time_since_epoch().count()); }

// ---- reinterpretations ----
inline float __int_as_float(int v) { float f; std::memcpy(&f, &v, 4); return f; }
inline float __uint_as_float(unsigned v) { float f; std::memcpy(&f, &v, 4); return f; }
inline int __float_as_int(float f) { int v; std::memcpy(&v, &f, 4); return v; }
inline unsigned __float_as_uint(float f) { unsigned v; std::memcpy(&v, &f, 4); return v; }
inline double __longlong_as_double(long long v) { double d; std::memcpy(&d, &v, 8); return d; }
inline long long __double_as_longlong(double d) { long long v; std::memcpy(&v, &d, 8); return v; }

// ---- math: CUDA's rounding-named and fast intrinsics as the host computes them (the fast ones
// are exact here, within a few ulp on a GPU) ----
// A value held as it is rounded: CUDA never contracts an _rn intrinsic into a fused multiply-add,
// and GCC (with -march=native's FMA) would contract a product fed into an add; the empty asm
// makes each operand and result a value of its own.
template <class F>
inline F emu_held(F v) {
  asm("" : "+g"(v));
  return v;
}
inline float __fadd_rn(float a, float b) { return emu_held(emu_held(a) + emu_held(b)); }
inline float __fsub_rn(float a, float b) { return emu_held(emu_held(a) - emu_held(b)); }
inline float __fmul_rn(float a, float b) { return emu_held(a * b); }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __fmaf_rn(float a, float b, float c) { return std::fma(a, b, c); }
inline float __frcp_rn(float a) { return 1.0f / a; }
inline float __fsqrt_rn(float a) { return std::sqrt(a); }
inline double __dadd_rn(double a, double b) { return emu_held(emu_held(a) + emu_held(b)); }
inline double __dsub_rn(double a, double b) { return emu_held(emu_held(a) - emu_held(b)); }
inline double __dmul_rn(double a, double b) { return emu_held(a * b); }
inline double __ddiv_rn(double a, double b) { return a / b; }
inline double __fma_rn(double a, double b, double c) { return std::fma(a, b, c); }
inline float __expf(float x) { return std::exp(x); }
inline float __exp10f(float x) { return std::pow(10.0f, x); }
inline float __logf(float x) { return std::log(x); }
inline float __log2f(float x) { return std::log2(x); }
inline float __powf(float x, float y) { return std::pow(x, y); }
inline float __sinf(float x) { return std::sin(x); }
inline float __cosf(float x) { return std::cos(x); }
inline float __tanf(float x) { return std::tan(x); }
inline float __fdividef(float a, float b) { return a / b; }
inline float __saturatef(float x) { return x != x ? 0.0f : x < 0.0f ? 0.0f : x > 1.0f ? 1.0f : x; }
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
inline double rsqrt(double x) { return 1.0 / std::sqrt(x); }
inline float exp10f(float x) { return std::pow(10.0f, x); }

// CUDA's min and max for every pair of arithmetic types: the wider or unsigned type wins, as in
// its overloads, and floats go through fmin / fmax (a NaN loses to a number). fminf, fmaxf, expf,
// exp2f and the rest of the math library come from the C library.
template <class A, class B>
  requires(std::is_arithmetic_v<A> && std::is_arithmetic_v<B>)
inline std::common_type_t<A, B> min(A a, B b) {
  using C = std::common_type_t<A, B>;
  if constexpr (std::is_floating_point_v<C>) return std::fmin(C(a), C(b));
  else return C(b) < C(a) ? C(b) : C(a);
}
template <class A, class B>
  requires(std::is_arithmetic_v<A> && std::is_arithmetic_v<B>)
inline std::common_type_t<A, B> max(A a, B b) {
  using C = std::common_type_t<A, B>;
  if constexpr (std::is_floating_point_v<C>) return std::fmax(C(a), C(b));
  else return C(a) < C(b) ? C(b) : C(a);
}
