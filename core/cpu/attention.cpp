// Causal attention fused on the CPU: softmax(scale q k^T + causal mask) v without a [B, H, Tq, Tk]
// tensor. Each (batch, head) pair is one work item, run on one thread, so the thread count never
// changes a result. Its queries go in blocks of kQueryBlock rows: a block's scores against the
// keys it may see (a kQueryBlock x Tk scratch, in cache) come from one product, are masked and
// normalised row by row, and multiply V in a second product. The causal mask also skips work: a
// block's rows multiply only the keys their queries see, about half of the T x T products.
// Queries may come after a KV cache's keys (Tk > Tq): query i sits at position past + i,
// past = Tk - Tq, and sees keys 0 .. past + i.
//
// A block's rows are short enough to hold whole, so each row's softmax is computed exactly from its
// maximum (no running "online" rescaling is needed). The forward keeps each query's log-sum-exp;
// the backward recomputes the probabilities from it, block by block, as FlashAttention does:
//
//   P = exp(S - lse),  dV += P^T dO,  dP = dO V^T,  dS = P * (dP - rowsum(dO * O)),
//   dQ = scale dS K,   dK += scale dS^T Q
//
// f32 products are tile_gemm's (core/cpu/tile_gemm.h), which reads B in unit-stride rows:
// K and V are transposed once per head for the products that take K^T and V^T. f64 (gradchecks)
// takes the BLAS GEMM over the whole blocks. The scratch is the thread's own, kept from call to call
// (core/cpu/thread_scratch.h). 16-bit inputs are widened to f32 copies, run through the f32
// kernel, and their results rounded once, as every 16-bit kernel of lathe computes (and as CUDA's
// attention does, whose tensor-core products also take P and dS in 16 bits).
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/cpu/tile_gemm.h"
#include "core/cpu/cpu_backend.h"
#include "core/cpu/gemm.h"
#include "core/cpu/loops.h"
#include "core/cpu/row_math.h"
#include "core/cpu/thread_scratch.h"
#include "core/cpu/transpose.h"
#include "core/kernel_profile.h"

