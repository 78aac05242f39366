#include "core/system_info.h"

#include <omp.h>
#include <sys/resource.h>
#include <unistd.h>

#include <Eigen/Core>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>

#include "core/backend.h"
#include "core/error.h"

namespace lathe {

std::vector<std::string> compiled_cpu_features() {
  std::vector<std::string> f;
#if defined(__SSE4_2__)
  f.push_back("SSE4.2");
#endif
#if defined(__AVX__)
  f.push_back("AVX");
#endif
#if defined(__AVX2__)
  f.push_back("AVX2");
#endif
#if defined(__FMA__)
  f.push_back("FMA");
#endif
#if defined(__F16C__)
  f.push_back("F16C");
#endif
#if defined(__AVX512F__)
  f.push_back("AVX512F");
#endif
#if defined(__AVX512BW__)
  f.push_back("AVX512BW");
#endif
#if defined(__AVX512VL__)
  f.push_back("AVX512VL");
#endif
#if defined(__AVX512BF16__)
  f.push_back("AVX512BF16");
#endif
#if defined(__ARM_NEON)
  f.push_back("NEON");
#endif
  return f;
}

std::string compiler_description() {
#if defined(__clang__)
  return "clang++ " + std::to_string(__clang_major__) + "." + std::to_string(__clang_minor__) + "." +
         std::to_string(__clang_patchlevel__);
#elif defined(__GNUC__)
  return "g++ " + std::to_string(__GNUC__) + "." + std::to_string(__GNUC_MINOR__) + "." +
         std::to_string(__GNUC_PATCHLEVEL__);
#else
  return "unknown compiler";
#endif
}

std::string eigen_version() {
  return std::to_string(EIGEN_WORLD_VERSION) + "." + std::to_string(EIGEN_MAJOR_VERSION) + "." +
         std::to_string(EIGEN_MINOR_VERSION);
}

int openmp_max_threads() { return omp_get_max_threads(); }

double cpu_fma_peak_gflops() {
  // One vector register of floats, as wide as the build's instruction set allows.
#if defined(__AVX512F__)
  constexpr int kBytes = 64;
#elif defined(__AVX__)
  constexpr int kBytes = 32;
#else
  constexpr int kBytes = 16;
#endif
  typedef float Vec __attribute__((vector_size(kBytes)));
  constexpr int kLanes = kBytes / int(sizeof(float));
  // More chains than any core's multiply-add latency times its units (4-5 cycles x 2 units), so
  // none waits on its own last result; 12 of them and the two constants fit AVX2's 16 registers.
  constexpr int kChains = 12;
  constexpr int64_t kIterations = int64_t(1) << 22;
  double best = 0;
  for (int round = 0; round < 3; ++round) {
    double seconds = 0;
    int threads = 1;
#pragma omp parallel reduction(max : seconds)
    {
#pragma omp single
      threads = omp_get_num_threads();
      Vec acc[kChains];
      for (int c = 0; c < kChains; ++c)
        for (int j = 0; j < kLanes; ++j) acc[c][j] = 1.0f + 0.001f * float(c * kLanes + j);
      Vec mul, add;
      for (int j = 0; j < kLanes; ++j) mul[j] = 0.9999999f, add[j] = 1e-7f;
#pragma omp barrier
      const auto t0 = std::chrono::steady_clock::now();
      for (int64_t i = 0; i < kIterations; ++i) {
#pragma GCC unroll 12
        for (int c = 0; c < kChains; ++c) acc[c] = acc[c] * mul + add;  // one fused multiply-add each
      }
      seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      asm volatile("" : : "m"(acc));  // the results are used, so the loop stays
    }
    best = std::max(best, double(threads) * double(kIterations) * kChains * kLanes * 2.0 / seconds / 1e9);
  }
  return best;
}

int cpu_count() {
  long n = ::sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? int(n) : 1;
}

bool cuda_compiled_in() {
#if defined(LATHE_HAVE_CUDA)
  return true;
#else
  return false;
#endif
}

int cuda_device_count() {
  if (!backend_available(DeviceType::cuda)) return 0;
  try {
    // backend_for checks the index, so asking for device 0 fails exactly when there is no GPU.
    return backend_for(Device::cuda(0)).device_count();
  } catch (const Error&) {
    return 0;
  }
}

size_t peak_rss_bytes() {
  struct rusage ru {};
  if (::getrusage(RUSAGE_SELF, &ru) != 0) return 0;
  return size_t(ru.ru_maxrss) * 1024;  // Linux reports kilobytes
}

void set_cpu_threads(int n) {
  if (n > 0) omp_set_num_threads(n);
}

}  // namespace lathe
