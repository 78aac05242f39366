// CPU reductions. Three layouts cover every case without a general N-d reduction loop:
//   rows:    the reduced dims are the trailing ones of a contiguous tensor: [K, R] -> [K]
//   columns: the reduced dims are the leading ones of a contiguous tensor: [R, K] -> [K]
//   other:   permute the reduced dims to the end and copy, then reduce rows.
// Float sums accumulate in f64, integers in i64. Every output element is reduced by one thread in
// index order, so the result does not depend on the thread count.
#include <cmath>
#include <limits>

#include "core/cpu/loops.h"
#include "core/kernel_profile.h"
#include "core/reduce_plan.h"

namespace lathe {

using cpu::parallel_for;

namespace {

template <class T>
using acc_t = std::conditional_t<std::is_floating_point_v<typename compute_type<T>::type>, double, int64_t>;

template <class T>
bool is_nan(T v) {
  if constexpr (std::is_floating_point_v<T>) return std::isnan(v);
  else return false;
}

// max/min/argmax/argmin over a run: NaN wins (propagates), and the first extreme index is kept.
template <class T, bool kMax>
std::pair<typename compute_type<T>::type, int64_t> extreme(const T* p, int64_t n, int64_t stride) {
  using C = typename compute_type<T>::type;
  C best = cpu::load(p);
  int64_t at = 0;
  if (is_nan(best)) return {best, 0};
  for (int64_t i = 1; i < n; ++i) {
    C v = cpu::load(p + i * stride);
    if (is_nan(v)) return {v, i};
    if (kMax ? v > best : v < best) {
      best = v;
      at = i;
    }
  }
  return {best, at};
}

template <class T>
void reduce_rows(ReduceOp op, const T* x, int64_t K, int64_t R, const Tensor& out) {
  parallel_for(K, std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(R, 1)), [&](int64_t b, int64_t e) {
    for (int64_t k = b; k < e; ++k) {
      const T* row = x + k * R;
      switch (op) {
        case ReduceOp::sum: {
          acc_t<T> acc = 0;
          for (int64_t i = 0; i < R; ++i) acc += acc_t<T>(cpu::load(row + i));
          static_cast<T*>(out.data_ptr())[k] = static_cast<T>(acc);
          break;
        }
        case ReduceOp::max: static_cast<T*>(out.data_ptr())[k] = T(extreme<T, true>(row, R, 1).first); break;
        case ReduceOp::min: static_cast<T*>(out.data_ptr())[k] = T(extreme<T, false>(row, R, 1).first); break;
        case ReduceOp::argmax: static_cast<int64_t*>(out.data_ptr())[k] = extreme<T, true>(row, R, 1).second; break;
        case ReduceOp::argmin: static_cast<int64_t*>(out.data_ptr())[k] = extreme<T, false>(row, R, 1).second; break;
      }
    }
  });
}

template <class T>
void reduce_columns(ReduceOp op, const T* x, int64_t R, int64_t K, const Tensor& out) {
  // Threads split the K columns evenly (a bias gradient of 128 columns is shared by two threads);
  // each walks the R rows in order for a block of kBlock columns at a time, so every output is a
  // sequential sum whatever the thread count, while the inner loop over the block's columns
  // vectorises with its accumulators in registers.
  constexpr int64_t kBlock = 64;
  const int64_t grain = std::max<int64_t>(16, kParallelGrain / std::max<int64_t>(R, 1));
  cpu::parallel_split(K, grain, [&](int64_t b, int64_t e) {
    if (op == ReduceOp::sum) {
      T* o = static_cast<T*>(out.data_ptr());
      for (int64_t jb = b; jb < e; jb += kBlock) {
        const int64_t m = std::min(kBlock, e - jb);
        acc_t<T> acc[kBlock] = {};
        for (int64_t r = 0; r < R; ++r) {
          const T* row = x + r * K + jb;
          for (int64_t j = 0; j < m; ++j) acc[j] += acc_t<T>(cpu::load(row + j));
        }
        for (int64_t j = 0; j < m; ++j) o[jb + j] = static_cast<T>(acc[j]);
      }
      return;
    }
    for (int64_t j = b; j < e; ++j) {
      bool is_max = op == ReduceOp::max || op == ReduceOp::argmax;
      auto r = is_max ? extreme<T, true>(x + j, R, K) : extreme<T, false>(x + j, R, K);
      if (op == ReduceOp::argmax || op == ReduceOp::argmin) static_cast<int64_t*>(out.data_ptr())[j] = r.second;
      else static_cast<T*>(out.data_ptr())[j] = static_cast<T>(r.first);
    }
  });
}

}  // namespace

void CpuBackend::reduce(ReduceOp op, const Tensor& x_in, const std::vector<int64_t>& dims, const Tensor& out) {
  profile::KernelScope scope("reduce");
  const ReducePlan plan = plan_reduce(x_in, dims);  // core/reduce_plan.h, as CUDA's
  const Tensor& x = plan.x;
  const int64_t R = plan.reduced, K = plan.outputs;
  LATHE_DISPATCH_ALL(x.dtype(), "reduce", [&]<class T>() {
    if constexpr (std::is_same_v<T, bool>) {
      LATHE_FAIL("reduce: bool tensors must be cast first");
    } else {
      const T* p = static_cast<const T*>(x.data_ptr());
      if (plan.trailing) reduce_rows<T>(op, p, K, R, out);
      else reduce_columns<T>(op, p, R, K, out);
    }
  });
}

}  // namespace lathe
