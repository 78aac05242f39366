// CPU kernels that move or create data: strided copy with casts, fill, arange, random numbers.
#include <cstring>

#include "core/cpu/loops.h"
#include "core/kernel_profile.h"
#include "core/random.h"

namespace lathe {

using cpu::elementwise_loop;
using cpu::parallel_for;
using cpu::parallel_split;

void CpuBackend::copy(const Tensor& src, const Tensor& dst) {
  profile::KernelScope scope("copy");
  LATHE_CHECK(src.shape() == dst.shape(), "copy: source ", src.desc(), " and destination ",
              dst.desc(), " differ in shape");
  std::array<const Strides*, 2> st{&dst.strides(), &src.strides()};
  std::array<char*, 2> base{static_cast<char*>(dst.data_ptr()), static_cast<char*>(src.data_ptr())};
  std::array<int64_t, 2> elem{int64_t(dtype_size(dst.dtype())), int64_t(dtype_size(src.dtype()))};
  LATHE_DISPATCH_ALL(dst.dtype(), "copy", [&]<class D>() {
    LATHE_DISPATCH_ALL(src.dtype(), "copy", [&]<class S>() {
      elementwise_loop<2>(dst.shape(), st, base, elem,
                          [](const std::array<char*, 2>& p, const std::array<int64_t, 2>& s, int64_t n) {
        D* o = reinterpret_cast<D*>(p[0]);
        const S* i = reinterpret_cast<const S*>(p[1]);
        if constexpr (std::is_same_v<D, S>) {
          if (s[0] == 1 && s[1] == 1) {
            std::memcpy(o, i, size_t(n) * sizeof(D));
            return;
          }
        }
        using C = typename compute_type<S>::type;
        // The casts of mixed precision, f32 <-> bf16/f16, in loops that vectorise (core/cpu/loops.h).
        if constexpr (cpu::is_16bit_float<S> && std::is_same_v<D, float>) {
          if (s[0] == 1 && s[1] == 1) return cpu::widen(i, o, n);
        }
        if constexpr (cpu::is_16bit_float<D> && std::is_same_v<S, float>) {
          if (s[0] == 1 && s[1] == 1) return cpu::narrow(i, o, n);
        }
        if (s[0] == 1 && s[1] == 1) {
          for (int64_t k = 0; k < n; ++k) o[k] = static_cast<D>(static_cast<C>(i[k]));
        } else {
          for (int64_t k = 0; k < n; ++k) o[k * s[0]] = static_cast<D>(static_cast<C>(i[k * s[1]]));
        }
      });
    });
  });
}

void CpuBackend::fill(const Tensor& dst, double value) {
  profile::KernelScope scope("fill");
  LATHE_DISPATCH_ALL(dst.dtype(), "fill", [&]<class T>() {
    T* p = static_cast<T*>(dst.data_ptr());
    T v = static_cast<T>(value);
    parallel_split(dst.numel(), kParallelGrain, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) p[i] = v;
    });
  });
}

void CpuBackend::arange(const Tensor& dst, double start, double step) {
  profile::KernelScope scope("arange");
  LATHE_DISPATCH_ALL(dst.dtype(), "arange", [&]<class T>() {
    T* p = static_cast<T*>(dst.data_ptr());
    for (int64_t i = 0; i < dst.numel(); ++i) p[i] = static_cast<T>(start + double(i) * step);
  });
}

void CpuBackend::random_uniform(const Tensor& dst, uint64_t seed, uint64_t offset, double lo, double hi) {
  profile::KernelScope scope("random_uniform");
  LATHE_DISPATCH_FLOAT(dst.dtype(), "rand", [&]<class T>() {
    T* p = static_cast<T*>(dst.data_ptr());
    parallel_for(dst.numel(), kParallelGrain / 16, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i)
        p[i] = static_cast<T>(lo + (hi - lo) * double(philox_uniform(seed, offset + uint64_t(i))));
    });
  });
}

void CpuBackend::random_normal(const Tensor& dst, uint64_t seed, uint64_t offset, double mean, double std) {
  profile::KernelScope scope("random_normal");
  LATHE_DISPATCH_FLOAT(dst.dtype(), "randn", [&]<class T>() {
    T* p = static_cast<T*>(dst.data_ptr());
    parallel_for(dst.numel(), kParallelGrain / 16, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i)
        p[i] = static_cast<T>(mean + std * double(philox_normal(seed, offset + uint64_t(i))));
    });
  });
}

}  // namespace lathe
