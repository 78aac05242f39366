// CPU kernels for softmax, log-softmax, layer norm and RMSNorm, row by row over the last dim.
//
// Rows are split over threads in fixed chunks (rows_per_chunk); each row is computed entirely by
// one thread with deterministic lane sums (row_math.h), so results never depend on threads.
// 16-bit rows are widened to f32 (WideRow); row statistics accumulate in f64. Layer norm also
// reads an f32 row into a 16-bit output (and a 16-bit gradient back into f32), so that a 16-bit run
// normalises its f32 stream for the product that follows without a cast of its own. A norm may also
// add a residual branch into the stream as it reads it, and fold the stream's gradient into its
// own, so that the residual add and the gradient's sum take no passes of their own.
#include <cmath>

#include "core/cpu/loops.h"
#include "core/cpu/row_math.h"
#include "core/kernel_profile.h"

namespace lathe {

using cpu::parallel_for;
using cpu::parallel_split;
using cpu::rows_per_chunk;
using cpu::WideRow;

namespace {

// x viewed as [rows, len] over its last dim.
struct Rows {
  int64_t rows, len;
};
Rows rows_of(const Tensor& x) {
  const int64_t len = x.dim() ? x.shape().back() : 1;
  return {len ? x.numel() / len : 0, len};
}

template <class T>
void softmax_rows(const Tensor& x, const Tensor& out, bool log) {
  using C = typename compute_type<T>::type;
  const Rows rows = rows_of(x);
  const int64_t R = rows.rows, V = rows.len;  // not a structured binding: clang 14 cannot capture those
  const T* px = static_cast<const T*>(x.data_ptr());
  T* py = static_cast<T*>(out.data_ptr());
  parallel_split(R, rows_per_chunk(V), [&](int64_t r0, int64_t r1) {
    WideRow<T> xin(V), yout(V);
    for (int64_t r = r0; r < r1; ++r) {
      const C* xr = xin.read(px + r * V);
      C* yr = yout.target(py + r * V);
      // Subtracting the row max keeps exp in range; a row of all -inf gives NaN, as in PyTorch.
      const C m = cpu::row_max(xr, V);
      const C s = cpu::exp_shifted_sum(xr, m, yr, V);
      if (log) {
        const C log_s = std::log(s);
        for (int64_t i = 0; i < V; ++i) yr[i] = (xr[i] - m) - log_s;
      } else {
        const C inv = C(1) / s;
        for (int64_t i = 0; i < V; ++i) yr[i] *= inv;
      }
      yout.write_back(py + r * V);
    }
  });
}

// softmax:     gx = y * (gy - sum(gy * y))
// log_softmax: gx = gy - exp(y) * sum(gy)
template <class T>
void softmax_backward_rows(const Tensor& y, const Tensor& gy, const Tensor& gx, bool log) {
  using C = typename compute_type<T>::type;
  const Rows rows = rows_of(y);
  const int64_t R = rows.rows, V = rows.len;  // not a structured binding: clang 14 cannot capture those
  const T* py = static_cast<const T*>(y.data_ptr());
  const T* pg = static_cast<const T*>(gy.data_ptr());
  T* pgx = static_cast<T*>(gx.data_ptr());
  parallel_split(R, rows_per_chunk(V), [&](int64_t r0, int64_t r1) {
    WideRow<T> yin(V), gin(V), gout(V);
    for (int64_t r = r0; r < r1; ++r) {
      const C* yr = yin.read(py + r * V);
      const C* gr = gin.read(pg + r * V);
      C* o = gout.target(pgx + r * V);
      if (log) {
        const C s = cpu::row_sum<C>(gr, V);
        for (int64_t i = 0; i < V; ++i) o[i] = gr[i] - cpu::exp_c(yr[i]) * s;
      } else {
        const C d = cpu::row_dot<C>(gr, yr, V);
        for (int64_t i = 0; i < V; ++i) o[i] = yr[i] * (gr[i] - d);
      }
      gout.write_back(pgx + r * V);
    }
  });
}

// The affine parameter widened to C, or `fill` everywhere when it is absent.
template <class T>
std::vector<typename compute_type<T>::type> widened_or(const Tensor& p, int64_t n, double fill) {
  using C = typename compute_type<T>::type;
  std::vector<C> v(static_cast<size_t>(n), C(fill));
  if (p.defined()) {
    const T* pp = static_cast<const T*>(p.data_ptr());
    for (int64_t i = 0; i < n; ++i) v[size_t(i)] = static_cast<C>(pp[i]);
  }
  return v;
}

// The rows a norm reads: x's, or with a branch (of element type B: T, or 16 bits for an f32 x),
// x + branch rounded to T as add rounds it, stored into `sum` on the way: the residual stream's add
// fused into the norm that reads it. An f32 or f64 sum is read back from `sum` itself.
template <class T, class B>
class NormInput {
 public:
  using C = typename compute_type<T>::type;
  NormInput(const Tensor& x, const Tensor& branch, const Tensor& sum, int64_t len)
      : px_(static_cast<const T*>(x.data_ptr())), len_(len), xin_(len) {
    if (!branch.defined()) return;
    pb_ = static_cast<const B*>(branch.data_ptr());
    psum_ = static_cast<T*>(sum.data_ptr());
    if constexpr (!std::is_same_v<T, C>) h_.resize(size_t(len));
    if constexpr (!std::is_same_v<B, C>) wide_.resize(size_t(len));
  }
  const C* row(int64_t r) {
    const C* xr = xin_.read(px_ + r * len_);
    if (!pb_) return xr;
    const C* br = branch_row(r);
    T* sr = psum_ + r * len_;
    if constexpr (std::is_same_v<T, C>) {
      for (int64_t i = 0; i < len_; ++i) sr[i] = xr[i] + br[i];
      return sr;
    } else {
      for (int64_t i = 0; i < len_; ++i) {
        sr[i] = static_cast<T>(xr[i] + br[i]);
        h_[size_t(i)] = static_cast<C>(sr[i]);
      }
      return h_.data();
    }
  }

