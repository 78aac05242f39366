// The entry points of the compiler's ThreadSanitizer instrumentation, which the emulated kernels
// are compiled with (CMakeLists.txt here): every load and store of a kernel calls one, and those in
// shared memory go to the race detector (shim/emu_races.h). There is no ThreadSanitizer runtime in
// the program; these functions are the whole of it, and this file is compiled without the
// instrumentation.
#include <dlfcn.h>

#include <cstdio>
#include <string>

#include "emu_core.h"

namespace emu::race {
namespace {

// The file and line at `pc`, from the program's line tables (addr2line), or "".
std::string source_line(const void* pc) {
  Dl_info info{};
  if (!::dladdr(pc, &info) || !info.dli_fname) return "";
  char command[4096];
  const auto offset = reinterpret_cast<uintptr_t>(pc) - reinterpret_cast<uintptr_t>(info.dli_fbase) - 1;
  std::snprintf(command, sizeof command, "addr2line -e '%s' 0x%zx 2>/dev/null", info.dli_fname, size_t(offset));
  std::string text;
  if (FILE* f = ::popen(command, "r")) {
    char buf[4096];
    if (std::fgets(buf, sizeof buf, f)) text.assign(buf, std::strcspn(buf, "\n"));
    ::pclose(f);
  }
  return text.find("??") == 0 ? "" : text;
}

std::string thread_name(unsigned tid) {
  const dim3 b = st().block_dim;
  return "thread (" + std::to_string(tid % b.x) + ", " + std::to_string(tid / b.x % b.y) + ", " +
         std::to_string(tid / (b.x * b.y)) + ")";
}

// `where` names the kernel's line when the shim reports its own access, else `pc` leads to it.
[[noreturn]] void report(const Conflict& c, const void* p, const void* pc, const std::source_location* where) {
  const State& s = st();
  const auto* byte = static_cast<const unsigned char*>(p) + (c.offset - detector.offset_of(p));
  char byte_name[160];
  if (byte >= s.dynamic && byte < s.dynamic + s.dynamic_bytes)
    std::snprintf(byte_name, sizeof byte_name, "byte %zu of dynamic shared memory (%p)", size_t(byte - s.dynamic),
                  static_cast<const void*>(byte));
  else
    std::snprintf(byte_name, sizeof byte_name, "a __shared__ array's byte at %p", static_cast<const void*>(byte));
  const std::string line =
      where ? std::string(where->file_name()) + ":" + std::to_string(where->line()) : source_line(pc);
  die("a race in shared memory: %s %s %s, which %s %s with no barrier between them (__syncthreads, or "
      "__syncwarp between lanes of one warp)%s%s",
      thread_name(unsigned(s.current)).c_str(), c.write ? "writes" : "reads", byte_name,
      thread_name(c.other).c_str(), c.other_wrote ? "wrote" : "read", line.empty() ? "" : "; at ", line.c_str());
}

inline void check(const void* p, size_t bytes, bool write, const void* pc,
                  const std::source_location* where = nullptr) {
  const size_t offset = detector.offset_of(p);
  if (__builtin_expect(!detector.watches(offset), 1)) return;  // not shared memory: nearly every access
  const State& s = st();
  if (!s.inside || s.current < 0) return;
  Conflict c{};
  if (!detector.access(offset, bytes, unsigned(s.current), write, &c)) report(c, p, pc, where);
}

}  // namespace

void read(const void* p, size_t bytes, const std::source_location& where) { check(p, bytes, false, nullptr, &where); }
void write(const void* p, size_t bytes, const std::source_location& where) { check(p, bytes, true, nullptr, &where); }

}  // namespace emu::race

