#include "core/random.h"

#include <cmath>

namespace lathe {

std::array<uint32_t, 4> philox4x32(uint64_t counter_lo, uint64_t counter_hi, uint64_t key) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;  // round multipliers
  constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;  // Weyl key increments
  uint32_t c0 = uint32_t(counter_lo), c1 = uint32_t(counter_lo >> 32);
  uint32_t c2 = uint32_t(counter_hi), c3 = uint32_t(counter_hi >> 32);
  uint32_t k0 = uint32_t(key), k1 = uint32_t(key >> 32);
  for (int round = 0; round < 10; ++round) {
    uint64_t p0 = uint64_t(kM0) * c0;
    uint64_t p1 = uint64_t(kM1) * c2;
    uint32_t hi0 = uint32_t(p0 >> 32), lo0 = uint32_t(p0);
    uint32_t hi1 = uint32_t(p1 >> 32), lo1 = uint32_t(p1);
    uint32_t n0 = hi1 ^ c1 ^ k0;
    uint32_t n1 = lo1;
    uint32_t n2 = hi0 ^ c3 ^ k1;
    uint32_t n3 = lo0;
    c0 = n0; c1 = n1; c2 = n2; c3 = n3;
    k0 += kW0;
    k1 += kW1;
  }
  return {c0, c1, c2, c3};
}

// Element i of stream `seed` uses counter (i, 0): one Philox block per element keeps the mapping
// trivial to reproduce on any device.
float philox_uniform(uint64_t seed, uint64_t index) {
  uint32_t r = philox4x32(index, 0, seed)[0];
  return float(r >> 8) * (1.0f / 16777216.0f);  // 24 random bits: exactly representable in [0, 1)
}

float philox_normal(uint64_t seed, uint64_t index) {
  auto r = philox4x32(index, 0, seed);
  // Box-Muller on two 32-bit uniforms; u1 in (0, 1] so the log is finite.
  double u1 = (double(r[0]) + 1.0) * (1.0 / 4294967296.0);
  double u2 = double(r[1]) * (1.0 / 4294967296.0);
  return float(std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2));
}

uint64_t philox_below(uint64_t seed, uint64_t index, uint64_t n) {
  auto r = philox4x32(index, 0, seed);
  uint64_t bits = (uint64_t(r[0]) << 32) | r[1];
  return uint64_t((static_cast<unsigned __int128>(bits) * n) >> 64);
}

}  // namespace lathe
