// Drawing the next token from logits, as nanoGPT's generate does: scale by 1/temperature, keep
// the top_k largest logits, softmax, one draw. The draw uses a counter-based Generator, so a
// seed fixes the tokens on every device.
#pragma once

#include <cstdint>
#include <vector>

#include "core/random.h"
#include "core/tensor.h"

namespace lathe::nn {

struct SamplingOptions {
  double temperature = 1.0;  // 0 takes the argmax (and draws nothing)
  int64_t top_k = 0;         // 0 keeps every token; logits tied with the k-th largest are kept
  // Draw only ids below this (0: every id), e.g. the ids a tokenizer can decode when the model's
  // vocabulary is padded beyond it (gpt2's 50,304 over a byte tokenizer).
  int64_t vocab_limit = 0;
};

// logits [B, V] (any floating dtype and device) -> one token id per row. Draws one uniform number
// per row from `gen`, in row order.
std::vector<int64_t> sample_tokens(const Tensor& logits, const SamplingOptions& opt, Generator& gen);

}  // namespace lathe::nn
