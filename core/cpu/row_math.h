// Row primitives for the CPU neural-network kernels: max, sum, exp over one contiguous row.
//
// Sums use kLanes independent accumulators combined in a fixed order. That keeps them
// deterministic (the order depends only on the row length, never on threads or alignment) and
// lets the compiler turn the lane loop into vector adds without -ffast-math, which plain
// `s += x[i]` never gets.
//
// glibc's expf does not vectorise without -ffast-math, and softmax and cross-entropy are
// dominated by exp, so f32 uses exp_f32 below: branch-free Cephes-style range reduction that
// vectorises, within 2 ulp of std::exp on normal results. f64 (gradchecks) keeps std::exp.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "core/cpu/cpu_backend.h"
#include "core/dtype.h"

namespace lathe::cpu {

constexpr int64_t kLanes = 16;

// The functions below must inline into the loops that call them: a call stops vectorisation.
#define LATHE_CPU_INLINE inline __attribute__((always_inline))

// exp(x) for f32: 2^n * p(r) with n = round(x / ln 2) and |r| <= ln(2) / 2. Results below
// FLT_MIN flush to 0 (so exp(-inf) is exactly 0, as masked attention needs); above FLT_MAX is inf.
LATHE_CPU_INLINE float exp_f32(float x) {
  constexpr float kLo = -87.33654f;  // ln(FLT_MIN): below it the result would be denormal
  constexpr float kHi = 88.72283f;   // ln(FLT_MAX)
  float xc = x > kLo ? x : kLo;  // NaN maps to kLo here and is restored at the end
  xc = xc < kHi ? xc : kHi;
  // Round to nearest by adding 1.5 * 2^23: std::floor would be a library call without
  // -fno-trapping-math, and a call stops vectorisation.
  constexpr float kRound = 12582912.0f;
  const float n = (xc * 1.44269504088896341f + kRound) - kRound;
  // r = x - n ln2, with ln2 split in two so that n * hi is exact.
  float r = xc - n * 0.693359375f;
  r = r + n * 2.12194440e-4f;
  const float r2 = r * r;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r2 + r + 1.0f;
  // 2^n as two factors 2^h * 2^(n-h): each stays a normal float for every n in [-126, 128].
  const int32_t ni = int32_t(n);
  const int32_t h = ni >> 1;
  float y = p * std::bit_cast<float>((h + 127) << 23) * std::bit_cast<float>((ni - h + 127) << 23);
  y = x < kLo ? 0.0f : y;
  y = x > kHi ? std::numeric_limits<float>::infinity() : y;
  y = x != x ? x : y;
  return y;
}

// tanh(x) for f32, branch-free so that it vectorises (glibc's tanhf is a call into expm1f, and
// GELU's tanh was a quarter of a GPT training step): for |x| < 0.625 Cephes' odd polynomial,
// x + x^3 P(x^2); above, 1 - 2 / (exp(2|x|) + 1) with the sign of x. Within 2 ulp of std::tanh.
LATHE_CPU_INLINE float tanh_f32(float x) {
  const float z = x * x;
  float p = -5.70498872745e-3f;
  p = p * z + 2.06390887954e-2f;
  p = p * z - 5.37397155531e-2f;
  p = p * z + 1.33314422036e-1f;
  p = p * z - 3.33332819422e-1f;
  const float small = x + x * z * p;
  const uint32_t sign = std::bit_cast<uint32_t>(x) & 0x80000000u;
  const float a = std::bit_cast<float>(std::bit_cast<uint32_t>(x) ^ sign);
  const float big = 1.0f - 2.0f / (exp_f32(2.0f * a) + 1.0f);  // exp overflow gives exactly 1
  const float signed_big = std::bit_cast<float>(std::bit_cast<uint32_t>(big) | sign);
  const float signed_small = std::bit_cast<float>(std::bit_cast<uint32_t>(small) | sign);  // tanh(-0) = -0
  return a < 0.625f ? signed_small : signed_big;  // NaN fails the test and stays NaN through `big`
}

template <class C>
inline C exp_c(C x) {
  if constexpr (std::is_same_v<C, float>) return exp_f32(x);
  else return std::exp(x);
}

// The lanes' partial results combined pairwise (lane j with j + 8, then + 4, + 2, + 1): a fixed
// order, in four vector steps where a running total took sixteen dependent scalar steps (on rows
// of a few dozen elements, such as attention's, that chain was a quarter of the row's time). Each
// step is unrolled at compile time: as a loop over the widths it went through memory.
template <int64_t W, class A, class Op>
LATHE_CPU_INLINE void fold_lanes(A* acc, Op op) {
  if constexpr (W >= 1) {
#pragma GCC unroll 16
    for (int64_t j = 0; j < W; ++j) acc[j] = op(acc[j], acc[j + W]);
    fold_lanes<W / 2>(acc, op);
  }
}

template <class A>
LATHE_CPU_INLINE A sum_lanes(A (&acc)[kLanes]) {
  fold_lanes<kLanes / 2>(acc, [](A a, A b) { return a + b; });
  return acc[0];
}

template <class A>
LATHE_CPU_INLINE A max_lanes(A (&acc)[kLanes]) {
  fold_lanes<kLanes / 2>(acc, [](A a, A b) { return b > a ? b : a; });
  return acc[0];
}

// max over x[0, n); NaN anywhere makes the callers' results NaN through exp(x - m) anyway.
// The lanes are one vector here: GCC 12 turns the sums' lane loops below into vector adds, but kept
// this loop's sixteen maxima in scalar registers, a load and a compare per element.
template <class C>
inline C row_max(const C* x, int64_t n) {
  typedef C Lanes __attribute__((vector_size(kLanes * sizeof(C))));
  Lanes acc;
  for (int64_t j = 0; j < kLanes; ++j) acc[j] = -std::numeric_limits<C>::infinity();
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    Lanes v;
    std::memcpy(&v, x + i, sizeof v);
    acc = v > acc ? v : acc;
  }
  C lanes[kLanes];
  std::memcpy(lanes, &acc, sizeof acc);
  C m = max_lanes(lanes);
  for (; i < n; ++i) m = x[i] > m ? x[i] : m;
  return m;
}

