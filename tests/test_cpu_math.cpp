// The vectorisable f32 functions of core/cpu/row_math.h against the C library, over dense sweeps:
// they replace expf and tanhf in softmax, cross-entropy and GELU, so their accuracy is the
// accuracy of those ops.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include <vector>

#include "core/cpu/row_math.h"
#include "core/cpu/transpose.h"

using namespace lathe;

namespace {

// Distance in units in the last place of `want` (as float).
double ulps(float got, float want) {
  if (got == want) return 0;
  const float spacing = std::nextafter(std::fabs(want), std::numeric_limits<float>::infinity()) - std::fabs(want);
  return std::fabs(double(got) - double(want)) / double(spacing);
}

}  // namespace

TEST_CASE("cpu math: tanh_f32 is within 2 ulp of std::tanh, odd, and exact at the limits") {
  double worst = 0;
  for (float x = -12.0f; x < 12.0f; x += 3.1e-4f) {
    worst = std::max(worst, ulps(cpu::tanh_f32(x), std::tanh(x)));
    CHECK(cpu::tanh_f32(-x) == -cpu::tanh_f32(x));
  }
  for (float x = 1e-30f; x < 1.0f; x *= 1.37f) worst = std::max(worst, ulps(cpu::tanh_f32(x), std::tanh(x)));
  CHECK(worst <= 2.0);
  CHECK(cpu::tanh_f32(0.0f) == 0.0f);
  CHECK(std::signbit(cpu::tanh_f32(-0.0f)));
  CHECK(cpu::tanh_f32(std::numeric_limits<float>::infinity()) == 1.0f);
  CHECK(cpu::tanh_f32(-std::numeric_limits<float>::infinity()) == -1.0f);
  CHECK(cpu::tanh_f32(100.0f) == 1.0f);
  CHECK(std::isnan(cpu::tanh_f32(std::numeric_limits<float>::quiet_NaN())));
}

TEST_CASE("cpu math: exp_f32 is within 2 ulp of std::exp on normal results, 0 below, inf above") {
  double worst = 0;
  for (float x = -87.0f; x < 88.5f; x += 1.3e-3f) worst = std::max(worst, ulps(cpu::exp_f32(x), std::exp(x)));
  CHECK(worst <= 2.0);
  CHECK(cpu::exp_f32(-std::numeric_limits<float>::infinity()) == 0.0f);
  CHECK(cpu::exp_f32(-100.0f) == 0.0f);
  CHECK(cpu::exp_f32(100.0f) == std::numeric_limits<float>::infinity());
  CHECK(std::isnan(cpu::exp_f32(std::numeric_limits<float>::quiet_NaN())));
}

TEST_CASE("cpu math: transpose of strided blocks of every size, whole 16 x 16 blocks and edges") {
  for (int64_t rows : {1, 5, 16, 17, 33, 64})
    for (int64_t cols : {1, 3, 16, 31, 48}) {
      const int64_t src_stride = cols + 7, dst_stride = rows + 3;
      std::vector<float> src(size_t(rows * src_stride));
      for (size_t i = 0; i < src.size(); ++i) src[i] = float(i) * 0.5f;
      std::vector<float> dst(size_t(cols * dst_stride), -1.0f);
      cpu::transpose(src.data(), src_stride, rows, cols, dst.data(), dst_stride);
      bool right = true, untouched = true;
      for (int64_t c = 0; c < cols; ++c)
        for (int64_t r = 0; r < dst_stride; ++r) {
          const float got = dst[size_t(c * dst_stride + r)];
          if (r < rows) right = right && got == src[size_t(r * src_stride + c)];
          else untouched = untouched && got == -1.0f;  // the stride's padding is never written
        }
      INFO("rows ", rows, " cols ", cols);
      CHECK(right);
      CHECK(untouched);
    }
}
