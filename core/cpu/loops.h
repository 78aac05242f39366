// Strided loops for CPU kernels.
//
// An elementwise kernel sees N operands (the output first) with one shape and per-operand strides.
// `elementwise_loop` merges dims that are contiguous across all operands, then walks the outer
// dims and hands the innermost run to a functor as raw pointers plus inner strides, so the
// functor's loop is a plain `for` the compiler vectorises when every inner stride is 1. Large
// problems are split over OpenMP threads in chunks that depend only on the shape.
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <type_traits>
#include <vector>

#include <omp.h>

#include "core/cpu/cpu_backend.h"
#include "core/tensor.h"

namespace lathe::cpu {

template <size_t N>
struct LoopGeometry {
  Shape shape;                       // coalesced shape (at least 1 dim)
  std::array<Strides, N> strides;    // per operand, in elements, same rank as shape
};

// Merges adjacent dims i-1, i when every operand has stride[i-1] == stride[i] * shape[i].
template <size_t N>
LoopGeometry<N> coalesce(const Shape& shape, const std::array<const Strides*, N>& strides) {
  LoopGeometry<N> g;
  if (shape.empty()) {
    g.shape = {1};
    for (size_t k = 0; k < N; ++k) g.strides[k] = {1};
    return g;
  }
  g.shape = {shape[0]};
  for (size_t k = 0; k < N; ++k) g.strides[k] = {(*strides[k])[0]};
  for (size_t i = 1; i < shape.size(); ++i) {
    if (shape[i] == 1) continue;  // a size-1 dim changes no address
    if (g.shape.back() == 1) {    // nor does the one before it: take this dim's strides
      g.shape.back() = shape[i];
      for (size_t k = 0; k < N; ++k) g.strides[k].back() = (*strides[k])[i];
      continue;
    }
    bool merge = true;
    for (size_t k = 0; k < N; ++k)
      if (g.strides[k].back() != (*strides[k])[i] * shape[i]) merge = false;
    if (merge) {
      g.shape.back() *= shape[i];
      for (size_t k = 0; k < N; ++k) g.strides[k].back() = (*strides[k])[i];
    } else {
      g.shape.push_back(shape[i]);
      for (size_t k = 0; k < N; ++k) g.strides[k].push_back((*strides[k])[i]);
    }
  }
  return g;
}

// Splits [0, n) into one range per thread, as many as n / min_grain rounded up (so small work stays
// on the calling thread), each starting at a multiple of 16 items (for a range of elements, a whole
// AVX-512 vector of f32), and runs fn(begin, end) on each. For work whose items are computed
// independently of one another (maps, rows of a row-wise kernel): where the split falls then never
// changes a result, so it may follow the thread count and keep the threads evenly loaded, which
// parallel_for's fixed chunks do not (3 chunks on 2 threads leave one idle a third of the time).
template <class Fn>
void parallel_split(int64_t n, int64_t min_grain, Fn&& fn) {
  if (n <= 0) return;
  const int64_t grain = std::max<int64_t>(min_grain, 1);
  const int64_t threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  const int64_t parts = std::min(threads, (n + grain - 1) / grain);
  if (parts <= 1) {
    fn(int64_t(0), n);
    return;
  }
  const int64_t len = ((n + parts - 1) / parts + 15) / 16 * 16;
#pragma omp parallel for schedule(static) num_threads(int(parts))
  for (int64_t p = 0; p < parts; ++p)
    if (p * len < n) fn(p * len, std::min(n, (p + 1) * len));
}

// Calls fn(ptrs, inner_strides, n) for each innermost run. `bases` are the operands' first
// elements, as char* and element sizes in `elem`.
template <size_t N, class Fn>
void elementwise_loop(const Shape& shape, const std::array<const Strides*, N>& strides,
                      const std::array<char*, N>& bases, const std::array<int64_t, N>& elem, Fn&& fn) {
  LoopGeometry<N> g = coalesce<N>(shape, strides);
  const int64_t ndim = int64_t(g.shape.size());
  const int64_t inner = g.shape.back();
  int64_t outer = 1;
  for (int64_t d = 0; d + 1 < ndim; ++d) outer *= g.shape[size_t(d)];
  const int64_t total = outer * inner;
  if (total == 0) return;
  std::array<int64_t, N> inner_stride;
  for (size_t k = 0; k < N; ++k) inner_stride[k] = g.strides[k].back();

  // Work item: a block of rows (outer indices) or, with a single long row, a block of columns.
  auto run_rows = [&](int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
    for (int64_t r = r0; r < r1; ++r) {
      std::array<char*, N> p = bases;
      int64_t rem = r;
      for (int64_t d = ndim - 2; d >= 0; --d) {
        int64_t idx = rem % g.shape[size_t(d)];
        rem /= g.shape[size_t(d)];
        for (size_t k = 0; k < N; ++k) p[k] += idx * g.strides[k][size_t(d)] * elem[k];
      }
      for (size_t k = 0; k < N; ++k) p[k] += c0 * inner_stride[k] * elem[k];
      fn(p, inner_stride, c1 - c0);
    }
  };

  // Every element is computed on its own, so the split (by thread count) never changes a result.
  if (outer == 1) {
    parallel_split(inner, kParallelGrain, [&](int64_t c0, int64_t c1) { run_rows(0, 1, c0, c1); });
    return;
  }
  parallel_split(outer, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(inner, 1)),
                 [&](int64_t r0, int64_t r1) { run_rows(r0, r1, 0, inner); });
}

