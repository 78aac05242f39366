// lathe's f32 matrix product kernel, register-tiled, on the calling thread: every f32 product of
// the CPU backend (core/cpu/matmul.cpp cuts products into blocks and calls this per block) and the
// small products of causal attention (core/cpu/attention.cpp).
//
// A tile of kRows rows x up to kVectors vectors of C stays in registers while the inner dim is
// walked once, reading A by broadcasts (so A may be stored either way round, e.g. P or P^T) and B
// in unit-stride rows. Nothing is packed here: the caller lays B out so that its rows are near
// each other in memory. A head's products are tiny (64 queries x 64..T keys x a head size of 32
// or 64), where a BLAS call's packing and dispatch held the fused kernels to 40-65% of the GEMM
// rate.
//
// The causal mask also bounds the work per tile of rows, through `CausalLimit`:
//   cols_to_row  row r needs columns < offset + r + 1 (scores: the keys its query sees)
//   k_to_row     row r's A is zero from inner index offset + r + 1 on (P or dS times V, K)
//   k_from_row   row r's A is zero below inner index r - offset (P^T or dS^T times dO, Q)
// A tile takes the bound of its last (or first) row, so a few products past the diagonal are
// computed (for `cols_to_row`, up to a whole vector); it leaves the columns past that unwritten, and the callers read
// only the entries a query sees. Each element of C is summed in inner-index order whatever the
// shape of the tile it falls in, and a tile's bounds depend on the shape alone, so results never
// depend on the thread count.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <utility>

namespace lathe::cpu {

enum class CausalLimit { none, cols_to_row, k_to_row, k_from_row };

namespace tile_gemm_detail {

// One vector register's worth of floats, at most kVectors of them across a tile, and at most
// kAccumulators accumulator registers in all: 24 of AVX-512's 32 registers (the rest hold B's
// vectors and the broadcast), 12 of AVX2's 16. A narrow product (a head size of 32 is 2 vectors)
// takes more rows per tile, so that each B vector loaded serves more multiply-adds.
#if defined(__AVX512F__)
constexpr int kLanes = 16, kVectors = 4, kAccumulators = 24;
#else
constexpr int kLanes = 8, kVectors = 2, kAccumulators = 12;
#endif
constexpr int kRows = kAccumulators;  // the rows of a one-vector tile
constexpr int64_t rows_per_tile(int64_t vectors) { return kAccumulators / vectors; }
typedef float Vec __attribute__((vector_size(kLanes * sizeof(float))));

// Built without AVX (LATHE_NATIVE=OFF), GCC warns that returning a Vec by value would pass it
// differently from an AVX build; Vecs never cross a library boundary, so the warning is off for
// the code that passes them.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"

inline Vec load(const float* p) {
  Vec v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

inline void store(float* p, Vec v) { std::memcpy(p, &v, sizeof v); }

// C[R x NV*kLanes] (=|+=) alpha * sum over k in [k0, k1) of A[r, k] * B[k, :].
template <int R, int NV>
void tile(const float* a, int64_t a_rs, int64_t a_cs, const float* b, int64_t ldb, int64_t k0, int64_t k1,
          float alpha, bool accumulate, float* c, int64_t ldc) {
  Vec acc[R][NV];
#pragma GCC unroll 24
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j) acc[r][j] = Vec{};
  for (int64_t k = k0; k < k1; ++k) {
    Vec bv[NV];
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j) bv[j] = load(b + k * ldb + j * kLanes);
#pragma GCC unroll 24
    for (int r = 0; r < R; ++r) {
      const float x = a[r * a_rs + k * a_cs];
#pragma GCC unroll 4
      for (int j = 0; j < NV; ++j) acc[r][j] += x * bv[j];
    }
  }
#pragma GCC unroll 24
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j) {
      float* out = c + r * ldc + j * kLanes;
      store(out, accumulate ? acc[r][j] * alpha + load(out) : acc[r][j] * alpha);
    }
}

