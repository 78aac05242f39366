#include "serialize/hf_directory.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <regex>
#include <set>

#include "core/error.h"
#include "serialize/atomic_file.h"
#include "serialize/json_document.h"
#include "serialize/safetensors.h"
#include "serialize/staged_directory.h"

namespace lathe::serialize {

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

constexpr const char* kConfigFile = "config.json";
constexpr const char* kWeightsFile = "model.safetensors";
constexpr const char* kIndexFile = "model.safetensors.index.json";

std::string join_path(const std::string& dir, const std::string& name) { return (fs::path(dir) / name).string(); }

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

std::string hf_config_path(const std::string& dir) { return join_path(dir, kConfigFile); }

json read_hf_config(const std::string& dir) {
  const std::string path = join_path(dir, kConfigFile);
  std::error_code ec;
  LATHE_CHECK(fs::exists(path, ec), dir, ": no ", kConfigFile,
              " (a Hugging Face model directory holds config.json and model.safetensors)");
  return read_json_file(path, path, kMaxConfigJsonBytes);
}

std::string hf_model_type(const std::string& dir) {
  const json j = read_hf_config(dir);
  const std::string path = join_path(dir, kConfigFile);
  LATHE_CHECK(j.is_object(), path, ": expected a JSON object, got ", quote_json(j));
  LATHE_CHECK(j.contains("model_type"), path, ": no model_type (lathe reads \"gpt2\" and \"llama\")");
  LATHE_CHECK(j["model_type"].is_string(), path, ": model_type must be a string, got ", quote_json(j["model_type"]));
  return j["model_type"].get<std::string>();
}

std::vector<std::string> hf_weight_files(const std::string& dir) {
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

std::map<std::string, HfTensor> read_hf_tensors(const std::vector<std::string>& files,
                                                const std::function<std::string(const std::string&)>& key_of,
                                                const std::string& aliases) {
  std::map<std::string, HfTensor> out;
  for (const std::string& file : files) {
    SafetensorsFile f = read_safetensors(file);
    for (auto& [name, t] : f.tensors) {
      const std::string key = key_of(name);
      if (key.empty()) continue;
      const auto [it, fresh] = out.emplace(key, HfTensor{name, file, t});
      LATHE_CHECK(fresh || it->second.stored_name != name, "tensor '", name, "' is in two shards, ", it->second.file,
                  " and ", file, "; a sharded model holds each tensor once");
      LATHE_CHECK(fresh, file, ": tensors '", it->second.stored_name, "' and '", name, "' are two names for one weight (",
                  aliases, ")");
    }
  }
  return out;
}

Tensor hf_as_f32(const HfTensor& s) {
  LATHE_CHECK(is_floating(s.tensor.dtype()), s.file, ": tensor '", s.stored_name, "' is ", s.tensor.desc(),
              "; weights must be floating (F32, F16, BF16, F64)");
  return s.tensor.to(DType::f32).contiguous();
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

void write_hf_directory(const std::string& dir, const json& config, const NamedTensors& tensors, bool overwrite) {
  const std::string config_text = config.dump(2) + "\n";
  const bool replace = check_model_directory_writable(dir, overwrite);
  StagedDirectory stage(dir, replace, dir);
  write_safetensors(join_path(stage.path(), kWeightsFile), tensors, {{"format", "pt"}});
  write_file_atomically(join_path(stage.path(), kConfigFile),
                        [&](AtomicFile& f) { f.write(config_text.data(), config_text.size()); });
  stage.commit([](const std::string& name) { return !is_model_entry(name); });
}

}  // namespace lathe::serialize
