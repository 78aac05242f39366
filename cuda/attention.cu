// Causal attention on CUDA without a [B, H, Tq, Tk] tensor: FlashAttention-2's algorithm, with a
// deterministic backward by default. core/cpu/attention.cpp computes the same on the CPU; the formulas:
//
//   forward   S = scale Q K^T (masked: key j > query position -> -inf), P = softmax(S), O = P V,
//             lse = log sum exp S per query, kept for the backward
//   backward  D = rowsum(dO * O), P = exp(S - lse), dV = P^T dO, dP = dO V^T, dS = P * (dP - D),
//             dQ = scale dS K, dK = scale dS^T Q
//
// Kernels (each block owns one tile of one (batch, head); grid (tiles, H, B)):
//   flash_forward          128 queries (4 warps of 32 rows; 64, warps of 16, at hs 128) against
//                          key tiles of 64: the online softmax keeps per row the running maximum
//                          and sum, in f32, and rescales the f32 output accumulator; key tiles past
//                          the block's last query are never visited, those across the diagonal
//                          are masked.
//   flash_backward_dq      64 queries against their key tiles: recomputes P from lse, dP, dS and
//                          accumulates dQ; also writes D for the next kernel.
//   flash_backward_dkdv    64 keys (4 warps of 16) against the query tiles that see them (from the
//                          diagonal to the end): accumulates dK and dV in registers.
//   attention_decode       few queries (sampling with a KV cache): one block per query, its 128
//                          threads splitting the keys (one key each per round of 128), so a single
//                          query does not leave one warp walking all Tk keys.
//
// The backward has two forms (core/backend.h, AttentionBackward). The split one, the default, is
// the two kernels above and deterministic: every gradient element is summed by one thread in a
// fixed order, no atomics, so a run gives the same bits each time; recomputing S, P and dP per query
// tile for dQ costs three of its seven products (of T^2/2 x hs each). The atomic one is
// FlashAttention-2's: flash_backward_prepare writes D and zeroes an f32 dQ sum,
// flash_backward_dkdv<.., true> also puts each query tile's dS^T in shared memory and adds dS K
// over its 64 keys into the sum with f32 atomics (five products, nothing recomputed), and
// flash_backward_store_dq scales and rounds the sum into dQ. Its atomics add in whatever order the
// blocks finish, so dQ's last bits may change from run to run.
//
// 16-bit inputs (bf16, f16) multiply on tensor cores (mma.m16n8k16 with f32 accumulation,
// cuda/mma.cuh), 16 rows per warp: Q (or dO, K, V) as A fragments in registers, the other operand
// through ldmatrix from shared memory, the scores' f32 accumulators turned into P's (or dS's)
// 16-bit A fragments in registers. Softmax, lse, D and every accumulator are f32; P and dS are
// rounded to the input type as operands of the next product (as PyTorch's flash attention does),
// the output and the gradients once at the end. f32 inputs take the same tiling with f32
// multiply-adds on the CUDA cores (the *_f32 kernels: 128 threads, each 4 rows x 4 columns of a
// 64 x 32 score tile); a TF32 mode for f32 products would swap their products for tensor cores
// (not done: --tf32 reaches cuBLAS's products only).
//
// Tiles move through shared memory with cp.async, double-buffered: the next tile's copy is in
// flight while the current one is multiplied. Rows are padded by 16 bytes, so ldmatrix and the
// f32 kernels' column reads have no bank conflicts. Exponentials are exp2f with scale * log2(e)
// folded into one fused multiply-add per score.
//
// Expected bottleneck (B 16, H 12, T 1024, hs 64, bf16 on an H100; to be profiled): the forward
// and dQ kernels are bound by mma.sync issue and the softmax's exp2 and shuffles between the
// products (FlashAttention-2's regime: Hopper's tensor cores reach about two thirds of their
// wgmma rate through mma.sync). A warp of 16 rows reads its B operands from shared memory at 16
// FLOP per byte, close to shared memory's 128 bytes per clock at that issue rate; the forward's
// warps of 32 rows (two m16 tiles sharing each B fragment) read at 32. The backward's warps keep
// 16 rows: their accumulators (dK and dV, or dQ) and operands held in registers leave no room for
// a second tile. Registers (ptxas for sm_90, no spills), bf16 at hs 64: forward 203 per thread
// (two blocks of 128 threads per SM by registers, FlashAttention-2's tiling of hs 64; 114 and four
// blocks with warps of 16), dQ 164 (three), dK dV 220 (two), the atomic backward's dK dV with dQ
// 241 (two); at hs 128: 166 (warps of 16), 224, 249, 248. Whether the forward's 32-row warps beat
// 16-row ones at half the resident warps is for the GPU to say (kForwardWarpRows below). The tile
// sizes are the template parameters and the k*Config constants below.
//
// Not yet run on a GPU: these kernels are proven only in the CUDA emulator (cuda/emulator) and
// compiled by nvcc for sm_90. On the next GPU, before anything else:
//   1. Correctness: `build/tests/lathe_tests -tc='cuda: causal attention*'` and the op cases
//      (`-tc='op cases*'`); their tolerances were set in the emulator, whose exp2f and products are
//      exact where the GPU's are a few ulp off, so a failure just past them wants a look, not a wider
//      tolerance. `compute-sanitizer --tool racecheck` and `synccheck` on the same cases
//      (tools/gpu_check.sh --sanitize). The emulator sees a missing barrier of a key loop (it runs a
//      warp up to its next __syncthreads before another, and a cp.async destination reads NaN until
//      its wait): tools/emu_barrier_faults.py removes each one and watches these cases fail.
//   2. Speed: tools/gpu_check.sh's `attention` stage runs examples/bench_attention (B 16, H 12,
//      T 1024, D 64, bf16, forward + backward), with the split and the atomic backward, against
//      PyTorch's SDPA: the target is no slower than SDPA. Also bench f32 and D 32 and 128, and T 1 to
//      16 after a long cache (the decode kernel) against the flash kernels at the same shape.
//   3. Profile (ncu) flash_forward<bf16, 64>, flash_backward_dq and flash_backward_dkdv (both forms;
//      the atomic one's f32 atomics into dQ against the split one's recomputation): registers
//      per thread and spills (the hs 128 tiles are the tightest), achieved occupancy, tensor pipe
//      utilisation against shared-memory throughput (the bottleneck guessed above), and bank
//      conflicts on ldmatrix (the padding should leave none). Then tune kKeys / kQueries and the
//      warps per block.
#include "cuda/device_common.cuh"
#include "cuda/mma.cuh"