using TileFn = void (*)(const float*, int64_t, int64_t, const float*, int64_t, int64_t, int64_t, float, bool, float*,
                        int64_t);

// tiles[R - 1][NV - 1] = tile<R, NV> where its accumulators fit in registers, else null.
template <int R, int NV>
constexpr TileFn tile_if_it_fits() {
  if constexpr (R * NV <= kAccumulators) return &tile<R, NV>;
  else return nullptr;
}
template <size_t... I>
constexpr auto make_tiles(std::index_sequence<I...>) {
  return std::array<TileFn, sizeof...(I)>{tile_if_it_fits<int(I / kVectors) + 1, int(I % kVectors) + 1>()...};
}
inline constexpr auto kTiles = make_tiles(std::make_index_sequence<kRows * kVectors>());
#pragma GCC diagnostic pop

}  // namespace tile_gemm_detail

// `cols_to_row` computes each row's columns up to its bound rounded up to a multiple of this (and
// at most n): callers may read that far.
inline constexpr int64_t kTileGemmLanes = tile_gemm_detail::kLanes;

// The height of the row tiles tile_gemm cuts a C of width n into (at most kVectors vectors wide): a
// block of rows that is a whole number of them leaves no short tile, which would load as many B
// vectors for fewer rows.
inline int64_t tile_gemm_rows(int64_t n) {
  using namespace tile_gemm_detail;
  return rows_per_tile(std::clamp<int64_t>((n + kLanes - 1) / kLanes, 1, kVectors));
}

// C[m x n] = alpha * A[m x k] * B[k x n] (+ C when `accumulate`). A's element (i, k) is at
// a[i * a_rs + k * a_cs]; B and C are row-major with unit column stride.
inline void tile_gemm(CausalLimit limit, int64_t offset, int64_t m, int64_t n, int64_t k, float alpha,
                           const float* a, int64_t a_rs, int64_t a_cs, const float* b, int64_t ldb, bool accumulate,
                           float* c, int64_t ldc) {
  using namespace tile_gemm_detail;
  const int64_t tile_rows = tile_gemm_rows(n);
  for (int64_t r0 = 0; r0 < m; r0 += tile_rows) {
    const int64_t rows = std::min(tile_rows, m - r0);
    int64_t cols = n, k0 = 0, k1 = k;
    // Rounded up to whole vectors: the columns a tile computes past its bound cost less than a tail
    // of single columns.
    if (limit == CausalLimit::cols_to_row)
      cols = std::min(n, (std::max<int64_t>(offset + r0 + rows, 0) + kLanes - 1) / kLanes * kLanes);
    if (limit == CausalLimit::k_to_row) k1 = std::clamp<int64_t>(offset + r0 + rows, 0, k);
    if (limit == CausalLimit::k_from_row) k0 = std::clamp<int64_t>(r0 - offset, 0, k);
    const float* ar = a + r0 * a_rs;
    float* cr = c + r0 * ldc;
    int64_t c0 = 0;
    for (; c0 + kLanes <= cols;) {
      const int64_t vectors = std::min<int64_t>({kVectors, (cols - c0) / kLanes, kAccumulators / rows});
      kTiles[size_t((rows - 1) * kVectors + vectors - 1)](ar, a_rs, a_cs, b + c0, ldb, k0, k1, alpha, accumulate,
                                                          cr + c0, ldc);
      c0 += vectors * kLanes;
    }
    // Columns past the last whole vector, one at a time in the same order over k.
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = c0; j < cols; ++j) {
        float s = 0;
        for (int64_t kk = k0; kk < k1; ++kk) s += ar[r * a_rs + kk * a_cs] * b[kk * ldb + j];
        float& out = cr[r * ldc + j];
        out = accumulate ? s * alpha + out : s * alpha;
      }
  }
}

}  // namespace lathe::cpu
