#include "serialize/hf_gpt2.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <regex>
#include <set>

#include "core/autograd.h"
#include "serialize/atomic_file.h"
#include "serialize/staged_directory.h"
#include "serialize/json_document.h"

namespace lathe::serialize {

namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

constexpr const char* kConfigFile = "config.json";
constexpr const char* kWeightsFile = "model.safetensors";
constexpr const char* kIndexFile = "model.safetensors.index.json";
constexpr const char* kPrefix = "transformer.";
// lathe's LayerNorm eps (nn/block.cpp, nn/gpt.cpp), GPT-2's too.
constexpr double kLayerNormEps = 1e-5;

std::string join_path(const std::string& dir, const std::string& name) { return (fs::path(dir) / name).string(); }

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

struct StoredTensor {
  std::string stored_name;  // as the file spells it
  std::string file;
  Tensor tensor;
};

// The files that hold the weights: model.safetensors, or the shards an index names.
std::vector<std::string> weight_files(const std::string& dir) {
  const std::string single = join_path(dir, kWeightsFile), index = join_path(dir, kIndexFile);
  std::error_code ec;
  if (fs::exists(single, ec)) return {single};
  if (fs::exists(index, ec)) {
    const json j = read_json_file(index, index, kMaxListJsonBytes);
    LATHE_CHECK(j.is_object() && j.contains("weight_map") && j["weight_map"].is_object(), index,
                ": expected an object with a \"weight_map\" of tensor name -> file");
    std::set<std::string> shards;
    for (const auto& [name, file] : j["weight_map"].items()) {
      LATHE_CHECK(file.is_string(), index, ": weight_map[\"", name, "\"] must be a file name, got ", quote_json(file));
      const std::string f = file.get<std::string>();
      // A shard lives in the directory: a path elsewhere is not one (and is not followed).
      LATHE_CHECK(!f.empty() && f.find('/') == std::string::npos && f != "." && f != "..", index, ": weight_map[\"",
                  name, "\"] names ", quote_json(file), ", not a file of this directory");
      shards.insert(f);
    }
    LATHE_CHECK(!shards.empty(), index, ": weight_map is empty");
    std::vector<std::string> out;
    for (const std::string& f : shards) out.push_back(join_path(dir, f));
    return out;
  }
  for (const char* other : {"pytorch_model.bin", "tf_model.h5", "flax_model.msgpack"})
    LATHE_CHECK(!fs::exists(join_path(dir, other), ec), dir, ": no ", kWeightsFile, ", only ", other,
                ", which lathe does not read; save the model again with save_pretrained(dir, "
                "safe_serialization=True)");
  LATHE_FAIL(dir, ": no weights: neither ", kWeightsFile, " nor ", kIndexFile);
}

// Every tensor of the files by its lathe name ("transformer." + the unprefixed name, or
// lm_head.weight), the mask buffers left out.
std::map<std::string, StoredTensor> read_tensors(const std::vector<std::string>& files) {
  std::map<std::string, StoredTensor> out;
  for (const std::string& file : files) {
    SafetensorsFile f = read_safetensors(file);
    for (auto& [name, t] : f.tensors) {
      const std::string unprefixed = starts_with(name, kPrefix) ? name.substr(std::strlen(kPrefix)) : name;
      if (is_mask_buffer(unprefixed)) continue;
      const std::string lathe_name = unprefixed == "lm_head.weight" ? unprefixed : kPrefix + unprefixed;
      const auto [it, fresh] = out.emplace(lathe_name, StoredTensor{name, file, t});
      LATHE_CHECK(fresh || it->second.stored_name != name, "tensor '", name, "' is in two shards, ", it->second.file,
                  " and ", file, "; a sharded model holds each tensor once");
      LATHE_CHECK(fresh, file, ": tensors '", it->second.stored_name, "' and '", name,
                  "' are two names for one weight (with and without the \"transformer.\" prefix)");
    }
  }
  return out;
}

// `t` as f32, the error naming the tensor when it is not a floating tensor.
Tensor as_f32(const StoredTensor& s) {
  LATHE_CHECK(is_floating(s.tensor.dtype()), s.file, ": tensor '", s.stored_name, "' is ", s.tensor.desc(),
              "; weights must be floating (F32, F16, BF16, F64)");
  return s.tensor.to(DType::f32).contiguous();
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && std::memcmp(a.data_ptr(), b.data_ptr(), a.nbytes()) == 0;
}

// The entries of a model directory that a written model replaces: the config and every form of
// weights (a sharded model's index and shards, PyTorch's pickles). Anything else (tokenizer files,
// a README, generation_config.json) is carried over into the new directory.
bool is_model_entry(const std::string& name) {
  static const std::regex model(
      R"(config\.json|model\.safetensors(\.index\.json)?|model-\d+-of-\d+\.safetensors|pytorch_model.*\.bin(\.index\.json)?)"
      R"(|\..*\.tmp-\d+-\d+-[0-9a-f]+-\d+)");
  return std::regex_match(name, model);
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
  const std::string config_path = join_path(dir, kConfigFile);
  std::error_code ec;
  LATHE_CHECK(fs::exists(config_path, ec), dir, ": no ", kConfigFile,
              " (a Hugging Face model directory holds config.json and model.safetensors)");
  GPT2Weights out;
  out.config = gpt_config_from_hf(read_json_file(config_path, config_path, kMaxConfigJsonBytes), config_path);
  std::map<std::string, StoredTensor> stored = read_tensors(weight_files(dir));
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
    const StoredTensor& s = it->second;
    const bool conv1d = is_conv1d_weight(name);
    const Shape want = conv1d ? Shape{shape[1], shape[0]} : shape;
    LATHE_CHECK(s.tensor.shape() == want, s.file, ": tensor '", s.stored_name, "' is ", s.tensor.desc(), ", expected ",
                shape_str(want), conv1d ? " (Conv1D's [in, out])" : "", " for the config's sizes");
    const Tensor t = as_f32(s);
    out.weights.emplace_back(name, conv1d ? t.t().contiguous() : t);
    stored.erase(it);
  }
  if (const auto head = stored.find("lm_head.weight"); head != stored.end()) {
    const StoredTensor& s = head->second;
    const Tensor& wte = out.weights.front().second;
    LATHE_CHECK(s.tensor.shape() == wte.shape() && same_bits(as_f32(s), wte), s.file, ": tensor '", s.stored_name,
                "' differs from wte.weight; lathe's head is tied to the token embedding, so an untied head cannot be "
                "converted");
    stored.erase(head);
  }
  if (!stored.empty()) {
    const StoredTensor& s = stored.begin()->second;
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
  const std::string config_text = hf_config_of(config).dump(2) + "\n";
  const bool replace = check_model_directory_writable(dir, overwrite);
  StagedDirectory stage(dir, replace, dir);
  write_safetensors(join_path(stage.path(), kWeightsFile), tensors, {{"format", "pt"}});  // transformers needs "pt"
  write_file_atomically(join_path(stage.path(), kConfigFile),
                        [&](AtomicFile& f) { f.write(config_text.data(), config_text.size()); });
  stage.commit([](const std::string& name) { return !is_model_entry(name); });
}

bool check_model_directory_writable(const std::string& dir, bool overwrite) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) {
    LATHE_CHECK(errno == ENOENT, dir, ": ", std::strerror(errno));
    return false;
  }
  LATHE_CHECK(S_ISDIR(st.st_mode), dir, ": is ", file_kind_name(st.st_mode),
              "; a Hugging Face model is a directory (config.json and model.safetensors)");
  std::error_code ec;
  const bool empty = fs::is_empty(dir, ec);
  LATHE_CHECK(!ec, dir, ": cannot list the directory: ", ec.message());
  LATHE_CHECK(empty || overwrite, dir, " is not empty; give --overwrite to replace the model there (its config and "
              "weights; other files such as a tokenizer are kept), or choose another directory");
  return true;
}

}  // namespace lathe::serialize
