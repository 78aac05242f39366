#include <cmath>

#include "nn/gpt.h"

namespace lathe::nn {

namespace {

// A value quoted in an error message, cut short: a config can hold a string of any length.
std::string brief(const nlohmann::json& v) {
  std::string s = v.dump(-1, ' ', /*ensure_ascii=*/true, nlohmann::json::error_handler_t::replace);
  return s.size() > 80 ? s.substr(0, 80) + "..." : s;
}

struct Preset {
  const char* name;
  GPTConfig config;
};

// As tools/torch_gpt_reference.py's CONFIGS (its batch sizes belong to the benchmark, not here).
const Preset kPresets[] = {
    {"tiny", {256, 64, 2, 2, 64}},
    {"small", {256, 128, 4, 4, 128}},
    {"char", {256, 256, 6, 6, 384}},
    // nanoGPT's "I only have a MacBook" recipe for shakespeare_char: no biases (nanoGPT's default)
    {"nanogpt-cpu", {256, 64, 4, 4, 128, /*bias=*/false}},
    {"gpt2", {50304, 1024, 12, 12, 768}},
};

int64_t required_int(const nlohmann::json& j, const char* field) {
  LATHE_CHECK(j.contains(field), "GPT config: missing field \"", field, "\"");
  const nlohmann::json& v = j.at(field);
  LATHE_CHECK(v.is_number_integer() || (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>()),
              "GPT config: field \"", field, "\" must be an integer, got ", brief(v));
  return v.is_number_integer() ? v.get<int64_t>() : int64_t(v.get<double>());
}

}  // namespace

void GPTConfig::validate() const {
  auto positive = [](const char* field, int64_t v) {
    LATHE_CHECK(v > 0, "GPT config: ", field, " must be positive, got ", v);
  };
  positive("vocab_size", vocab_size);
  positive("block_size", block_size);
  positive("n_layer", n_layer);
  positive("n_head", n_head);
  positive("n_embd", n_embd);
  LATHE_CHECK(n_embd % n_head == 0, "GPT config: n_embd (", n_embd, ") must be a multiple of n_head (", n_head, ")");
  LATHE_CHECK(dropout >= 0.0 && dropout < 1.0, "GPT config: dropout must be in [0, 1), got ", dropout);
}

std::vector<std::string> GPTConfig::preset_names() {
  std::vector<std::string> names;
  for (const auto& p : kPresets) names.push_back(p.name);
  return names;
}

GPTConfig GPTConfig::preset(const std::string& name) {
  std::string all;
  for (const auto& p : kPresets) {
    if (name == p.name) return p.config;
    all += (all.empty() ? "" : ", ") + std::string(p.name);
  }
  LATHE_FAIL("GPT config: unknown preset \"", name, "\" (presets: ", all, ")");
}

nlohmann::json GPTConfig::to_json() const {
  return {{"vocab_size", vocab_size}, {"block_size", block_size}, {"n_layer", n_layer}, {"n_head", n_head},
          {"n_embd", n_embd},         {"bias", bias},             {"dropout", dropout}};
}

GPTConfig GPTConfig::from_json(const nlohmann::json& j) {
  LATHE_CHECK(j.is_object(), "GPT config: expected a JSON object, got ", brief(j));
  // A misspelt field would otherwise leave its default in place without a word.
  const nlohmann::json known = GPTConfig{}.to_json();
  for (const auto& [key, value] : j.items()) {
    if (known.contains(key)) continue;
    std::string fields;
    for (const auto& [k, _] : known.items()) fields += (fields.empty() ? "" : ", ") + k;
    LATHE_FAIL("GPT config: unknown field ", brief(key), " (the fields are ", fields, ")");
  }
  GPTConfig c;
  c.vocab_size = required_int(j, "vocab_size");
  c.block_size = required_int(j, "block_size");
  c.n_layer = required_int(j, "n_layer");
  c.n_head = required_int(j, "n_head");
  c.n_embd = required_int(j, "n_embd");
  if (j.contains("bias")) {
    LATHE_CHECK(j["bias"].is_boolean(), "GPT config: field \"bias\" must be true or false, got ", brief(j["bias"]));
    c.bias = j["bias"].get<bool>();
  }
  if (j.contains("dropout")) {
    LATHE_CHECK(j["dropout"].is_number(), "GPT config: field \"dropout\" must be a number, got ",
                brief(j["dropout"]));
    c.dropout = j["dropout"].get<double>();
  }
  c.validate();
  return c;
}

void to_json(nlohmann::json& j, const GPTConfig& c) { j = c.to_json(); }
void from_json(const nlohmann::json& j, GPTConfig& c) { c = GPTConfig::from_json(j); }

}  // namespace lathe::nn
