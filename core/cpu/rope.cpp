// Rotary position embeddings on the CPU: each head vector's halves turned by its position's angles.
// Work items are (batch, head) pairs, each turning its T rows in order; a row is computed on its
// own, so the split over threads never changes a result.
#include "core/cpu/loops.h"
#include "core/cpu/row_math.h"
#include "core/kernel_profile.h"

namespace lathe {

namespace {

// One head vector: y = (x1 c - x2 s, x2 c + x1 s) over its halves, s already signed for the
// direction. Unaliased, so that the loop is a few vector multiply-adds.
template <class T, class C>
LATHE_CPU_INLINE void turn_row(const T* __restrict__ x, T* __restrict__ y, const C* __restrict__ c,
                               const C* __restrict__ s, C dir, int64_t half) {
  for (int64_t i = 0; i < half; ++i) {
    const C x1 = static_cast<C>(x[i]), x2 = static_cast<C>(x[i + half]), sn = dir * s[i];
    y[i] = static_cast<T>(x1 * c[i] - x2 * sn);
    y[i + half] = static_cast<T>(x2 * c[i] + x1 * sn);
  }
}

// x, out [B, H, T, D] with unit last strides; cos, sin [T, D/2] contiguous, of the compute type C.
// 16-bit elements are computed in f32 and rounded once.
template <class T>
void rope_heads(const Tensor& x, const Tensor& cos, const Tensor& sin, bool inverse, const Tensor& out) {
  using C = typename compute_type<T>::type;
  const int64_t H = x.size(1), T_ = x.size(2), half = x.size(3) / 2;
  const Strides& xs = x.strides();
  const Strides& ys = out.strides();
  const T* px = static_cast<const T*>(x.data_ptr());
  T* py = static_cast<T*>(out.data_ptr());
  const C* pc = static_cast<const C*>(cos.data_ptr());
  const C* ps = static_cast<const C*>(sin.data_ptr());
  // The backward turns the other way: sin(-theta) = -sin(theta).
  const C dir = inverse ? C(-1) : C(1);
  const int64_t grain = std::max<int64_t>(1, cpu::rows_per_chunk(2 * half) / std::max<int64_t>(T_, 1));
  cpu::parallel_split(x.size(0) * H, grain, [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      const T* xh = px + (p / H) * xs[0] + (p % H) * xs[1];
      T* yh = py + (p / H) * ys[0] + (p % H) * ys[1];
      for (int64_t t = 0; t < T_; ++t) turn_row(xh + t * xs[2], yh + t * ys[2], pc + t * half, ps + t * half, dir, half);
    }
  });
}

}  // namespace

void CpuBackend::rope(const Tensor& x, const Tensor& cos, const Tensor& sin, bool inverse, const Tensor& out) {
  profile::KernelScope scope(inverse ? "rope_backward" : "rope");
  LATHE_DISPATCH_FLOAT(x.dtype(), "rope", [&]<class T>() { rope_heads<T>(x, cos, sin, inverse, out); });
}

}  // namespace lathe
