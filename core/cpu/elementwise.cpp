// CPU elementwise kernels: unary, binary (operands already broadcast), where.
//
// Each op of the table becomes a lambda instantiated per dtype; the strided loop hands it
// contiguous runs, where the plain `for` vectorises.
#include <cmath>
#include <limits>

#include "core/cpu/cpu_math.h"
#include "core/cpu/loops.h"
#include "core/kernel_profile.h"
#include "core/op_table.h"

namespace lathe {

using cpu::CpuMath;
using cpu::elementwise_loop;

namespace {

// Runs out[i] = f(x[i]) over a strided input, contiguous output.
template <class TO, class TI, class F>
void map1(const Tensor& x, const Tensor& out, F f) {
  std::array<const Strides*, 2> st{&out.strides(), &x.strides()};
  std::array<char*, 2> base{static_cast<char*>(out.data_ptr()), static_cast<char*>(x.data_ptr())};
  std::array<int64_t, 2> elem{sizeof(TO), sizeof(TI)};
  // flatten: `f` must inline into the loops (a call per element stops vectorisation, and GCC's
  // inliner gives up on some of these lambdas in a function this large).
  elementwise_loop<2>(out.shape(), st, base, elem,
                      [&](const std::array<char*, 2>& p, const std::array<int64_t, 2>& s, int64_t n)
                          __attribute__((flatten)) {
    TO* o = reinterpret_cast<TO*>(p[0]);
    const TI* a = reinterpret_cast<const TI*>(p[1]);
    if constexpr (cpu::is_16bit_float<TI>) {
      if (s[0] == 1 && s[1] == 1) {  // in blocks through f32, see core/cpu/loops.h
        using R = decltype(f(0.0f));
        float xa[cpu::k16BitBlock];
        R r[cpu::k16BitBlock];
        for (int64_t k0 = 0; k0 < n; k0 += cpu::k16BitBlock) {
          const int64_t m = std::min(cpu::k16BitBlock, n - k0);
          cpu::widen(a + k0, xa, m);
          for (int64_t k = 0; k < m; ++k) r[k] = f(xa[k]);
          cpu::narrow(r, o + k0, m);
        }
        return;
      }
    }
    if (s[0] == 1 && s[1] == 1) {
      for (int64_t k = 0; k < n; ++k) o[k] = static_cast<TO>(f(cpu::load(a + k)));
    } else {
      for (int64_t k = 0; k < n; ++k) o[k * s[0]] = static_cast<TO>(f(cpu::load(a + k * s[1])));
    }
  });
}

template <class TO, class TI, class F>
void map2(const Tensor& a, const Tensor& b, const Tensor& out, F f) {
  std::array<const Strides*, 3> st{&out.strides(), &a.strides(), &b.strides()};
  std::array<char*, 3> base{static_cast<char*>(out.data_ptr()), static_cast<char*>(a.data_ptr()),
                            static_cast<char*>(b.data_ptr())};
  std::array<int64_t, 3> elem{sizeof(TO), sizeof(TI), sizeof(TI)};
  elementwise_loop<3>(out.shape(), st, base, elem,
                      [&](const std::array<char*, 3>& p, const std::array<int64_t, 3>& s, int64_t n)
                          __attribute__((flatten)) {  // as in map1
    TO* o = reinterpret_cast<TO*>(p[0]);
    const TI* x = reinterpret_cast<const TI*>(p[1]);
    const TI* y = reinterpret_cast<const TI*>(p[2]);
    if constexpr (cpu::is_16bit_float<TI>) {
      // Contiguous, or one side a broadcast scalar: in blocks through f32 (core/cpu/loops.h).
      if (s[0] == 1 && (s[1] == 1 || s[1] == 0) && (s[2] == 1 || s[2] == 0) && (s[1] | s[2]) != 0) {
        using R = decltype(f(0.0f, 0.0f));
        float xa[cpu::k16BitBlock], ya[cpu::k16BitBlock];
        R r[cpu::k16BitBlock];
        if (s[1] == 0) std::fill_n(xa, cpu::k16BitBlock, float(cpu::load(x)));
        if (s[2] == 0) std::fill_n(ya, cpu::k16BitBlock, float(cpu::load(y)));
        for (int64_t k0 = 0; k0 < n; k0 += cpu::k16BitBlock) {
          const int64_t m = std::min(cpu::k16BitBlock, n - k0);
          if (s[1] == 1) cpu::widen(x + k0, xa, m);
          if (s[2] == 1) cpu::widen(y + k0, ya, m);
          for (int64_t k = 0; k < m; ++k) r[k] = f(xa[k], ya[k]);
          cpu::narrow(r, o + k0, m);
        }
        return;
      }
    }
    if (s[0] == 1 && s[1] == 1 && s[2] == 1) {
      for (int64_t k = 0; k < n; ++k) o[k] = static_cast<TO>(f(cpu::load(x + k), cpu::load(y + k)));
    } else if (s[0] == 1 && s[1] == 1 && s[2] == 0) {  // tensor op scalar
      auto yv = cpu::load(y);
      for (int64_t k = 0; k < n; ++k) o[k] = static_cast<TO>(f(cpu::load(x + k), yv));
    } else if (s[0] == 1 && s[1] == 0 && s[2] == 1) {  // scalar op tensor
      auto xv = cpu::load(x);
      for (int64_t k = 0; k < n; ++k) o[k] = static_cast<TO>(f(xv, cpu::load(y + k)));
    } else {
      for (int64_t k = 0; k < n; ++k)
        o[k * s[0]] = static_cast<TO>(f(cpu::load(x + k * s[1]), cpu::load(y + k * s[2])));
    }
  });
}

// out = a + b for an f32 a and out and a 16-bit b: a 16-bit residual branch added to the f32 stream,
// b widened as it is read (exactly: every 16-bit value is an f32 value).
template <class TB>
void add_widening(const Tensor& a, const Tensor& b, const Tensor& out) {
  std::array<const Strides*, 3> st{&out.strides(), &a.strides(), &b.strides()};
  std::array<char*, 3> base{static_cast<char*>(out.data_ptr()), static_cast<char*>(a.data_ptr()),
                            static_cast<char*>(b.data_ptr())};
  std::array<int64_t, 3> elem{sizeof(float), sizeof(float), sizeof(TB)};
  elementwise_loop<3>(out.shape(), st, base, elem,
                      [](const std::array<char*, 3>& p, const std::array<int64_t, 3>& s, int64_t n) {
    float* o = reinterpret_cast<float*>(p[0]);
    const float* x = reinterpret_cast<const float*>(p[1]);
    const TB* y = reinterpret_cast<const TB*>(p[2]);
    if (s[0] == 1 && s[1] == 1 && s[2] == 1) {
      float yw[cpu::k16BitBlock];
      for (int64_t k0 = 0; k0 < n; k0 += cpu::k16BitBlock) {
        const int64_t m = std::min(cpu::k16BitBlock, n - k0);
        cpu::widen(y + k0, yw, m);
        for (int64_t k = 0; k < m; ++k) o[k0 + k] = x[k0 + k] + yw[k];
      }
    } else {
      for (int64_t k = 0; k < n; ++k) o[k * s[0]] = x[k * s[1]] + cpu::load(y + k * s[2]);
    }
  });
}

}  // namespace

// Both dispatchers are generated from the op table (core/op_table.h): one switch case per entry,
// compiled only for the dtypes the entry is defined for. The op layer has checked the operands
// (dtypes, shapes, devices) and that the op is defined for their dtype. The case macros stand
// outside the functions because a directive cannot sit inside the dispatch macro's argument.
#define LATHE_CPU_UNARY_(entry)                                                                      \
  case UnaryOp::entry:                                                                               \
    if constexpr (op_table::defined_for<op_table::entry, C>())                                       \
      return map1<T, T>(x, out, [s](C v) { return op_table::entry::apply<CpuMath>(v, s); });        \
    break;

#define LATHE_CPU_BINARY_(entry)                                                                     \
  case BinaryOp::entry:                                                                              \
    if constexpr (op_table::defined_for<op_table::entry, C>()) {                                     \
      using Out = std::conditional_t<op_table::entry::predicate, bool, T>;                           \
      return map2<Out, T>(a, b, out, [](C x, C y) { return op_table::entry::apply<CpuMath>(x, y); }); \
    }                                                                                                \
    break;

void CpuBackend::unary(UnaryOp op, const Tensor& x, const Tensor& out, double p0, double p1) {
  profile::KernelScope scope(op_name(op));
  LATHE_DISPATCH_ALL(x.dtype(), op_name(op), [&]<class T>() {
    using C = typename compute_type<T>::type;
    const OpScalars<C> s = op_scalars<C>(p0, p1);
    switch (op) {
      LATHE_UNARY_OPS(LATHE_CPU_UNARY_)
    }
    LATHE_FAIL("unary ", op_name(op), ": not defined for dtype ", dtype_name(x.dtype()));
  });
}

void CpuBackend::binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out) {
  profile::KernelScope scope(op_name(op));
  if (b.dtype() != a.dtype()) {
    LATHE_CHECK(op == BinaryOp::add && a.dtype() == DType::f32 && out.dtype() == DType::f32,
                "binary ", op_name(op), ": operands ", a.desc(), " and ", b.desc(), " differ in dtype");
    if (b.dtype() == DType::bf16) return add_widening<bf16>(a, b, out);
    if (b.dtype() == DType::f16) return add_widening<f16>(a, b, out);
    LATHE_FAIL("binary add: cannot widen ", b.desc(), " into f32");
  }
  LATHE_DISPATCH_ALL(a.dtype(), op_name(op), [&]<class T>() {
    using C = typename compute_type<T>::type;
    switch (op) {
      LATHE_BINARY_OPS(LATHE_CPU_BINARY_)
    }
    LATHE_FAIL("binary ", op_name(op), ": not defined for dtype ", dtype_name(a.dtype()));
  });
}