// Splits [0, n) into fixed chunks of `grain` and runs fn(begin, end) over OpenMP. The split
// depends only on n and grain, so per-chunk results combined in order are thread-count invariant.
template <class Fn>
void parallel_for(int64_t n, int64_t grain, Fn&& fn) {
  if (n <= 0) return;
  int64_t chunks = (n + grain - 1) / grain;
  if (chunks == 1) {
    fn(int64_t(0), n);
    return;
  }
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < chunks; ++c) fn(c * grain, std::min(n, (c + 1) * grain));
}

// Load and store through the compute type (f32 for 16-bit floats).
template <class T>
inline typename compute_type<T>::type load(const T* p) {
  return static_cast<typename compute_type<T>::type>(*p);
}
template <class T, class V>
inline void store(T* p, V v) {
  *p = static_cast<T>(v);
}

// ---- 16-bit floats over contiguous runs ----
// Loops over contiguous runs that the compiler vectorises: bf16 -> f32 is a shift of the bits
// (exact, as Eigen's conversion); f32 -> 16 bits is Eigen's conversion (round to nearest even),
// which vectorises by itself on a plain loop (AVX512-BF16 and F16C instructions where the CPU has
// them; measured faster than a hand-written bit rounding here). f16 -> f32 goes through Eigen.
template <class T>
inline constexpr bool is_16bit_float = std::is_same_v<T, bf16> || std::is_same_v<T, f16>;

template <class T>
inline void widen(const T* in, float* out, int64_t n) {
  if constexpr (std::is_same_v<T, bf16>) {
    const uint16_t* u = reinterpret_cast<const uint16_t*>(in);
    for (int64_t k = 0; k < n; ++k) out[k] = std::bit_cast<float>(uint32_t(u[k]) << 16);
  } else {
    for (int64_t k = 0; k < n; ++k) out[k] = static_cast<float>(in[k]);
  }
}

// out[k] = in[k] converted to T (16-bit: rounded once); R is the computed type (float or bool).
template <class T, class R>
inline void narrow(const R* in, T* out, int64_t n) {
  for (int64_t k = 0; k < n; ++k) out[k] = static_cast<T>(in[k]);
}

// Elementwise kernels run a 16-bit op over a contiguous run in blocks of this many elements:
// widen the operands to f32, apply the op to the whole block (a plain f32 loop that vectorises),
// round each result once.
inline constexpr int64_t k16BitBlock = 256;

}  // namespace lathe::cpu
