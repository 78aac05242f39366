// dst = src^T for a rows x cols block of a strided matrix, on the calling thread:
//
//   dst[c * dst_stride + r] = src[r * src_stride + c]
//
// The matrix product packs x @ w^T's weight this way (core/cpu/matmul.cpp) and the fused attention
// transposes a head's K and V (core/cpu/attention.cpp). Element by element, a transpose
// reads or writes a new cache line for almost every element and ran at about 6 cycles an element;
// with AVX-512 an f32 block goes 16 x 16 at a time through registers (16 loads, 64 shuffles, 16
// stores), and only the edges go element by element.
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace lathe::cpu {

namespace transpose_detail {

#if defined(__AVX512F__)
// GCC 12 reports the "undefined" source operand inside the shuffle intrinsics as uninitialized.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
// The 16 x 16 block at src (rows src_stride apart) into dst (rows dst_stride apart), transposed.
inline void block16(const float* src, int64_t src_stride, float* dst, int64_t dst_stride) {
  __m512 r[16], a[16], b[16];
  for (int i = 0; i < 16; ++i) r[i] = _mm512_loadu_ps(src + i * src_stride);
  // Pairs of rows interleaved within each 128-bit lane: a[2i] = (r[2i]0, r[2i+1]0, r[2i]1, r[2i+1]1).
  for (int i = 0; i < 8; ++i) {
    a[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    a[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  // b[4g + c]: in each 128-bit lane L, rows 4g..4g+3 of column 4L + c.
  for (int g = 0; g < 4; ++g) {
    const __m512d lo0 = _mm512_castps_pd(a[4 * g]), lo1 = _mm512_castps_pd(a[4 * g + 2]);
    const __m512d hi0 = _mm512_castps_pd(a[4 * g + 1]), hi1 = _mm512_castps_pd(a[4 * g + 3]);
    b[4 * g + 0] = _mm512_castpd_ps(_mm512_unpacklo_pd(lo0, lo1));
    b[4 * g + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(lo0, lo1));
    b[4 * g + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(hi0, hi1));
    b[4 * g + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(hi0, hi1));
  }
  // Column 4L + c gathers lane L of b[c], b[4 + c], b[8 + c], b[12 + c].
  for (int c = 0; c < 4; ++c) {
    const __m512 e0 = _mm512_shuffle_f32x4(b[c], b[4 + c], 0x88), e1 = _mm512_shuffle_f32x4(b[c], b[4 + c], 0xdd);
    const __m512 e2 = _mm512_shuffle_f32x4(b[8 + c], b[12 + c], 0x88);
    const __m512 e3 = _mm512_shuffle_f32x4(b[8 + c], b[12 + c], 0xdd);
    _mm512_storeu_ps(dst + (0 + c) * dst_stride, _mm512_shuffle_f32x4(e0, e2, 0x88));
    _mm512_storeu_ps(dst + (4 + c) * dst_stride, _mm512_shuffle_f32x4(e1, e3, 0x88));
    _mm512_storeu_ps(dst + (8 + c) * dst_stride, _mm512_shuffle_f32x4(e0, e2, 0xdd));
    _mm512_storeu_ps(dst + (12 + c) * dst_stride, _mm512_shuffle_f32x4(e1, e3, 0xdd));
  }
}
#pragma GCC diagnostic pop
#endif

}  // namespace transpose_detail

template <class T>
void transpose(const T* src, int64_t src_stride, int64_t rows, int64_t cols, T* dst, int64_t dst_stride) {
  int64_t r_full = 0, c_full = 0;  // the part covered by whole 16 x 16 blocks
#if defined(__AVX512F__)
  if constexpr (std::is_same_v<T, float>) {
    r_full = rows / 16 * 16;
    c_full = cols / 16 * 16;
    for (int64_t r0 = 0; r0 < r_full; r0 += 16)
      for (int64_t c0 = 0; c0 < c_full; c0 += 16)
        transpose_detail::block16(src + r0 * src_stride + c0, src_stride, dst + c0 * dst_stride + r0, dst_stride);
  }
#endif
  // The rest element by element, in 16-row bands so that the rows read stay in cache: the columns
  // past the whole blocks of every row, then the rows past them.
  for (int64_t r0 = 0; r0 < rows; r0 += 16) {
    const int64_t r1 = std::min(rows, r0 + 16), c_begin = r0 < r_full ? c_full : 0;
    for (int64_t c = c_begin; c < cols; ++c)
      for (int64_t r = r0; r < r1; ++r) dst[c * dst_stride + r] = src[r * src_stride + c];
  }
}

}  // namespace lathe::cpu
