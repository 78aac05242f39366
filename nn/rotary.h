// The angle tables of rotary position embeddings (core's rope op, the rotate-half convention):
// pair i of a head vector of size D at position t turns by theta = t * base^(-2i / D), as Llama
// and nanochat compute it (base 10000 by default).
//
// The tables are computed in f64 on the host for the positions asked for so far (doubling as
// later positions are asked for, up to the model's block_size), and handed out as cos and sin rows
// [T, D/2] in the compute type the rope op takes, on the device asked for. A model of a context of
// 10^8 positions that runs 64 of them holds tables of 64, not gigabytes. The copy on the last
// device and dtype asked for is kept, so a step uploads nothing; a model moved to another device,
// or run at later positions, uploads them once at its next forward.
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
  // Computes rows up to (at least) position `end` - 1.
  void extend(int64_t end) const;

  int64_t positions_, half_;
  std::vector<double> inv_freq_;          // [half]: base^(-2i / D)
  mutable std::vector<double> cos_, sin_;  // [computed, half], row-major
  mutable Tensor kept_cos_, kept_sin_;
};

}  // namespace lathe::nn
