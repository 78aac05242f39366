// Tensor-core building blocks of the attention kernels (cuda/attention.cu): the PTX instructions
// they use, and warp-level products of 16-row tiles built on them.
//
// One warp multiplies with `mma.sync.aligned.m16n8k16`: D[16 x 8] = A[16 x 16] B[16 x 8] + C, A and
// B 16-bit (bf16 or f16), C and D f32. Each lane holds pieces of every operand in registers, in the
// layouts of the PTX ISA ("Matrix Fragments for mma.m16n8k16"). With g = lane / 4 (the group) and
// t = lane % 4 (the thread in the group):
//
//   A, 4 registers of 2 elements:  a[0] = A[g][2t, 2t+1]      a[1] = A[g+8][2t, 2t+1]
//                                  a[2] = A[g][2t+8, 2t+9]    a[3] = A[g+8][2t+8, 2t+9]
//   B, 2 registers of 2 elements:  b[0] = B[2t, 2t+1][g]      b[1] = B[2t+8, 2t+9][g]
//   C and D, 4 floats:             c[0], c[1] = C[g][2t, 2t+1]    c[2], c[3] = C[g+8][2t, 2t+1]
//
// (the lower-numbered element of a pair in the register's low 16 bits). So an accumulator's two n8
// tiles side by side hold, lane for lane, the A operand of a k16 step of a following product: an
// attention kernel turns its f32 scores into the 16-bit A operand of P V without leaving registers
// (to_a below), as FlashAttention-2 does.
//
// Operands come from shared memory through `ldmatrix.x4`: lanes 8i .. 8i+7 give the row addresses
// of 8x8 matrix i (8 rows of 16 bytes), and lane l receives in register i the elements (l / 4,
// 2 (l % 4)) and (l / 4, 2 (l % 4) + 1) of matrix i, or with `.trans` the elements (2 (l % 4), l / 4)
// and (2 (l % 4) + 1, l / 4): the fragment of the matrix transposed. Tiles in shared memory are rows
// of 16-bit elements `stride` apart, stride = width + 8: the 16-byte pad puts the 8 rows one
// ldmatrix reads in 8 different groups of 4 banks, so the reads have no bank conflicts.
//
// Copies into shared memory are `cp.async` (16 bytes, or 4, per thread, zero-filled outside the
// tensor), committed in groups and waited for with `cp.async.wait_group`, so the next tile loads
// while the current one is multiplied.
//
// The CUDA emulator (cuda/emulator) has no tensor cores: its shim, shim/mma_ptx.h, implements the
// same functions as warp-collective C++ (each lane's registers gathered through a warp barrier,
// multiplied in f32, scattered back; cp.async copies deferred until their group is waited for), so
// the indexing of the kernels is tested without a GPU exactly as the hardware would read it.
#pragma once

#include <cstdint>

#include "cuda/device_common.cuh"

#if __has_include(<emu_core.h>)  // the emulator's shim directory is on the include path
#include <mma_ptx.h>
#else
namespace lathe::cuda {

// d += a b on one m16n8k16 tile; T = bf16_t or f16_t.
template <class T>
__device__ __forceinline__ void mma_16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  static_assert(std::is_same_v<T, bf16_t> || std::is_same_v<T, f16_t>, "mma_16816 multiplies bf16 or f16");
  if constexpr (std::is_same_v<T, bf16_t>) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

__device__ __forceinline__ uint32_t shared_address(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// Four 8x8 matrices of 16-bit elements; `row` is this lane's row address (see above).
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(shared_address(row)));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const void* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(shared_address(row)));
}

// Two f32 values rounded to nearest even into one register of 16-bit T, lo in the low half.
template <class T>
__device__ __forceinline__ uint32_t pack_rn(float lo, float hi) {
  uint32_t r;
  if constexpr (std::is_same_v<T, bf16_t>) asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
  else asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}