// Sum of x[0, n) in the accumulator type A (f64 for row statistics, else C).
template <class A, class C>
inline A row_sum(const C* x, int64_t n) {
  A acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int64_t j = 0; j < kLanes; ++j) acc[j] += A(x[i + j]);
  A s = sum_lanes(acc);
  for (; i < n; ++i) s += A(x[i]);
  return s;
}

// Sum of x[i] * y[i].
template <class A, class C>
inline A row_dot(const C* x, const C* y, int64_t n) {
  A acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int64_t j = 0; j < kLanes; ++j) acc[j] += A(x[i + j]) * A(y[i + j]);
  A s = sum_lanes(acc);
  for (; i < n; ++i) s += A(x[i]) * A(y[i]);
  return s;
}

// Sum of (x[i] - c)^2: the centred second moment for variances.
template <class A, class C>
inline A row_sq_dev(const C* x, A c, int64_t n) {
  A acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int64_t j = 0; j < kLanes; ++j) {
      A d = A(x[i + j]) - c;
      acc[j] += d * d;
    }
  A s = sum_lanes(acc);
  for (; i < n; ++i) {
    A d = A(x[i]) - c;
    s += d * d;
  }
  return s;
}

// Sum of exp(x[i] - m), without storing the exponentials.
template <class C>
inline C row_exp_sum(const C* x, C m, int64_t n) {
  C acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int64_t j = 0; j < kLanes; ++j) acc[j] += exp_c(x[i + j] - m);
  C s = sum_lanes(acc);
  for (; i < n; ++i) s += exp_c(x[i] - m);
  return s;
}

// y[i] = exp(x[i] - m); returns the sum of y. y may alias x.
template <class C>
inline C exp_shifted_sum(const C* x, C m, C* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = exp_c(x[i] - m);
  return row_sum<C>(y, n);
}

// One row seen in the compute type: f32/f64 rows are used in place, 16-bit rows are widened into
// (or narrowed from) a scratch row, so every kernel's math is written once, on f32 or f64.
template <class T>
class WideRow {
 public:
  using C = typename compute_type<T>::type;
  static constexpr bool kInPlace = std::is_same_v<T, C>;

  explicit WideRow(int64_t n) : n_(n) {
    if constexpr (!kInPlace) buf_.resize(size_t(n));
  }
  // The row as C values.
  const C* read(const T* row) {
    if constexpr (kInPlace) {
      return row;
    } else {
      for (int64_t i = 0; i < n_; ++i) buf_[size_t(i)] = static_cast<C>(row[i]);
      return buf_.data();
    }
  }
  // Where to compute an output row; write_back(row) then stores it.
  C* target(T* row) {
    if constexpr (kInPlace) return row;
    else return buf_.data();
  }
  void write_back(T* row) {
    if constexpr (!kInPlace)
      for (int64_t i = 0; i < n_; ++i) row[i] = static_cast<T>(buf_[size_t(i)]);
  }

 private:
  int64_t n_;
  std::vector<C> buf_;
};

// Rows per parallel chunk for row-wise kernels: about kParallelGrain elements, at least one row.
// Depends only on the row length, so chunk boundaries never depend on the thread count.
inline int64_t rows_per_chunk(int64_t row_len) {
  return std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(row_len, 1));
}

}  // namespace lathe::cpu