#define EMU_PC __builtin_return_address(0)
extern "C" {
// Loads and stores of 1 to 16 bytes, aligned or not.
#define EMU_ACCESS_HOOKS(n)                                                                          \
  void __tsan_read##n(void* p) { emu::race::check(p, n, false, EMU_PC); }                            \
  void __tsan_write##n(void* p) { emu::race::check(p, n, true, EMU_PC); }                            \
  void __tsan_unaligned_read##n(void* p) { emu::race::check(p, n, false, EMU_PC); }                  \
  void __tsan_unaligned_write##n(void* p) { emu::race::check(p, n, true, EMU_PC); }
EMU_ACCESS_HOOKS(1)
EMU_ACCESS_HOOKS(2)
EMU_ACCESS_HOOKS(4)
EMU_ACCESS_HOOKS(8)
EMU_ACCESS_HOOKS(16)
#undef EMU_ACCESS_HOOKS
void __tsan_read_range(void* p, unsigned long n) { emu::race::check(p, n, false, EMU_PC); }
void __tsan_write_range(void* p, unsigned long n) { emu::race::check(p, n, true, EMU_PC); }

// Copies and fills the compiler hands to the runtime (Clang's instrumentation does).
void* __tsan_memcpy(void* d, const void* s, size_t n) {
  emu::race::check(s, n, false, EMU_PC);
  emu::race::check(d, n, true, EMU_PC);
  return std::memcpy(d, s, n);
}
void* __tsan_memmove(void* d, const void* s, size_t n) {
  emu::race::check(s, n, false, EMU_PC);
  emu::race::check(d, n, true, EMU_PC);
  return std::memmove(d, s, n);
}
void* __tsan_memset(void* d, int v, size_t n) {
  emu::race::check(d, n, true, EMU_PC);
  return std::memset(d, v, n);
}

// What the detector needs no record of: the runtime's start, calls and returns, virtual tables.
void __tsan_init() {}
void __tsan_func_entry(void*) {}
void __tsan_func_exit() {}
void __tsan_vptr_update(void**, void*) {}
void __tsan_vptr_read(void**) {}

// Atomic operations of the host code the kernels' files include (a reference count, a guard):
// performed as asked, sequentially consistent. Atomics in shared memory are CUDA's atomic*
// functions, which the shim keeps out of the instrumentation.
#define EMU_ATOMIC_HOOKS(bits, T)                                                                          \
  T __tsan_atomic##bits##_load(const volatile T* a, int) { return __atomic_load_n(a, __ATOMIC_SEQ_CST); } \
  void __tsan_atomic##bits##_store(volatile T* a, T v, int) { __atomic_store_n(a, v, __ATOMIC_SEQ_CST); } \
  T __tsan_atomic##bits##_exchange(volatile T* a, T v, int) {                                             \
    return __atomic_exchange_n(a, v, __ATOMIC_SEQ_CST);                                                    \
  }                                                                                                        \
  T __tsan_atomic##bits##_fetch_add(volatile T* a, T v, int) { return __atomic_fetch_add(a, v, __ATOMIC_SEQ_CST); } \
  T __tsan_atomic##bits##_fetch_sub(volatile T* a, T v, int) { return __atomic_fetch_sub(a, v, __ATOMIC_SEQ_CST); } \
  T __tsan_atomic##bits##_fetch_and(volatile T* a, T v, int) { return __atomic_fetch_and(a, v, __ATOMIC_SEQ_CST); } \
  T __tsan_atomic##bits##_fetch_or(volatile T* a, T v, int) { return __atomic_fetch_or(a, v, __ATOMIC_SEQ_CST); }   \
  T __tsan_atomic##bits##_fetch_xor(volatile T* a, T v, int) { return __atomic_fetch_xor(a, v, __ATOMIC_SEQ_CST); } \
  T __tsan_atomic##bits##_fetch_nand(volatile T* a, T v, int) {                                           \
    return __atomic_fetch_nand(a, v, __ATOMIC_SEQ_CST);                                                    \
  }                                                                                                        \
  int __tsan_atomic##bits##_compare_exchange_strong(volatile T* a, T* c, T v, int, int) {                 \
    return __atomic_compare_exchange_n(a, c, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);                \
  }                                                                                                        \
  int __tsan_atomic##bits##_compare_exchange_weak(volatile T* a, T* c, T v, int, int) {                   \
    return __atomic_compare_exchange_n(a, c, v, true, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);                 \
  }                                                                                                        \
  T __tsan_atomic##bits##_compare_exchange_val(volatile T* a, T c, T v, int, int) {                       \
    __atomic_compare_exchange_n(a, &c, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);                      \
    return c;                                                                                              \
  }
EMU_ATOMIC_HOOKS(8, uint8_t)
EMU_ATOMIC_HOOKS(16, uint16_t)
EMU_ATOMIC_HOOKS(32, uint32_t)
EMU_ATOMIC_HOOKS(64, uint64_t)
#undef EMU_ATOMIC_HOOKS
void __tsan_atomic_thread_fence(int) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
void __tsan_atomic_signal_fence(int) { __atomic_signal_fence(__ATOMIC_SEQ_CST); }
}