namespace lathe::cuda {

namespace {

constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;
constexpr int kThreadsPerBlock = 128;  // every attention kernel: 4 warps
constexpr int kWarps = kThreadsPerBlock / 32;
constexpr int kMmaRows = 16 * kWarps;  // rows of a block's own tile in the tensor-core kernels
// At most this many queries take the decode kernel; more take the flash kernels, whose 64-query
// tiles would leave most warps idle below it.
constexpr int64_t kDecodeMaxQueries = 16;

__device__ __forceinline__ float neg_inf() { return -__int_as_float(0x7f800000); }

template <class T>
__device__ __forceinline__ const T* head_of(const HeadsIn& x, int64_t b, int64_t h) {
  return static_cast<const T*>(x.data) + b * x.sb + h * x.sh;
}
template <class T>
__device__ __forceinline__ T* head_of(const HeadsOut& x, int64_t b, int64_t h) {
  return static_cast<T*>(x.data) + b * x.sb + h * x.sh;
}
__device__ __forceinline__ int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

// Rows of shared tiles are the head size padded to 16 more bytes.
template <class T, int D>
constexpr int padded_row() {
  return D + int(16 / sizeof(T));
}

// Copies rows [0, ROWS) of a [T, hs] matrix (`src` its first row, rows `src_stride` apart) into a
// shared tile of ROWS x D elements, rows STRIDE apart, 16 bytes per cp.async; rows from `valid` on
// and columns from hs on are zero-filled, so a ragged tile multiplies as a whole one.
template <class T, int ROWS, int D, int STRIDE>
__device__ __forceinline__ void load_tile(T* dst, const T* src, int64_t src_stride, int64_t valid, int hs) {
  constexpr int kVec = int(16 / sizeof(T)), kChunks = D / kVec;
#pragma unroll
  for (int c = threadIdx.x; c < ROWS * kChunks; c += kThreadsPerBlock) {
    const int r = c / kChunks, col = (c % kChunks) * kVec;
    const bool in = r < valid && col < hs;
    cp_async_16(dst + r * STRIDE + col, in ? src + r * src_stride + col : src, in);
  }
}

// Copies n floats from src (n_valid of them exist) into shared memory, zeros past n_valid.
__device__ __forceinline__ void load_floats(float* dst, const float* src, int n, int64_t n_valid) {
  for (int j = threadIdx.x; j < n; j += kThreadsPerBlock) {
    const bool in = j < n_valid;
    cp_async_4(dst + j, in ? src + j : src, in);
  }
}

// Key tile kt of a head (keys kt BN on; those from Tk on zero-filled) into stage kt % 2 of
// `stages`: the forward and dQ kernels' two stages, each a K tile then a V tile of BN rows, STRIDE
// elements apart.
template <class T, int BN, int D, int STRIDE>
__device__ __forceinline__ void load_key_tile(T* stages, int kt, const T* kh, const HeadsIn& k, const T* vh,
                                              const HeadsIn& v, int64_t Tk, int hs) {
  T* stage = stages + (kt & 1) * 2 * BN * STRIDE;
  const int64_t k0 = int64_t(kt) * BN;
  load_tile<T, BN, D, STRIDE>(stage, kh + k0 * k.st, k.st, Tk - k0, hs);
  load_tile<T, BN, D, STRIDE>(stage + BN * STRIDE, vh + k0 * v.st, v.st, Tk - k0, hs);
}

// Dynamic shared memory over 48 KB has to be allowed per kernel before its launch:
// LATHE_ALLOW_SHARED(bytes, kernel) sets the kernel's limit to its launch's bytes. A macro, so that
// cudaFuncSetAttribute names the kernel as its launch does: the CUDA emulator knows a kernel by
// that spelling (cuda/emulator/README.md). The kernel comes last: its template arguments hold commas.
#define LATHE_ALLOW_SHARED(bytes, ...)                                                                      \
  check_cuda(cudaFuncSetAttribute(__VA_ARGS__, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)), \
             "causal_attention: the shared memory of its kernel")

// =====================================================================================================
// Tensor-core kernels (bf16, f16). A warp owns 16 rows of the block's tile; a lane holds of each
// accumulator rows g = lane / 4 and g + 8, columns 2 (lane % 4) and 2 (lane % 4) + 1 of every n8 tile
// (cuda/mma.cuh).
// =====================================================================================================

// Scores of a warp's 16 query rows against N keys: -inf where the key is in the query's future.
// Row r sits at position `row_pos` + r and column j holds key `key0` + j; masked iff
// j + (key0 - row_pos) > r.
template <int N>
__device__ __forceinline__ void mask_future_keys(float (&sc)[N / 8][4], int key0_minus_row_pos) {
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int nt = 0; nt < N / 8; ++nt)
#pragma unroll
    for (int i = 0; i < 4; ++i)
      if (nt * 8 + 2 * t + (i & 1) + key0_minus_row_pos > g + 8 * (i >> 1)) sc[nt][i] = neg_inf();
}

// The transposed case of the dK dV kernel: rows are keys (row r at position key_pos + r), columns
// queries (column j at position q_pos + j); masked iff r > j + (q_pos - key_pos).
template <int N>
__device__ __forceinline__ void mask_past_queries(float (&sc)[N / 8][4], int q_pos_minus_key_pos) {
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int nt = 0; nt < N / 8; ++nt)
#pragma unroll
    for (int i = 0; i < 4; ++i)
      if (g + 8 * (i >> 1) > nt * 8 + 2 * t + (i & 1) + q_pos_minus_key_pos) sc[nt][i] = neg_inf();
}

// One key tile of the online softmax over a warp's rows g and g + 8 (r = 0, 1): sc holds raw
// scores and becomes P's unnormalised numerators exp2((s - m) c); m is each row's running maximum
// of raw scores, l this lane's part of its running sum, o the output rows, rescaled to the new
// maximum. The first tile of every row holds key 0, which every query sees, so m is finite from
// then on.
template <int N, int D>
__device__ __forceinline__ void online_softmax(float (&sc)[N / 8][4], float (&o)[D / 8][4], float (&m)[2],
                                               float (&l)[2], float c) {
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float mx = m[r];
#pragma unroll
    for (int nt = 0; nt < N / 8; ++nt) mx = fmaxf(mx, fmaxf(sc[nt][2 * r], sc[nt][2 * r + 1]));
    mx = fmaxf(mx, shfl_xor(mx, 1));  // the row's 4 lanes
    mx = fmaxf(mx, shfl_xor(mx, 2));
    const float rescale = exp2f((m[r] - mx) * c);  // 0 on the first tile: m is -inf
    const float shift = mx * c;
    m[r] = mx;
    float sum = 0.f;
#pragma unroll
    for (int nt = 0; nt < N / 8; ++nt)
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        const float p = exp2f(fmaf(sc[nt][2 * r + j], c, -shift));
        sc[nt][2 * r + j] = p;
        sum += p;
      }
    l[r] = l[r] * rescale + sum;
#pragma unroll
    for (int dt = 0; dt < D / 8; ++dt) {
      o[dt][2 * r] *= rescale;
      o[dt][2 * r + 1] *= rescale;
    }
  }
}

// Stores a warp's 16 accumulator rows times `mul` as T into rows `row0` + r (those < `rows`) of a
// [T, hs] matrix.
template <class T, int D>
__device__ __forceinline__ void store_rows(T* dst, int64_t stride, int64_t row0, int64_t rows, int hs,
                                           const float (&acc)[D / 8][4], const float (&mul)[2]) {
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int64_t row = row0 + g + 8 * r;
    if (row >= rows) continue;
    T* out = dst + row * stride;
#pragma unroll
    for (int dt = 0; dt < D / 8; ++dt) {
      const int col = dt * 8 + 2 * t;  // hs is a multiple of 8: a pair is in or out whole
      if (col < hs)
        *reinterpret_cast<uint32_t*>(out + col) = pack_rn<T>(acc[dt][2 * r] * mul[r], acc[dt][2 * r + 1] * mul[r]);
    }
  }
}

// Query tiles are visited longest first (the last tile sees the most keys), so the short ones
// fill the GPU's tail.
__device__ __forceinline__ int64_t query_tile_start(int64_t Tq, int rows) {
  const int64_t tiles = (Tq + rows - 1) / rows;
  return (tiles - 1 - int64_t(blockIdx.x)) * rows;
}

template <class T, int D>
struct MmaConfig {
  static constexpr int kKeys = 64;                   // keys per tile (forward, dQ)
  static constexpr int kQueries = D <= 64 ? 64 : 32;  // queries per tile (dK dV)
  // The forward's query rows per warp: two m16 tiles share each K and V fragment read from shared
  // memory where registers allow (ptxas, sm_90, no spills: 203 a thread at hs 64); one at hs 128,
  // whose accumulators alone would take 256.
  static constexpr int kForwardWarpRows = D <= 64 ? 32 : 16;
  static constexpr int kForwardRows = kWarps * kForwardWarpRows;  // queries per forward block
  static constexpr int kStride = padded_row<T, D>();
  // forward, dQ: two stages of K and V tiles; dQ adds D of its 64 rows
  static constexpr size_t kForwardBytes = 2 * 2 * size_t(kKeys) * kStride * sizeof(T);
  static constexpr size_t kDqBytes = kForwardBytes + kMmaRows * sizeof(float);
  // dK dV: the block's K and V, then two stages of Q, dO, lse and D
  static constexpr size_t kStageBytes = 2 * size_t(kQueries) * kStride * sizeof(T) + 2 * kQueries * sizeof(float);
  static constexpr size_t kDkDvBytes = 2 * size_t(kMmaRows) * kStride * sizeof(T) + 2 * kStageBytes;
  // the atomic backward's dK dV kernel also holds dS^T, the block's keys by a tile's queries
  static constexpr int kDsStride = padded_row<T, kQueries>();
  static constexpr size_t kDkDvDqBytes = kDkDvBytes + size_t(kMmaRows) * kDsStride * sizeof(T);
  static_assert(2 * kKeys >= kMmaRows && 4 * kKeys >= kForwardRows,
                "the stages hold the block's Q tile (and dQ's dO tile) while they are staged");
};

