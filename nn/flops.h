// Floating-point work of one GPT training step, to turn a measured time into achieved GFLOP/s.
//
// Per token, forward + backward (nanoGPT's estimate_mfu, after the PaLM paper's appendix B):
//   6 * N          every weight takes part in one multiply-add forward (2 flops) and two backward
//                  (gradient of the input and of the weight: 4 flops); N counts the parameters
//                  that multiply, i.e. all of them except the position embeddings, which are only
//                  looked up (the tied token embedding counts once: it multiplies in lm_head;
//                  an untied one is only looked up, and its lm_head counts instead);
//   12 * L * C * T attention scores q.k^T and the weighted sum att.v, 2 * T * C flops each per
//                  layer and token forward (the full T x T product, as a dense kernel computes
//                  it), times 3 for forward + backward.
// Elementwise work (LayerNorm, GELU, softmax, the optimizer) is left out, as is customary.
#pragma once

#include <cstdint>

namespace lathe::nn {

inline double training_flops_per_token(int64_t matmul_params, int64_t n_layer, int64_t n_embd, int64_t seq_len) {
  return 6.0 * double(matmul_params) + 12.0 * double(n_layer) * double(n_embd) * double(seq_len);
}

}  // namespace lathe::nn
