// What a Hugging Face model directory is, whatever the model (serialize/hf_gpt2.h, serialize/hf_llama.h):
// config.json beside model.safetensors, or beside model.safetensors.index.json and the shards its
// weight_map names, as save_pretrained writes them.
#pragma once

#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "serialize/weights.h"

namespace lathe::serialize {

// The path of `dir`'s config.json.
std::string hf_config_path(const std::string& dir);
// config.json of `dir`, parsed (at most 1 MiB); errors name the directory or the file.
nlohmann::json read_hf_config(const std::string& dir);
// Its "model_type" ("gpt2", "llama", ...); an error naming the file when it has none.
std::string hf_model_type(const std::string& dir);

// The files that hold the weights: model.safetensors, or the shards the index names (each a file
// of the directory). Errors name what is missing, or PyTorch's pickle that lathe does not read.
std::vector<std::string> hf_weight_files(const std::string& dir);

// One tensor of a directory's weights.
struct HfTensor {
  std::string stored_name;  // as the file spells it
  std::string file;
  Tensor tensor;
};
// Every tensor of `files` under the key `key_of(stored name)` gives ("": left out). A tensor in two
// shards, or two stored names for one key (`aliases` says how they may differ), is an error naming both.
std::map<std::string, HfTensor> read_hf_tensors(const std::vector<std::string>& files,
                                                const std::function<std::string(const std::string&)>& key_of,
                                                const std::string& aliases);
// The tensor as f32; an error naming it when it is not floating.
Tensor hf_as_f32(const HfTensor& t);

// Whether `dir` may receive a model: absent (false), or an empty directory or any directory with
// `overwrite` (true: it exists). Otherwise an error that says what to do.
bool check_model_directory_writable(const std::string& dir, bool overwrite);
// Writes config.json (`config`) and model.safetensors (`tensors`, metadata "format": "pt", which
// transformers needs) as one unit (serialize/staged_directory.h): into a directory beside `dir`,
// put in place in one rename or swap; with `overwrite`, the old directory's entries that are not a
// model's config or weights (a tokenizer, a README) are carried over.
void write_hf_directory(const std::string& dir, const nlohmann::json& config, const NamedTensors& tensors, bool overwrite);

}  // namespace lathe::serialize
