#include "examples/lib/model_config.h"

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

bool looks_like_file(const std::string& s) {
  return std::filesystem::exists(s) || s.find('/') != std::string::npos ||
         (s.size() > 5 && s.compare(s.size() - 5, 5, ".json") == 0);
}

}  // namespace

ModelChoice resolve_model_config(const std::string& name_or_path) {
  if (!looks_like_file(name_or_path)) {
    return {name_or_path, nn::GPTConfig::preset(name_or_path), preset_batch(name_or_path)};
  }
  std::ifstream in(name_or_path);
  LATHE_CHECK(in.good(), "--config ", name_or_path, ": cannot open the file (and it is not a preset name)");
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
