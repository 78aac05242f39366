// Measures of a trained model beside its validation loss: a multiple-choice benchmark scored as llm.c
// and nanochat score HellaSwag, and bits per byte on a text (`lathe eval`, `lathe train --eval-mc`).
//
// Multiple choice: each ending is tokenized as " " + ending after the context's tokens (the context
// and each ending encoded apart, as llm.c does), the model reads context and ending in one window,
// and the ending is scored by the log-probabilities of its tokens: their sum (`accuracy`: the
// ending with the largest sum is the answer) and their mean (`accuracy_norm`: the largest mean,
// which does not favour short endings). Ties go to the first ending. Items are scored in batches of
// rows (one row per ending, every ending of an item in one batch), padded at the end: the model is
// causal, so padding changes no score. An item whose context and ending do not fit the model's
// block_size is skipped and reported, never cut.
//
// Bits per byte: the text's tokens in windows of block_size + 1 tokens, each window predicting its
// last block_size tokens from the ones before (stride block_size, so every token after the first is
// predicted once), the summed cross-entropy in bits over the bytes of the predicted tokens.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "data/multiple_choice.h"
#include "data/tokenizer.h"
#include "nn/gpt.h"

namespace lathe::train {

struct EndingScore {
  double sum_logprob = 0;   // nats
  double mean_logprob = 0;  // per token
  int64_t tokens = 0;
};

struct ItemScore {
  int64_t line = 0;
  int64_t label = 0;
  std::vector<EndingScore> endings;
  int64_t pred = 0;       // by the sum
  int64_t pred_norm = 0;  // by the mean
};

struct MultipleChoiceResult {
  std::vector<ItemScore> items;
  std::vector<data::SkippedItem> skipped;  // the file's bad lines, and items too long for the model
  double accuracy = 0, accuracy_norm = 0;  // over `items`
};

// How many items of `set` fit a model of `block_size` (context and every ending within it).
int64_t items_that_fit(const data::MultipleChoiceSet& set, const data::Tokenizer& tokenizer, int64_t block_size);

// Called after each batch with the items scored so far and the total.
using Progress = std::function<void(int64_t done, int64_t total)>;

// Scores `set` with `model` (in eval mode, without gradients). `batch_rows`: endings per forward.
// Throws lathe::Error when no item fits the model.
MultipleChoiceResult evaluate_multiple_choice(nn::GPT& model, const data::Tokenizer& tokenizer,
                                              const data::MultipleChoiceSet& set, int64_t batch_rows,
                                              const Progress& progress = {});

struct BitsPerByte {
  double bits_per_byte = 0;
  double nats_per_token = 0;
  int64_t tokens = 0;  // predicted
  int64_t bytes = 0;   // of the predicted tokens
};

// Bits per byte of `text` under `model`; `batch_rows` windows per forward. Throws lathe::Error when
// the text has fewer than two tokens.
BitsPerByte evaluate_bits_per_byte(nn::GPT& model, const data::Tokenizer& tokenizer, const std::string& text,
                                   int64_t batch_rows, const Progress& progress = {});

}  // namespace lathe::train
