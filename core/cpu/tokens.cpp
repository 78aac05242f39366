// CPU kernels indexed by token ids: embedding (ids pick rows) and cross-entropy (targets pick
// classes), forward and backward, and the fused classifier (the loss and its gradient in one pass).
//
// Ids are validated in one serial pass before any parallel work, so a bad id is reported (with its
// position) instead of reading out of bounds, and no exception ever leaves an OpenMP region.
#include <cmath>
#include <cstring>
#include <sstream>

#include "core/cpu/loops.h"
#include "core/cpu/row_math.h"
#include "core/kernel_profile.h"

namespace lathe {

using cpu::parallel_for;
using cpu::parallel_split;
using cpu::rows_per_chunk;
using cpu::WideRow;

namespace {

// "[1, 3]": the multi-index of flat position n in shape.
std::string position_str(int64_t n, const Shape& shape) {
  std::vector<int64_t> idx(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    idx[d] = shape[d] ? n % shape[d] : 0;
    n = shape[d] ? n / shape[d] : 0;
  }
  return shape_str(idx);
}

// Ids as i64, validated against [0, limit) (entries equal to `skip` are allowed when has_skip).
template <class I>
std::vector<int64_t> checked_ids(const Tensor& ids, int64_t limit, const char* op, const char* what,
                                 const char* limit_name, bool has_skip = false, int64_t skip = 0) {
  const I* p = static_cast<const I*>(ids.data_ptr());
  const int64_t n = ids.numel();
  std::vector<int64_t> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const int64_t v = int64_t(p[i]);
    if ((v < 0 || v >= limit) && !(has_skip && v == skip)) {
      std::ostringstream os;
      os << op << ": " << what << " " << v << " at position " << position_str(i, ids.shape()) << " of "
         << ids.desc() << " is out of range for " << limit_name << " " << limit;
      if (has_skip) os << " (ignore_index is " << skip << ")";
      throw Error(os.str());
    }
    out[size_t(i)] = v;
  }
  return out;
}

std::vector<int64_t> embedding_ids(const Tensor& idx, int64_t vocab, const char* op) {
  Tensor ic = idx.contiguous();
  return LATHE_DISPATCH_INDEX(idx.dtype(), op, [&]<class I>() {
    return checked_ids<I>(ic, vocab, op, "id", "vocab size");
  });
}

}  // namespace

void CpuBackend::embedding(const Tensor& weight, const Tensor& idx, const Tensor& out) {
  profile::KernelScope scope("embedding");
  Tensor w = weight.contiguous();
  const int64_t V = w.shape()[0], C = w.shape()[1];
  const std::vector<int64_t> ids = embedding_ids(idx, V, "embedding");
  const size_t row_bytes = size_t(C) * dtype_size(w.dtype());
  const char* src = static_cast<const char*>(w.data_ptr());
  char* dst = static_cast<char*>(out.data_ptr());
  parallel_split(int64_t(ids.size()), rows_per_chunk(C), [&](int64_t n0, int64_t n1) {
    for (int64_t n = n0; n < n1; ++n)
      std::memcpy(dst + size_t(n) * row_bytes, src + size_t(ids[size_t(n)]) * row_bytes, row_bytes);
  });
}

