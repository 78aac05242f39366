#include "train/weights_file.h"

#include <filesystem>

#include "core/error.h"
#include "serialize/checkpoint.h"
#include "serialize/checksum.h"
#include "serialize/json_document.h"
#include "serialize/weights.h"

namespace lathe::train {

void save_weights(const std::string& path, const nn::GPT& model, serialize::Metadata extra) {
  extra["format"] = kWeightsFormat;
  extra["config"] = model.config().to_json().dump();
  if (extra.find("tokenizer") == extra.end()) extra["tokenizer"] = "bytes";  // the trainer names any other
  // serialize::save_weights records every tensor's checksum (metadata "lathe"), as checkpoints do,
  // so that a flipped bit is found by whoever loads the file.
  serialize::save_weights(path, model.state_dict(), extra);
}

LoadedModel load_weights(const std::string& path, Device device) {
  std::error_code ec;  // a symlink loop is a reason to name, not an exception to leak
  LATHE_CHECK(std::filesystem::exists(path, ec), path, ": ", ec ? ec.message() : std::string("no such file"));
  serialize::SafetensorsFile f = serialize::read_safetensors(path, Device::cpu());
  if (serialize::TrainingCheckpoint::is_checkpoint(f.metadata)) {
    // A training checkpoint: its weights, without the optimizer state.
    const serialize::TrainingCheckpoint ckpt = serialize::TrainingCheckpoint::from_file(std::move(f));
    LoadedModel out;
    try {
      out.model = std::make_unique<nn::GPT>(nn::GPTConfig::from_json(ckpt.model_description()), /*seed=*/0, device);
    } catch (const Error& e) {
      LATHE_FAIL(path, ": checkpoint model config: ", e.what());
    }
    ckpt.load_weights(*out.model);
    out.model->eval();
    out.metadata["step"] = std::to_string(ckpt.step());
    // The tokenizer of a run on token shards is in the program state (train/program_state.h).
    const nlohmann::json& program = ckpt.program();
    if (program.is_object() && program.contains("tokenizer") && program["tokenizer"].is_object())
      out.metadata["tokenizer"] = program["tokenizer"].dump();
    return out;
  }
  // (A checkpoint verifies its own above.) Files written before weights carried checksums, or by
  // other programs, have none: nothing to check.
  serialize::verify_checksums(f);
  auto it = f.metadata.find("config");
  LATHE_CHECK(it != f.metadata.end(), path, ": no model config in its metadata (key \"config\"); ",
              "was it written by lathe train?");
  nn::GPTConfig config;
  try {
    config = nn::GPTConfig::from_json(serialize::parse_json_document(it->second, path + ": metadata \"config\""));
  } catch (const nlohmann::json::exception& e) {
    LATHE_FAIL(path, ": metadata \"config\" is not valid JSON: ", e.what());
  } catch (const Error& e) {
    LATHE_FAIL(path, ": metadata \"config\": ", e.what());
  }
  LoadedModel out;
  out.model = std::make_unique<nn::GPT>(config, /*seed=*/0, device);
  try {
    out.model->load_state_dict(f.tensors);
  } catch (const Error& e) {
    LATHE_FAIL(path, ": ", e.what());
  }
  out.model->eval();
  out.metadata = std::move(f.metadata);
  return out;
}

}  // namespace lathe::train