namespace lathe {

namespace {

using cpu::CausalLimit;

constexpr int64_t kQueryBlock = 64;

// One head's [T, hs] matrix inside a [B, H, T, hs] tensor: its first element and its row stride.
template <class T>
struct HeadView {
  T* data;
  int64_t row_stride;
};

template <class T>
HeadView<T> head(const Tensor& t, int64_t b, int64_t h) {
  const Strides& s = t.strides();
  return {static_cast<T*>(t.data_ptr()) + b * s[0] + h * s[1], s[2]};
}

// Multiply-adds of the causal products of one head: the forward's two products over the keys each
// query sees (the backward's four cost twice that). Query i sees past + i + 1 keys.
double causal_flops(int64_t Tq, int64_t Tk, int64_t hs) {
  const double past = double(Tk - Tq);
  return 2.0 * 2.0 * double(Tq) * (past + double(Tq + 1) / 2.0) * double(hs);
}

// A row of scores is worked on up to its visible keys rounded up to whole vectors, the columns
// the products computed for it (core/cpu/tile_gemm.h), with the masked entries set to -inf so
// that exp makes them 0: a tail of single elements after the vectors cost more than the masked
// entries do. At most n, the columns the block has.
int64_t padded_length(int64_t visible, int64_t n) {
  constexpr int64_t block = cpu::kTileGemmLanes;
  return std::min(n, (visible + block - 1) / block * block);
}

// C[m x n] = alpha A B (+ C), A's (i, k) at a[i * a_rs + k * a_cs], B [k x n] in rows ldb apart.
template <class T>
void product(CausalLimit limit, int64_t offset, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t a_rs,
             int64_t a_cs, const T* b, int64_t ldb, bool accumulate, T* c, int64_t ldc) {
  if constexpr (std::is_same_v<T, float>) {
    cpu::tile_gemm(limit, offset, m, n, k, alpha, a, a_rs, a_cs, b, ldb, accumulate, c, ldc);
  } else {
    // The whole block: the entries a limit would skip are zeros of A or columns nobody reads.
    const bool a_transposed = a_cs != 1;
    cpu::gemm<T>(a_transposed, false, m, n, k, alpha, a, a_transposed ? a_cs : a_rs, b, ldb, accumulate ? T(1) : T(0),
                 c, ldc);
  }
}

// out [hs x T] = the head's [T x hs] matrix transposed.
template <class T>
void transpose_into(const HeadView<T>& x, int64_t Tn, int64_t hs, T* out) {
  cpu::transpose(x.data, x.row_stride, Tn, hs, out, Tn);
}

template <class T>
void attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, T scale, const Tensor& out,
                       const Tensor& lse) {
  const int64_t B = q.size(0), H = q.size(1), Tq = q.size(2), Tk = k.size(2), hs = q.size(3), past = Tk - Tq;
  T* plse = static_cast<T*>(lse.data_ptr());
  cpu::parallel_for(B * H, 1, [&](int64_t w0, int64_t w1) {
    T* const s = cpu::thread_scratch<T>(size_t((kQueryBlock + hs) * Tk));  // scores, then probabilities
    T* const kt = s + kQueryBlock * Tk;                                     // the head's K transposed
    for (int64_t w = w0; w < w1; ++w) {
      const int64_t b = w / H, h = w % H;
      const HeadView<T> Q = head<T>(q, b, h), K = head<T>(k, b, h), V = head<T>(v, b, h), O = head<T>(out, b, h);
      transpose_into(K, Tk, hs, kt);
      for (int64_t i0 = 0; i0 < Tq; i0 += kQueryBlock) {
        // The block's first query sits at position p0; n: the keys its last query sees.
        const int64_t m = std::min(kQueryBlock, Tq - i0), p0 = past + i0, n = p0 + m;
        product<T>(CausalLimit::cols_to_row, p0, m, n, hs, scale, Q.data + i0 * Q.row_stride, Q.row_stride, 1,
                   kt, Tk, false, s, n);
        for (int64_t r = 0; r < m; ++r) {
          T* row = s + r * n;
          const int64_t visible = p0 + r + 1, padded = padded_length(visible, n);
          std::fill(row + visible, row + padded, -std::numeric_limits<T>::infinity());  // exp makes them 0
          const T mx = cpu::row_max(row, padded);
          const T sum = cpu::exp_shifted_sum(row, mx, row, padded);
          const T inv = T(1) / sum;
          for (int64_t j = 0; j < padded; ++j) row[j] *= inv;
          std::fill(row + padded, row + n, T(0));
          plse[w * Tq + i0 + r] = mx + std::log(sum);
        }
        product<T>(CausalLimit::k_to_row, p0, m, hs, n, T(1), s, n, 1, V.data, V.row_stride, false,
                   O.data + i0 * O.row_stride, O.row_stride);
      }
    }
  });
}

template <class T>
void attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& lse,
                        const Tensor& gout, T scale, const Tensor& gq, const Tensor& gk, const Tensor& gv) {
  const int64_t B = q.size(0), H = q.size(1), Tq = q.size(2), Tk = k.size(2), hs = q.size(3), past = Tk - Tq;
  const T* plse = static_cast<const T*>(lse.data_ptr());
  cpu::parallel_for(B * H, 1, [&](int64_t w0, int64_t w1) {
    T* const p = cpu::thread_scratch<T>(size_t(2 * (kQueryBlock + hs) * Tk));  // P, dP then dS, K^T, V^T
    T* const dp = p + kQueryBlock * Tk;
    T* const kt = dp + kQueryBlock * Tk;
    T* const vt = kt + hs * Tk;
    T d[kQueryBlock];  // rowsum(dO * O) of the block's queries
    for (int64_t w = w0; w < w1; ++w) {
      const int64_t b = w / H, h = w % H;
      const HeadView<T> Q = head<T>(q, b, h), K = head<T>(k, b, h), V = head<T>(v, b, h), O = head<T>(out, b, h);
      const HeadView<T> dO = head<T>(gout, b, h), dQ = head<T>(gq, b, h), dK = head<T>(gk, b, h), dV = head<T>(gv, b, h);
      transpose_into(K, Tk, hs, kt);
      transpose_into(V, Tk, hs, vt);
      for (int64_t i = 0; i < Tk; ++i) {
        std::fill(dK.data + i * dK.row_stride, dK.data + i * dK.row_stride + hs, T(0));
        std::fill(dV.data + i * dV.row_stride, dV.data + i * dV.row_stride + hs, T(0));
      }
      for (int64_t i0 = 0; i0 < Tq; i0 += kQueryBlock) {
        const int64_t m = std::min(kQueryBlock, Tq - i0), p0 = past + i0, n = p0 + m;
        const T* q_blk = Q.data + i0 * Q.row_stride;
        const T* do_blk = dO.data + i0 * dO.row_stride;
        product<T>(CausalLimit::cols_to_row, p0, m, n, hs, scale, q_blk, Q.row_stride, 1, kt, Tk, false, p, n);
        for (int64_t r = 0; r < m; ++r) {
          T* row = p + r * n;
          const int64_t visible = p0 + r + 1, padded = padded_length(visible, n);
          const T l = plse[w * Tq + i0 + r];
          std::fill(row + visible, row + padded, -std::numeric_limits<T>::infinity());
          for (int64_t j = 0; j < padded; ++j) row[j] = cpu::exp_c(row[j] - l);
          std::fill(row + padded, row + n, T(0));
          d[r] = cpu::row_dot<T>(do_blk + r * dO.row_stride, O.data + (i0 + r) * O.row_stride, hs);
        }
        // Rows of P^T are keys; key j has non-zero P only for the block's queries from j - p0 on.
        product<T>(CausalLimit::k_from_row, p0, n, hs, m, T(1), p, 1, n, do_blk, dO.row_stride, true, dV.data,
                   dV.row_stride);
        product<T>(CausalLimit::cols_to_row, p0, m, n, hs, T(1), do_blk, dO.row_stride, 1, vt, Tk, false, dp, n);
        for (int64_t r = 0; r < m; ++r) {
          T* ds = dp + r * n;
          const T* pr = p + r * n;
          const int64_t padded = padded_length(p0 + r + 1, n);  // P is 0 past the visible keys
          for (int64_t j = 0; j < padded; ++j) ds[j] = pr[j] * (ds[j] - d[r]);
          std::fill(ds + padded, ds + n, T(0));
        }
        product<T>(CausalLimit::k_to_row, p0, m, hs, n, scale, dp, n, 1, K.data, K.row_stride, false,
                   dQ.data + i0 * dQ.row_stride, dQ.row_stride);
        product<T>(CausalLimit::k_from_row, p0, n, hs, m, scale, dp, 1, n, q_blk, Q.row_stride, true, dK.data,
                   dK.row_stride);
      }
    }
  });
}

