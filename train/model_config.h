// Which model a program builds: `--config` names a preset (tiny, small, char, nanogpt-cpu,
// speedrun-small, gpt2) or a JSON file with GPTConfig's fields. The benchmark batch of each preset
// comes from tools/torch_gpt_reference.py, so lathe and PyTorch time the same work.
#pragma once

#include <cstdint>
#include <string>

#include "nn/gpt.h"

namespace lathe::train {

struct ModelChoice {
  std::string name;       // the preset name, or the JSON file's stem
  nn::GPTConfig config;
  int64_t default_batch;  // the preset's batch (gpt_torch.py); 8 for a JSON file without "batch"
};

// Throws lathe::Error naming the preset list, or the file and the bad field: a key that is not a
// GPTConfig field or "batch" (a misspelt "droput" would otherwise silently train without dropout),
// a value of the wrong type (quoted, shortened), a document nested too deep.
ModelChoice resolve_model_config(const std::string& name_or_path);

// Bytes a training run of `config` keeps per parameter: f32 weights, gradients and two moments of
// Adam (the largest optimizer state lathe has).
inline constexpr int64_t kTrainingBytesPerParam = 16;

// The parameter count of `config`, computed with overflow checks; throws lathe::Error naming
// `what` and the fields whose product overflows.
int64_t checked_param_count(const nn::GPTConfig& config, const std::string& what);

// Refuses, before anything is allocated, a model whose parameters and optimizer state would not
// fit in the machine's physical memory (or whose sizes overflow): the error names `what` (the
// --config), the dominant fields and the bytes needed and available.
void check_model_fits_memory(const nn::GPTConfig& config, const std::string& what);

// Refuses a batch whose activations for one training step cannot fit in physical memory. The
// estimate is a lower bound (token windows, logits, every layer's attention probabilities and four
// values per token and layer, all of which the forward keeps for the backward): a batch that
// passes may still be too large, one that fails certainly is. The error names `what` (the --batch flag) and the bytes.
void check_batch_fits_memory(const nn::GPTConfig& config, int64_t batch, const std::string& what);

}  // namespace lathe::train