template <class T, int D>
__global__ void __launch_bounds__(kThreadsPerBlock)
    flash_forward(AttnShape s, HeadsIn q, HeadsIn k, HeadsIn v, HeadsOut out, float* lse) {
  using Cfg = MmaConfig<T, D>;
  constexpr int BN = Cfg::kKeys, kStride = Cfg::kStride, kStage = 2 * BN * kStride;
  constexpr int BM = Cfg::kForwardRows, WR = Cfg::kForwardWarpRows, MT = WR / 16;  // a warp's m16 tiles
  extern __shared__ uint4 smem_words[];
  T* smem = reinterpret_cast<T*>(smem_words);
  const int warp = threadIdx.x >> 5;
  const int64_t b = blockIdx.z, h = blockIdx.y, past = s.Tk - s.Tq;
  const int64_t q0 = query_tile_start(s.Tq, BM), q_valid = min64(BM, s.Tq - q0);
  const int hs = int(s.hs);
  const T* kh = head_of<T>(k, b, h);
  const T* vh = head_of<T>(v, b, h);

  // Q passes through the stages' buffers into registers, where it stays.
  load_tile<T, BM, D, kStride>(smem, head_of<T>(q, b, h) + q0 * q.st, q.st, q_valid, hs);
  cp_async_commit();
  cp_async_wait<0>();
  __syncthreads();
  uint32_t qf[MT][D / 16][4];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) load_a<D / 16>(qf[mt], smem + (warp * WR + 16 * mt) * kStride, kStride);
  __syncthreads();

  auto load_keys = [&](int kt) { load_key_tile<T, BN, D, kStride>(smem, kt, kh, k, vh, v, s.Tk, hs); };
  const int64_t row_pos = past + q0 + warp * WR;  // the position of the warp's first query
  const int key_tiles = int((past + q0 + q_valid + BN - 1) / BN);  // up to the block's last query
  const float c = s.scale * kLog2e;
  float o[MT][D / 8][4] = {};
  float m[MT][2], l[MT][2];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) m[mt][0] = m[mt][1] = neg_inf(), l[mt][0] = l[mt][1] = 0.f;

  load_keys(0);
  cp_async_commit();
  for (int kt = 0; kt < key_tiles; ++kt) {
    if (kt + 1 < key_tiles) load_keys(kt + 1);
    cp_async_commit();
    cp_async_wait<1>();
    __syncthreads();
    const T* sk = smem + (kt & 1) * kStage;
    const int64_t k0 = int64_t(kt) * BN;
    const int64_t seen = row_pos + WR - k0;  // keys of the tile the warp's last row sees
    if (seen > 0) {
      const int cols = int(min64(seen, BN));
      float sc[MT][BN / 8][4] = {};
      mma_nt<BN, D, MT>(sc, qf, sk, kStride, cols);
      uint32_t pf[MT][BN / 16][4];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        const int64_t tile_pos = row_pos + 16 * mt;
        if (k0 + BN - 1 > tile_pos) mask_future_keys<BN>(sc[mt], int(k0 - tile_pos));
        online_softmax<BN, D>(sc[mt], o[mt], m[mt], l[mt], c);
        to_a<BN, T>(pf[mt], sc[mt]);
      }
      mma_nn<D, BN, MT>(o, pf, sk + BN * kStride, kStride, cols);
    }
    __syncthreads();  // the stage is refilled next iteration
  }
  cp_async_wait<0>();

  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
    float inv[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      l[mt][r] += shfl_xor(l[mt][r], 1);
      l[mt][r] += shfl_xor(l[mt][r], 2);
      inv[r] = 1.f / l[mt][r];
    }
    const int64_t row0 = q0 + warp * WR + 16 * mt;
    store_rows<T, D>(head_of<T>(out, b, h), out.st, row0, s.Tq, hs, o[mt], inv);
    if ((lane & 3) == 0) {
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int64_t row = row0 + (lane >> 2) + 8 * r;
        if (row < s.Tq) lse[(b * s.H + h) * s.Tq + row] = m[mt][r] * s.scale + logf(l[mt][r]);
      }
    }
  }
}

// rowsum(dO * O) of a warp's 16 rows (row0 + r, those < rows), each row's lanes reading 16 bytes
// at a time and summing in f32 over a fixed shuffle tree; written to `dst[r]` (shared; unless dst is
// null) and to `global` (for the dK dV kernel).
template <class T, int D>
__device__ __forceinline__ void output_rowsums(const T* o, int64_t o_stride, const T* go, int64_t go_stride,
                                               int64_t row0, int64_t rows, int hs, float* dst, float* global) {
  constexpr int kVec = int(16 / sizeof(T)), kLanes = D / kVec, kRowsPerPass = 32 / kLanes;
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int r0 = 0; r0 < 16; r0 += kRowsPerPass) {
    const int r = r0 + lane / kLanes, col = (lane % kLanes) * kVec;
    const int64_t row = row0 + r;
    float acc = 0.f;
    if (row < rows && col < hs) {
      const Pack<T, kVec> a = *reinterpret_cast<const Pack<T, kVec>*>(o + row * o_stride + col);
      const Pack<T, kVec> g = *reinterpret_cast<const Pack<T, kVec>*>(go + row * go_stride + col);
#pragma unroll
      for (int e = 0; e < kVec; ++e) acc = fmaf(float(to_c(a.v[e])), float(to_c(g.v[e])), acc);
    }
#pragma unroll
    for (int mask = kLanes / 2; mask > 0; mask >>= 1) acc += shfl_xor(acc, mask);
    if (lane % kLanes == 0) {
      if (dst) dst[r] = acc;
      if (row < rows) global[row] = acc;
    }
  }
}

template <class T, int D>
__global__ void __launch_bounds__(kThreadsPerBlock)
    flash_backward_dq(AttnShape s, HeadsIn q, HeadsIn k, HeadsIn v, HeadsIn out, const float* lse, HeadsIn gout,
                      HeadsOut gq, float* rowsums) {
  using Cfg = MmaConfig<T, D>;
  constexpr int BN = Cfg::kKeys, kStride = Cfg::kStride, kStage = 2 * BN * kStride;
  extern __shared__ uint4 smem_words[];
  T* smem = reinterpret_cast<T*>(smem_words);
  float* s_rowsum = reinterpret_cast<float*>(smem + 2 * kStage);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t b = blockIdx.z, h = blockIdx.y, bh = b * s.H + h, past = s.Tk - s.Tq;
  const int64_t q0 = query_tile_start(s.Tq, kMmaRows), q_valid = min64(kMmaRows, s.Tq - q0);
  const int hs = int(s.hs);
  const T* kh = head_of<T>(k, b, h);
  const T* vh = head_of<T>(v, b, h);
  const T* goh = head_of<T>(gout, b, h);

  // Q and dO pass through the two stages' buffers into registers, where they stay.
  load_tile<T, kMmaRows, D, kStride>(smem, head_of<T>(q, b, h) + q0 * q.st, q.st, q_valid, hs);
  load_tile<T, kMmaRows, D, kStride>(smem + kStage, goh + q0 * gout.st, gout.st, q_valid, hs);
  cp_async_commit();
  output_rowsums<T, D>(head_of<T>(out, b, h) + q0 * out.st, out.st, goh + q0 * gout.st, gout.st, warp * 16,
                       q_valid, hs, s_rowsum + warp * 16, rowsums + bh * s.Tq + q0);
  cp_async_wait<0>();
  __syncthreads();
  uint32_t qf[D / 16][4], gof[D / 16][4];
  load_a<D / 16>(qf, smem + warp * 16 * kStride, kStride);
  load_a<D / 16>(gof, smem + kStage + warp * 16 * kStride, kStride);
  const float c = s.scale * kLog2e;
  float lse2[2], rowsum[2];  // lse in base-2 units, and D, of rows g and g + 8
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int row = warp * 16 + (lane >> 2) + 8 * r;
    lse2[r] = row < q_valid ? lse[bh * s.Tq + q0 + row] * kLog2e : 0.f;
    rowsum[r] = s_rowsum[row];
  }
  __syncthreads();

  auto load_keys = [&](int kt) { load_key_tile<T, BN, D, kStride>(smem, kt, kh, k, vh, v, s.Tk, hs); };
  const int64_t row_pos = past + q0 + warp * 16;
  const int key_tiles = int((past + q0 + q_valid + BN - 1) / BN);
  float dq[D / 8][4] = {};

  load_keys(0);
  cp_async_commit();
  for (int kt = 0; kt < key_tiles; ++kt) {
    if (kt + 1 < key_tiles) load_keys(kt + 1);
    cp_async_commit();
    cp_async_wait<1>();
    __syncthreads();
    const T* sk = smem + (kt & 1) * kStage;
    const T* sv = sk + BN * kStride;
    const int64_t k0 = int64_t(kt) * BN;
    const int64_t seen = row_pos + 16 - k0;
    if (seen > 0) {
      const int cols = int(min64(seen, BN));
      float p[BN / 8][4] = {};
      mma_nt<BN, D>(p, qf, sk, kStride, cols);  // S
      if (k0 + BN - 1 > row_pos) mask_future_keys<BN>(p, int(k0 - row_pos));
#pragma unroll
      for (int nt = 0; nt < BN / 8; ++nt)
#pragma unroll
        for (int i = 0; i < 4; ++i) p[nt][i] = exp2f(fmaf(p[nt][i], c, -lse2[i >> 1]));
      float ds[BN / 8][4] = {};
      mma_nt<BN, D>(ds, gof, sv, kStride, cols);  // dP = dO V^T
#pragma unroll
      for (int nt = 0; nt < BN / 8; ++nt)
#pragma unroll
        for (int i = 0; i < 4; ++i) ds[nt][i] = p[nt][i] * (ds[nt][i] - rowsum[i >> 1]);
      uint32_t dsf[BN / 16][4];
      to_a<BN, T>(dsf, ds);
      mma_nn<D, BN>(dq, dsf, sk, kStride, cols);  // dQ += dS K
    }
    __syncthreads();
  }
  cp_async_wait<0>();
  const float scale[2] = {s.scale, s.scale};
  store_rows<T, D>(head_of<T>(gq, b, h), gq.st, q0 + warp * 16, s.Tq, hs, dq, scale);
}