void CpuBackend::embedding_backward(const Tensor& idx, const Tensor& gout, const Tensor& gweight) {
  profile::KernelScope scope("embedding_backward");
  const int64_t V = gweight.shape()[0], C = gweight.shape()[1];
  const std::vector<int64_t> ids = embedding_ids(idx, V, "embedding_backward");
  const int64_t N = int64_t(ids.size());
  Tensor g = gout.contiguous();

  // Counting sort of positions by id: each vocabulary row then sums its own positions in
  // increasing order, so threads own disjoint rows and the sums are deterministic.
  std::vector<int64_t> start(size_t(V) + 1, 0), order(static_cast<size_t>(N));
  for (int64_t id : ids) ++start[size_t(id) + 1];
  for (int64_t v = 0; v < V; ++v) start[size_t(v) + 1] += start[size_t(v)];
  {
    std::vector<int64_t> fill(start.begin(), start.end() - 1);
    for (int64_t n = 0; n < N; ++n) order[size_t(fill[size_t(ids[size_t(n)])]++)] = n;
  }

  LATHE_DISPATCH_FLOAT(gweight.dtype(), "embedding_backward", [&]<class T>() {
    using Acc = typename compute_type<T>::type;
    const T* pg = static_cast<const T*>(g.data_ptr());
    T* pw = static_cast<T*>(gweight.data_ptr());
    parallel_for(V, rows_per_chunk(C), [&](int64_t v0, int64_t v1) {
      std::vector<Acc> acc(static_cast<size_t>(C));
      for (int64_t v = v0; v < v1; ++v) {
        const int64_t b = start[size_t(v)], e = start[size_t(v) + 1];
        if (b == e) continue;
        T* row = pw + v * C;
        for (int64_t k = 0; k < C; ++k) acc[size_t(k)] = static_cast<Acc>(row[k]);
        for (int64_t p = b; p < e; ++p) {
          const T* src = pg + order[size_t(p)] * C;
          for (int64_t k = 0; k < C; ++k) acc[size_t(k)] += static_cast<Acc>(src[k]);
        }
        for (int64_t k = 0; k < C; ++k) row[k] = static_cast<T>(acc[size_t(k)]);
      }
    });
  });
}

namespace {

std::vector<int64_t> ce_targets(const Tensor& targets, int64_t V, int64_t ignore_index, const char* op) {
  Tensor tc = targets.contiguous();
  return LATHE_DISPATCH_INDEX(targets.dtype(), op, [&]<class I>() {
    return checked_ids<I>(tc, V, op, "target", "number of classes", true, ignore_index);
  });
}

}  // namespace

// loss[n] = logsumexp(logits[n]) - logits[n, t]  =  log(sum(exp(x - m))) + m - x[t]
void CpuBackend::cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index,
                               const Tensor& losses) {
  profile::KernelScope scope("cross_entropy");
  Tensor x = logits.contiguous();
  const int64_t N = x.shape()[0], V = x.shape()[1];
  const std::vector<int64_t> t = ce_targets(targets, V, ignore_index, "cross_entropy");
  LATHE_DISPATCH_FLOAT(x.dtype(), "cross_entropy", [&]<class T>() {
    using C = typename compute_type<T>::type;
    const T* px = static_cast<const T*>(x.data_ptr());
    T* pl = static_cast<T*>(losses.data_ptr());
    parallel_split(N, rows_per_chunk(V), [&](int64_t n0, int64_t n1) {
      WideRow<T> xin(V);
      for (int64_t n = n0; n < n1; ++n) {
        const int64_t tn = t[size_t(n)];
        if (tn == ignore_index) {
          pl[n] = T(0);
          continue;
        }
        const C* xr = xin.read(px + n * V);
        const C m = cpu::row_max(xr, V);
        const C s = cpu::row_exp_sum(xr, m, V);
        pl[n] = static_cast<T>(std::log(s) + (m - xr[tn]));
      }
    });
  });
}

