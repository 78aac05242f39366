// CPU batched matrix product, and the linear layer's kernels built on it (the product with its bias
// and GELU epilogue, the parameter gradients).
//
// f32, in a build for AVX2+FMA or AVX-512 (the default, -march=native): lathe's own register-tiled
// kernel, tile_gemm (core/cpu/tile_gemm.h), driven by `batched_gemm_f32` below. f64 (gradient
// checks), and f32 in a build for plain x86-64: one single-threaded BLAS call per tile of the
// output, OpenBLAS's where the build found it, else Eigen's (`batched_gemm`).
//
// Both read a matrix in row-major (unit column stride) or column-major (unit row stride) order
// with an outer stride (core/matrix_layout.h, as the CUDA backend does), so plain and transposed
// views need no copy of the tensor; only a view that is neither (e.g. a strided slice in both dims)
// is copied first. Batch dims are walked by offsets: a broadcast (stride-0) batch dim is never
// materialised.
//
// Threads never change a result (train and bench change the thread count with the machine's load):
//   - tile_gemm sums each element of C over k in order, in k-blocks fixed by the shape, whatever
//     block of C it falls in, so the blocks may follow the thread count;
//   - a BLAS picks its blocking, and so the order in which it sums over k, from the shape of each
//     call (OpenBLAS: differently where a tile boundary falls, for shapes that are not multiples of
//     its unrolling), so its tiles are cut by the product's shape alone (`tiling_of`) and only their
//     assignment to threads follows the thread count. The library's own threading is off.

// GCC 12 reports a false "may be used uninitialized" inside Eigen's AVX-512 GEMM kernels.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <Eigen/Core>
#if LATHE_HAVE_OPENBLAS
#include <cblas.h>
// OpenBLAS's pthread build (Debian's default) exports this: it stops the library's worker threads,
// as its own fork handler does. Weak, so a build without it (serial, OpenMP) links and skips it.
extern "C" int blas_thread_shutdown_(void) __attribute__((weak));
#endif

#include "core/cpu/gemm.h"
#include "core/cpu/loops.h"
#include "core/cpu/thread_scratch.h"
#include "core/cpu/tile_gemm.h"
#include "core/cpu/transpose.h"
#include "core/kernel_profile.h"
#include "core/matrix_layout.h"

namespace lathe {

namespace cpu {

template <class T>
void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, T alpha, const T* a, int64_t lda,
          const T* b, int64_t ldb, T beta, T* c, int64_t ldc) {
  if (M == 0 || N == 0) return;
#if LATHE_HAVE_OPENBLAS
  const auto ta = trans_a ? CblasTrans : CblasNoTrans, tb = trans_b ? CblasTrans : CblasNoTrans;
  // The stride between the rows of a one-row operand is never read; BLAS still wants it to be at
  // least the row's length.
  lda = std::max(lda, trans_a ? M : K);
  ldb = std::max(ldb, trans_b ? K : N);
  if constexpr (std::is_same_v<T, float>)
    cblas_sgemm(CblasRowMajor, ta, tb, blasint(M), blasint(N), blasint(K), alpha, a, blasint(lda), b, blasint(ldb),
                beta, c, blasint(ldc));
  else
    cblas_dgemm(CblasRowMajor, ta, tb, blasint(M), blasint(N), blasint(K), alpha, a, blasint(lda), b, blasint(ldb),
                beta, c, blasint(ldc));
#else
  using Stride = Eigen::OuterStride<>;
  using Rows = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using Cols = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::ColMajor>;
  Eigen::Map<Rows, Eigen::Unaligned, Stride> C(c, M, N, Stride(ldc));
  // A stored transposed is, as a column-major map, the matrix itself.
  auto product = [&](const auto& A) {
    auto with_b = [&](const auto& B) {
      if (beta == T(0)) C.noalias() = alpha * (A * B);
      else {
        C *= beta;
        C.noalias() += alpha * (A * B);
      }
    };
    if (trans_b) with_b(Eigen::Map<const Cols, Eigen::Unaligned, Stride>(b, K, N, Stride(ldb)));
    else with_b(Eigen::Map<const Rows, Eigen::Unaligned, Stride>(b, K, N, Stride(ldb)));
  };
  if (trans_a) product(Eigen::Map<const Cols, Eigen::Unaligned, Stride>(a, M, K, Stride(lda)));
  else product(Eigen::Map<const Rows, Eigen::Unaligned, Stride>(a, M, K, Stride(lda)));
#endif
}

template void gemm<float>(bool, bool, int64_t, int64_t, int64_t, float, const float*, int64_t, const float*, int64_t,
                          float, float*, int64_t);
template void gemm<double>(bool, bool, int64_t, int64_t, int64_t, double, const double*, int64_t, const double*,
                           int64_t, double, double*, int64_t);

}  // namespace cpu