// The atomic backward's share of dQ from one query tile in the dK dV kernel: dQ[BM queries x D] +=
// dS K over the block's 64 keys, added into dq_sum's rows (f32, hs apart; rows from `rows` on are
// past Tq) with atomics. dS^T [64 keys x BM queries] is in shared memory as T (every warp's 16 keys,
// rows `ds_stride` apart), K [64 keys x D] too; keys from `key_limit` on see none of the tile's
// queries (their warps skipped the tile and left no dS^T). Warp w takes 16 queries from
// 16 (w mod BM / 16) and D BM / 64 of the columns, in passes of 32 that keep its accumulators few.
template <class T, int D, int BM>
__device__ __forceinline__ void add_dq_share(float* dq_rows, int64_t rows, int hs, const T* ds_t, int ds_stride,
                                             const T* sk, int k_stride, int key_limit) {
  constexpr int kRowGroups = BM / 16, kCols = D / (kWarps / kRowGroups), kPass = kCols < 32 ? kCols : 32;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int row0 = (warp % kRowGroups) * 16, col0 = (warp / kRowGroups) * kCols;
  uint32_t a[kMmaRows / 16][4];
  load_a_trans<kMmaRows / 16>(a, ds_t + row0, ds_stride, key_limit);  // dS [16 queries x 64 keys]
#pragma unroll
  for (int c0 = col0; c0 < col0 + kCols; c0 += kPass) {
    float acc[kPass / 8][4] = {};
    mma_nn<kPass, kMmaRows>(acc, a, sk + c0, k_stride, key_limit);
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int64_t row = row0 + g + 8 * r;
      if (row >= rows) continue;
#pragma unroll
      for (int nt = 0; nt < kPass / 8; ++nt) {
        const int col = c0 + nt * 8 + 2 * t;  // hs is a multiple of 8: a pair is in or out whole
        if (col >= hs) continue;
        atomicAdd(dq_rows + row * hs + col, acc[nt][2 * r]);
        atomicAdd(dq_rows + row * hs + col + 1, acc[nt][2 * r + 1]);
      }
    }
  }
}

// kSumsDq: FlashAttention-2's one backward kernel, which also adds each query tile's share of dQ
// into dq_sum (add_dq_share); else dq_sum is unused and flash_backward_dq computes dQ.
template <class T, int D, bool kSumsDq>
__global__ void __launch_bounds__(kThreadsPerBlock)
    flash_backward_dkdv(AttnShape s, HeadsIn q, HeadsIn k, HeadsIn v, const float* lse, HeadsIn gout, HeadsOut gk,
                        HeadsOut gv, const float* rowsums, float* dq_sum) {
  using Cfg = MmaConfig<T, D>;
  constexpr int BM = Cfg::kQueries, kStride = Cfg::kStride;
  extern __shared__ uint4 smem_words[];
  T* sK = reinterpret_cast<T*>(smem_words);
  T* sV = sK + kMmaRows * kStride;
  unsigned char* stages = reinterpret_cast<unsigned char*>(sV + kMmaRows * kStride);
  T* sDsT = reinterpret_cast<T*>(stages + 2 * Cfg::kStageBytes);  // kSumsDq: dS^T of the current tile
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, t = lane & 3;
  const int64_t b = blockIdx.z, h = blockIdx.y, bh = b * s.H + h, past = s.Tk - s.Tq;
  const int64_t k0 = int64_t(blockIdx.x) * kMmaRows;  // the block's keys: the first tiles see the most queries
  const int hs = int(s.hs);
  const T* qh = head_of<T>(q, b, h);
  const T* goh = head_of<T>(gout, b, h);

  load_tile<T, kMmaRows, D, kStride>(sK, head_of<T>(k, b, h) + k0 * k.st, k.st, s.Tk - k0, hs);
  load_tile<T, kMmaRows, D, kStride>(sV, head_of<T>(v, b, h) + k0 * v.st, v.st, s.Tk - k0, hs);
  cp_async_commit();

  // Stage layout: Q [BM rows], dO [BM rows], lse [BM], D [BM].
  auto stage_q = [&](int64_t qt) { return reinterpret_cast<T*>(stages + (qt & 1) * Cfg::kStageBytes); };
  auto load_queries = [&](int64_t qt) {
    T* sq = stage_q(qt);
    T* sgo = sq + BM * kStride;
    float* sl = reinterpret_cast<float*>(sgo + BM * kStride);
    const int64_t q_begin = qt * BM, valid = s.Tq - q_begin;
    load_tile<T, BM, D, kStride>(sq, qh + q_begin * q.st, q.st, valid, hs);
    load_tile<T, BM, D, kStride>(sgo, goh + q_begin * gout.st, gout.st, valid, hs);
    load_floats(sl, lse + bh * s.Tq + q_begin, BM, valid);
    load_floats(sl + BM, rowsums + bh * s.Tq + q_begin, BM, valid);
  };
  // Queries at positions >= k0 see the block's keys; invalid rows past Tq are zeros (their dO is
  // zero, so they add nothing).
  const int64_t first_query = k0 > past ? k0 - past : 0;
  const int64_t q_tiles = (s.Tq + BM - 1) / BM;
  const int64_t key_pos = k0 + warp * 16;  // the position of the warp's first key
  const float c = s.scale * kLog2e;
  float dk[D / 8][4] = {}, dv[D / 8][4] = {};

  load_queries(first_query / BM);
  cp_async_commit();
  for (int64_t qt = first_query / BM; qt < q_tiles; ++qt) {
    if (qt + 1 < q_tiles) load_queries(qt + 1);
    cp_async_commit();
    cp_async_wait<1>();
    __syncthreads();
    const T* sq = stage_q(qt);
    const T* sgo = sq + BM * kStride;
    const float* sl = reinterpret_cast<const float*>(sgo + BM * kStride);
    const float* sd = sl + BM;
    const int64_t q_pos = past + qt * BM;        // the position of the tile's first query
    if (q_pos + BM - 1 >= key_pos) {             // some query of the tile sees the warp's first key
      uint32_t kf[D / 16][4];
      load_a<D / 16>(kf, sK + warp * 16 * kStride, kStride);
      float p[BM / 8][4] = {};
      mma_nt<BM, D>(p, kf, sq, kStride);  // S^T = K Q^T
      if (q_pos < key_pos + 15) mask_past_queries<BM>(p, int(q_pos - key_pos));
#pragma unroll
      for (int nt = 0; nt < BM / 8; ++nt)
#pragma unroll
        for (int i = 0; i < 4; ++i) p[nt][i] = exp2f(fmaf(p[nt][i], c, -sl[nt * 8 + 2 * t + (i & 1)] * kLog2e));
      uint32_t pf[BM / 16][4];
      to_a<BM, T>(pf, p);
      mma_nn<D, BM>(dv, pf, sgo, kStride);  // dV += P^T dO
      uint32_t vf[D / 16][4];
      load_a<D / 16>(vf, sV + warp * 16 * kStride, kStride);
      float ds[BM / 8][4] = {};
      mma_nt<BM, D>(ds, vf, sgo, kStride);  // dP^T = V dO^T
#pragma unroll
      for (int nt = 0; nt < BM / 8; ++nt)
#pragma unroll
        for (int i = 0; i < 4; ++i) ds[nt][i] = p[nt][i] * (ds[nt][i] - sd[nt * 8 + 2 * t + (i & 1)]);
      uint32_t dsf[BM / 16][4];
      to_a<BM, T>(dsf, ds);
      mma_nn<D, BM>(dk, dsf, sq, kStride);  // dK += dS^T Q
      if constexpr (kSumsDq) store_a<BM / 16>(sDsT + warp * 16 * Cfg::kDsStride, Cfg::kDsStride, dsf);
    }
    if constexpr (kSumsDq) {
      __syncthreads();  // every warp's dS^T is in sDsT
      const int key_limit = int(min64(kMmaRows, q_pos + BM - k0));  // keys some query of the tile sees
      add_dq_share<T, D, BM>(dq_sum + (bh * s.Tq + qt * BM) * hs, s.Tq - qt * BM, hs, sDsT, Cfg::kDsStride, sK,
                             kStride, key_limit);
    }
    __syncthreads();
  }
  cp_async_wait<0>();
  const float one[2] = {1.f, 1.f}, scale[2] = {s.scale, s.scale};
  store_rows<T, D>(head_of<T>(gk, b, h), gk.st, k0 + warp * 16, s.Tk, hs, dk, scale);
  store_rows<T, D>(head_of<T>(gv, b, h), gv.st, k0 + warp * 16, s.Tk, hs, dv, one);
}

