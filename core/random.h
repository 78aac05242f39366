// Counter-based random numbers (Philox 4x32-10, Salmon et al., SC'11).
//
// A counter-based generator maps (key, counter) to random bits with no hidden state, so element
// i of a random tensor depends only on (seed, offset + i): the same on every device, whatever the
// thread count. A Generator is just (seed, offset); a checkpoint stores those two integers.
#pragma once

#include <array>
#include <cstdint>

namespace lathe {

// Philox4x32-10: four 32-bit outputs for one 128-bit counter under a 64-bit key.
std::array<uint32_t, 4> philox4x32(uint64_t counter_lo, uint64_t counter_hi, uint64_t key);

// The i-th uniform float in [0, 1) and standard normal of stream (seed, offset): the contract every
// backend's random kernels follow.
float philox_uniform(uint64_t seed, uint64_t index);
float philox_normal(uint64_t seed, uint64_t index);
// Uniform integer in [0, n) for the i-th draw, without modulo bias worth measuring (64-bit product).
uint64_t philox_below(uint64_t seed, uint64_t index, uint64_t n);

class Generator {
 public:
  explicit Generator(uint64_t seed = 0, uint64_t offset = 0) : seed_(seed), offset_(offset) {}
  uint64_t seed() const { return seed_; }
  uint64_t offset() const { return offset_; }
  void set_state(uint64_t seed, uint64_t offset) { seed_ = seed; offset_ = offset; }
  // Reserves n draws and returns the offset of the first.
  uint64_t advance(uint64_t n) {
    uint64_t o = offset_;
    offset_ += n;
    return o;
  }
  uint64_t next_below(uint64_t n) { return philox_below(seed_, advance(1), n); }
  float next_uniform() { return philox_uniform(seed_, advance(1)); }

 private:
  uint64_t seed_;
  uint64_t offset_;
};

}  // namespace lathe