 private:
  const C* branch_row(int64_t r) {
    if constexpr (std::is_same_v<B, C>) {
      return pb_ + r * len_;
    } else {
      cpu::widen(pb_ + r * len_, wide_.data(), len_);
      return wide_.data();
    }
  }

  const T* px_;
  int64_t len_;
  WideRow<T> xin_;
  const B* pb_ = nullptr;
  T* psum_ = nullptr;
  std::vector<C> h_, wide_;
};

// The input's gradient row `o` (the norm's own, about to be stored as T) plus the gradient the
// input already holds, each term rounded to T first as autograd's separate add would see them. A
// pass of its own after the row is written: within one expression the compiler would contract the
// last product of `o` and this add into one fused multiply-add, rounding differently.
template <class T>
void fold_gathered(typename compute_type<T>::type* o, const typename compute_type<T>::type* gathered, int64_t n) {
  using C = typename compute_type<T>::type;
  for (int64_t k = 0; k < n; ++k) o[k] = gathered[k] + static_cast<C>(static_cast<T>(o[k]));
}

// Calls fn.template operator()<B>() for the element type B of a norm's branch: T's when there is
// none, or 16 bits for an f32 T.
template <class T, class Fn>
void dispatch_branch(const Tensor& branch, Fn&& fn) {
  if (!branch.defined() || branch.dtype() == dtype_of<T>()) return fn.template operator()<T>();
  if constexpr (std::is_same_v<T, float>) {
    if (branch.dtype() == DType::bf16) return fn.template operator()<bf16>();
    if (branch.dtype() == DType::f16) return fn.template operator()<f16>();
  }
  LATHE_FAIL("norm: no kernel adds a ", dtype_name(branch.dtype()), " branch to ", dtype_name(dtype_of<T>()), " rows");
}

// The stat type S of the saved mean and rstd: f64 for f64 input, else f32.
template <class T>
using stat_of = std::conditional_t<std::is_same_v<T, double>, double, float>;

void check_stat_dtype(const char* op, const Tensor& x, const Tensor& stat) {
  const DType want = x.dtype() == DType::f64 ? DType::f64 : DType::f32;
  LATHE_CHECK(stat.dtype() == want, op, ": statistics ", stat.desc(), " must be ", dtype_name(want), " for the input ",
              x.desc());
}

// T: the input's element type; Y: the output's (T, or 16-bit for an f32 input); S: the type of the
// saved mean and rstd (f32, or f64 for f64 inputs).
template <class T, class Y, class S, class B>
void layer_norm_rows(const Tensor& x, const Tensor& residual, const Tensor& weight, const Tensor& bias, double eps,
                     const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& sum) {
  using C = typename compute_type<T>::type;
  const Rows rows = rows_of(x);
  const int64_t R = rows.rows, D = rows.len;  // not a structured binding: clang 14 cannot capture those
  const auto w = widened_or<T>(weight, D, 1.0), b = widened_or<T>(bias, D, 0.0);
  Y* py = static_cast<Y*>(out.data_ptr());
  S* pm = static_cast<S*>(mean.data_ptr());
  S* pr = static_cast<S*>(rstd.data_ptr());
  parallel_split(R, rows_per_chunk(D), [&](int64_t r0, int64_t r1) {
    NormInput<T, B> xin(x, residual, sum, D);
    WideRow<Y> yout(D);
    for (int64_t r = r0; r < r1; ++r) {
      const C* xr = xin.row(r);
      // Two passes in f64: the centred variance does not cancel catastrophically.
      const double mu = cpu::row_sum<double>(xr, D) / double(D);
      const double var = cpu::row_sq_dev<double>(xr, mu, D) / double(D);
      const double rs = 1.0 / std::sqrt(var + eps);
      pm[r] = S(mu);
      pr[r] = S(rs);
      const C m = C(mu), s = C(rs);
      C* yr = yout.target(py + r * D);
      for (int64_t i = 0; i < D; ++i) yr[i] = (xr[i] - m) * s * w[size_t(i)] + b[size_t(i)];
      yout.write_back(py + r * D);
    }
  });
}

// With xh = (x - mean) * rstd and g = gy * w:
//   gx = rstd * (g - mean(g) - xh * mean(g * xh)),  gweight = sum_rows(gy * xh),  gbias = sum_rows(gy).
// The column sums are taken per fixed chunk of rows and the chunk partials added in chunk order.
// G: the element type of gy (the forward output's); everything else is T's.
template <class T, class G, class S>
void layer_norm_backward_rows(const Tensor& x, const Tensor& weight, const Tensor& mean,
                              const Tensor& rstd, const Tensor& gy, const Tensor& gathered, const Tensor& gx,
                              const Tensor& gweight, const Tensor& gbias) {
  using C = typename compute_type<T>::type;
  const Rows rows = rows_of(x);
  const int64_t R = rows.rows, D = rows.len;  // not a structured binding: clang 14 cannot capture those
  const auto w = widened_or<T>(weight, D, 1.0);
  const bool want_w = gweight.defined(), want_b = gbias.defined();
  const int64_t chunk_rows = rows_per_chunk(D);
  const int64_t chunks = (R + chunk_rows - 1) / chunk_rows;
  std::vector<C> part_w(want_w ? size_t(chunks * D) : 0), part_b(want_b ? size_t(chunks * D) : 0);

  const T* px = static_cast<const T*>(x.data_ptr());
  const G* pg = static_cast<const G*>(gy.data_ptr());
  const T* pgath = gathered.defined() ? static_cast<const T*>(gathered.data_ptr()) : nullptr;
  T* pgx = static_cast<T*>(gx.data_ptr());
  const S* pm = static_cast<const S*>(mean.data_ptr());
  const S* pr = static_cast<const S*>(rstd.data_ptr());
  parallel_for(chunks, 1, [&](int64_t c0, int64_t c1) {
    WideRow<T> xin(D), gout(D), gathered_in(D);
    WideRow<G> gin(D);
    for (int64_t c = c0; c < c1; ++c) {
      C* cw = want_w ? &part_w[size_t(c * D)] : nullptr;
      C* cb = want_b ? &part_b[size_t(c * D)] : nullptr;
      for (int64_t r = c * chunk_rows; r < std::min(R, (c + 1) * chunk_rows); ++r) {
        const C* xr = xin.read(px + r * D);
        const C* gr = gin.read(pg + r * D);
        const C mu = C(pm[r]), rs = C(pr[r]);
        double acc_g[cpu::kLanes] = {}, acc_gx[cpu::kLanes] = {};
        int64_t i = 0;
        for (; i + cpu::kLanes <= D; i += cpu::kLanes)
          for (int64_t j = 0; j < cpu::kLanes; ++j) {
            const C g = gr[i + j] * w[size_t(i + j)];
            acc_g[j] += double(g);
            acc_gx[j] += double(g * ((xr[i + j] - mu) * rs));
          }
        double sum_g = cpu::sum_lanes(acc_g), sum_gx = cpu::sum_lanes(acc_gx);
        for (; i < D; ++i) {
          const C g = gr[i] * w[size_t(i)];
          sum_g += double(g);
          sum_gx += double(g * ((xr[i] - mu) * rs));
        }
        const C mean_g = C(sum_g / double(D)), mean_gx = C(sum_gx / double(D));
        C* o = gout.target(pgx + r * D);
        for (int64_t k = 0; k < D; ++k) {
          const C xh = (xr[k] - mu) * rs;
          o[k] = rs * (gr[k] * w[size_t(k)] - mean_g - xh * mean_gx);
        }
        if (pgath) fold_gathered<T>(o, gathered_in.read(pgath + r * D), D);
        gout.write_back(pgx + r * D);
        if (cw)
          for (int64_t k = 0; k < D; ++k) cw[k] += gr[k] * ((xr[k] - mu) * rs);
        if (cb)
          for (int64_t k = 0; k < D; ++k) cb[k] += gr[k];
      }
    }
  });

  auto combine = [&](const std::vector<C>& part, const Tensor& dst) {
    std::vector<double> acc(size_t(D), 0.0);
    for (int64_t c = 0; c < chunks; ++c)
      for (int64_t k = 0; k < D; ++k) acc[size_t(k)] += double(part[size_t(c * D + k)]);
    T* pd = static_cast<T*>(dst.data_ptr());
    for (int64_t k = 0; k < D; ++k) pd[k] = static_cast<T>(acc[size_t(k)]);
  };
  if (want_w) combine(part_w, gweight);
  if (want_b) combine(part_b, gbias);
}

}  // namespace

void CpuBackend::softmax(const Tensor& x, const Tensor& out, bool log) {
  profile::KernelScope scope(log ? "log_softmax" : "softmax");
  Tensor xc = x.contiguous();
  LATHE_DISPATCH_FLOAT(x.dtype(), log ? "log_softmax" : "softmax",
                       [&]<class T>() { softmax_rows<T>(xc, out, log); });
}

void CpuBackend::softmax_backward(const Tensor& y, const Tensor& gy, const Tensor& gx, bool log) {
  profile::KernelScope scope(log ? "log_softmax_backward" : "softmax_backward");
  Tensor yc = y.contiguous(), gc = gy.contiguous();
  LATHE_DISPATCH_FLOAT(y.dtype(), log ? "log_softmax_backward" : "softmax_backward",
                       [&]<class T>() { softmax_backward_rows<T>(yc, gc, gx, log); });
}

namespace {

// Calls fn.template operator()<T, Y>() for x's element type T and the element type Y of the
// layer norm's output (or its gradient): T itself, or 16 bits for an f32 input.
template <class Fn>
void dispatch_layer_norm(const char* op, const Tensor& x, DType out_dtype, Fn&& fn) {
  LATHE_DISPATCH_FLOAT(x.dtype(), op, [&]<class T>() {
    if (out_dtype == x.dtype()) return fn.template operator()<T, T>();
    if constexpr (std::is_same_v<T, float>) {
      if (out_dtype == DType::bf16) return fn.template operator()<T, bf16>();
      if (out_dtype == DType::f16) return fn.template operator()<T, f16>();
    }
    LATHE_FAIL(op, ": no kernel from ", dtype_name(x.dtype()), " input to ", dtype_name(out_dtype), " output");
  });
}

}  // namespace

void CpuBackend::layer_norm(const Tensor& x, const Tensor& residual, const Tensor& weight, const Tensor& bias,
                            double eps, const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& sum) {
  profile::KernelScope scope(residual.defined() ? "add_layer_norm" : "layer_norm");
  check_stat_dtype("layer_norm", x, mean);
  Tensor xc = x.contiguous(), rc = residual.defined() ? residual.contiguous() : residual;
  Tensor wc = weight.defined() ? weight.contiguous() : weight;
  Tensor bc = bias.defined() ? bias.contiguous() : bias;
  dispatch_layer_norm("layer_norm", x, out.dtype(), [&]<class T, class Y>() {
    dispatch_branch<T>(rc, [&]<class B>() {
      layer_norm_rows<T, Y, stat_of<T>, B>(xc, rc, wc, bc, eps, out, mean, rstd, sum);
    });
  });
}

void CpuBackend::layer_norm_backward(const Tensor& x, const Tensor& weight, const Tensor& mean,
                                     const Tensor& rstd, const Tensor& gy, const Tensor& gathered, const Tensor& gx,
                                     const Tensor& gweight, const Tensor& gbias) {
  profile::KernelScope scope("layer_norm_backward");
  check_stat_dtype("layer_norm", x, mean);
  Tensor xc = x.contiguous(), gc = gy.contiguous();
  Tensor wc = weight.defined() ? weight.contiguous() : weight;
  Tensor ac = gathered.defined() ? gathered.contiguous() : gathered;
  dispatch_layer_norm("layer_norm_backward", x, gy.dtype(), [&]<class T, class G>() {
    layer_norm_backward_rows<T, G, stat_of<T>>(xc, wc, mean, rstd, gc, ac, gx, gweight, gbias);
  });
}

// ---------------------------------------------------------------- RMSNorm

namespace {

// Y: the output's element type (T, or 16-bit for an f32 input); S: the type of the saved rstd (f32,
// or f64 for f64 inputs). The mean square accumulates in f64.
template <class T, class Y, class S, class B>
void rms_norm_rows(const Tensor& x, const Tensor& residual, const Tensor& weight, double eps, const Tensor& out,
                   const Tensor& rstd, const Tensor& sum) {
  using C = typename compute_type<T>::type;
  const Rows rows = rows_of(x);
  const int64_t R = rows.rows, D = rows.len;  // not a structured binding: clang 14 cannot capture those
  const auto w = widened_or<T>(weight, D, 1.0);
  Y* py = static_cast<Y*>(out.data_ptr());
  S* pr = static_cast<S*>(rstd.data_ptr());
  parallel_split(R, rows_per_chunk(D), [&](int64_t r0, int64_t r1) {
    NormInput<T, B> xin(x, residual, sum, D);
    WideRow<Y> yout(D);
    for (int64_t r = r0; r < r1; ++r) {
      const C* xr = xin.row(r);
      const double rs = 1.0 / std::sqrt(cpu::row_dot<double>(xr, xr, D) / double(D) + eps);
      pr[r] = S(rs);
      const C s = C(rs);
      C* yr = yout.target(py + r * D);
      for (int64_t i = 0; i < D; ++i) yr[i] = xr[i] * s * w[size_t(i)];
      yout.write_back(py + r * D);
    }
  });
}

// With xh = x * rstd and g = gy * w:
//   gx = rstd * (g - xh * mean(g * xh)),  gweight = sum_rows(gy * xh).
// The weight's column sums are taken per fixed chunk of rows and the chunk partials added in
// chunk order, as layer norm's. G: the element type of gy (the forward output's); everything else
// is T's.
template <class T, class G, class S>
void rms_norm_backward_rows(const Tensor& x, const Tensor& weight, const Tensor& rstd, const Tensor& gy,
                            const Tensor& gathered, const Tensor& gx, const Tensor& gweight) {
  using C = typename compute_type<T>::type;
  const Rows rows = rows_of(x);
  const int64_t R = rows.rows, D = rows.len;  // not a structured binding: clang 14 cannot capture those
  const auto w = widened_or<T>(weight, D, 1.0);
  const bool want_w = gweight.defined();
  const int64_t chunk_rows = rows_per_chunk(D);
  const int64_t chunks = (R + chunk_rows - 1) / chunk_rows;
  std::vector<C> part_w(want_w ? size_t(chunks * D) : 0);

  const T* px = static_cast<const T*>(x.data_ptr());
  const G* pg = static_cast<const G*>(gy.data_ptr());
  const T* pgath = gathered.defined() ? static_cast<const T*>(gathered.data_ptr()) : nullptr;
  T* pgx = static_cast<T*>(gx.data_ptr());
  const S* pr = static_cast<const S*>(rstd.data_ptr());
  parallel_for(chunks, 1, [&](int64_t c0, int64_t c1) {
    WideRow<T> xin(D), gout(D), gathered_in(D);
    WideRow<G> gin(D);
    for (int64_t c = c0; c < c1; ++c) {
      C* cw = want_w ? &part_w[size_t(c * D)] : nullptr;
      for (int64_t r = c * chunk_rows; r < std::min(R, (c + 1) * chunk_rows); ++r) {
        const C* xr = xin.read(px + r * D);
        const C* gr = gin.read(pg + r * D);
        const C rs = C(pr[r]);
        double acc[cpu::kLanes] = {};
        int64_t i = 0;
        for (; i + cpu::kLanes <= D; i += cpu::kLanes)
          for (int64_t j = 0; j < cpu::kLanes; ++j) acc[j] += double(gr[i + j] * w[size_t(i + j)] * (xr[i + j] * rs));
        double sum_gx = cpu::sum_lanes(acc);
        for (; i < D; ++i) sum_gx += double(gr[i] * w[size_t(i)] * (xr[i] * rs));
        const C mean_gx = C(sum_gx / double(D));
        C* o = gout.target(pgx + r * D);
        for (int64_t k = 0; k < D; ++k) o[k] = rs * (gr[k] * w[size_t(k)] - (xr[k] * rs) * mean_gx);
        if (pgath) fold_gathered<T>(o, gathered_in.read(pgath + r * D), D);
        gout.write_back(pgx + r * D);
        if (cw)
          for (int64_t k = 0; k < D; ++k) cw[k] += gr[k] * (xr[k] * rs);
      }
    }
  });

  if (want_w) {
    std::vector<double> acc(size_t(D), 0.0);
    for (int64_t c = 0; c < chunks; ++c)
      for (int64_t k = 0; k < D; ++k) acc[size_t(k)] += double(part_w[size_t(c * D + k)]);
    T* pd = static_cast<T*>(gweight.data_ptr());
    for (int64_t k = 0; k < D; ++k) pd[k] = static_cast<T>(acc[size_t(k)]);
  }
}

}  // namespace

void CpuBackend::rms_norm(const Tensor& x, const Tensor& residual, const Tensor& weight, double eps,
                          const Tensor& out, const Tensor& rstd, const Tensor& sum) {
  profile::KernelScope scope(residual.defined() ? "add_rms_norm" : "rms_norm");
  check_stat_dtype("rms_norm", x, rstd);
  Tensor xc = x.contiguous(), rc = residual.defined() ? residual.contiguous() : residual;
  Tensor wc = weight.defined() ? weight.contiguous() : weight;
  dispatch_layer_norm("rms_norm", x, out.dtype(), [&]<class T, class Y>() {
    dispatch_branch<T>(rc, [&]<class B>() { rms_norm_rows<T, Y, stat_of<T>, B>(xc, rc, wc, eps, out, rstd, sum); });
  });
}

void CpuBackend::rms_norm_backward(const Tensor& x, const Tensor& weight, const Tensor& rstd, const Tensor& gy,
                                   const Tensor& gathered, const Tensor& gx, const Tensor& gweight) {
  profile::KernelScope scope("rms_norm_backward");
  check_stat_dtype("rms_norm", x, rstd);
  Tensor xc = x.contiguous(), gc = gy.contiguous();
  Tensor wc = weight.defined() ? weight.contiguous() : weight;
  Tensor ac = gathered.defined() ? gathered.contiguous() : gathered;
  dispatch_layer_norm("rms_norm_backward", x, gy.dtype(), [&]<class T, class G>() {
    rms_norm_backward_rows<T, G, stat_of<T>>(xc, wc, rstd, gc, ac, gx, gweight);
  });
}

}  // namespace lathe
