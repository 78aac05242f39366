// The vectorisable f32 functions of core/cpu/row_math.h against the C library, over dense sweeps:
// they replace expf and tanhf in softmax, cross-entropy and GELU, so their accuracy is the
// accuracy of those ops.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "core/cpu/row_math.h"

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
