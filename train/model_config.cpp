#include "train/model_config.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "core/error.h"
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

// The keys a config file may hold: GPTConfig's fields and the benchmark batch, by JSON type.
const char* const kIntegerFields[] = {"vocab_size", "block_size", "n_layer", "n_head", "n_embd", "batch"};
const char* const kBoolFields[] = {"bias", "rope", "norm_weight", "qk_norm", "tie_embeddings"};
const char* const kNumberFields[] = {"dropout", "rope_base", "logit_softcap"};
const char* const kStringFields[] = {"norm", "activation"};

template <size_t N>
bool one_of(const std::string& key, const char* const (&fields)[N]) {
  for (const char* f : fields)
    if (key == f) return true;
  return false;
}

// Every key known and every value of the right JSON type, checked here so that a bad value is
// quoted shortened (nn's own messages print it whole).
void check_config_fields(const nlohmann::json& j, const std::string& path) {
  LATHE_CHECK(j.is_object(), "--config ", path, ": expected a JSON object, got ", serialize::quote_json(j));
  for (const auto& [key, value] : j.items()) {
    const std::string field = serialize::quote_json(key);
    if (one_of(key, kIntegerFields)) {
      LATHE_CHECK(value.is_number(), "--config ", path, ": field ", field, " must be an integer, got ",
                  serialize::quote_json(value));
    } else if (one_of(key, kBoolFields)) {
      LATHE_CHECK(value.is_boolean(), "--config ", path, ": field ", field, " must be true or false, got ",
                  serialize::quote_json(value));
    } else if (one_of(key, kNumberFields)) {
      LATHE_CHECK(value.is_number(), "--config ", path, ": field ", field, " must be a number, got ",
                  serialize::quote_json(value));
    } else if (one_of(key, kStringFields)) {
      LATHE_CHECK(value.is_string(), "--config ", path, ": field ", field, " must be a string, got ",
                  serialize::quote_json(value));
    } else {
      LATHE_FAIL("--config ", path, ": unknown field ", field,
                 " (known: vocab_size, block_size, n_layer, n_head, n_embd, bias, dropout, rope, rope_base, norm, "
                 "norm_weight, activation, qk_norm, tie_embeddings, logit_softcap, batch)");
    }
  }
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  LATHE_CHECK(in.good(), "--config ", path, ": cannot open the file");
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// a * b, or an error naming both factors when it does not fit in int64.
int64_t mul(int64_t a, int64_t b, const std::string& what, const char* a_name, const char* b_name) {
  int64_t r = 0;
  LATHE_CHECK(!__builtin_mul_overflow(a, b, &r), what, ": ", a_name, " (", a, ") x ", b_name, " (", b,
              ") overflows 64-bit arithmetic; the model cannot be built");
  return r;
}

int64_t add(int64_t a, int64_t b, const std::string& what, const char* name) {
  int64_t r = 0;
  LATHE_CHECK(!__builtin_add_overflow(a, b, &r), what, ": the parameter count overflows 64-bit arithmetic (at ",
              name, ")");
  return r;
}

// Physical memory of the machine in bytes; the largest int64 when the system does not say.
int64_t physical_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  int64_t bytes = 0;
  if (pages <= 0 || page <= 0 || __builtin_mul_overflow(int64_t(pages), int64_t(page), &bytes))
    return std::numeric_limits<int64_t>::max();
  return bytes;
}

}  // namespace

int64_t checked_param_count(const nn::GPTConfig& c, const std::string& what) {
  const int64_t E = c.n_embd;
  // Per block: two norms (2E each), c_attn (3E x E + 3E), attn c_proj (E x E + E), then the MLP:
  // c_fc (hidden x E + hidden), with SwiGLU c_gate likewise, and c_proj (E x hidden + E). Biases and
  // norm weights are counted: an upper bound without them.
  const int64_t e2 = mul(E, E, what, "n_embd", "n_embd");
  // E^2 fits, so E < 2^32 and the hidden width (at most 4E) cannot overflow.
  const int64_t hidden = nn::mlp_hidden_size(E, c.activation);
  const int64_t mlp_in = c.activation == nn::Activation::swiglu ? 2 : 1;  // c_fc, and SwiGLU's c_gate
  const int64_t mlp_matrix = mul(hidden, E, what, "the MLP width", "n_embd");
  int64_t mlp = mul(mlp_in + 1, mlp_matrix, what, "the MLP's matrices", "their size");
  mlp = add(mlp, add(mul(mlp_in, hidden, what, "the MLP's biases", "the MLP width"), E, what, "the MLP"), what,
            "the MLP");
  const int64_t attn_and_norms = add(mul(4, e2, what, "4", "n_embd^2"), mul(8, E, what, "8", "n_embd"), what, "n_embd");
  const int64_t block = add(attn_and_norms, mlp, what, "the MLP");
  int64_t n = mul(c.n_layer, block, what, "n_layer", "the parameters of a block");
  const int64_t VE = mul(c.vocab_size, E, what, "vocab_size", "n_embd");
  n = add(n, VE, what, "vocab_size");                                // wte (and a tied lm_head)
  if (!c.tie_embeddings) n = add(n, VE, what, "vocab_size");         // an untied lm_head
  if (!c.rope) n = add(n, mul(c.block_size, E, what, "block_size", "n_embd"), what, "block_size");  // wpe
  return add(n, mul(2, E, what, "2", "n_embd"), what, "ln_f");
}

void check_model_fits_memory(const nn::GPTConfig& c, const std::string& what) {
  const int64_t params = checked_param_count(c, what);
  const int64_t bytes = mul(params, kTrainingBytesPerParam, what, "the parameter count", "bytes per parameter");
  const int64_t available = physical_memory_bytes();
  LATHE_CHECK(bytes <= available, what, ": the model (vocab_size ", c.vocab_size, ", n_embd ", c.n_embd,
              ", n_layer ", c.n_layer, ", block_size ", c.block_size, ") has ", params,
              " parameters and needs ", bytes, " bytes for them and their optimizer state, more than the ",
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
  const nlohmann::json j = serialize::parse_json_document(read_text(name_or_path), "--config " + name_or_path);
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
  if (j.contains("batch")) {
    LATHE_CHECK(j["batch"].is_number_integer() && j["batch"].get<int64_t>() > 0, "--config ", name_or_path,
                ": field \"batch\" must be a positive integer, got ", serialize::quote_json(j["batch"]));
    c.default_batch = j["batch"].get<int64_t>();
  }
  return c;
}

}  // namespace lathe::train