// Copies 16 bytes (or 4) from global to shared memory asynchronously; with `fill` false nothing is
// read and the destination gets zeros (src must still be a valid address).
__device__ __forceinline__ void cp_async_16(void* dst, const void* src, bool fill) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(shared_address(dst)), "l"(src),
               "r"(fill ? 16 : 0));
}
__device__ __forceinline__ void cp_async_4(void* dst, const void* src, bool fill) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(shared_address(dst)), "l"(src),
               "r"(fill ? 4 : 0));
}
// Closes the group of this thread's copies issued since the last commit.
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
// Waits until at most N of this thread's committed groups are still in flight.
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

}  // namespace lathe::cuda
#endif

namespace lathe::cuda {

// ---- warp-level products of 16-row tiles, from the primitives above ----

// The A operand of a[16 x 16 KSTEPS] from a row-major shared tile (its first row; rows `stride`
// apart): lanes 0-15 give rows 0-15 at column 16 ks, lanes 16-31 the same rows at 16 ks + 8.
template <int KSTEPS, class T>
__device__ __forceinline__ void load_a(uint32_t (&a)[KSTEPS][4], const T* tile, int stride) {
  const int lane = threadIdx.x & 31;
  const T* row = tile + (lane & 15) * stride + (lane >> 4) * 8;
#pragma unroll
  for (int ks = 0; ks < KSTEPS; ++ks) ldmatrix_x4(a[ks], row + ks * 16);
}

// The A operand of a[16 x 16 KSTEPS] from a shared tile holding A transposed (its rows are A's
// columns, `stride` apart: dS^T's rows for dS K), through the transposing ldmatrix: matrix i is the
// tile's rows 16 ks + 8 (i / 2) .. + 7 at column 8 (i % 2), which, transposed, is register i of an A
// fragment (the layouts above). K-steps from `k_limit` on (rounded up to 16) are not loaded.
template <int KSTEPS, class T>
__device__ __forceinline__ void load_a_trans(uint32_t (&a)[KSTEPS][4], const T* tile_t, int stride,
                                             int k_limit = 16 * KSTEPS) {
  const int lane = threadIdx.x & 31;
  const T* row = tile_t + ((lane & 7) + ((lane >> 4) << 3)) * stride + ((lane >> 3) & 1) * 8;
#pragma unroll
  for (int ks = 0; ks < KSTEPS; ++ks) {
    if (ks * 16 >= k_limit) break;
    ldmatrix_x4_trans(a[ks], row + ks * 16 * stride);
  }
}

// Stores an A operand a[16 x 16 KSTEPS] into a row-major shared tile (its first row; rows `stride`
// apart): the inverse of load_a, one 4-byte word (two elements) per register.
template <int KSTEPS, class T>
__device__ __forceinline__ void store_a(T* tile, int stride, const uint32_t (&a)[KSTEPS][4]) {
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int ks = 0; ks < KSTEPS; ++ks)
#pragma unroll
    for (int i = 0; i < 4; ++i)
      *reinterpret_cast<uint32_t*>(tile + (g + 8 * (i & 1)) * stride + 16 * ks + 8 * (i >> 1) + 2 * t) = a[ks][i];
}

// c[mt][16 x N] += a[mt][16 x K] bt^T for MT 16-row tiles of a warp (its rows 16 mt on), bt a shared
// tile of N rows of K elements (B stored transposed: K^T for scores from K's rows). One ldmatrix.x4
// gives the B fragments of two n8 tiles: matrices 0 and 1 are rows n .. n+7 at columns k and k+8,
// matrices 2 and 3 rows n+8 .. n+15; each is read once for all MT tiles, so a warp of 32 rows
// reads shared memory half as often per product as one of 16. Columns of c from `n_limit` on are
// left alone (the work a causal mask would discard), rounded up to 16.
template <int N, int K, int MT, class T>
__device__ __forceinline__ void mma_nt(float (&c)[MT][N / 8][4], const uint32_t (&a)[MT][K / 16][4], const T* bt,
                                       int stride, int n_limit = N) {
  const int lane = threadIdx.x & 31;
  const T* row = bt + ((lane & 7) + ((lane >> 4) << 3)) * stride + ((lane >> 3) & 1) * 8;
#pragma unroll
  for (int np = 0; np < N / 16; ++np) {
    if (np * 16 >= n_limit) break;
#pragma unroll
    for (int ks = 0; ks < K / 16; ++ks) {
      uint32_t b[4];
      ldmatrix_x4(b, row + np * 16 * stride + ks * 16);
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        mma_16816<T>(c[mt][2 * np], a[mt][ks], b[0], b[1]);
        mma_16816<T>(c[mt][2 * np + 1], a[mt][ks], b[2], b[3]);
      }
    }
  }
}

