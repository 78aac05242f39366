// CPU indexing kernels: index_select and gather read rows picked by integer indices; index_add
// and scatter_add (their backwards) accumulate into them.
//
// Indices are validated in one serial pass before any parallel work, so a bad index is reported
// with its position instead of reading out of bounds, and no exception leaves an OpenMP region.
// The accumulating kernels give every thread its own output lines and add the entries of a line
// in index order, so repeated indices sum in the same order whatever the thread count.
#include <cstring>

#include "core/cpu/loops.h"
#include "core/kernel_profile.h"

namespace lathe {

using cpu::elementwise_loop;
using cpu::parallel_for;

namespace {

// "[1, 3]": the multi-index of flat position n in shape.
std::string position_of(int64_t n, const Shape& shape) {
  Shape idx(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    idx[d] = shape[d] ? n % shape[d] : 0;
    n = shape[d] ? n / shape[d] : 0;
  }
  return shape_str(idx);
}

// Throws unless every entry of idx lies in [0, limit); the message names the op, the bad value,
// where it sits in idx and the size it indexes.
void check_indices(const Tensor& idx, int64_t limit, int64_t dim, const char* op) {
  Tensor ic = idx.contiguous();
  LATHE_DISPATCH_INDEX(ic.dtype(), op, [&]<class I>() {
    const I* p = static_cast<const I*>(ic.data_ptr());
    for (int64_t n = 0; n < ic.numel(); ++n) {
      const int64_t v = int64_t(p[n]);
      LATHE_CHECK(v >= 0 && v < limit, op, ": index ", v, " at position ", position_of(n, ic.shape()),
                  " of the index tensor is out of range for dim ", dim, " of size ", limit);
    }
  });
}

// The indices of a 1-D (or 0-d) index tensor as i64.
std::vector<int64_t> index_list(const Tensor& idx) {
  Tensor ic = idx.contiguous();
  return LATHE_DISPATCH_INDEX(ic.dtype(), "index", [&]<class I>() {
    const I* p = static_cast<const I*>(ic.data_ptr());
    std::vector<int64_t> v(static_cast<size_t>(ic.numel()));
    for (size_t n = 0; n < v.size(); ++n) v[n] = int64_t(p[n]);
    return v;
  });
}

// A contiguous tensor seen as [outer, size(dim), inner].
struct Split3 {
  int64_t outer = 1, size = 1, inner = 1;
};
Split3 split_around(const Shape& shape, int64_t dim) {
  Split3 s;
  if (shape.empty()) return s;
  for (int64_t d = 0; d < int64_t(shape.size()); ++d) {
    if (d < dim) s.outer *= shape[size_t(d)];
    else if (d > dim) s.inner *= shape[size_t(d)];
  }
  s.size = shape[size_t(dim)];
  return s;
}

// Chunk size (in rows of `row` elements) that gives each parallel task about kParallelGrain elements.
int64_t rows_grain(int64_t row) { return std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(row, 1)); }

}  // namespace

void CpuBackend::index_select(const Tensor& x_in, int64_t dim, const Tensor& idx, const Tensor& out) {
  profile::KernelScope scope("index_select");
  LATHE_CHECK(out.is_contiguous() && out.dtype() == x_in.dtype() && idx.dim() <= 1,
              "index_select kernel: x ", x_in.desc(), ", index ", idx.desc(), " and output ", out.desc(),
              " do not match");
  const Tensor x = x_in.contiguous();
  const Split3 s = split_around(x.shape(), dim);
  check_indices(idx, s.size, dim, "index_select");
  const std::vector<int64_t> ids = index_list(idx);
  const int64_t J = int64_t(ids.size());
  LATHE_CHECK(out.numel() == s.outer * J * s.inner, "index_select kernel: output ", out.desc(), " does not fit ",
              J, " indices into ", x_in.desc());
  const size_t esize = dtype_size(x.dtype());
  const size_t row_bytes = size_t(s.inner) * esize;
  const char* src = static_cast<const char*>(x.data_ptr());
  char* dst = static_cast<char*>(out.data_ptr());
  // Each task copies whole output rows (o, j): disjoint writes.
  parallel_for(s.outer * J, rows_grain(s.inner), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t o = r / J, j = r % J;
      std::memcpy(dst + size_t(r) * row_bytes, src + size_t(o * s.size + ids[size_t(j)]) * row_bytes, row_bytes);
    }
  });
}

