// Which model a program builds: `--config` names a preset (tiny, small, char, gpt2) or a JSON file
// with GPTConfig's fields. The benchmark batch of each preset comes from
// tools/torch_gpt_reference.py, so lathe and PyTorch time the same work.
#pragma once

#include <cstdint>
#include <string>

#include "nn/gpt.h"

namespace lathe::app {

struct ModelChoice {
  std::string name;       // the preset name, or the JSON file's stem
  nn::GPTConfig config;
  int64_t default_batch;  // the preset's batch (gpt_torch.py); 8 for a JSON file without "batch"
};

// Throws lathe::Error naming the preset list, or the file and the bad field.
ModelChoice resolve_model_config(const std::string& name_or_path);

}  // namespace lathe::app