// c[mt][16 x N] += a[mt][16 x K] b for MT 16-row tiles, b a shared tile of K rows of N elements
// (row-major: V for P V). The transposing ldmatrix gives the B fragments of two n8 tiles: matrices
// 0 and 1 are rows k .. k+7 and k+8 .. k+15 at column n, matrices 2 and 3 the same rows at column
// n + 8; each is read once for all MT tiles. Rows of b from `k_limit` on are skipped (A is zero
// there), rounded up to 16.
template <int N, int K, int MT, class T>
__device__ __forceinline__ void mma_nn(float (&c)[MT][N / 8][4], const uint32_t (&a)[MT][K / 16][4], const T* b,
                                       int stride, int k_limit = K) {
  const int lane = threadIdx.x & 31;
  const T* row = b + ((lane & 7) + (((lane >> 3) & 1) << 3)) * stride + (lane >> 4) * 8;
#pragma unroll
  for (int ks = 0; ks < K / 16; ++ks) {
    if (ks * 16 >= k_limit) break;
#pragma unroll
    for (int np = 0; np < N / 16; ++np) {
      uint32_t bf[4];
      ldmatrix_x4_trans(bf, row + ks * 16 * stride + np * 16);
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        mma_16816<T>(c[mt][2 * np], a[mt][ks], bf[0], bf[1]);
        mma_16816<T>(c[mt][2 * np + 1], a[mt][ks], bf[2], bf[3]);
      }
    }
  }
}

// The same products for one 16-row tile (c[16 x N], a[16 x K]).
template <int N, int K, class T>
__device__ __forceinline__ void mma_nt(float (&c)[N / 8][4], const uint32_t (&a)[K / 16][4], const T* bt, int stride,
                                       int n_limit = N) {
  mma_nt<N, K, 1>(reinterpret_cast<float(&)[1][N / 8][4]>(c), reinterpret_cast<const uint32_t(&)[1][K / 16][4]>(a),
                  bt, stride, n_limit);
}
template <int N, int K, class T>
__device__ __forceinline__ void mma_nn(float (&c)[N / 8][4], const uint32_t (&a)[K / 16][4], const T* b, int stride,
                                       int k_limit = K) {
  mma_nn<N, K, 1>(reinterpret_cast<float(&)[1][N / 8][4]>(c), reinterpret_cast<const uint32_t(&)[1][K / 16][4]>(a),
                  b, stride, k_limit);
}

// The f32 accumulators of a [16 x K] tile, rounded to T, as the A operand of a product over K:
// n8 tiles 2 ks and 2 ks + 1 become k-step ks (see the layouts above).
template <int K, class T>
__device__ __forceinline__ void to_a(uint32_t (&a)[K / 16][4], const float (&c)[K / 8][4]) {
#pragma unroll
  for (int ks = 0; ks < K / 16; ++ks) {
    a[ks][0] = pack_rn<T>(c[2 * ks][0], c[2 * ks][1]);
    a[ks][1] = pack_rn<T>(c[2 * ks][2], c[2 * ks][3]);
    a[ks][2] = pack_rn<T>(c[2 * ks + 1][0], c[2 * ks + 1][1]);
    a[ks][3] = pack_rn<T>(c[2 * ks + 1][2], c[2 * ks + 1][3]);
  }
}

}  // namespace lathe::cuda