void CpuBackend::index_add(const Tensor& out, int64_t dim, const Tensor& idx, const Tensor& src_in) {
  profile::KernelScope scope("index_add");
  LATHE_CHECK(out.dtype() != DType::b8, "index_add: not defined for bool tensors, got ", out.desc());
  LATHE_CHECK(src_in.dtype() == out.dtype() && idx.dim() <= 1, "index_add kernel: out ", out.desc(), ", index ",
              idx.desc(), " and source ", src_in.desc(), " do not match");
  const Tensor acc = out.is_contiguous() ? out : out.contiguous();
  const Split3 s = split_around(acc.shape(), dim);
  check_indices(idx, s.size, dim, "index_add");
  const std::vector<int64_t> ids = index_list(idx);
  const int64_t J = int64_t(ids.size());
  const Tensor src = src_in.contiguous();
  LATHE_CHECK(src.numel() == s.outer * J * s.inner, "index_add kernel: source ", src_in.desc(), " does not fit ",
              J, " indices into ", out.desc());
  LATHE_DISPATCH_ALL(acc.dtype(), "index_add", [&]<class T>() {
    using C = typename compute_type<T>::type;
    T* po = static_cast<T*>(acc.data_ptr());
    const T* ps = static_cast<const T*>(src.data_ptr());
    // A task owns out[o, :, i0:i1] and walks j in order: disjoint writes, a fixed order per element.
    const int64_t blocks = (s.inner + kParallelGrain - 1) / kParallelGrain;
    parallel_for(s.outer * blocks, rows_grain(J * std::min(s.inner, kParallelGrain)), [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) {
        const int64_t o = t / blocks, i0 = (t % blocks) * kParallelGrain;
        const int64_t i1 = std::min(s.inner, i0 + kParallelGrain);
        for (int64_t j = 0; j < J; ++j) {
          T* d = po + (o * s.size + ids[size_t(j)]) * s.inner;
          const T* g = ps + (o * J + j) * s.inner;
          for (int64_t i = i0; i < i1; ++i) d[i] = static_cast<T>(C(cpu::load(d + i) + cpu::load(g + i)));
        }
      }
    });
  });
  if (!out.is_contiguous()) copy(acc, out);
}

void CpuBackend::gather(const Tensor& x_in, int64_t dim, const Tensor& idx_in, const Tensor& out_in) {
  profile::KernelScope scope("gather");
  LATHE_CHECK(out_in.shape() == idx_in.shape() && out_in.dtype() == x_in.dtype() && idx_in.dim() == x_in.dim(),
              "gather kernel: x ", x_in.desc(), ", index ", idx_in.desc(), " and output ", out_in.desc(),
              " do not match");
  if (out_in.numel() == 0) return;
  // 0-d operands are one-element 1-D ones.
  const Tensor x = x_in.dim() ? x_in : x_in.reshape({1});
  const Tensor idx = idx_in.dim() ? idx_in : idx_in.reshape({1});
  const Tensor out = out_in.dim() ? out_in : out_in.reshape({1});
  for (int64_t d = 0; d < x.dim(); ++d)
    LATHE_CHECK(d == dim || idx.shape()[size_t(d)] <= x.shape()[size_t(d)], "gather kernel: index ",
                idx_in.desc(), " is larger than ", x_in.desc(), " in dim ", d);
  const int64_t limit = x.shape()[size_t(dim)];
  check_indices(idx, limit, dim, "gather");
  // x is walked with idx's geometry; its coordinate along dim comes from the index instead.
  Strides xs = x.strides();
  const int64_t x_dim_stride = xs[size_t(dim)];
  xs[size_t(dim)] = 0;
  std::array<const Strides*, 3> st{&out.strides(), &idx.strides(), &xs};
  std::array<char*, 3> base{static_cast<char*>(out.data_ptr()), static_cast<char*>(idx.data_ptr()),
                            static_cast<char*>(x.data_ptr())};
  LATHE_DISPATCH_ALL(x.dtype(), "gather", [&]<class T>() {
    LATHE_DISPATCH_INDEX(idx.dtype(), "gather", [&]<class I>() {
      std::array<int64_t, 3> elem{sizeof(T), sizeof(I), sizeof(T)};
      elementwise_loop<3>(idx.shape(), st, base, elem,
                          [&](const std::array<char*, 3>& p, const std::array<int64_t, 3>& s, int64_t n) {
        T* o = reinterpret_cast<T*>(p[0]);
        const I* ix = reinterpret_cast<const I*>(p[1]);
        const T* xp = reinterpret_cast<const T*>(p[2]);
        for (int64_t k = 0; k < n; ++k) o[k * s[0]] = xp[k * s[2] + int64_t(ix[k * s[1]]) * x_dim_stride];
      });
    });
  });
}

