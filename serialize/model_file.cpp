#include "serialize/model_file.h"

#include <filesystem>
#include <functional>

#include "core/error.h"
#include "serialize/checkpoint.h"
#include "serialize/checksum.h"
#include "serialize/hf_gpt2.h"
#include "serialize/hf_llama.h"
#include "serialize/json_document.h"
#include "serialize/llmc.h"
#include "serialize/weights.h"

namespace lathe::serialize {

void save_model(const std::string& path, const nn::GPT& model, Metadata extra, Existing existing) {
  extra["format"] = kWeightsFormat;
  extra["config"] = model.config().to_json().dump();
  if (extra.find("tokenizer") == extra.end()) extra["tokenizer"] = "bytes";  // the trainer names any other
  // save_weights (serialize/weights.h) records every tensor's checksum (metadata "lathe"), as
  // checkpoints do, so that a flipped bit is found by whoever loads the file.
  save_weights(path, model.state_dict(), extra, existing);
}

const char* weights_format_name(WeightsFormat f) {
  switch (f) {
    case WeightsFormat::lathe: return "lathe";
    case WeightsFormat::checkpoint: return "checkpoint";
    case WeightsFormat::hf: return "hf";
    case WeightsFormat::llmc: return "llmc";
    case WeightsFormat::gguf: return "gguf";
  }
  return "?";
}

WeightsFormat weights_format_of(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) return WeightsFormat::hf;
  const std::string bin = ".bin";
  if (path.size() >= bin.size() && path.compare(path.size() - bin.size(), bin.size(), bin) == 0)
    return WeightsFormat::llmc;
  const std::string gguf = ".gguf";
  if (path.size() >= gguf.size() && path.compare(path.size() - gguf.size(), gguf.size(), gguf) == 0)
    return WeightsFormat::gguf;
  return WeightsFormat::lathe;
}

namespace {

// A GPT-2 read from another program's files, as a model; such files name no tokenizer lathe knows.
LoadedModel gpt2_model(GPT2Weights w, WeightsFormat format, const std::string& path, Device device) {
  LoadedModel out;
  out.format = format;
  out.model = std::make_unique<nn::GPT>(w.config, nn::GPT::kToBeLoaded, device);
  try {
    out.model->load_state_dict(w.weights);
  } catch (const Error& e) {
    LATHE_FAIL(path, ": ", e.what());
  }
  out.model->eval();
  out.metadata["tokenizer"] = kUnknownTokenizer;
  return out;
}

}  // namespace

void check_file_holds(const nn::GPTConfig& config, const SafetensorsFile& f, const std::string& what,
                      const std::function<bool(const std::string&)>& skip) {
  int64_t held = 0;
  for (const auto& [name, t] : f.tensors)
    if (!skip || !skip(name)) held += t.numel();
  const int64_t needed = config.parameter_count();
  LATHE_CHECK(needed <= held, what, ": the config (n_layer ", config.n_layer, ", n_embd ", config.n_embd, ", vocab_size ",
              config.vocab_size, ", block_size ", config.block_size, ") has ", needed,
              " parameters, but the file holds only ", held, " values in ", f.tensors.size(), " tensors");
}

bool is_training_state(const std::string& name) {
  return name.rfind("optim.", 0) == 0 || name.rfind("scaler.", 0) == 0;
}

LoadedModel load_model(const std::string& path, Device device) {
  std::error_code ec;  // a symlink loop is a reason to name, not an exception to leak
  LATHE_CHECK(std::filesystem::exists(path, ec), path, ": ", ec ? ec.message() : std::string("no such file"));
  const WeightsFormat format = weights_format_of(path);
  if (format == WeightsFormat::hf) {
    const std::filesystem::path dir(path);
    LATHE_CHECK(std::filesystem::exists(dir / "config.json", ec) || !std::filesystem::exists(dir / "metrics.jsonl", ec),
                path, ": a run directory of lathe train, not a model directory; name its model.safetensors or one of "
                "its checkpoints (ckpt-<step>.safetensors)");
    // Llama's layout for the modern block, GPT-2's otherwise (whose reader names a model_type it does not take).
    if (hf_model_type(path) == "llama") return gpt2_model(read_hf_llama(path), format, path, device);
    return gpt2_model(read_hf_gpt2(path), format, path, device);
  }
  if (format == WeightsFormat::llmc) return gpt2_model(read_llmc(path), format, path, device);
  LATHE_CHECK(format != WeightsFormat::gguf, path, ": a GGUF file, which lathe writes for llama.cpp but does not read; "
              "give the lathe weights it was converted from");
  SafetensorsFile f = read_safetensors(path, Device::cpu());
  if (TrainingCheckpoint::is_checkpoint(f.metadata)) {
    // A training checkpoint: its weights, without the optimizer state.
    const TrainingCheckpoint ckpt = TrainingCheckpoint::from_file(std::move(f));
    LoadedModel out;
    out.format = WeightsFormat::checkpoint;
    try {
      const nn::GPTConfig config = nn::GPTConfig::from_json(ckpt.model_description());
      check_file_holds(config, ckpt.file(), "model config", is_training_state);
      out.model = std::make_unique<nn::GPT>(config, nn::GPT::kToBeLoaded, device);
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
  verify_checksums(f);
  auto it = f.metadata.find("config");
  LATHE_CHECK(it != f.metadata.end(), path, ": no model config in its metadata (key \"config\"); ",
              "was it written by lathe train?");
  // parse_json_document's errors name the file and the key already.
  const nlohmann::json config_json = parse_json_document(it->second, path + ": metadata \"config\"");
  nn::GPTConfig config;
  try {
    config = nn::GPTConfig::from_json(config_json);
  } catch (const nlohmann::json::exception& e) {
    LATHE_FAIL(path, ": metadata \"config\" is not valid JSON: ", e.what());
  } catch (const Error& e) {
    LATHE_FAIL(path, ": metadata \"config\": ", e.what());
  }
  LoadedModel out;
  try {
    check_file_holds(config, f, "metadata \"config\"");
    out.model = std::make_unique<nn::GPT>(config, nn::GPT::kToBeLoaded, device);
  } catch (const Error& e) {
    LATHE_FAIL(path, ": ", e.what());
  }
  try {
    out.model->load_state_dict(f.tensors);
  } catch (const Error& e) {
    LATHE_FAIL(path, ": ", e.what());
  }
  out.model->eval();
  out.metadata = std::move(f.metadata);
  return out;
}

}  // namespace lathe::serialize