// A contiguous f32 copy of a 16-bit operand.
Tensor widened(const Tensor& t) {
  Tensor w = Tensor::empty(t.shape(), DType::f32, t.device());
  backend_for(t.device()).copy(t, w);
  return w;
}

}  // namespace

bool CpuBackend::fuses(FusedKernel kernel, DType dtype, int64_t) const {
  switch (kernel) {
    // 16-bit inputs compute in f32 and round once, as on CUDA (causal_attention below).
    case FusedKernel::causal_attention: return is_floating(dtype);
  }
  return false;
}

void CpuBackend::causal_attention(const Tensor& q, const Tensor& k, const Tensor& v, double scale, const Tensor& out,
                                  const Tensor& lse) {
  profile::KernelScope scope("causal_attention",
                             double(q.size(0) * q.size(1)) * causal_flops(q.size(2), k.size(2), q.size(3)));
  if (q.dtype() == DType::f64) {
    attention_forward<double>(q, k, v, scale, out, lse);
  } else if (q.dtype() == DType::f32) {
    attention_forward<float>(q, k, v, float(scale), out, lse);
  } else {
    Tensor o32 = Tensor::empty(q.shape(), DType::f32, q.device());
    attention_forward<float>(widened(q), widened(k), widened(v), float(scale), o32, lse);
    copy(o32, out);
  }
}

void CpuBackend::causal_attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                                           const Tensor& lse, const Tensor& gout, double scale, const Tensor& gq,
                                           const Tensor& gk, const Tensor& gv) {
  profile::KernelScope scope("causal_attention_backward",
                             2.0 * double(q.size(0) * q.size(1)) * causal_flops(q.size(2), k.size(2), q.size(3)));
  if (q.dtype() == DType::f64) {
    attention_backward<double>(q, k, v, out, lse, gout, scale, gq, gk, gv);
  } else if (q.dtype() == DType::f32) {
    attention_backward<float>(q, k, v, out, lse, gout, float(scale), gq, gk, gv);
  } else {
    const Tensor gq32 = Tensor::empty(gq.shape(), DType::f32, q.device());
    const Tensor gk32 = Tensor::empty(gk.shape(), DType::f32, q.device());
    const Tensor gv32 = Tensor::empty(gv.shape(), DType::f32, q.device());
    attention_backward<float>(widened(q), widened(k), widened(v), widened(out), lse, widened(gout), float(scale), gq32,
                              gk32, gv32);
    copy(gq32, gq);
    copy(gk32, gk);
    copy(gv32, gv);
  }
}

}  // namespace lathe