// glogits[n] = (softmax(logits[n]) - onehot(t[n])) * gloss[n]; the softmax is recomputed from the
// logits straight into glogits, so no probability tensor is kept between forward and backward.
void CpuBackend::cross_entropy_backward(const Tensor& logits, const Tensor& targets, int64_t ignore_index,
                                        const Tensor& gloss, const Tensor& glogits) {
  profile::KernelScope scope("cross_entropy_backward");
  Tensor x = logits.contiguous();
  const int64_t N = x.shape()[0], V = x.shape()[1];
  const std::vector<int64_t> t = ce_targets(targets, V, ignore_index, "cross_entropy_backward");
  // gloss is often one scalar broadcast over the rows (stride 0).
  const int64_t gstride = gloss.dim() ? gloss.strides()[0] : 0;
  LATHE_DISPATCH_FLOAT(x.dtype(), "cross_entropy_backward", [&]<class T>() {
    using C = typename compute_type<T>::type;
    const T* px = static_cast<const T*>(x.data_ptr());
    const T* pgl = static_cast<const T*>(gloss.data_ptr());
    T* pgx = static_cast<T*>(glogits.data_ptr());
    parallel_split(N, rows_per_chunk(V), [&](int64_t n0, int64_t n1) {
      WideRow<T> xin(V), gout(V);
      for (int64_t n = n0; n < n1; ++n) {
        const int64_t tn = t[size_t(n)];
        C* o = gout.target(pgx + n * V);
        if (tn == ignore_index) {
          std::fill(o, o + V, C(0));
        } else {
          const C* xr = xin.read(px + n * V);
          const C gl = static_cast<C>(pgl[n * gstride]);
          const C m = cpu::row_max(xr, V);
          // The exponentials go straight into the gradient row and are scaled there: one exp
          // per element, and the second pass reads a row that is still in cache.
          const C scale = gl / cpu::exp_shifted_sum(xr, m, o, V);
          for (int64_t i = 0; i < V; ++i) o[i] *= scale;
          o[tn] -= gl;
        }
        gout.write_back(pgx + n * V);
      }
    });
  });
}

// The fused classifier: loss[n] = log(sum(exp(x - m))) + m - x[t] and, with glogits, the gradient
// row (exp(x - m) / s - onehot(t)) * w, in one visit of the row; the exponentials go straight into
// the gradient row and are scaled there, as in cross_entropy_backward, so that for w = gloss the two
// give the same bits. In place (glogits == logits) the row's max and x[t] are read before the
// exponentials overwrite it.
void CpuBackend::cross_entropy_fused(const Tensor& logits, const Tensor& targets, int64_t ignore_index,
                                     const Tensor& weight, const Tensor& losses, const Tensor& glogits) {
  profile::KernelScope scope("cross_entropy_fused");
  const int64_t N = logits.shape()[0], V = logits.shape()[1];
  const std::vector<int64_t> t = ce_targets(targets, V, ignore_index, "cross_entropy_fused");
  const bool with_grad = glogits.defined();
  LATHE_DISPATCH_FLOAT(logits.dtype(), "cross_entropy_fused", [&]<class T>() {
    using C = typename compute_type<T>::type;
    const T* px = static_cast<const T*>(logits.data_ptr());
    C* pl = static_cast<C*>(losses.data_ptr());
    T* pg = with_grad ? static_cast<T*>(glogits.data_ptr()) : nullptr;
    const C w = with_grad ? *static_cast<const C*>(weight.data_ptr()) : C(0);
    parallel_split(N, rows_per_chunk(V), [&](int64_t n0, int64_t n1) {
      WideRow<T> xin(V), gout(V);
      for (int64_t n = n0; n < n1; ++n) {
        const int64_t tn = t[size_t(n)];
        if (tn == ignore_index) {
          pl[n] = C(0);
          if (with_grad) {
            C* o = gout.target(pg + n * V);
            std::fill(o, o + V, C(0));
            gout.write_back(pg + n * V);
          }
          continue;
        }
        const C* xr = xin.read(px + n * V);
        const C m = cpu::row_max(xr, V);
        const C xt = xr[tn];
        if (!with_grad) {
          pl[n] = std::log(cpu::row_exp_sum(xr, m, V)) + (m - xt);
          continue;
        }
        C* o = gout.target(pg + n * V);
        const C s = cpu::exp_shifted_sum(xr, m, o, V);
        pl[n] = std::log(s) + (m - xt);
        const C scale = w / s;
        for (int64_t i = 0; i < V; ++i) o[i] *= scale;
        o[tn] -= w;
        gout.write_back(pg + n * V);
      }
    });
  });
}

}  // namespace lathe
