#include "train/model_config.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "core/error.h"
#include "core/memory_info.h"
#include "serialize/json_document.h"

namespace lathe::train {

namespace {

int64_t preset_batch(const std::string& name) {
  if (name == "small" || name == "speedrun-small") return 16;
  if (name == "gpt2") return 4;
  if (name == "nanogpt-cpu") return 12;
  return 8;  // tiny, char
}

bool is_preset(const std::string& s) {
  for (const std::string& name : nn::GPTConfig::preset_names())
    if (s == name) return true;
  return false;
}

std::string preset_list() {
  std::string all;
  for (const std::string& name : nn::GPTConfig::preset_names()) all += (all.empty() ? "" : ", ") + name;
  return all;
}

// Every key known and every value of the right JSON type, checked here so that a bad value is
// quoted shortened (nn's own messages print it whole). The keys are GPTConfig's fields
// (GPTConfig::for_each_field) and the benchmark's batch.
void check_config_fields(const nlohmann::json& j, const std::string& path) {
  LATHE_CHECK(j.is_object(), "--config ", path, ": expected a JSON object, got ", serialize::quote_json(j));
  for (const auto& [key, value] : j.items()) {
    const std::string field = serialize::quote_json(key);
    const char* type = key == "batch" ? "integer" : nn::GPTConfig::field_json_type(key);
    LATHE_CHECK(type != nullptr, "--config ", path, ": unknown field ", field, " (known: ",
                nn::GPTConfig::field_names(), ", batch)");
    const std::string t = type;
    const bool fits = t == "boolean" ? value.is_boolean() : t == "string" ? value.is_string() : value.is_number();
    const char* must = t == "integer" ? "an integer" : t == "boolean" ? "true or false" : t == "number" ? "a number"
                                                                                                       : "a string";
    LATHE_CHECK(fits, "--config ", path, ": field ", field, " must be ", must, ", got ", serialize::quote_json(value));
  }
}

}  // namespace

int64_t checked_param_count(const nn::GPTConfig& c, const std::string& what) {
  try {
    return c.parameter_count();
  } catch (const Error& e) {
    LATHE_FAIL(what, ": ", e.what());
  }
}

void check_model_fits_memory(const nn::GPTConfig& c, const std::string& what) {
  const int64_t params = checked_param_count(c, what);
  const int64_t available = physical_memory_bytes();
  const long double bytes = static_cast<long double>(params) * kTrainingBytesPerParam;  // may pass int64
  LATHE_CHECK(bytes <= static_cast<long double>(available), what, ": the model (vocab_size ", c.vocab_size, ", n_embd ", c.n_embd,
              ", n_layer ", c.n_layer, ", block_size ", c.block_size, ") has ", params,
              " parameters and needs ", static_cast<double>(bytes), " bytes for them and their optimizer state, more than the ",
              available, " bytes of this machine's memory");
}

void check_batch_fits_memory(const nn::GPTConfig& c, int64_t batch, const std::string& what) {
  // In long double: the point is to refuse sizes whose products overflow as well as large ones.
  const long double B = batch, T = c.block_size, V = c.vocab_size, C = c.n_embd, H = c.n_head, L = c.n_layer;
  // Only what the forward pass keeps for the backward, so the bound holds whatever the backward
  // frees as it goes.
  const long double f32 = 4;
  const long double tokens = 2 * B * (T + 1) * 8;           // inputs and targets, i64
  const long double logits = B * T * V * f32;               // the classifier's output
  const long double attention = L * B * H * T * T * f32;    // each layer's attention probabilities
  const long double per_token = L * B * T * C * f32 * 4;    // a few values per token and layer
  const long double bytes = tokens + logits + attention + per_token;
  const long double available = static_cast<long double>(physical_memory_bytes());
  LATHE_CHECK(bytes <= available, what, ": ", batch, " sequences of ", c.block_size,
              " tokens need at least ", static_cast<double>(bytes), " bytes of activations for one step (logits ",
              static_cast<double>(logits), ", attention ", static_cast<double>(attention),
              "), more than the ", static_cast<double>(available), " bytes of this machine's memory");
}

ModelChoice resolve_model_config(const std::string& name_or_path) {
  // A preset name wins over a file of the same name in the working directory.
  if (is_preset(name_or_path))
    return {name_or_path, nn::GPTConfig::preset(name_or_path), preset_batch(name_or_path)};
  // The error_code form: a loop of symbolic links is a reason to name, not an exception to leak.
  std::error_code ec;
  const bool regular = std::filesystem::is_regular_file(name_or_path, ec);
  LATHE_CHECK(regular, "--config ", name_or_path, ": neither a preset (", preset_list(), ") nor a JSON file",
              ec ? " (" + ec.message() + ")" : std::string());
  const nlohmann::json j = serialize::read_json_file(name_or_path, "--config " + name_or_path, serialize::kMaxConfigJsonBytes);
  check_config_fields(j, name_or_path);
  ModelChoice c;
  c.name = std::filesystem::path(name_or_path).stem().string();
  try {
    nlohmann::json model = j;
    model.erase("batch");  // the file's own field, not the model's
    c.config = nn::GPTConfig::from_json(model);
  } catch (const Error& e) {
    LATHE_FAIL("--config ", name_or_path, ": ", e.what());
  }
  checked_param_count(c.config, "--config " + name_or_path);
  c.default_batch = 8;
  if (j.contains("batch")) c.default_batch = json_integer(j["batch"], 1, INT64_MAX, "--config " + name_or_path + ": field \"batch\"");
  return c;
}

}  // namespace lathe::train
