// Model weights in and out of safetensors files, under nanoGPT's names (Module::state_dict()), so
// that weights move between lathe and PyTorch without renaming.
//
// save_weights writes a plain safetensors file that Python's safetensors.torch.load_file opens; its
// metadata gets "format": "pt" (what transformers expects of a PyTorch checkpoint) and, under the
// key "lathe", {"format_version": 1, "kind": "weights", "tensors": {name: {"checksum": ...}}}.
// load_weights reads any safetensors file, including those written by Python's save_file or
// save_model (which keeps only one name of a tied pair, e.g. lm_head.weight but not
// transformer.wte.weight: resolving the tie is the model's load_state_dict's job), and verifies
// the checksums when the file carries them.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "serialize/safetensors.h"

namespace lathe::serialize {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

// Tensors may live on any device and have any strides; each is written as a contiguous copy (a
// tied weight listed under two names is written twice). Atomic: an error leaves `path` as it was.
// `metadata` is stored as given, except the reserved key "lathe".
void save_weights(const std::string& path, const NamedTensors& weights, const Metadata& metadata = {},
                  Existing existing = Existing::replace);

// The named tensors in file order, created on `device`; `metadata`, when given, receives the file's
// metadata. Throws lathe::Error naming the file (and tensor) for a damaged file or bad checksum.
NamedTensors load_weights(const std::string& path, Device device = Device::cpu(), Metadata* metadata = nullptr);

}  // namespace lathe::serialize