namespace {

// What both drivers need to know of a product out[..., M, N] = a[..., M, K] @ b[..., K, N]: its
// dims, its operands' layouts, and the offsets of each batch element's A and B matrices (by an
// odometer over the batch dims).
struct Product {
  int64_t M, N, K, batch;
  MatrixLayout la, lb;
  std::vector<int64_t> a_off, b_off;
};

Product product_of(const Tensor& a, const Tensor& b, const Tensor& out) {
  const int64_t nd = out.dim();
  Product p;
  p.M = out.shape()[size_t(nd - 2)];
  p.N = out.shape()[size_t(nd - 1)];
  p.K = a.shape()[size_t(nd - 1)];
  p.batch = out.numel() / std::max<int64_t>(p.M * p.N, 1);
  p.la = matrix_layout(a);
  p.lb = matrix_layout(b);
  p.a_off.resize(size_t(p.batch));
  p.b_off.resize(size_t(p.batch));
  std::vector<int64_t> idx(size_t(std::max<int64_t>(nd - 2, 0)), 0);
  int64_t ao = 0, bo = 0;
  for (int64_t i = 0; i < p.batch; ++i) {
    p.a_off[size_t(i)] = ao;
    p.b_off[size_t(i)] = bo;
    for (int64_t d = nd - 3; d >= 0; --d) {
      const size_t du = size_t(d);
      ao += a.strides()[du];
      bo += b.strides()[du];
      if (++idx[du] < out.shape()[du]) break;
      ao -= a.strides()[du] * out.shape()[du];
      bo -= b.strides()[du] * out.shape()[du];
      idx[du] = 0;
    }
  }
  return p;
}

// C (M x N, row-major, rows ldc apart) = A (M x K) * B (K x N), on the calling thread. An operand
// in column-major order is, read row-major, the transpose of its matrix.
template <class T, int OrderA, int OrderB>
void gemm(const T* a, int64_t a_outer, const T* b, int64_t b_outer, T* c, int64_t ldc, int64_t M, int64_t N,
          int64_t K) {
  cpu::gemm<T>(OrderA == Eigen::ColMajor, OrderB == Eigen::ColMajor, M, N, K, T(1), a, a_outer, b, b_outer, T(0), c,
               ldc);
}

// The GEMM stays on the thread that calls it (see the top of this file); set once, before the
// first product. OpenBLAS started its worker threads when it was loaded, and a worker with no work
// spins on sched_yield for about 0.1 s before it sleeps: at the start of every process, beside
// lathe's own threads, a third busy thread on a 2-core machine (the first attention calls of
// examples/bench_kernels at 2 threads took 7.8 ms where they take 0.2). With one thread OpenBLAS
// never hands work to them, so they are stopped here.
const bool kGemmSingleThreaded = [] {
  Eigen::setNbThreads(1);
#if LATHE_HAVE_OPENBLAS
  openblas_set_num_threads(1);
  if (blas_thread_shutdown_ != nullptr) blas_thread_shutdown_();
#endif
  return true;
}();

// The tiles of one M x N x K product: rows x cols blocks of the output, from the shape alone.
// Tiles are at least 64 x 64 (GEMM kernels pack such panels efficiently, and re-packing an
// operand per tile then costs a few percent) and hold at least kMinTileWork multiply-adds; a
// product makes at most kMaxTiles of them, enough to keep 16 threads busy. Small weight gradients
// need the 64: a 128-wide model's [128, 384] gradient of c_attn in 128-blocks made 3 tiles, and 3
// tiles on 2 threads leave one thread idle for a third of the product.
struct Tiling {
  int64_t rows, cols;
};

constexpr int64_t kMinTileWork = int64_t(1) << 20;
constexpr int64_t kMaxTiles = 8;

Tiling tiling_of(int64_t M, int64_t N, int64_t K) {
  const int64_t work = M * N * std::max<int64_t>(K, 1);
  const int64_t by_work = std::max<int64_t>(1, std::min(kMaxTiles, work / kMinTileWork));
  const int64_t row_blocks = std::max<int64_t>(1, std::min(by_work, M / 64));
  const int64_t col_blocks = std::max<int64_t>(1, std::min(by_work / row_blocks, N / 64));
  return {(M + row_blocks - 1) / row_blocks, (N + col_blocks - 1) / col_blocks};
}

template <class T>
void batched_gemm(const Tensor& a, const Tensor& b, const Tensor& out) {
  const Product pr = product_of(a, b, out);
  const int64_t M = pr.M, N = pr.N, K = pr.K, batch = pr.batch;
  const MatrixLayout &la = pr.la, &lb = pr.lb;
  const std::vector<int64_t>&a_off = pr.a_off, &b_off = pr.b_off;

  const T* pa = static_cast<const T*>(a.data_ptr());
  const T* pb = static_cast<const T*>(b.data_ptr());
  T* pc = static_cast<T*>(out.data_ptr());
  // A batch of many products needs no tiles: whole products are work enough for every thread.
  const Tiling tile = batch >= kMaxTiles ? Tiling{M, N} : tiling_of(M, N, K);
  const int64_t row_tiles = (M + tile.rows - 1) / tile.rows, col_tiles = (N + tile.cols - 1) / tile.cols;
  const int64_t tiles = row_tiles * col_tiles;
  // Work item w: batch element w / tiles, tile w % tiles; the A rows and B columns of a tile
  // start at an offset that depends on the operand's layout.
  auto run = [&](int64_t w) {
    const int64_t i = w / tiles, r0 = (w % tiles) / col_tiles * tile.rows, c0 = (w % tiles) % col_tiles * tile.cols;
    const int64_t m = std::min(tile.rows, M - r0), n = std::min(tile.cols, N - c0);
    const T* ai = pa + a_off[size_t(i)] + r0 * (la.row_major ? la.outer : 1);
    const T* bi = pb + b_off[size_t(i)] + c0 * (lb.row_major ? 1 : lb.outer);
    T* ci = pc + i * M * N + r0 * N + c0;
    constexpr int R = Eigen::RowMajor, C = Eigen::ColMajor;
    if (la.row_major && lb.row_major) gemm<T, R, R>(ai, la.outer, bi, lb.outer, ci, N, m, n, K);
    else if (la.row_major) gemm<T, R, C>(ai, la.outer, bi, lb.outer, ci, N, m, n, K);
    else if (lb.row_major) gemm<T, C, R>(ai, la.outer, bi, lb.outer, ci, N, m, n, K);
    else gemm<T, C, C>(ai, la.outer, bi, lb.outer, ci, N, m, n, K);
  };
  cpu::parallel_for(batch * tiles, 1, [&](int64_t w0, int64_t w1) {
    for (int64_t w = w0; w < w1; ++w) run(w);
  });
}

// ---- f32: lathe's own register-tiled kernel ----
//
// tile_gemm keeps a tile of C in registers while the inner dim is walked, reading A by broadcasts
// (either layout) and B in unit-stride rows. Each element of C is summed over k in order, one
// k-block of kKBlock at a time, so where the rows and columns of C are cut between threads never
// changes a bit. At the shapes of a GPT step it runs from 6% slower (char's lm_head weight
// gradient) to 15% faster than OpenBLAS's sgemm on one thread (examples/bench_kernels;
// docs/benchmarks.md), and further ahead of OpenBLAS's shape-fixed tiles on several threads:
// nothing is packed again per tile, no zeroing pass comes before the sum, and the blocks of C
// follow the thread count.
//
// What the kernel needs of the operands, and what is arranged for it here:
//   B  unit-stride rows of whole vectors: a column-major B (x @ w^T), a width that is not a
//      multiple of a vector, or rows far apart are packed once per product into panels;
//   A  any layout; a column-major A (dy^T @ x) with a long inner dim is copied block by block, as
//      its column k lies a whole row of storage away from column k + 1 (a TLB miss per k);
//   C  a width that is not a multiple of a vector goes to a padded scratch, copied out after.

// Built for plain x86-64 (LATHE_NATIVE=OFF), tile_gemm's vectors are emulated with SSE and the
// runtime-dispatched BLAS is the faster choice.
#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
constexpr bool kOwnF32Kernel = true;
#else
constexpr bool kOwnF32Kernel = false;
#endif

constexpr int64_t kLanes = cpu::kTileGemmLanes;
// The inner dim in blocks of kKBlock: a block's B panel (kKBlock x kColBlock floats, 128 KiB) stays
// in L2 while the row tiles sweep it.
constexpr int64_t kKBlock = 512;
constexpr int64_t kColBlock = 64;
// Rows of a work item: at most kMaxRowBlock (an A block of kMaxRowBlock x kKBlock floats is 384 KiB),
// a multiple of every tile height (24, 12, 8, 6 rows).
constexpr int64_t kMaxRowBlock = 192;
// A row block of fewer tiles than this splits the columns instead: each item reads its columns' B
// panels once for all its rows, and items of 2-3 tiles (a 128-row weight gradient cut 8 ways) read
// all of B 8 times over (a 128 x 512 x 768 product on 2 threads: 212 -> 217-228 GFLOP/s).
constexpr int64_t kMinBlockTiles = 8;
// A column-major A's blocks are copied when the inner dim is at least this long, and a row-major
// B is packed when its rows lie more than kMaxUnpackedRow floats apart.
constexpr int64_t kStripCopyMinK = 1024;
constexpr int64_t kMaxUnpackedRow = 512;

// B (K x N, read through its layout) as panels of kColBlock columns: panel p holds columns
// p * kColBlock.. as a contiguous [K, width] block (width kColBlock, or what is left of Np),
// columns N..Np zero. A panel's rows then lie a few hundred bytes apart, where B's own rows may lie
// kilobytes apart (a TLB miss per k in a wide product).
void pack_b(const float* src, const MatrixLayout& lb, int64_t K, int64_t N, int64_t Np, float* dst) {
  const int64_t panels = (Np + kColBlock - 1) / kColBlock, k_chunks = (K + 63) / 64;
  cpu::parallel_for(panels * k_chunks, 1, [&](int64_t w0, int64_t w1) {
    for (int64_t w = w0; w < w1; ++w) {
      const int64_t p = w / k_chunks, k0 = w % k_chunks * 64, k1 = std::min(K, k0 + 64);
      const int64_t c0 = p * kColBlock, width = std::min(kColBlock, Np - c0);
      const int64_t real = std::clamp<int64_t>(N - c0, 0, width);  // columns of B, the rest is padding
      float* panel = dst + p * K * kColBlock;
      if (lb.row_major) {
        for (int64_t k = k0; k < k1; ++k) {
          const float* row = src + k * lb.outer + c0;
          std::copy(row, row + real, panel + k * width);
        }
      } else {  // column j of B is contiguous in k
        cpu::transpose(src + c0 * lb.outer + k0, lb.outer, real, k1 - k0, panel + k0 * width, width);
      }
      for (int64_t k = k0; k < k1; ++k) std::fill(panel + k * width + real, panel + (k + 1) * width, 0.0f);
    }
  });
}

void batched_gemm_f32(const Tensor& a, const Tensor& b, const Tensor& out) {
  const Product pr = product_of(a, b, out);
  const int64_t M = pr.M, N = pr.N, K = pr.K, batch = pr.batch;
  const MatrixLayout &la = pr.la, &lb = pr.lb;
  const std::vector<int64_t>&a_off = pr.a_off, &b_off = pr.b_off;
  const float* pa = static_cast<const float*>(a.data_ptr());
  const float* pb = static_cast<const float*>(b.data_ptr());

  // B as unit-stride rows of Np columns: the operand itself, or panels packed once per product
  // (one set per distinct B: a weight broadcast over the batch is packed once).
  const int64_t Np = (N + kLanes - 1) / kLanes * kLanes;
  const bool packed = !lb.row_major || Np != N || lb.outer > kMaxUnpackedRow;
  const bool shared_b = std::all_of(b_off.begin(), b_off.end(), [&](int64_t o) { return o == b_off[0]; });
  Tensor b_packed;
  if (packed) {
    const int64_t copies = shared_b ? 1 : batch;
    b_packed = Tensor::empty({copies, K, Np}, DType::f32, out.device());
    for (int64_t i = 0; i < copies; ++i)
      pack_b(pb + b_off[size_t(i)], lb, K, N, Np, static_cast<float*>(b_packed.data_ptr()) + i * K * Np);
  }
  // Batch element i's B from row k0, column c0 (a multiple of kColBlock), and its row stride.
  auto b_at = [&](int64_t i, int64_t k0, int64_t c0) -> std::pair<const float*, int64_t> {
    if (!packed) return {pb + b_off[size_t(i)] + k0 * lb.outer + c0, lb.outer};
    const int64_t width = std::min(kColBlock, Np - c0);
    const float* panel = static_cast<const float*>(b_packed.data_ptr()) + (shared_b ? 0 : i * K * Np) + c0 * K;
    return {panel + k0 * width, width};
  };

  // C: the output, or a padded scratch when its width is not whole vectors.
  Tensor c_padded = Np == N ? out : Tensor::empty({batch, M, Np}, DType::f32, out.device());
  float* pc = static_cast<float*>(c_padded.data_ptr());

  // Work items: batch element x row block (x column range, where there are too few row blocks to
  // give every thread 4 items, so that one slowed by a neighbour's process leaves little for the
  // others to wait on). Within an item, per k-block, the A block (at most kMaxRowBlock rows) stays
  // in L2 while the B panels of kColBlock columns go by, and each panel while the row tiles go by.
  //
  // Every thread gets the same work: the row blocks are whole row tiles, their heights differ by at
  // most one tile, and the items are a multiple of the thread count where the rows allow. Blocks of
  // one height had left a remainder: 1024 rows made 7 blocks of 144 and one of 16, 576 rows for one
  // thread of two and 448 for the other (the 1024^3 product ran at 85% of the vector units' peak on
  // two threads, 95% on one); 2048 rows made 11 items, 1088 rows against 960.
  const int64_t threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  const int64_t want_items = 4 * threads;
  const int64_t tile_rows = cpu::tile_gemm_rows(std::min(Np, kColBlock));
  const int64_t row_tiles = (M + tile_rows - 1) / tile_rows;  // the last may be short
  const int64_t want_rows =
      std::min((want_items + batch - 1) / batch, std::max<int64_t>(1, row_tiles / kMinBlockTiles));
  int64_t row_blocks = std::max(want_rows, (row_tiles * tile_rows + kMaxRowBlock - 1) / kMaxRowBlock);
  // Both bounds above are at most row_tiles (a tile is at most 24 rows), and this stops there too.
  while ((batch * row_blocks) % threads != 0 && row_blocks < row_tiles) ++row_blocks;
  const int64_t col_blocks_all = (Np + kColBlock - 1) / kColBlock;
  const int64_t col_ranges =
      std::clamp<int64_t>((want_items + batch * row_blocks - 1) / (batch * row_blocks), 1, col_blocks_all);
  // Part p of `parts` near-equal parts of `n` units: its first unit.
  auto part_start = [](int64_t p, int64_t parts, int64_t n) { return p * n / parts; };
  const bool strip_copy = !la.row_major && K >= kStripCopyMinK;

  auto run = [&](int64_t w) {
    const int64_t i = w / (row_blocks * col_ranges), rb = (w / col_ranges) % row_blocks, cr = w % col_ranges;
    const int64_t r0 = std::min(M, part_start(rb, row_blocks, row_tiles) * tile_rows);
    const int64_t m = std::min(M, part_start(rb + 1, row_blocks, row_tiles) * tile_rows) - r0;
    const int64_t c_begin = part_start(cr, col_ranges, col_blocks_all) * kColBlock;
    const int64_t c_end = std::min(Np, part_start(cr + 1, col_ranges, col_blocks_all) * kColBlock);
    // A's rows r0.. : element (r, k) at a_rows[r * a_rs + k * a_cs].
    const float* a_rows = pa + a_off[size_t(i)] + r0 * (la.row_major ? la.outer : 1);
    const int64_t a_rs = la.row_major ? la.outer : 1, a_cs = la.row_major ? 1 : la.outer;
    float* c = pc + i * M * Np + r0 * Np;
    float* const strip = strip_copy ? cpu::thread_scratch<float>(size_t(kKBlock * kMaxRowBlock)) : nullptr;
    for (int64_t k0 = 0; k0 < K; k0 += kKBlock) {
      const int64_t kk = std::min(kKBlock, K - k0);
      const float* ak = a_rows + k0 * a_cs;
      int64_t ak_cs = a_cs;
      if (strip_copy) {  // the block's columns k0.. as m-float runs, side by side
        for (int64_t k = 0; k < kk; ++k) std::copy(ak + k * a_cs, ak + k * a_cs + m, strip + k * m);
        ak = strip;
        ak_cs = m;
      }
      for (int64_t c0 = c_begin; c0 < c_end; c0 += kColBlock) {
        const auto [b, ldb] = b_at(i, k0, c0);
        cpu::tile_gemm(cpu::CausalLimit::none, 0, m, std::min(kColBlock, c_end - c0), kk, 1.0f, ak, a_rs, ak_cs, b,
                       ldb, /*accumulate=*/k0 > 0, c + c0, Np);
      }
    }
  };
  const int64_t items = batch * row_blocks * col_ranges;
  if (items == 1 || threads == 1) {
    for (int64_t w = 0; w < items; ++w) run(w);
  } else {
#pragma omp parallel for schedule(dynamic, 1)
    for (int64_t w = 0; w < items; ++w) run(w);
  }

  if (Np != N) {
    float* po = static_cast<float*>(out.data_ptr());
    cpu::parallel_split(batch * M, 64, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) std::copy(pc + r * Np, pc + r * Np + N, po + r * N);
    });
  }
}

}  // namespace

