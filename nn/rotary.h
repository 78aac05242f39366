// The angle tables of rotary position embeddings (core's rope op, the rotate-half convention):
// pair i of a head vector of size D at position t turns by theta = t * base^(-2i / D), as Llama
// and nanochat compute it (base 10000 by default).
//
// The tables are computed once, in f64 on the host, for every position below the model's
// block_size, and handed out as cos and sin rows [T, D/2] in the compute type the rope op takes,
// on the device asked for. The copy on the last device and dtype asked for is kept, so a step
// uploads nothing; a model moved to another device uploads them once at its next forward.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace lathe::nn {

class RotaryTables {
 public:
  RotaryTables(int64_t positions, int64_t head_size, double base);

  // cos and sin of positions pos0 .. pos0 + T - 1 for a rope input of dtype `dtype` (f64 tables for
  // f64, f32 for every other float) on `device`; views of the kept copy.
  std::pair<Tensor, Tensor> rows(int64_t pos0, int64_t T, DType dtype, Device device) const;

  int64_t positions() const { return positions_; }

 private:
  int64_t positions_, half_;
  std::vector<double> cos_, sin_;  // [positions, half], row-major
  mutable Tensor kept_cos_, kept_sin_;
};

}  // namespace lathe::nn
