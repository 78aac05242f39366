// Drawing the next token from logits, as runners do it: transformers' generate and llama.cpp's
// sampler apply the same filters, each defined here as they define it.
//
//   repetition_penalty  CTRL's (Keskar et al. 2019), as transformers' RepetitionPenaltyLogitsProcessor
//                       and llama.cpp's penalty_repeat: the logit of every distinct id among the
//                       row's previous tokens (the last repetition_window of them; 0: all, as
//                       transformers; llama.cpp's default window is 64) is divided by the penalty
//                       when positive and multiplied by it when not. 1: off.
//   temperature         the logits are divided by it; 0 takes the argmax of the penalised logits.
//   top_k               the k largest logits are kept (with any tied with the k-th); 0: all.
//   top_p               nucleus sampling: the fewest most likely ids whose probability sums to at
//                       least top_p are kept (transformers' TopPLogitsWarper, llama.cpp's top_p). 1: off.
//   min_p               the ids whose probability is at least min_p times the largest one's are kept
//                       (transformers' MinPLogitsWarper, llama.cpp's min_p). 0: off.
//
// Order: the penalty, then the temperature, then top_k, top_p and min_p, each on the
// probabilities the one before left, renormalised -- transformers' order. (llama.cpp's default
// chain applies the temperature last, after top_k, top_p and min_p: the same filters on the
// untempered distribution; with temperature 1 the two agree.) One uniform number per row is then
// drawn from a counter-based Generator, so a seed fixes the tokens on every device.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/random.h"
#include "core/tensor.h"

namespace lathe::nn {

struct SamplingOptions {
  double temperature = 1.0;  // 0 takes the argmax (and draws nothing)
  int64_t top_k = 0;         // 0 keeps every token; logits tied with the k-th largest are kept
  double top_p = 1.0;        // in (0, 1]; 1 keeps every token
  double min_p = 0.0;        // in [0, 1]; 0 keeps every token
  double repetition_penalty = 1.0;  // > 0; 1 leaves the logits as they are
  int64_t repetition_window = 0;    // the previous tokens the penalty looks at; 0: all of them
  // Draw only ids below this (0: every id), e.g. the ids a tokenizer can decode when the model's
  // vocabulary is padded beyond it (gpt2's 50,304 over a byte tokenizer).
  int64_t vocab_limit = 0;

  // Throws lathe::Error naming the option and its range when a value is out of it.
  void validate() const;
};

// The distribution a row's next token is drawn from: probabilities over the row's V logits (0 for
// every id a filter removed), after the penalty (over `previous`, the row's tokens so far) and every
// filter of `opt`. With temperature 0, one-hot at the argmax. `logits` holds V values (f64).
std::vector<double> sampling_distribution(std::span<const double> logits, const SamplingOptions& opt,
                                          std::span<const int64_t> previous = {});

// logits [B, V] (any floating dtype and device) -> one token id per row. Draws one uniform number
// per row from `gen`, in row order. `previous`, when given, holds each row's tokens so far (for the
// repetition penalty).
std::vector<int64_t> sample_tokens(const Tensor& logits, const SamplingOptions& opt, Generator& gen,
                                   const std::vector<std::span<const int64_t>>& previous = {});

}  // namespace lathe::nn