// =====================================================================================================
// f32 kernels on the CUDA cores: the same tiles, 128 threads as 16 x 8 (ty, tx); a thread owns rows
// ty + 16 i (i < 4) and columns tx + 8 j of every tile it computes.
// =====================================================================================================

// acc[i][j] += sum over kk < K of A(ty + 16 i, kk) B(kk, tx + 8 j), both read from shared memory
// through strides, so a transposed operand is a swap of strides. With rows and columns padded to
// 4 (mod 32) floats, a warp's reads fall in distinct banks or broadcast.
template <int RI, int CJ, int K, int A_RS, int A_KS, int B_KS, int B_CS>
__device__ __forceinline__ void simt_product(float (&acc)[RI][CJ], const float* a, const float* b) {
  const int ty = threadIdx.x >> 3, tx = threadIdx.x & 7;
#pragma unroll 4
  for (int kk = 0; kk < K; ++kk) {
    float av[RI], bv[CJ];
#pragma unroll
    for (int i = 0; i < RI; ++i) av[i] = a[(ty + 16 * i) * A_RS + kk * A_KS];
#pragma unroll
    for (int j = 0; j < CJ; ++j) bv[j] = b[kk * B_KS + (tx + 8 * j) * B_CS];
#pragma unroll
    for (int i = 0; i < RI; ++i)
#pragma unroll
      for (int j = 0; j < CJ; ++j) acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
  }
}

// A row's reduction over its 8 tx lanes (adjacent lanes of one warp).
__device__ __forceinline__ float row_max8(float v) {
  v = fmaxf(v, shfl_xor(v, 1));
  v = fmaxf(v, shfl_xor(v, 2));
  return fmaxf(v, shfl_xor(v, 4));
}
__device__ __forceinline__ float row_sum8(float v) {
  v += shfl_xor(v, 1);
  v += shfl_xor(v, 2);
  return v + shfl_xor(v, 4);
}

// Stores a thread's accumulator rows ty + 16 i (the f32 kernels' layout) times `mul`, as rows
// row0 + ty + 16 i (those < rows) of a [T, hs] f32 matrix; the tensor-core kernels' store_rows.
template <int RI, int CO>
__device__ __forceinline__ void store_rows_f32(float* dst, int64_t stride, int64_t row0, int64_t rows, int hs,
                                               const float (&acc)[RI][CO], const float (&mul)[RI]) {
  const int ty = threadIdx.x >> 3, tx = threadIdx.x & 7;
#pragma unroll
  for (int i = 0; i < RI; ++i) {
    const int64_t row = row0 + ty + 16 * i;
    if (row >= rows) continue;
#pragma unroll
    for (int j = 0; j < CO; ++j)
      if (tx + 8 * j < hs) dst[row * stride + tx + 8 * j] = acc[i][j] * mul[i];
  }
}

template <int D>
struct SimtConfig {
  static constexpr int kRows = 64, kKeys = 32;           // forward and dQ: queries, keys per tile
  static constexpr int kKeyRows = 64, kQueries = 32;     // dK dV: keys, queries per tile
  static constexpr int kStride = D + 4, kScoreStride = 32 + 4;  // both 4 (mod 32)
  static constexpr int RI = 4, CJ = 4, CO = D / 8;       // per thread: rows, score columns, output columns
  static constexpr size_t kTile = size_t(kKeys) * kStride;      // one K or V (or Q, dO) tile of 32 rows
  static constexpr size_t kForwardFloats = size_t(kRows) * kStride + 2 * 2 * kTile + size_t(kRows) * kScoreStride;
  static constexpr size_t kDqFloats = 2 * size_t(kRows) * kStride + 2 * 2 * kTile + size_t(kRows) * kScoreStride;
  static constexpr size_t kStageFloats = 2 * kTile + 2 * kQueries;
  static constexpr size_t kDkDvFloats =
      2 * size_t(kKeyRows) * kStride + 2 * kStageFloats + 2 * size_t(kKeyRows) * kScoreStride;
};

template <int D>
__global__ void __launch_bounds__(kThreadsPerBlock)
    flash_forward_f32(AttnShape s, HeadsIn q, HeadsIn k, HeadsIn v, HeadsOut out, float* lse) {
  using Cfg = SimtConfig<D>;
  constexpr int BM = Cfg::kRows, BN = Cfg::kKeys, SD = Cfg::kStride, SN = Cfg::kScoreStride;
  constexpr int RI = Cfg::RI, CJ = Cfg::CJ, CO = Cfg::CO;
  extern __shared__ uint4 smem_words[];
  float* sQ = reinterpret_cast<float*>(smem_words);
  float* stages = sQ + BM * SD;             // two stages of K then V
  float* sP = stages + 2 * 2 * Cfg::kTile;  // the tile's probabilities
  const int ty = threadIdx.x >> 3, tx = threadIdx.x & 7;
  const int64_t b = blockIdx.z, h = blockIdx.y, past = s.Tk - s.Tq;
  const int64_t q0 = query_tile_start(s.Tq, BM), q_valid = min64(BM, s.Tq - q0);
  const int hs = int(s.hs);
  const float* kh = head_of<float>(k, b, h);
  const float* vh = head_of<float>(v, b, h);

  auto load_keys = [&](int kt) { load_key_tile<float, BN, D, SD>(stages, kt, kh, k, vh, v, s.Tk, hs); };
  load_tile<float, BM, D, SD>(sQ, head_of<float>(q, b, h) + q0 * q.st, q.st, q_valid, hs);
  load_keys(0);
  cp_async_commit();  // Q travels with the first key tile

  const int key_tiles = int((past + q0 + q_valid + BN - 1) / BN);
  const float c = s.scale * kLog2e;
  float o[RI][CO] = {}, m[RI], l[RI];
#pragma unroll
  for (int i = 0; i < RI; ++i) m[i] = neg_inf(), l[i] = 0.f;
  for (int kt = 0; kt < key_tiles; ++kt) {
    if (kt + 1 < key_tiles) load_keys(kt + 1);
    cp_async_commit();
    cp_async_wait<1>();
    __syncthreads();
    const float* sk = stages + (kt & 1) * 2 * Cfg::kTile;
    const float* sv = sk + Cfg::kTile;
    const int64_t k0 = int64_t(kt) * BN;
    float sc[RI][CJ] = {};
    simt_product<RI, CJ, D, SD, 1, 1, SD>(sc, sQ, sk);  // S = Q K^T
    const bool diagonal = k0 + BN - 1 > past + q0;
#pragma unroll
    for (int i = 0; i < RI; ++i) {
      const int64_t pos = past + q0 + ty + 16 * i;
      float mx = m[i];
#pragma unroll
      for (int j = 0; j < CJ; ++j) {
        if (diagonal && k0 + tx + 8 * j > pos) sc[i][j] = neg_inf();
        mx = fmaxf(mx, sc[i][j]);
      }
      mx = row_max8(mx);
      const float rescale = exp2f((m[i] - mx) * c), shift = mx * c;  // key 0 is in tile 0: m is finite after it
      m[i] = mx;
      float sum = 0.f;
#pragma unroll
      for (int j = 0; j < CJ; ++j) {
        const float p = exp2f(fmaf(sc[i][j], c, -shift));
        sP[(ty + 16 * i) * SN + tx + 8 * j] = p;
        sum += p;
      }
      l[i] = l[i] * rescale + sum;
#pragma unroll
      for (int j = 0; j < CO; ++j) o[i][j] *= rescale;
    }
    __syncthreads();
    simt_product<RI, CO, BN, SN, 1, SD, 1>(o, sP, sv);  // O += P V
    __syncthreads();
  }
  cp_async_wait<0>();

  float inv[RI];
#pragma unroll
  for (int i = 0; i < RI; ++i) {
    const float total = row_sum8(l[i]);
    inv[i] = 1.f / total;
    const int64_t row = q0 + ty + 16 * i;
    if (row < s.Tq && tx == 0) lse[(b * s.H + h) * s.Tq + row] = m[i] * s.scale + logf(total);
  }
  store_rows_f32<RI, CO>(head_of<float>(out, b, h), out.st, q0, s.Tq, hs, o, inv);
}