void CpuBackend::matmul(const Tensor& a_in, const Tensor& b_in, const Tensor& out) {
  // Every output element is a K-long dot product: one multiply and one add per term.
  profile::KernelScope scope("matmul", 2.0 * double(out.numel()) * double(a_in.numel() ? a_in.shape().back() : 0));
  const bool low = a_in.dtype() == DType::bf16 || a_in.dtype() == DType::f16;
  LATHE_CHECK(a_in.dtype() == b_in.dtype() && (a_in.dtype() == out.dtype() || (low && out.dtype() == DType::f32)),
              "matmul kernel: dtypes differ: ", a_in.desc(), ", ", b_in.desc(), " -> ", out.desc());
  LATHE_CHECK(out.is_contiguous() && out.dim() >= 2, "matmul kernel: output must be contiguous and at least 2-D, got ",
              out.desc());
  if (out.numel() == 0) return;
  const int64_t K = a_in.shape().back();
  if (K == 0) {
    fill(out, 0.0);
    return;
  }
  if (low) {
    // 16-bit floats multiply in f32: convert, multiply, round once at the end (or not at all, into
    // an f32 out).
    Tensor a32 = compact_matrices(a_in, DType::f32), b32 = compact_matrices(b_in, DType::f32);
    Tensor o32 = out.dtype() == DType::f32 ? out : Tensor::empty(out.shape(), DType::f32, out.device());
    if constexpr (kOwnF32Kernel) batched_gemm_f32(a32, b32, o32);
    else batched_gemm<float>(a32, b32, o32);
    if (o32.data_ptr() != out.data_ptr()) copy(o32, out);
    return;
  }
  Tensor a = matrix_layout(a_in).usable ? a_in : compact_matrices(a_in, a_in.dtype());
  Tensor b = matrix_layout(b_in).usable ? b_in : compact_matrices(b_in, b_in.dtype());
  LATHE_DISPATCH_FLOAT(a.dtype(), "matmul", [&]<class T>() {
    if constexpr (std::is_same_v<T, float> && kOwnF32Kernel) batched_gemm_f32(a, b, out);
    else if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) batched_gemm<T>(a, b, out);
  });
}

