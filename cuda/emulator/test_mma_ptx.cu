// The CUDA emulator's tensor-core shim (cuda/emulator/shim/mma_ptx.h) against plain arithmetic:
// each instruction run by one emulated warp whose lanes fill and read their registers by the PTX
// ISA's fragment layouts, written out here independently of the shim; and the warp-level products
// of cuda/mma.cuh built on it against a plain matrix product. Part of the emulator's own tests
// (lathe_emu_selftest, cuda/emulator/CMakeLists.txt): ctest lists each case as "emu: mma shim: ...".
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "cuda/mma.cuh"

using lathe::cuda::bf16_t;
using lathe::cuda::f16_t;

namespace {

// Small integers: every product and sum below is exact in f32, so the shim must match exactly.
float small_int(int i, int j, int salt) { return float(((i * 7 + j * 3 + salt) % 9) - 4); }

template <class T>
uint16_t bits_of(float v) {
  T h;
  if constexpr (std::is_same_v<T, bf16_t>) h = __float2bfloat16_rn(v);
  else h = __float2half_rn(v);
  uint16_t b;
  std::memcpy(&b, &h, 2);
  return b;
}
template <class T>
uint32_t pair(float lo, float hi) {
  return uint32_t(bits_of<T>(lo)) | (uint32_t(bits_of<T>(hi)) << 16);
}

// One warp (32 emulated threads) runs body(lane).
template <class F>
void one_warp(F body) {
  emu::launch("one_warp", emu::LaunchConfig(dim3(1), dim3(32)), [&] { body(int(threadIdx.x)); });
}

template <class T>
void check_mma() {
  float A[16][16], B[16][8], C[16][8], want[16][8];
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 16; ++j) A[i][j] = small_int(i, j, 1);
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 8; ++j) B[i][j] = small_int(i, j, 5), C[i][j] = small_int(i, j, 2) * 0.5f;
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 8; ++j) {
      double acc = C[i][j];
      for (int k = 0; k < 16; ++k) acc += double(A[i][k]) * B[k][j];
      want[i][j] = float(acc);
    }
  float got[16][8] = {};
  one_warp([&](int lane) {
    const int g = lane / 4, t = lane % 4;
    const uint32_t a[4] = {pair<T>(A[g][2 * t], A[g][2 * t + 1]), pair<T>(A[g + 8][2 * t], A[g + 8][2 * t + 1]),
                           pair<T>(A[g][2 * t + 8], A[g][2 * t + 9]),
                           pair<T>(A[g + 8][2 * t + 8], A[g + 8][2 * t + 9])};
    const uint32_t b0 = pair<T>(B[2 * t][g], B[2 * t + 1][g]), b1 = pair<T>(B[2 * t + 8][g], B[2 * t + 9][g]);
    float d[4] = {C[g][2 * t], C[g][2 * t + 1], C[g + 8][2 * t], C[g + 8][2 * t + 1]};
    lathe::cuda::mma_16816<T>(d, a, b0, b1);
    got[g][2 * t] = d[0], got[g][2 * t + 1] = d[1], got[g + 8][2 * t] = d[2], got[g + 8][2 * t + 1] = d[3];
  });
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 8; ++j) {
      CAPTURE(i);
      CAPTURE(j);
      CHECK(got[i][j] == want[i][j]);
    }
}

}  // namespace

TEST_CASE("mma shim: m16n8k16 in bf16 and f16 is the plain product, lane by lane as the PTX ISA lays it out") {
  check_mma<bf16_t>();
  check_mma<f16_t>();
}

TEST_CASE("mma shim: ldmatrix.x4 and .trans deliver the documented elements") {
  // Four 8x8 matrices of distinct 16-bit values, each row 16 bytes, rows 24 elements apart.
  constexpr int kStride = 24;
  std::vector<uint16_t> smem(4 * 8 * kStride);
  auto at = [&](int m, int r, int c) -> uint16_t& { return smem[size_t((m * 8 + r) * kStride + c)]; };
  for (int m = 0; m < 4; ++m)
    for (int r = 0; r < 8; ++r)
      for (int c = 0; c < 8; ++c) at(m, r, c) = uint16_t(1000 * m + 10 * r + c);
  uint32_t plain[32][4], trans[32][4];
  one_warp([&](int lane) {
    const void* row = &at(lane / 8, lane % 8, 0);
    lathe::cuda::ldmatrix_x4(plain[lane], row);
    lathe::cuda::ldmatrix_x4_trans(trans[lane], row);
  });
  for (int l = 0; l < 32; ++l)
    for (int m = 0; m < 4; ++m) {
      CAPTURE(l);
      CAPTURE(m);
      CHECK(plain[l][m] == (uint32_t(at(m, l / 4, 2 * (l % 4))) | uint32_t(at(m, l / 4, 2 * (l % 4) + 1)) << 16));
      CHECK(trans[l][m] == (uint32_t(at(m, 2 * (l % 4), l / 4)) | uint32_t(at(m, 2 * (l % 4) + 1, l / 4)) << 16));
    }
}

