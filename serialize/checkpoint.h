// A whole training run in one safetensors file, restored onto any device by construction
// (docs/design.md, "Checkpoints").
//
// Tensors (any safetensors reader opens the file; PyTorch's load_file gives plain tensors):
//   <parameter name>          the model's weights under nanoGPT's names (tied ones once, under
//                             their first name, as Module::named_parameters lists them)
//   optim.<state entry>       every optimizer state tensor: optim.param.<i>.<key> (per parameter,
//                             i its number in the optimizer), optim.group.<g>.<key> (per group),
//                             optim.global.<key>
//   scaler.scale, scaler.growth_tracker   the loss scaler's state, when the run has one
//
// Metadata: "format": "pt" and, under the key "lathe", one JSON document (CheckpointDocument,
// serialize/checkpoint_document.h):
//   format_version   kCheckpointFormatVersion; a reader refuses a newer one
//   kind             "training_state"
//   step             optimizer steps completed
//   model            the program's description of the model (lathe train: GPTConfig)
//   parameters       [name, ...]: the model's parameters in order, with shape and dtype
//   optimizer        {"kind", "fused", "params": [name of the optimizer's parameter i, ...],
//                     "groups": Optimizer::groups_json() (parameter numbers and hyperparameters)}
//   scaler           GradScaler options, or null when the run has no loss scaler
//   program          the program's own state, stored verbatim (lathe train: its options, the
//                    corpus, the data and dropout generators' (seed, offset))
//   tensors          {name: {"checksum": XXH3-64, "dtype", "shape", "policy", "scope"}} for every tensor;
//                    policy is the placement policy of optimizer and scaler state ("with_param",
//                    "host") and "parameter" for weights. Never a device.
//
// Restoring: the caller builds the model on the target device and the optimizer over its
// parameters (as at the start of a run), then calls restore(). Weights are copied into the
// parameters in place (identity kept, so the optimizer's references stay valid); every state
// tensor is created directly where its policy puts it for where the parameters are now. There is
// no "load, then remember to move" step.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "nn/module.h"
#include "optim/grad_scaler.h"
#include "optim/optimizer.h"
#include "serialize/checkpoint_document.h"
#include "serialize/safetensors.h"

namespace lathe::serialize {

// What a checkpoint saves; the pointed-to objects are only read.
struct TrainingStateRef {
  const nn::Module* model = nullptr;
  const optim::Optimizer* optimizer = nullptr;
  const optim::GradScaler* scaler = nullptr;  // optional
  int64_t step = 0;
  nlohmann::json model_description;  // e.g. the GPT config
  nlohmann::json program;            // anything else the program needs to continue
};

// Writes atomically (temporary file in the same directory, fsync, rename, fsync of the
// directory): an error or a kill at any moment leaves an existing file at `path` as it was.
void save_training_state(const std::string& path, const TrainingStateRef& state);

// A checkpoint read and fully validated: the safetensors structure, the document (format
// version, kind, every field above), the checksum of every tensor, and every tensor the document
// lists. Errors name the file and what is wrong.
class TrainingCheckpoint {
 public:
  // Reads for a run on `target`: each tensor is validated from its host staging copy, then
  // created where it will be used (state of the host policy on the host, everything else on
  // `target`), one tensor at a time, so the whole state never sits in host memory on its way to a
  // device. restore() then only copies within the target.
  static TrainingCheckpoint read(const std::string& path, Device target = Device::cpu());
  // The same, with the target chosen from the file's document as soon as it is read: a resume
  // that continues on the device the run was on, or on one the user names (empty: the host).
  using TargetOf = std::function<Device(const CheckpointDocument&)>;
  static TrainingCheckpoint read(const std::string& path, const TargetOf& target_of);
  // The same checks on a file already read.
  static TrainingCheckpoint from_file(SafetensorsFile file);
  // Whether a file's metadata says it is a training checkpoint (nothing validated).
  static bool is_checkpoint(const Metadata& metadata);

  const std::string& path() const { return file_.path; }
  // The file's tensors (weights, optimizer and scaler state) where read() placed them.
  const SafetensorsFile& file() const { return file_; }
  int64_t step() const { return step_; }
  const CheckpointDocument& document() const { return doc_; }
  const nlohmann::json& model_description() const { return doc_.model; }
  const nlohmann::json& program() const { return doc_.program; }
  const std::string& optimizer_kind() const { return doc_.optimizer.kind; }
  bool has_scaler() const { return !doc_.scaler.is_null(); }

  // Restores weights, optimizer groups and state, and the scaler's state. Checks first that the
  // objects fit the file (parameter names and shapes, the optimizer's kind, its parameters being
  // the same model parameters in the same groups, a scaler exactly when the file has one); an
  // error names the file and the mismatch. On an error the objects may be partly restored: discard
  // them.
  void restore(nn::Module& model, optim::Optimizer& optimizer, optim::GradScaler* scaler = nullptr) const;
  // Only the weights (e.g. to sample from a checkpoint), with the same checks.
  void load_weights(nn::Module& model) const;

 private:
  // The file's weights for `model`, after checking names, order and count.
  nn::NamedTensors weights_for(const nn::Module& model) const;
  // The document of the file's metadata (sets doc_ and step_).
  void parse_document(const Metadata& metadata, const std::string& path);
  // The document's record of tensor `name`, after checking that it lists it with t's dtype and
  // shape and a checksum.
  const TensorRecord& check_listed(const std::string& name, const Tensor& t, const std::string& path) const;
  void check_complete() const;

  SafetensorsFile file_;  // each tensor where read() placed it (the host for from_file)
  CheckpointDocument doc_;
  int64_t step_ = 0;
};

}  // namespace lathe::serialize