// ---- linear layers ----

void CpuBackend::linear(const Tensor& x, const Tensor& weight, const Tensor& bias, LinearEpilogue epilogue,
                        const Tensor& out, const Tensor& pre) {
  const bool gelu = epilogue == LinearEpilogue::gelu;
  if (x.dtype() != DType::bf16 && x.dtype() != DType::f16) {
    // f32 and f64: the product, then the bias and the GELU, each kernel rounding in the compute type
    // as it goes, which is what rounding once in it means.
    const Tensor y = gelu ? pre : out;
    matmul(x, weight.t(), y);
    if (bias.defined()) binary(BinaryOp::add, y, bias.expand(y.shape()), y);
    if (gelu) unary(UnaryOp::gelu, y, out, 0, 0);
    return;
  }
  // 16 bits: the product, the bias (widened as the add reads it) and the GELU in f32, then one
  // rounding of each result.
  const Tensor acc = Tensor::empty(out.shape(), DType::f32, out.device());
  matmul(x, weight.t(), acc);
  if (bias.defined()) binary(BinaryOp::add, acc, bias.expand(acc.shape()), acc);
  if (gelu) {
    copy(acc, pre);
    unary(UnaryOp::gelu, acc, acc, 0, 0);
  }
  copy(acc, out);
}

void CpuBackend::linear_backward_weight(const Tensor& g, const Tensor& x, const Tensor& gweight, const Tensor& gbias) {
  if (gweight.defined()) matmul(g.t(), x, gweight);  // [N, R] @ [R, K], f32 for 16-bit g and x
  if (!gbias.defined()) return;
  const int64_t N = g.shape()[1];
  if (g.shape()[0] == 0) return fill(gbias, 0.0);
  // The rows' sum in the reduction kernel; 16-bit rows are widened first, so that the sum is f32.
  Tensor rows = g;
  if (gbias.dtype() != g.dtype()) {
    rows = Tensor::empty(g.shape(), gbias.dtype(), g.device());
    copy(g, rows);
  }
  reduce(ReduceOp::sum, rows, {0}, gbias.view({1, N}));
}

}  // namespace lathe
