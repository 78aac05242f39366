#include "serialize/hf_gpt2.h"

#include <sys/stat.h>

#include <algorithm>
#include <climits>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <regex>

#include "core/autograd.h"
#include "serialize/atomic_file.h"
#include "serialize/hf_directory.h"
#include "serialize/json_document.h"

namespace lathe::serialize {

namespace {

using json = nlohmann::json;

constexpr const char* kPrefix = "transformer.";
// lathe's LayerNorm eps (nn/block.cpp, nn/gpt.cpp), GPT-2's too.
constexpr double kLayerNormEps = 1e-5;

bool starts_with(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

// ---------------------------------------------------------------- config.json

// One field of config.json, with transformers' default when it is absent.
class ConfigFields {
 public:
  ConfigFields(const json& j, const std::string& file) : j_(j), file_(file) {}

  // A size: a positive integer within int32, as in every GPT-2 (and llm.c's header), so that no
  // product of sizes overflows before the weights are compared with it.
  int64_t size(const char* key, int64_t fallback) const {
    const json* v = find(key);
    if (!v) return fallback;
    const bool ok = v->is_number_integer() && v->get<int64_t>() > 0 && v->get<int64_t>() <= INT32_MAX;
    LATHE_CHECK(ok, file_, ": field \"", key, "\" must be a positive integer below 2^31, got ", quote_json(*v));
    return v->get<int64_t>();
  }
  double number(const char* key, double fallback) const {
    const json* v = find(key);
    if (!v) return fallback;
    LATHE_CHECK(v->is_number(), file_, ": field \"", key, "\" must be a number, got ", quote_json(*v));
    return v->get<double>();
  }
  bool boolean(const char* key, bool fallback) const {
    const json* v = find(key);
    if (!v) return fallback;
    LATHE_CHECK(v->is_boolean(), file_, ": field \"", key, "\" must be true or false, got ", quote_json(*v));
    return v->get<bool>();
  }
  // A field that must hold `wanted` (or be absent, when transformers' default is `wanted`).
  template <class T>
  void require(const char* key, const T& wanted, const char* why) const {
    const json* v = find(key);
    if (!v || *v == json(wanted)) return;
    refuse(key, *v, why);
  }
  [[noreturn]] void refuse(const char* key, const json& value, const std::string& why) const {
    LATHE_FAIL(file_, ": ", key, " = ", quote_json(value), " cannot be converted: ", why);
  }
  // The field, or null when absent. A field given as JSON null is present: transformers would use
  // None (tie_word_embeddings None unties the head), not its default, so it is refused by the
  // check of its value; n_inner, whose None means 4 n_embd, is the one field null may hold.
  const json* find(const char* key) const {
    const auto it = j_.find(key);
    return it == j_.end() ? nullptr : &*it;
  }

 private:
  const json& j_;
  const std::string& file_;
};

// ---------------------------------------------------------------- tensors

// Conv1D layers store their weight [in, out]: nn.Linear's transpose.
bool is_conv1d_weight(const std::string& name) {
  static const std::regex conv1d(R"(transformer\.h\.\d+\.(attn\.c_attn|attn\.c_proj|mlp\.c_fc|mlp\.c_proj)\.weight)");
  return std::regex_match(name, conv1d);
}

// The causal-mask buffers that files written before transformers 4.31 carry (name without prefix).
bool is_mask_buffer(const std::string& unprefixed) {
  static const std::regex mask(R"(h\.\d+\.attn\.(bias|masked_bias))");
  return std::regex_match(unprefixed, mask);
}

// Every tensor of the files by its lathe name ("transformer." + the unprefixed name, or
// lm_head.weight), the mask buffers left out.
std::map<std::string, HfTensor> read_tensors(const std::vector<std::string>& files) {
  return read_hf_tensors(files, [](const std::string& name) {
    const std::string unprefixed = starts_with(name, kPrefix) ? name.substr(std::strlen(kPrefix)) : name;
    if (is_mask_buffer(unprefixed)) return std::string();
    return unprefixed == "lm_head.weight" ? unprefixed : kPrefix + unprefixed;
  }, "with and without the \"transformer.\" prefix");
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && std::memcmp(a.data_ptr(), b.data_ptr(), a.nbytes()) == 0;
}

}  // namespace

nn::GPTConfig gpt_config_from_hf(const json& j, const std::string& file) {
  LATHE_CHECK(j.is_object(), file, ": expected a JSON object, got ", quote_json(j));
  const ConfigFields f(j, file);
  const json* model_type = f.find("model_type");
  LATHE_CHECK(model_type, file, ": no model_type (a GPT-2's is \"gpt2\")");
  if (*model_type != "gpt2") f.refuse("model_type", *model_type, "lathe converts GPT-2 (\"gpt2\") only");

  // GPT2Config's defaults where the file is silent.
  nn::GPTConfig c;
  c.vocab_size = f.size("vocab_size", 50257);
  c.block_size = f.size("n_positions", 1024);
  c.n_embd = f.size("n_embd", 768);
  c.n_layer = f.size("n_layer", 12);
  c.n_head = f.size("n_head", 12);
  c.bias = true;

  if (const json* act = f.find("activation_function"); act && *act != "gelu_new" && *act != "gelu_pytorch_tanh")
    f.refuse("activation_function", *act, "lathe's MLP computes GPT-2's tanh GELU (\"gelu_new\") only");
  if (const json* inner = f.find("n_inner"); inner && !inner->is_null() && *inner != json(4 * c.n_embd))
    f.refuse("n_inner", *inner, "lathe's MLP is 4 n_embd = " + std::to_string(4 * c.n_embd) + " wide");
  if (const double eps = f.number("layer_norm_epsilon", kLayerNormEps); eps != kLayerNormEps)
    f.refuse("layer_norm_epsilon", *f.find("layer_norm_epsilon"), "lathe's LayerNorm uses eps 1e-05");
  f.boolean("scale_attn_weights", true);
  f.require("scale_attn_weights", true, "lathe's attention always scales by 1/sqrt(head size)");
  f.boolean("scale_attn_by_inverse_layer_idx", false);
  f.require("scale_attn_by_inverse_layer_idx", false, "lathe's attention does not scale by layer");
  f.boolean("reorder_and_upcast_attn", false);
  f.require("reorder_and_upcast_attn", false, "lathe's attention has no reordered, upcast variant");
  f.boolean("add_cross_attention", false);
  f.require("add_cross_attention", false, "lathe's GPT is a decoder without cross-attention");
  f.boolean("tie_word_embeddings", true);
  f.require("tie_word_embeddings", true, "lathe's head shares its weight with wte");

  const double resid = f.number("resid_pdrop", 0.1), embd = f.number("embd_pdrop", 0.1),
               attn = f.number("attn_pdrop", 0.1);
  LATHE_CHECK(resid == embd && embd == attn, file, ": resid_pdrop ", resid, ", embd_pdrop ", embd, " and attn_pdrop ",
              attn, " differ, but lathe's GPT has one dropout rate for all three places");
  c.dropout = resid;
  try {
    c.validate();
  } catch (const Error& e) {
    LATHE_FAIL(file, ": ", e.what());
  }
  return c;
}

json hf_config_of(const nn::GPTConfig& c) {
  // What GPT2LMHeadModel.from_pretrained needs; every field that decides the computation is
  // written out rather than left to transformers' defaults.
  return {{"activation_function", "gelu_new"},
          {"architectures", {"GPT2LMHeadModel"}},
          {"attn_pdrop", c.dropout},
          {"embd_pdrop", c.dropout},
          {"initializer_range", 0.02},
          {"layer_norm_epsilon", kLayerNormEps},
          {"model_type", "gpt2"},
          {"n_ctx", c.block_size},
          {"n_embd", c.n_embd},
          {"n_head", c.n_head},
          {"n_inner", nullptr},
          {"n_layer", c.n_layer},
          {"n_positions", c.block_size},
          {"reorder_and_upcast_attn", false},
          {"resid_pdrop", c.dropout},
          {"scale_attn_by_inverse_layer_idx", false},
          {"scale_attn_weights", true},
          {"tie_word_embeddings", true},
          {"torch_dtype", "float32"},
          {"use_cache", true},
          {"vocab_size", c.vocab_size}};
}

GPT2Weights read_hf_gpt2(const std::string& dir) {
  const std::string config_path = hf_config_path(dir);
  GPT2Weights out;
  out.config = gpt_config_from_hf(read_hf_config(dir), config_path);
  std::map<std::string, HfTensor> stored = read_tensors(hf_weight_files(dir));
  // The blocks the weights hold, compared with n_layer before a name of every block is made.
  static const std::regex block_name(R"(transformer\.h\.(\d{1,9})\..*)");
  int64_t blocks = 0;
  for (const auto& [name, s] : stored) {
    std::smatch m;
    if (std::regex_match(name, m, block_name)) blocks = std::max<int64_t>(blocks, std::stoll(m[1].str()) + 1);
  }
  LATHE_CHECK(blocks == out.config.n_layer, dir, ": config.json has n_layer ", out.config.n_layer,
              " but the weights hold tensors of ", blocks, " blocks (h.<i>.*)");

  NoGradGuard no_grad;
  for (const auto& [name, shape] : gpt2_tensors(out.config)) {
    const auto it = stored.find(name);
    LATHE_CHECK(it != stored.end(), dir, ": the weights hold no tensor '", name.substr(std::strlen(kPrefix)),
                "' (with or without the \"transformer.\" prefix)");
    const HfTensor& s = it->second;
    const bool conv1d = is_conv1d_weight(name);
    const Shape want = conv1d ? Shape{shape[1], shape[0]} : shape;
    LATHE_CHECK(s.tensor.shape() == want, s.file, ": tensor '", s.stored_name, "' is ", s.tensor.desc(), ", expected ",
                shape_str(want), conv1d ? " (Conv1D's [in, out])" : "", " for the config's sizes");
    const Tensor t = hf_as_f32(s);
    out.weights.emplace_back(name, conv1d ? t.t().contiguous() : t);
    stored.erase(it);
  }
  if (const auto head = stored.find("lm_head.weight"); head != stored.end()) {
    const HfTensor& s = head->second;
    const Tensor& wte = out.weights.front().second;
    LATHE_CHECK(s.tensor.shape() == wte.shape() && same_bits(hf_as_f32(s), wte), s.file, ": tensor '", s.stored_name,
                "' differs from wte.weight; lathe's head is tied to the token embedding, so an untied head cannot be "
                "converted");
    stored.erase(head);
  }
  if (!stored.empty()) {
    const HfTensor& s = stored.begin()->second;
    LATHE_FAIL(s.file, ": tensor '", s.stored_name, "' is not part of GPT-2 (", stored.size(),
               " unknown tensor(s); a GPT2LMHeadModel or GPT2Model has wte, wpe, h.<i>.*, ln_f and lm_head only)");
  }
  return out;
}

void write_hf_gpt2(const std::string& dir_given, const nn::GPTConfig& config, const NamedTensors& state,
                   bool overwrite) {
  std::string dir = dir_given;  // "out/" names the directory "out"
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  LATHE_CHECK(!dir.empty(), "the output directory must be named, got an empty path");
  check_gpt2_block(config, dir);
  NamedTensors tensors = gpt2_tensors_of(config, state, dir);
  for (auto& [name, t] : tensors)
    if (is_conv1d_weight(name)) t = t.t().contiguous();
  write_hf_directory(dir, hf_config_of(config), tensors, overwrite);
}

}  // namespace lathe::serialize