template <int D>
__global__ void __launch_bounds__(kThreadsPerBlock)
    flash_backward_dq_f32(AttnShape s, HeadsIn q, HeadsIn k, HeadsIn v, HeadsIn out, const float* lse,
                          HeadsIn gout, HeadsOut gq, float* rowsums) {
  using Cfg = SimtConfig<D>;
  constexpr int BM = Cfg::kRows, BN = Cfg::kKeys, SD = Cfg::kStride, SN = Cfg::kScoreStride;
  constexpr int RI = Cfg::RI, CJ = Cfg::CJ, CO = Cfg::CO;
  extern __shared__ uint4 smem_words[];
  float* sQ = reinterpret_cast<float*>(smem_words);
  float* sGo = sQ + BM * SD;
  float* stages = sGo + BM * SD;
  float* sDs = stages + 2 * 2 * Cfg::kTile;
  const int ty = threadIdx.x >> 3, tx = threadIdx.x & 7;
  const int64_t b = blockIdx.z, h = blockIdx.y, bh = b * s.H + h, past = s.Tk - s.Tq;
  const int64_t q0 = query_tile_start(s.Tq, BM), q_valid = min64(BM, s.Tq - q0);
  const int hs = int(s.hs);
  const float* kh = head_of<float>(k, b, h);
  const float* vh = head_of<float>(v, b, h);
  const float* oh = head_of<float>(out, b, h);
  const float* goh = head_of<float>(gout, b, h);

  auto load_keys = [&](int kt) { load_key_tile<float, BN, D, SD>(stages, kt, kh, k, vh, v, s.Tk, hs); };
  load_tile<float, BM, D, SD>(sQ, head_of<float>(q, b, h) + q0 * q.st, q.st, q_valid, hs);
  load_tile<float, BM, D, SD>(sGo, goh + q0 * gout.st, gout.st, q_valid, hs);
  load_keys(0);
  cp_async_commit();

  // D and lse (base 2) of the thread's rows; D from global memory, 4 floats per lane.
  const float c = s.scale * kLog2e;
  float lse2[RI], rowsum[RI];
#pragma unroll
  for (int i = 0; i < RI; ++i) {
    const int64_t row = q0 + ty + 16 * i;
    float acc = 0.f;
    if (row < s.Tq)
      for (int col = tx * 4; col < hs; col += 32) {
        const Pack<float, 4> a = *reinterpret_cast<const Pack<float, 4>*>(oh + row * out.st + col);
        const Pack<float, 4> g = *reinterpret_cast<const Pack<float, 4>*>(goh + row * gout.st + col);
#pragma unroll
        for (int e = 0; e < 4; ++e) acc = fmaf(a.v[e], g.v[e], acc);
      }
    rowsum[i] = row_sum8(acc);
    if (row < s.Tq && tx == 0) rowsums[bh * s.Tq + row] = rowsum[i];
    lse2[i] = row < s.Tq ? lse[bh * s.Tq + row] * kLog2e : 0.f;
  }

  const int key_tiles = int((past + q0 + q_valid + BN - 1) / BN);
  float dq[RI][CO] = {};
  for (int kt = 0; kt < key_tiles; ++kt) {
    if (kt + 1 < key_tiles) load_keys(kt + 1);
    cp_async_commit();
    cp_async_wait<1>();
    __syncthreads();
    const float* sk = stages + (kt & 1) * 2 * Cfg::kTile;
    const float* sv = sk + Cfg::kTile;
    const int64_t k0 = int64_t(kt) * BN;
    float p[RI][CJ] = {}, ds[RI][CJ] = {};
    simt_product<RI, CJ, D, SD, 1, 1, SD>(p, sQ, sk);    // S = Q K^T
    simt_product<RI, CJ, D, SD, 1, 1, SD>(ds, sGo, sv);  // dP = dO V^T
    const bool diagonal = k0 + BN - 1 > past + q0;
#pragma unroll
    for (int i = 0; i < RI; ++i) {
      const int64_t pos = past + q0 + ty + 16 * i;
#pragma unroll
      for (int j = 0; j < CJ; ++j) {
        const bool masked = diagonal && k0 + tx + 8 * j > pos;
        const float pij = masked ? 0.f : exp2f(fmaf(p[i][j], c, -lse2[i]));
        sDs[(ty + 16 * i) * SN + tx + 8 * j] = pij * (ds[i][j] - rowsum[i]);
      }
    }
    __syncthreads();
    simt_product<RI, CO, BN, SN, 1, SD, 1>(dq, sDs, sk);  // dQ += dS K
    __syncthreads();
  }
  cp_async_wait<0>();

  float scale[RI];
  for (float& x : scale) x = s.scale;
  store_rows_f32<RI, CO>(head_of<float>(gq, b, h), gq.st, q0, s.Tq, hs, dq, scale);
}