#undef LATHE_CPU_UNARY_
#undef LATHE_CPU_BINARY_

void CpuBackend::scale_by(const Tensor& x, const Tensor& s) {
  profile::KernelScope scope("scale_by");
  LATHE_DISPATCH_FLOAT(x.dtype(), "scale_by", [&]<class T>() {
    using C = typename compute_type<T>::type;
    const C v = *static_cast<const C*>(s.data_ptr());
    if (v == C(1)) return;
    T* p = static_cast<T*>(x.data_ptr());
    cpu::parallel_split(x.numel(), kParallelGrain, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) p[i] = static_cast<T>(static_cast<C>(p[i]) * v);
    });
  });
}

void CpuBackend::where(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out) {
  profile::KernelScope scope("where");
  std::array<const Strides*, 4> st{&out.strides(), &cond.strides(), &a.strides(), &b.strides()};
  std::array<char*, 4> base{static_cast<char*>(out.data_ptr()), static_cast<char*>(cond.data_ptr()),
                            static_cast<char*>(a.data_ptr()), static_cast<char*>(b.data_ptr())};
  LATHE_DISPATCH_ALL(out.dtype(), "where", [&]<class T>() {
    std::array<int64_t, 4> elem{sizeof(T), 1, sizeof(T), sizeof(T)};
    elementwise_loop<4>(out.shape(), st, base, elem,
                        [](const std::array<char*, 4>& p, const std::array<int64_t, 4>& s, int64_t n) {
      T* o = reinterpret_cast<T*>(p[0]);
      const bool* c = reinterpret_cast<const bool*>(p[1]);
      const T* x = reinterpret_cast<const T*>(p[2]);
      const T* y = reinterpret_cast<const T*>(p[3]);
      for (int64_t k = 0; k < n; ++k) o[k * s[0]] = c[k * s[1]] ? x[k * s[2]] : y[k * s[3]];
    });
  });
}

}  // namespace lathe
