#include "examples/lib/weights_file.h"

#include <filesystem>

#include "core/error.h"

namespace lathe::app {

void save_weights(const std::string& path, const nn::GPT& model, serialize::Metadata extra) {
  extra["format"] = kWeightsFormat;
  extra["config"] = model.config().to_json().dump();
  extra["tokenizer"] = "bytes";
  serialize::write_safetensors(path, model.named_parameters(), extra);
}

LoadedModel load_weights(const std::string& path, Device device) {
  LATHE_CHECK(std::filesystem::exists(path), path, ": no such file");
  serialize::SafetensorsFile f = serialize::read_safetensors(path, device);
  auto it = f.metadata.find("config");
  LATHE_CHECK(it != f.metadata.end(), path, ": no model config in its metadata (key \"config\"); ",
              "was it written by lathe train?");
  nn::GPTConfig config;
  try {
    config = nn::GPTConfig::from_json(nlohmann::json::parse(it->second));
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

}  // namespace lathe::app
