// A model's weights as one safetensors file, with what is needed to rebuild the model in its
// metadata:
//   "format": "lathe-gpt-weights", "config": GPTConfig as JSON, "tokenizer": "bytes" (or the
//   TokenizerIdentity JSON of data/bpe_tokenizer.h, or "none" when it is not known: weights
//   converted from a format that does not say; data/model_tokenizer.h reads it back),
//   plus whatever the caller adds (the trainer adds "step" and "val_loss"), and under "lathe"
//   every tensor's checksum (serialize/weights.h), which load_model verifies.
// Tensors are nanoGPT's state_dict, every name of the tied pair included (lm_head.weight and
// transformer.wte.weight, the same values twice), so that `safetensors.torch.load_file` plus
// nanoGPT's strict `load_state_dict` takes them as they are (tools/torch_loads_lathe.py checks it).
// Files that store the tied weight once (as Hugging Face writes them) load too.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "nn/gpt.h"
#include "serialize/safetensors.h"

namespace lathe::serialize {

inline constexpr const char* kWeightsFormat = "lathe-gpt-weights";
// The "tokenizer" of weights whose tokenizer is not known (lathe sample then needs --tokenizer).
inline constexpr const char* kUnknownTokenizer = "none";

void save_model(const std::string& path, const nn::GPT& model, Metadata extra = {},
                Existing existing = Existing::replace);

// The files a model's weights come in.
enum class WeightsFormat {
  lathe,       // a weights file (above)
  checkpoint,  // a training checkpoint of serialize/checkpoint.h: its weights
  hf,          // a Hugging Face GPT-2 directory (serialize/hf_gpt2.h)
  llmc,        // llm.c's GPT-2 model file (serialize/llmc.h)
  gguf,        // llama.cpp's model file (lathe convert --to gguf): written, never read
};
const char* weights_format_name(WeightsFormat f);  // "lathe", "checkpoint", "hf", "llmc", "gguf"
// What `path` holds, by what it is: a directory is a Hugging Face model, a name ending in ".bin"
// llm.c's model file, anything else lathe's safetensors (weights or a checkpoint: reported as
// lathe here, told apart by the metadata once read).
WeightsFormat weights_format_of(const std::string& path);

struct LoadedModel {
  std::unique_ptr<nn::GPT> model;
  Metadata metadata;  // a Hugging Face or llm.c model's: "tokenizer": "none" only
  WeightsFormat format = WeightsFormat::lathe;
};
// Builds the model from the file's "config" metadata (or, for a training checkpoint of
// serialize/checkpoint.h, from its document; for a Hugging Face directory, from its config.json;
// for an llm.c file, from its header) and loads its weights onto `device`, in eval mode. Errors
// name the file: missing file, no config in the metadata, missing or mis-shaped tensors, a tensor
// whose bytes do not match its recorded checksum, and the format's own (serialize/hf_gpt2.h,
// serialize/llmc.h).
LoadedModel load_model(const std::string& path, Device device = Device::cpu());

// Before a model is built from `config` out of file `f`: the file holds at least as many values as
// the model has parameters. A config that asks for far more than its file holds (n_layer 10^6
// beside the tensors of two blocks) would otherwise be allocated and initialised in full before its
// first tensor is found missing. `skip` names the tensors that are not weights; errors start with
// `what`.
void check_file_holds(const nn::GPTConfig& config, const SafetensorsFile& f, const std::string& what,
                      const std::function<bool(const std::string&)>& skip = {});
// A checkpoint's tensors that are not weights: optimizer and loss-scaler state (serialize/checkpoint.h).
bool is_training_state(const std::string& name);

}  // namespace lathe::serialize