// kSumsDq: also adds each query tile's dS K into dq_sum with atomics, as flash_backward_dkdv.
template <int D, bool kSumsDq>
__global__ void __launch_bounds__(kThreadsPerBlock)
    flash_backward_dkdv_f32(AttnShape s, HeadsIn q, HeadsIn k, HeadsIn v, const float* lse, HeadsIn gout,
                            HeadsOut gk, HeadsOut gv, const float* rowsums, float* dq_sum) {
  using Cfg = SimtConfig<D>;
  constexpr int BN = Cfg::kKeyRows, BM = Cfg::kQueries, SD = Cfg::kStride, SM = Cfg::kScoreStride;
  constexpr int RI = Cfg::RI, CJ = Cfg::CJ, CO = Cfg::CO;
  extern __shared__ uint4 smem_words[];
  float* sK = reinterpret_cast<float*>(smem_words);
  float* sV = sK + BN * SD;
  float* stages = sV + BN * SD;  // two stages of Q, dO [BM rows each], lse, D [BM each]
  float* sP = stages + 2 * Cfg::kStageFloats;
  float* sDs = sP + BN * SM;
  const int ty = threadIdx.x >> 3, tx = threadIdx.x & 7;
  const int64_t b = blockIdx.z, h = blockIdx.y, bh = b * s.H + h, past = s.Tk - s.Tq;
  const int64_t k0 = int64_t(blockIdx.x) * BN;
  const int hs = int(s.hs);
  const float* qh = head_of<float>(q, b, h);
  const float* goh = head_of<float>(gout, b, h);

  load_tile<float, BN, D, SD>(sK, head_of<float>(k, b, h) + k0 * k.st, k.st, s.Tk - k0, hs);
  load_tile<float, BN, D, SD>(sV, head_of<float>(v, b, h) + k0 * v.st, v.st, s.Tk - k0, hs);
  auto load_queries = [&](int64_t qt) {
    float* sq = stages + (qt & 1) * Cfg::kStageFloats;
    const int64_t q_begin = qt * BM, valid = s.Tq - q_begin;
    load_tile<float, BM, D, SD>(sq, qh + q_begin * q.st, q.st, valid, hs);
    load_tile<float, BM, D, SD>(sq + Cfg::kTile, goh + q_begin * gout.st, gout.st, valid, hs);
    load_floats(sq + 2 * Cfg::kTile, lse + bh * s.Tq + q_begin, BM, valid);
    load_floats(sq + 2 * Cfg::kTile + BM, rowsums + bh * s.Tq + q_begin, BM, valid);
  };
  const int64_t first_query = k0 > past ? k0 - past : 0;
  const int64_t q_tiles = (s.Tq + BM - 1) / BM;
  const float c = s.scale * kLog2e;
  float dk[RI][CO] = {}, dv[RI][CO] = {};

  load_queries(first_query / BM);
  cp_async_commit();  // with the block's K and V
  for (int64_t qt = first_query / BM; qt < q_tiles; ++qt) {
    if (qt + 1 < q_tiles) load_queries(qt + 1);
    cp_async_commit();
    cp_async_wait<1>();
    __syncthreads();
    const float* sq = stages + (qt & 1) * Cfg::kStageFloats;
    const float* sgo = sq + Cfg::kTile;
    const float* sl = sgo + Cfg::kTile;
    const float* sd = sl + BM;
    const int64_t q_pos = past + qt * BM;
    float p[RI][CJ] = {}, ds[RI][CJ] = {};
    simt_product<RI, CJ, D, SD, 1, 1, SD>(p, sK, sq);    // S^T = K Q^T
    simt_product<RI, CJ, D, SD, 1, 1, SD>(ds, sV, sgo);  // dP^T = V dO^T
    const bool diagonal = q_pos < k0 + BN - 1;
#pragma unroll
    for (int i = 0; i < RI; ++i)
#pragma unroll
      for (int j = 0; j < CJ; ++j) {
        const int col = tx + 8 * j;
        const bool masked = diagonal && k0 + ty + 16 * i > q_pos + col;
        const float pij = masked ? 0.f : exp2f(fmaf(p[i][j], c, -sl[col] * kLog2e));
        sP[(ty + 16 * i) * SM + col] = pij;
        sDs[(ty + 16 * i) * SM + col] = pij * (ds[i][j] - sd[col]);
      }
    __syncthreads();
    simt_product<RI, CO, BM, SM, 1, SD, 1>(dv, sP, sgo);  // dV += P^T dO
    simt_product<RI, CO, BM, SM, 1, SD, 1>(dk, sDs, sq);  // dK += dS^T Q
    if constexpr (kSumsDq) {
      // dQ's share [BM queries x D] = dS K over the block's keys: a thread's rows are queries ty + 16 i.
      constexpr int QI = BM / 16;
      float dq[QI][CO] = {};
      simt_product<QI, CO, BN, 1, SM, SD, 1>(dq, sDs, sK);
      float* dq_rows = dq_sum + (bh * s.Tq + qt * BM) * hs;
#pragma unroll
      for (int i = 0; i < QI; ++i) {
        const int64_t row = ty + 16 * i;
        if (qt * BM + row >= s.Tq) continue;
#pragma unroll
        for (int j = 0; j < CO; ++j)
          if (tx + 8 * j < hs) atomicAdd(dq_rows + row * hs + tx + 8 * j, dq[i][j]);
      }
    }
    __syncthreads();
  }
  cp_async_wait<0>();

  float scale[RI], one[RI];
  for (int i = 0; i < RI; ++i) scale[i] = s.scale, one[i] = 1.f;
  store_rows_f32<RI, CO>(head_of<float>(gk, b, h), gk.st, k0, s.Tk, hs, dk, scale);
  store_rows_f32<RI, CO>(head_of<float>(gv, b, h), gv.st, k0, s.Tk, hs, dv, one);
}

// =====================================================================================================
// The atomic backward's first and last kernels (every dtype), around flash_backward_dkdv<.., true>.
// =====================================================================================================

// D = rowsum(dO * O) of 64 queries (a warp's 16 each) for the dK dV kernel, and the same queries'
// rows of dq_sum zeroed for its atomics.
template <class T, int D>
__global__ void __launch_bounds__(kThreadsPerBlock)
    flash_backward_prepare(AttnShape s, HeadsIn out, HeadsIn gout, float* rowsums, float* dq_sum) {
  const int warp = threadIdx.x >> 5;
  const int64_t b = blockIdx.z, h = blockIdx.y, bh = b * s.H + h;
  const int64_t q0 = int64_t(blockIdx.x) * kMmaRows, q_valid = min64(kMmaRows, s.Tq - q0);
  output_rowsums<T, D>(head_of<T>(out, b, h) + q0 * out.st, out.st, head_of<T>(gout, b, h) + q0 * gout.st,
                       gout.st, warp * 16, q_valid, int(s.hs), nullptr, rowsums + bh * s.Tq + q0);
  float* rows = dq_sum + (bh * s.Tq + q0) * s.hs;
  for (int64_t i = threadIdx.x; i < q_valid * s.hs; i += kThreadsPerBlock) rows[i] = 0.f;
}

// dQ = scale dq_sum, rounded once to the gradient's dtype.
template <class T>
__global__ void flash_backward_store_dq(AttnShape s, const float* dq_sum, HeadsOut gq) {
  const int64_t n = s.B * s.H * s.Tq * s.hs, stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const int64_t col = i % s.hs, row = i / s.hs % s.Tq, bh = i / (s.hs * s.Tq);
    head_of<T>(gq, bh / s.H, bh % s.H)[row * gq.st + col] = from_c<T>(dq_sum[i] * s.scale);
  }
}

// =====================================================================================================
// Decode: one block per query (any dtype), for the few queries of sampling with a KV cache.
// =====================================================================================================

// Each round, thread i scores key base + i (a dot product read 16 bytes at a time), the block
// agrees on the round's maximum and sum, and thread (group, e) accumulates output column e over the
// round's keys of its group; the groups' partial outputs are added in order at the end.
template <class T, int D>
__global__ void __launch_bounds__(kThreadsPerBlock)
    attention_decode(AttnShape s, HeadsIn q, HeadsIn k, HeadsIn v, HeadsOut out, float* lse) {
  constexpr int kVec = int(16 / sizeof(T)), kGroups = kThreadsPerBlock / D;
  __shared__ float s_q[D];                         // the query, times scale log2(e)
  __shared__ float s_p[kThreadsPerBlock];          // the round's probabilities
  __shared__ float s_o[kGroups][D];                // the groups' partial outputs
  __shared__ float s_reduce[32];
  const int tid = threadIdx.x, e = tid % D, group = tid / D;
  const int64_t i = blockIdx.x, b = blockIdx.z, h = blockIdx.y;
  const int64_t keys = s.Tk - s.Tq + i + 1;  // the keys query i sees
  const int hs = int(s.hs);
  const T* kh = head_of<T>(k, b, h);
  const T* vh = head_of<T>(v, b, h);
  if (tid < D) s_q[tid] = tid < hs ? float(to_c(head_of<T>(q, b, h)[i * q.st + tid])) * (s.scale * kLog2e) : 0.f;
  __syncthreads();

  float m = neg_inf(), l = 0.f, o = 0.f;  // max and sum over the keys so far (base-2 units), output column e
  for (int64_t base = 0; base < keys; base += kThreadsPerBlock) {
    float score = neg_inf();
    if (base + tid < keys) {
      const T* key = kh + (base + tid) * k.st;
      float acc = 0.f;
#pragma unroll
      for (int col = 0; col < D; col += kVec) {
        if (col >= hs) break;
        const Pack<T, kVec> kv = *reinterpret_cast<const Pack<T, kVec>*>(key + col);
#pragma unroll
        for (int u = 0; u < kVec; ++u) acc = fmaf(float(to_c(kv.v[u])), s_q[col + u], acc);
      }
      score = acc;
    }
    const float mx = fmaxf(m, block_allreduce(score, [](float a, float c) { return fmaxf(a, c); }, s_reduce));
    const float rescale = exp2f(m - mx);  // 0 in the first round (m is -inf; key 0 makes mx finite)
    const float p = exp2f(score - mx);
    s_p[tid] = p;
    l = l * rescale + block_allreduce(p, [](float a, float c) { return a + c; }, s_reduce);  // syncs: s_p is visible
    m = mx;
    o *= rescale;
    const int64_t round = min64(kThreadsPerBlock, keys - base);
    if (e < hs)
      for (int j = group; j < round; j += kGroups) o = fmaf(s_p[j], float(to_c(vh[(base + j) * v.st + e])), o);
    __syncthreads();  // s_p is rewritten next round
  }
  s_o[group][e] = o;
  __syncthreads();
  if (tid < D && tid < hs) {
    float acc = 0.f;
#pragma unroll
    for (int g = 0; g < kGroups; ++g) acc += s_o[g][tid];
    head_of<T>(out, b, h)[i * out.st + tid] = from_c<T>(acc / l);
  }
  if (tid == 0) lse[(b * s.H + h) * s.Tq + i] = m * kLn2 + logf(l);
}

