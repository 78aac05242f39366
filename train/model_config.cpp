#include "train/model_config.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"

namespace lathe::app {

namespace {

int64_t preset_batch(const std::string& name) {
  if (name == "small") return 16;
  if (name == "gpt2") return 4;
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

}  // namespace

ModelChoice resolve_model_config(const std::string& name_or_path) {
  // A preset name wins over a file of the same name in the working directory.
  if (is_preset(name_or_path))
    return {name_or_path, nn::GPTConfig::preset(name_or_path), preset_batch(name_or_path)};
  LATHE_CHECK(std::filesystem::is_regular_file(name_or_path), "--config ", name_or_path,
              ": neither a preset (", preset_list(), ") nor a JSON file");
  std::ifstream in(name_or_path);
  LATHE_CHECK(in.good(), "--config ", name_or_path, ": cannot open the file");
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text.str());
  } catch (const nlohmann::json::exception& e) {
    LATHE_FAIL("--config ", name_or_path, ": not valid JSON: ", e.what());
  }
  ModelChoice c;
  c.name = std::filesystem::path(name_or_path).stem().string();
  try {
    c.config = nn::GPTConfig::from_json(j);
  } catch (const Error& e) {
    LATHE_FAIL("--config ", name_or_path, ": ", e.what());
  }
  c.default_batch = 8;
  if (j.contains("batch")) {
    LATHE_CHECK(j["batch"].is_number_integer() && j["batch"].get<int64_t>() > 0, "--config ", name_or_path,
                ": field \"batch\" must be a positive integer, got ", j["batch"].dump());
    c.default_batch = j["batch"].get<int64_t>();
  }
  return c;
}

}  // namespace lathe::app