TEST_CASE("mma shim: pack_rn rounds to nearest even, the first value in the low half") {
  // 1 + 2^-8 lies halfway between bf16's 1 and 1 + 2^-7: it rounds to the even one, 1.
  const uint32_t r = lathe::cuda::pack_rn<bf16_t>(1.0f + 1.0f / 256, -2.0f);
  CHECK((r & 0xffffu) == 0x3f80u);
  CHECK((r >> 16) == 0xc000u);
  CHECK(lathe::cuda::pack_rn<f16_t>(1.0f, 0.5f) == (0x3c00u | (0x3800u << 16)));
}

TEST_CASE("mma shim: cp.async copies land when their group is waited for, zeros where not filled, NaN until then") {
  alignas(16) static float src[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  alignas(16) static float dst[12];
  std::vector<float> before_wait, after_first, after_all;
  one_warp([&](int lane) {
    if (lane == 0) {
      for (float& d : dst) d = -1;
      lathe::cuda::cp_async_16(dst, src, true);
      lathe::cuda::cp_async_commit();
      lathe::cuda::cp_async_16(dst + 4, src + 4, true);
      lathe::cuda::cp_async_4(dst + 8, src, false);
      lathe::cuda::cp_async_commit();
      before_wait.assign(dst, dst + 12);
      lathe::cuda::cp_async_wait<1>();
      after_first.assign(dst, dst + 12);
      lathe::cuda::cp_async_wait<0>();
      after_all.assign(dst, dst + 12);
    }
  });
  // Between the issue and the wait a destination's bytes are undefined (a GPU may write them at
  // any moment): the shim makes them NaN, so that a read of them before the wait, or of a stage
  // another warp has begun to refill, shows. Bytes no copy names keep their contents.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  auto same = [](const std::vector<float>& got, const std::vector<float>& want) {
    if (got.size() != want.size()) return false;
    for (size_t i = 0; i < got.size(); ++i)
      if (!(got[i] == want[i] || (std::isnan(got[i]) && std::isnan(want[i])))) return false;
    return true;
  };
  CHECK(same(before_wait, {nan, nan, nan, nan, nan, nan, nan, nan, nan, -1, -1, -1}));
  CHECK(same(after_first, {1, 2, 3, 4, nan, nan, nan, nan, nan, -1, -1, -1}));
  CHECK(same(after_all, {1, 2, 3, 4, 5, 6, 7, 8, 0, -1, -1, -1}));
}

TEST_CASE("mma shim: cuda/mma.cuh's warp products equal the plain product") {
  // c[16 x 32] = a[16 x 32] bt^T (mma_nt, bt [32 x 32]) and e[16 x 32] = to_a(c) b (mma_nn, b
  // [32 x 32]), with the shared tiles padded as the attention kernels pad them.
  constexpr int kStride = 40;
  std::vector<bf16_t> a(16 * kStride), bt(32 * kStride), b(32 * kStride);
  auto set = [](std::vector<bf16_t>& m, int r, int c, float v) {
    m[size_t(r * kStride + c)] = __float2bfloat16_rn(v);
  };
  float A[16][32], BT[32][32], Bm[32][32];
  for (int i = 0; i < 16; ++i)
    for (int k = 0; k < 32; ++k) set(a, i, k, A[i][k] = small_int(i, k, 3));
  for (int n = 0; n < 32; ++n)
    for (int k = 0; k < 32; ++k) {
      set(bt, n, k, BT[n][k] = small_int(n, k, 4));
      set(b, k, n, Bm[k][n] = small_int(k, n, 6));
    }
  float want_c[16][32], want_e[16][32];
  for (int i = 0; i < 16; ++i)
    for (int n = 0; n < 32; ++n) {
      double acc = 0;
      for (int k = 0; k < 32; ++k) acc += double(A[i][k]) * BT[n][k];
      want_c[i][n] = float(acc);  // an integer of at most 512: exact in f32
    }
  for (int i = 0; i < 16; ++i)
    for (int n = 0; n < 32; ++n) {
      double acc = 0;
      // to_a rounds c to bf16 (8 significant bits) on its way into the second product.
      for (int k = 0; k < 32; ++k) acc += double(__bfloat162float(__float2bfloat16_rn(want_c[i][k]))) * Bm[k][n];
      want_e[i][n] = float(acc);
    }
  float got_c[16][32], got_e[16][32];
  one_warp([&](int lane) {
    const int g = lane / 4, t = lane % 4;
    uint32_t af[2][4];
    lathe::cuda::load_a<2>(af, a.data(), kStride);
    float c[4][4] = {};
    lathe::cuda::mma_nt<32, 32>(c, af, bt.data(), kStride);
    uint32_t cf[2][4];
    lathe::cuda::to_a<32, bf16_t>(cf, c);
    float e[4][4] = {};
    lathe::cuda::mma_nn<32, 32>(e, cf, b.data(), kStride);
    for (int nt = 0; nt < 4; ++nt)
      for (int i = 0; i < 4; ++i) {
        const int row = g + 8 * (i / 2), col = nt * 8 + 2 * t + i % 2;
        got_c[row][col] = c[nt][i];
        got_e[row][col] = e[nt][i];
      }
  });
  for (int i = 0; i < 16; ++i)
    for (int n = 0; n < 32; ++n) {
      CAPTURE(i);
      CAPTURE(n);
      CHECK(got_c[i][n] == want_c[i][n]);
      CHECK(got_e[i][n] == want_e[i][n]);  // integers below 2^24: exact
    }
}