// Calls f.template operator()<D>() with D the kernels' head size for hs: 32, 64 or 128.
template <class F>
void with_head_size(int64_t hs, F&& f) {
  if (hs <= 32) f.template operator()<32>();
  else if (hs <= 64) f.template operator()<64>();
  else f.template operator()<128>();
}

template <class T>
constexpr bool is_16_bit_v = std::is_same_v<T, bf16_t> || std::is_same_v<T, f16_t>;

}  // namespace

void launch_attention_forward(DT dtype, const AttnShape& s, HeadsIn q, HeadsIn k, HeadsIn v, HeadsOut out,
                              float* lse, cudaStream_t stream) {
  if (s.B * s.H * s.Tq == 0) return;
  const unsigned H = unsigned(s.H), B = unsigned(s.B);
  with_head_size(s.hs, [&]<int D>() {
    LATHE_CUDA_DISPATCH_FLOAT(dtype, "causal_attention", [&]<class T>() {
      if constexpr (std::is_same_v<T, double>) {
        fail_dtype("causal_attention", dtype);
      } else if (s.Tq <= kDecodeMaxQueries) {
        attention_decode<T, D><<<dim3(unsigned(s.Tq), H, B), kThreadsPerBlock, 0, stream>>>(s, q, k, v, out, lse);
      } else if constexpr (is_16_bit_v<T>) {
        using Cfg = MmaConfig<T, D>;
        LATHE_ALLOW_SHARED(Cfg::kForwardBytes, flash_forward<T, D>);
        const unsigned tiles = unsigned((s.Tq + Cfg::kForwardRows - 1) / Cfg::kForwardRows);
        flash_forward<T, D><<<dim3(tiles, H, B), kThreadsPerBlock, Cfg::kForwardBytes, stream>>>(s, q, k, v, out, lse);
      } else {
        constexpr size_t bytes = SimtConfig<D>::kForwardFloats * sizeof(float);
        LATHE_ALLOW_SHARED(bytes, flash_forward_f32<D>);
        const unsigned tiles = unsigned((s.Tq + SimtConfig<D>::kRows - 1) / SimtConfig<D>::kRows);
        flash_forward_f32<D><<<dim3(tiles, H, B), kThreadsPerBlock, bytes, stream>>>(s, q, k, v, out, lse);
      }
    });
  });
  check_launch("causal_attention");
}

void launch_attention_backward(DT dtype, const AttnShape& s, HeadsIn q, HeadsIn k, HeadsIn v, HeadsIn out,
                               const float* lse, HeadsIn gout, HeadsOut gq, HeadsOut gk, HeadsOut gv,
                               float* rowsums, float* dq_sum, cudaStream_t stream) {
  if (s.B * s.H * s.Tq == 0) return;
  const unsigned H = unsigned(s.H), B = unsigned(s.B);
  with_head_size(s.hs, [&]<int D>() {
    LATHE_CUDA_DISPATCH_FLOAT(dtype, "causal_attention_backward", [&]<class T>() {
      if constexpr (std::is_same_v<T, double>) {
        fail_dtype("causal_attention_backward", dtype);
      } else if (dq_sum != nullptr) {
        // FlashAttention-2's: D and a zeroed dq_sum, one kernel over key tiles, dQ from dq_sum.
        const unsigned q_tiles = unsigned((s.Tq + kMmaRows - 1) / kMmaRows);
        flash_backward_prepare<T, D><<<dim3(q_tiles, H, B), kThreadsPerBlock, 0, stream>>>(s, out, gout, rowsums,
                                                                                           dq_sum);
        if constexpr (is_16_bit_v<T>) {
          using Cfg = MmaConfig<T, D>;
          LATHE_ALLOW_SHARED(Cfg::kDkDvDqBytes, flash_backward_dkdv<T, D, true>);
          const unsigned k_tiles = unsigned((s.Tk + kMmaRows - 1) / kMmaRows);
          flash_backward_dkdv<T, D, true><<<dim3(k_tiles, H, B), kThreadsPerBlock, Cfg::kDkDvDqBytes, stream>>>(
              s, q, k, v, lse, gout, gk, gv, rowsums, dq_sum);
        } else {
          using Cfg = SimtConfig<D>;
          constexpr size_t bytes = Cfg::kDkDvFloats * sizeof(float);
          LATHE_ALLOW_SHARED(bytes, flash_backward_dkdv_f32<D, true>);
          const unsigned k_tiles = unsigned((s.Tk + Cfg::kKeyRows - 1) / Cfg::kKeyRows);
          flash_backward_dkdv_f32<D, true><<<dim3(k_tiles, H, B), kThreadsPerBlock, bytes, stream>>>(
              s, q, k, v, lse, gout, gk, gv, rowsums, dq_sum);
        }
        flash_backward_store_dq<T><<<grid_for(s.B * s.H * s.Tq * s.hs), kThreads, 0, stream>>>(s, dq_sum, gq);
      } else if constexpr (is_16_bit_v<T>) {
        using Cfg = MmaConfig<T, D>;
        LATHE_ALLOW_SHARED(Cfg::kDqBytes, flash_backward_dq<T, D>);
        LATHE_ALLOW_SHARED(Cfg::kDkDvBytes, flash_backward_dkdv<T, D, false>);
        const unsigned q_tiles = unsigned((s.Tq + kMmaRows - 1) / kMmaRows);
        const unsigned k_tiles = unsigned((s.Tk + kMmaRows - 1) / kMmaRows);
        flash_backward_dq<T, D><<<dim3(q_tiles, H, B), kThreadsPerBlock, Cfg::kDqBytes, stream>>>(
            s, q, k, v, out, lse, gout, gq, rowsums);
        flash_backward_dkdv<T, D, false><<<dim3(k_tiles, H, B), kThreadsPerBlock, Cfg::kDkDvBytes, stream>>>(
            s, q, k, v, lse, gout, gk, gv, rowsums, nullptr);
      } else {
        using Cfg = SimtConfig<D>;
        constexpr size_t dq_bytes = Cfg::kDqFloats * sizeof(float), dkdv_bytes = Cfg::kDkDvFloats * sizeof(float);
        LATHE_ALLOW_SHARED(dq_bytes, flash_backward_dq_f32<D>);
        LATHE_ALLOW_SHARED(dkdv_bytes, flash_backward_dkdv_f32<D, false>);
        const unsigned q_tiles = unsigned((s.Tq + Cfg::kRows - 1) / Cfg::kRows);
        const unsigned k_tiles = unsigned((s.Tk + Cfg::kKeyRows - 1) / Cfg::kKeyRows);
        flash_backward_dq_f32<D><<<dim3(q_tiles, H, B), kThreadsPerBlock, dq_bytes, stream>>>(
            s, q, k, v, out, lse, gout, gq, rowsums);
        flash_backward_dkdv_f32<D, false><<<dim3(k_tiles, H, B), kThreadsPerBlock, dkdv_bytes, stream>>>(
            s, q, k, v, lse, gout, gk, gv, rowsums, nullptr);
      }
    });
  });
  check_launch("causal_attention_backward");
}

}  // namespace lathe::cuda
