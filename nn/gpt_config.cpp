#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "core/json_value.h"
#include "nn/gpt.h"

namespace lathe::nn {

namespace {

struct Preset {
  const char* name;
  GPTConfig config;
};

// The block of nanochat and the modded-nanogpt speedrun (RoPE, RMSNorm without weights, ReLU^2,
// QK-norm, an untied head, no biases, logits soft-capped at 30 as modded-nanogpt's tanh form) at
// `small`'s size: 852k parameters against small's 842k (no wpe, biases or norm weights; a second
// 256 x 128 matrix in lm_head).
GPTConfig speedrun_small() {
  GPTConfig c{256, 128, 4, 4, 128, /*bias=*/false};
  c.rope = true;
  c.norm = NormKind::rms_norm;
  c.norm_weight = false;
  c.activation = Activation::squared_relu;
  c.qk_norm = true;
  c.tie_embeddings = false;
  c.logit_softcap = 30.0;
  return c;
}

// As tools/torch_gpt_reference.py's CONFIGS (its batch sizes belong to the benchmark, not here).
const Preset kPresets[] = {
    {"tiny", {256, 64, 2, 2, 64}},
    {"small", {256, 128, 4, 4, 128}},
    {"char", {256, 256, 6, 6, 384}},
    // nanoGPT's "I only have a MacBook" recipe for shakespeare_char: no biases (nanoGPT's default)
    {"nanogpt-cpu", {256, 64, 4, 4, 128, /*bias=*/false}},
    {"speedrun-small", speedrun_small()},
    {"gpt2", {50304, 1024, 12, 12, 768}},
};

const GPTConfig kDefaults{};

bool read_bool(const nlohmann::json& j, const char* field, bool fallback) {
  if (!j.contains(field)) return fallback;
  LATHE_CHECK(j[field].is_boolean(), "GPT config: field \"", field, "\" must be true or false, got ", quote_json(j[field]));
  return j[field].get<bool>();
}

double read_number(const nlohmann::json& j, const char* field, double fallback) {
  if (!j.contains(field)) return fallback;
  LATHE_CHECK(j[field].is_number(), "GPT config: field \"", field, "\" must be a number, got ", quote_json(j[field]));
  return j[field].get<double>();
}

// One of `names` (an enum's values in order) for a string field.
template <class E, size_t N>
E read_choice(const nlohmann::json& j, const char* field, E fallback, const char* (&name_of)(E),
              const E (&choices)[N]) {
  if (!j.contains(field)) return fallback;
  std::string all;
  for (E c : choices) {
    if (j[field].is_string() && j[field].get<std::string>() == name_of(c)) return c;
    all += (all.empty() ? "\"" : ", \"") + std::string(name_of(c)) + "\"";
  }
  LATHE_FAIL("GPT config: field \"", field, "\" must be one of ", all, ", got ", quote_json(j[field]));
}

constexpr NormKind kNormKinds[] = {NormKind::layer_norm, NormKind::rms_norm};
constexpr Activation kActivations[] = {Activation::gelu_tanh, Activation::squared_relu, Activation::swiglu};

int64_t required_int(const nlohmann::json& j, const char* field) {
  LATHE_CHECK(j.contains(field), "GPT config: missing field \"", field, "\"");
  return json_integer(j.at(field), 1, INT64_MAX, std::string("GPT config: field \"") + field + "\"");
}

// One field from JSON by its member's type (an integer field is a required size).
void read_field(const nlohmann::json& j, const char* name, int64_t& v) { v = required_int(j, name); }
void read_field(const nlohmann::json& j, const char* name, bool& v) { v = read_bool(j, name, v); }
void read_field(const nlohmann::json& j, const char* name, double& v) { v = read_number(j, name, v); }
void read_field(const nlohmann::json& j, const char* name, NormKind& v) {
  v = read_choice(j, name, v, norm_kind_name, kNormKinds);
}
void read_field(const nlohmann::json& j, const char* name, Activation& v) {
  v = read_choice(j, name, v, activation_name, kActivations);
}

// One field as JSON, and its JSON type.
template <class T>
nlohmann::json field_json(const T& v) {
  if constexpr (std::is_same_v<T, NormKind>) return norm_kind_name(v);
  else if constexpr (std::is_same_v<T, Activation>) return activation_name(v);
  else return v;
}
template <class T>
const char* json_type_of() {
  if constexpr (std::is_same_v<T, int64_t>) return "integer";
  else if constexpr (std::is_same_v<T, bool>) return "boolean";
  else if constexpr (std::is_same_v<T, double>) return "number";
  else return "string";  // the enums, by name
}

// a * b and a + b, or an error naming what overflows 64-bit arithmetic.
int64_t times(int64_t a, int64_t b, const char* a_name, const char* b_name) {
  int64_t r = 0;
  LATHE_CHECK(!__builtin_mul_overflow(a, b, &r), "GPT config: ", a_name, " (", a, ") x ", b_name, " (", b,
              ") overflows 64-bit arithmetic; no such model can be built");
  return r;
}
int64_t plus(int64_t a, int64_t b, const char* at) {
  int64_t r = 0;
  LATHE_CHECK(!__builtin_add_overflow(a, b, &r), "GPT config: the parameter count overflows 64-bit arithmetic (at ",
              at, "); no such model can be built");
  return r;
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
  // The model computes in f32 (and narrower): a value is checked as f32 will hold it, so that a
  // dropout of 1 - 1e-12 (1 in f32, an infinite scale) or a soft cap of 1e39 (infinite in f32: every
  // logit NaN) is refused here rather than computed.
  LATHE_CHECK(dropout >= 0.0 && float(dropout) < 1.0f, "GPT config: dropout must be in [0, 1), got ", dropout,
              dropout < 1.0 && dropout >= 0.0 ? " (1 in f32)" : "");
  if (rope) {
    LATHE_CHECK(head_size() % 2 == 0, "GPT config: rope needs an even head size, but n_embd / n_head = ", n_embd, " / ",
                n_head, " = ", head_size());
    LATHE_CHECK(rope_base > 1.0 && std::isfinite(rope_base), "GPT config: rope_base must be finite and above 1, got ",
                rope_base);
  } else {
    LATHE_CHECK(rope_base == kDefaults.rope_base, "GPT config: rope_base is ", rope_base,
                " but rope is off; a base without rotary embeddings would be ignored (set \"rope\": true, or leave "
                "rope_base out)");
  }
  LATHE_CHECK(logit_softcap == 0.0 || (logit_softcap >= double(std::numeric_limits<float>::min()) &&
                                       logit_softcap <= double(std::numeric_limits<float>::max())),
              "GPT config: logit_softcap must be 0 (off) or a positive cap that f32 holds (",
              std::numeric_limits<float>::min(), " to ", std::numeric_limits<float>::max(), "), got ", logit_softcap);
  parameter_count();  // every size the model's tensors take fits in 64 bits
}

int64_t GPTConfig::parameter_count() const {
  const int64_t E = n_embd;
  const int64_t matrix = times(E, E, "n_embd", "n_embd");  // first: then E < 2^32, and 8E cannot overflow
  const int64_t hidden = mlp_hidden_size(E, activation);
  // A norm: its weight, and LayerNorm's bias.
  const int64_t norm_params = (norm_weight ? E : 0) + (norm == NormKind::layer_norm && bias ? E : 0);
  const int64_t mlp_inputs = activation == Activation::swiglu ? 2 : 1;  // c_fc, and SwiGLU's c_gate
  const int64_t mlp = plus(times(mlp_inputs + 1, times(hidden, E, "the MLP's width", "n_embd"), "the MLP's matrices",
                                 "their size"),
                           bias ? mlp_inputs * hidden + E : 0, "the MLP");
  const int64_t attention = plus(times(4, matrix, "4", "n_embd^2"), bias ? 4 * E : 0, "attention");
  const int64_t block = plus(plus(attention, mlp, "a block"), 2 * norm_params, "a block");
  const int64_t embedding = times(vocab_size, E, "vocab_size", "n_embd");
  int64_t n = times(n_layer, block, "n_layer", "the parameters of a block");
  n = plus(n, embedding, "wte");
  if (!tie_embeddings) n = plus(n, embedding, "lm_head");
  if (!rope) n = plus(n, times(block_size, E, "block_size", "n_embd"), "wpe");
  return plus(n, norm_params, "ln_f");
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

nlohmann::json GPTConfig::to_json(bool every_field) const {
  nlohmann::json defaults = nlohmann::json::object();
  for_each_field(kDefaults, [&](const char* name, const auto& v, bool) { defaults[name] = field_json(v); });
  // GPT-2's seven always; a switch only where it differs from GPT-2's model, whose config then
  // reads as before.
  nlohmann::json j = nlohmann::json::object();
  for_each_field(*this, [&](const char* name, const auto& v, bool gpt2) {
    nlohmann::json value = field_json(v);
    if (gpt2 || every_field || value != defaults[name]) j[name] = std::move(value);
  });
  return j;
}

const char* GPTConfig::field_json_type(const std::string& name) {
  const char* type = nullptr;
  GPTConfig c;
  for_each_field(c, [&](const char* field, const auto& v, bool) {
    if (name == field) type = json_type_of<std::decay_t<decltype(v)>>();
  });
  return type;
}

std::string GPTConfig::field_names() {
  std::string names;
  GPTConfig c;
  for_each_field(c, [&](const char* field, const auto&, bool) { names += (names.empty() ? "" : ", ") + std::string(field); });
  return names;
}

GPTConfig GPTConfig::from_json(const nlohmann::json& j) {
  LATHE_CHECK(j.is_object(), "GPT config: expected a JSON object, got ", quote_json(j));
  // A misspelt field would otherwise leave its default in place without a word.
  for (const auto& [key, value] : j.items())
    LATHE_CHECK(field_json_type(key) != nullptr, "GPT config: unknown field ", quote_json(key), " (the fields are ",
                field_names(), ")");
  GPTConfig c;
  for_each_field(c, [&](const char* name, auto& v, bool) { read_field(j, name, v); });
  c.validate();
  return c;
}

void to_json(nlohmann::json& j, const GPTConfig& c) { j = c.to_json(); }
void from_json(const nlohmann::json& j, GPTConfig& c) { c = GPTConfig::from_json(j); }

}  // namespace lathe::nn