void CpuBackend::scatter_add(const Tensor& out_in, int64_t dim, const Tensor& idx_in, const Tensor& src_in) {
  profile::KernelScope scope("scatter_add");
  LATHE_CHECK(out_in.dtype() != DType::b8, "scatter_add: not defined for bool tensors, got ", out_in.desc());
  LATHE_CHECK(src_in.dtype() == out_in.dtype() && idx_in.dim() == out_in.dim() && src_in.dim() == out_in.dim(),
              "scatter_add kernel: out ", out_in.desc(), ", index ", idx_in.desc(), " and source ", src_in.desc(),
              " do not match");
  for (int64_t d = 0; d < idx_in.dim(); ++d)
    LATHE_CHECK(idx_in.shape()[size_t(d)] <= src_in.shape()[size_t(d)] &&
                    (d == dim || idx_in.shape()[size_t(d)] <= out_in.shape()[size_t(d)]),
                "scatter_add kernel: index ", idx_in.desc(), " is larger than source ", src_in.desc(),
                " or output ", out_in.desc(), " in dim ", d);
  if (idx_in.numel() == 0) return;
  const Tensor acc = out_in.is_contiguous() ? out_in : out_in.contiguous();
  const Tensor out = acc.dim() ? acc : acc.reshape({1});
  const Tensor idx = idx_in.dim() ? idx_in : idx_in.reshape({1});
  const Tensor src = src_in.dim() ? src_in : src_in.reshape({1});
  const int64_t limit = out.shape()[size_t(dim)];
  check_indices(idx, limit, dim, "scatter_add");
  // One line per coordinate of idx outside dim; a line's entries are added in index order by
  // the one task that owns it, and distinct lines write distinct output elements.
  const int64_t len = idx.shape()[size_t(dim)];
  const int64_t idx_stride = idx.strides()[size_t(dim)], src_stride = src.strides()[size_t(dim)];
  const int64_t out_stride = out.strides()[size_t(dim)];
  Shape lines = idx.shape();
  lines[size_t(dim)] = 1;
  std::array<const Strides*, 3> st{&out.strides(), &idx.strides(), &src.strides()};
  std::array<char*, 3> base{static_cast<char*>(out.data_ptr()), static_cast<char*>(idx.data_ptr()),
                            static_cast<char*>(src.data_ptr())};
  LATHE_DISPATCH_ALL(out.dtype(), "scatter_add", [&]<class T>() {
    using C = typename compute_type<T>::type;
    LATHE_DISPATCH_INDEX(idx.dtype(), "scatter_add", [&]<class I>() {
      std::array<int64_t, 3> elem{sizeof(T), sizeof(I), sizeof(T)};
      elementwise_loop<3>(lines, st, base, elem,
                          [&](const std::array<char*, 3>& p, const std::array<int64_t, 3>& s, int64_t n) {
        for (int64_t k = 0; k < n; ++k) {
          T* o = reinterpret_cast<T*>(p[0]) + k * s[0];
          const I* ix = reinterpret_cast<const I*>(p[1]) + k * s[1];
          const T* g = reinterpret_cast<const T*>(p[2]) + k * s[2];
          for (int64_t j = 0; j < len; ++j) {
            T* d = o + int64_t(ix[j * idx_stride]) * out_stride;
            *d = static_cast<T>(C(cpu::load(d) + cpu::load(g + j * src_stride)));
          }
        }
      });
    });
  });
  if (!out_in.is_contiguous()) copy(acc, out_in);
}

}  // namespace lathe
