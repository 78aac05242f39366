// GPT-2's weights in and out: Hugging Face directories and llm.c model files against the goldens of
// tests/golden/make_convert_goldens.py (a small random GPT-2 written by transformers or in its
// layout, its logits computed by PyTorch in f64), round trips through every format, `lathe
// convert`, `lathe sample` on a Hugging Face directory with GPT-2's tokenizer, `lathe train
// --init-from`, and bad inputs that are refused naming the file, field or tensor, writing nothing.
#include <doctest/doctest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/autograd.h"
#include "data/bpe_tokenizer.h"
#include "nn/gpt.h"
#include "serialize/hf_gpt2.h"
#include "serialize/llmc.h"
#include "serialize/model_file.h"
#include "serialize/safetensors.h"
#include "tests/core_test_util.h"
#include "tests/temp_dir.h"
#include "tests/test_helpers.h"
#include "train/convert_weights.h"
#include "train/program_state.h"
#include "train/trainer.h"

using namespace lathe;
using lathe::testing::error_of;
using lathe::testing::Run;
using lathe::testing::run_lathe;
using lathe::testing::TempDir;
namespace fs = std::filesystem;

namespace {

const std::string kGolden = LATHE_GOLDEN_DIR;
const std::string kHf = kGolden + "/convert_hf";
const std::string kHfLegacy = kGolden + "/convert_hf_legacy";
const std::string kLlmcV3 = kGolden + "/convert_llmc_v3.bin";
const std::string kLlmcV5 = kGolden + "/convert_llmc_v5.bin";

// Logits of PyTorch's f64 forward against lathe's f32 one: relative 1e-4 (the issue's f32
// tolerance), with 1e-5 absolute for logits near zero (they spread over [-3.9, 3.8]).
constexpr double kRtol = 1e-4, kAtol = 1e-5;

const serialize::SafetensorsFile& golden_logits() {
  static const serialize::SafetensorsFile f = serialize::read_safetensors(kGolden + "/convert_logits.safetensors");
  return f;
}

// The logits of weights loaded from any format, for the golden input.
Tensor logits_of(const nn::GPT& model) {
  NoGradGuard no_grad;
  return model.forward(golden_logits().at("idx")).logits;
}

void check_logits(const std::string& path, const char* expected = "logits") {
  const serialize::LoadedModel m = serialize::load_model(path);
  const std::string diff = core_test::compare(logits_of(*m.model), golden_logits().at(expected), kRtol, kAtol);
  CHECK_MESSAGE(diff.empty(), path, ": ", diff);
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The options of a conversion to `format`.
train::ConvertOptions to(serialize::WeightsFormat format, bool bf16 = false) {
  train::ConvertOptions o;
  o.to = format;
  o.bf16 = bf16;
  return o;
}

bool same_state(const nn::GPT& a, const nn::GPT& b) {
  const nn::NamedTensors sa = a.state_dict(), sb = b.state_dict();
  if (sa.size() != sb.size()) return false;
  for (size_t i = 0; i < sa.size(); ++i)
    if (sa[i].first != sb[i].first || !core_test::same_bits(sa[i].second, sb[i].second)) return false;
  return true;
}

// A copy of the golden Hugging Face directory in `d`, to damage.
std::string hf_copy(const TempDir& d, const std::string& name, const std::string& from = kHf) {
  const std::string dir = d.file(name);
  fs::create_directories(dir);
  for (const char* f : {"config.json", "model.safetensors"}) fs::copy_file(from + "/" + f, dir + "/" + f);
  return dir;
}

// The golden config.json with `edit` applied.
std::string hf_with_config(const TempDir& d, const std::string& name, const std::function<void(nlohmann::json&)>& edit) {
  const std::string dir = hf_copy(d, name);
  nlohmann::json j = nlohmann::json::parse(slurp(dir + "/config.json"));
  edit(j);
  std::ofstream(dir + "/config.json") << j.dump(2);
  return dir;
}

// The golden weights with `edit` applied to the (name -> tensor) list, written as the directory's.
std::string hf_with_tensors(const TempDir& d, const std::string& name,
                            const std::function<void(std::vector<std::pair<std::string, Tensor>>&)>& edit,
                            const std::string& from = kHf) {
  const std::string dir = hf_copy(d, name, from);
  serialize::SafetensorsFile f = serialize::read_safetensors(dir + "/model.safetensors");
  edit(f.tensors);
  serialize::write_safetensors(dir + "/model.safetensors", f.tensors, f.metadata);
  return dir;
}

// The golden v3 file with its int32 header field `i` set to `value`.
std::string llmc_with_header(const TempDir& d, const std::string& name, int i, int32_t value) {
  std::string bytes = slurp(kLlmcV3);
  std::memcpy(bytes.data() + 4 * i, &value, 4);
  return d.write(name, bytes);
}

}  // namespace

TEST_CASE("convert: a Hugging Face GPT-2 as save_pretrained writes it gives PyTorch's logits") {
  const serialize::GPT2Weights w = serialize::read_hf_gpt2(kHf);
  CHECK(w.config == nn::GPTConfig{100, 16, 2, 2, 16, /*bias=*/true, /*dropout=*/0.1});
  check_logits(kHf);
  // lathe sample's and --init-from's loader reads the directory as it is.
  CHECK(serialize::load_model(kHf).format == serialize::WeightsFormat::hf);
}

TEST_CASE("convert: the early published layout (no prefix, the head stored, mask buffers, a sparse config)") {
  const serialize::GPT2Weights w = serialize::read_hf_gpt2(kHfLegacy);
  // The dropouts it leaves out are GPT2Config's 0.1.
  CHECK(w.config == nn::GPTConfig{100, 16, 2, 2, 16, true, 0.1});
  check_logits(kHfLegacy);
}

TEST_CASE("convert: llm.c's v3 file gives PyTorch's logits, v5 those of the bf16-rounded weights") {
  const serialize::GPT2Weights v3 = serialize::read_llmc(kLlmcV3);
  // The vocabulary padded to 128 in the file is the model's 100 again.
  CHECK(v3.config == nn::GPTConfig{100, 16, 2, 2, 16, true, 0.0});
  check_logits(kLlmcV3);
  check_logits(kLlmcV5, "logits_bf16");
  // v5 holds v3's weights rounded to bf16: within half a bf16 unit of them, 2^-8 relative (bf16
  // keeps 8 significant bits).
  const serialize::GPT2Weights v5 = serialize::read_llmc(kLlmcV5);
  REQUIRE(v5.weights.size() == v3.weights.size());
  for (size_t i = 0; i < v3.weights.size(); ++i) {
    INFO(v3.weights[i].first);
    CHECK(core_test::compare(v5.weights[i].second, v3.weights[i].second, 1.0 / 256, 0.0).empty());
  }
}

TEST_CASE("convert: llm.c files round-trip bitwise, through lathe's weights file too, and bf16 rounds to nearest even") {
  TempDir d("convert_llmc");
  const train::ConvertOptions to_llmc = to(serialize::WeightsFormat::llmc);
  train::convert_weights(kLlmcV3, d.file("v3.bin"), to_llmc);
  CHECK(slurp(d.file("v3.bin")) == slurp(kLlmcV3));
  // v3 -> lathe -> v3: the padding rows come back as zeros.
  train::convert_weights(kLlmcV3, d.file("v3.safetensors"), {});
  train::convert_weights(d.file("v3.safetensors"), d.file("v3_again.bin"), to_llmc);
  CHECK(slurp(d.file("v3_again.bin")) == slurp(kLlmcV3));
  // f32 -> bf16 is PyTorch's rounding: lathe writes the v5 file PyTorch wrote.
  const train::ConvertOptions to_v5 = to(serialize::WeightsFormat::llmc, /*bf16=*/true);
  train::convert_weights(kLlmcV3, d.file("v5.bin"), to_v5);
  CHECK(slurp(d.file("v5.bin")) == slurp(kLlmcV5));
  train::convert_weights(kLlmcV5, d.file("v5_again.bin"), to_v5);
  CHECK(slurp(d.file("v5_again.bin")) == slurp(kLlmcV5));
}

TEST_CASE("convert: a Hugging Face directory written by lathe has transformers' layout and reads back bitwise") {
  TempDir d("convert_hf");
  train::convert_weights(kLlmcV3, d.file("hf"), to(serialize::WeightsFormat::hf));
  const nlohmann::json config = nlohmann::json::parse(slurp(d.file("hf/config.json")));
  CHECK(config["model_type"] == "gpt2");
  CHECK(config["architectures"] == nlohmann::json::array({"GPT2LMHeadModel"}));
  CHECK(config["n_positions"] == 16);
  CHECK(config["n_embd"] == 16);
  CHECK(config["vocab_size"] == 100);
  CHECK(config["activation_function"] == "gelu_new");
  CHECK(config["layer_norm_epsilon"] == 1e-5);
  CHECK(config["tie_word_embeddings"] == true);
  const serialize::SafetensorsFile f = serialize::read_safetensors(d.file("hf/model.safetensors"));
  CHECK(f.metadata.at("format") == "pt");  // transformers refuses safetensors without it
  CHECK(f.find("lm_head.weight") == nullptr);
  CHECK(f.at("transformer.h.1.attn.c_attn.weight").shape() == Shape{16, 48});  // Conv1D: [in, out]
  CHECK(f.at("transformer.h.0.mlp.c_proj.weight").shape() == Shape{64, 16});
  CHECK(f.tensors.size() == 4 + 12 * 2);
  for (const auto& [name, t] : f.tensors) CHECK(name.rfind("transformer.", 0) == 0);
  // Back in: the same model, bit for bit; and the golden directory through lathe and back.
  CHECK(same_state(*serialize::load_model(d.file("hf")).model, *serialize::load_model(kLlmcV3).model));
  train::convert_weights(kHf, d.file("hf.safetensors"), {});
  train::convert_weights(d.file("hf.safetensors"), d.file("hf_again"), to(serialize::WeightsFormat::hf));
  CHECK(same_state(*serialize::load_model(d.file("hf_again")).model, *serialize::load_model(kHf).model));
  // An existing directory is refused, whole; with --overwrite its model is replaced in one swap, and
  // the files that are not a model's (a README, a tokenizer) are carried over, a stale shard index not.
  d.write("hf_again/README.md", "kept");
  d.write("hf_again/model.safetensors.index.json", "{}");
  const std::string before = slurp(d.file("hf_again/model.safetensors"));
  CHECK(error_of([&] { train::convert_weights(kHfLegacy, d.file("hf_again"), to(serialize::WeightsFormat::hf)); })
            .find("hf_again is not empty; give --overwrite") != std::string::npos);
  CHECK(slurp(d.file("hf_again/model.safetensors")) == before);
  train::ConvertOptions overwrite = to(serialize::WeightsFormat::hf);
  overwrite.overwrite = true;
  train::convert_weights(kHfLegacy, d.file("hf_again"), overwrite);
  CHECK(slurp(d.file("hf_again/README.md")) == "kept");
  CHECK(!fs::exists(d.file("hf_again/model.safetensors.index.json")));
  CHECK(same_state(*serialize::load_model(d.file("hf_again")).model, *serialize::load_model(kHfLegacy).model));
  // Nothing is left beside it: no stage, no old directory.
  std::vector<std::string> beside;
  for (const auto& e : fs::directory_iterator(d.path))
    if (e.path().filename().string().rfind(".hf_again", 0) == 0) beside.push_back(e.path().filename().string());
  CHECK(beside.empty());
}

TEST_CASE("convert: a model without biases is written with zero biases, which compute the same logits") {
  TempDir d("convert_nobias");
  nn::GPT model(nn::GPTConfig{64, 8, 1, 2, 16, /*bias=*/false}, /*seed=*/7);
  serialize::save_model(d.file("nobias.safetensors"), model);
  train::convert_weights(d.file("nobias.safetensors"), d.file("hf"), to(serialize::WeightsFormat::hf));
  train::convert_weights(d.file("nobias.safetensors"), d.file("nobias.bin"), to(serialize::WeightsFormat::llmc));
  const Tensor idx = Tensor::from_vector(std::vector<int64_t>{3, 1, 4, 1, 5, 9, 2, 6}, {1, 8});
  NoGradGuard no_grad;
  const Tensor want = model.forward(idx).logits;
  for (const std::string& path : {d.file("hf"), d.file("nobias.bin")}) {
    const serialize::LoadedModel m = serialize::load_model(path);
    CHECK(m.model->config().bias);
    CHECK(core_test::same_bits(dynamic_cast<const nn::LayerNorm&>(*m.model->transformer.h[0].ln_1).bias, Tensor::zeros({16})));
    CHECK_MESSAGE(core_test::compare(m.model->forward(idx).logits, want, 0, 0).empty(), path);
  }
}

TEST_CASE("convert: a model of the modern block is refused by GPT-2's formats, naming its switch, writing nothing") {
  TempDir d("convert_modern");
  const std::pair<const char*, void (*)(nn::GPTConfig&)> switches[] = {
      {"rope = true", [](nn::GPTConfig& c) { c.rope = true; }},
      {"norm = \"rms_norm\"", [](nn::GPTConfig& c) { c.norm = nn::NormKind::rms_norm; }},
      {"activation = \"squared_relu\"", [](nn::GPTConfig& c) { c.activation = nn::Activation::squared_relu; }},
      {"tie_embeddings = false", [](nn::GPTConfig& c) { c.tie_embeddings = false; }},
      {"logit_softcap = 30", [](nn::GPTConfig& c) { c.logit_softcap = 30; }},
  };
  for (const auto& [says, set] : switches) {
    INFO(says);
    nn::GPTConfig c{64, 8, 1, 2, 16};
    set(c);
    nn::GPT model(c, 7);
    serialize::save_model(d.file("modern.safetensors"), model);
    for (const serialize::WeightsFormat format : {serialize::WeightsFormat::hf, serialize::WeightsFormat::llmc}) {
      const std::string out = d.file(std::string("out_") + serialize::weights_format_name(format));
      const std::string e = error_of([&] { train::convert_weights(d.file("modern.safetensors"), out, to(format)); });
      // A Hugging Face directory holds Llama's block too: the switch it names is the one that keeps
      // the model from being either.
      if (format == serialize::WeightsFormat::llmc)
        CHECK_MESSAGE(e.find(std::string("the model's config has ") + says) != std::string::npos, e);
      else
        CHECK_MESSAGE(e.find("which neither GPT-2's block nor Llama's computes") != std::string::npos, e);
      CHECK_FALSE(fs::exists(out));
    }
  }
}

TEST_CASE("convert: the modern block of Llama's switches is a Llama directory read back bitwise, and other switches are named") {
  TempDir d("convert_llama");
  nn::GPTConfig c{64, 16, 2, 2, 32, /*bias=*/false};
  c.rope = true;
  c.rope_base = 500000;
  c.norm = nn::NormKind::rms_norm;
  c.activation = nn::Activation::swiglu;
  for (bool tied : {false, true}) {
    INFO("tied ", tied);
    c.tie_embeddings = tied;
    nn::GPT model(c, 11);
    serialize::save_model(d.file("llama.safetensors"), model);
    const std::string dir = d.file(tied ? "hf_tied" : "hf_untied");
    train::convert_weights(d.file("llama.safetensors"), dir, to(serialize::WeightsFormat::hf));
    const nlohmann::json config = nlohmann::json::parse(slurp(dir + "/config.json"));
    CHECK(config["architectures"] == nlohmann::json::array({"LlamaForCausalLM"}));
    CHECK(config["model_type"] == "llama");
    CHECK(config["intermediate_size"] == nn::mlp_hidden_size(32, nn::Activation::swiglu));
    CHECK(config["rope_theta"] == 500000.0);
    CHECK(config["tie_word_embeddings"] == tied);
    CHECK(config["num_key_value_heads"] == 2);
    const serialize::SafetensorsFile f = serialize::read_safetensors(dir + "/model.safetensors");
    CHECK(f.find("model.layers.1.self_attn.k_proj.weight") != nullptr);
    CHECK(f.find("model.layers.0.mlp.gate_proj.weight") != nullptr);
    CHECK((f.find("lm_head.weight") != nullptr) == !tied);
    // q_proj, k_proj, v_proj are c_attn's rows in that order, as they are (both rotate halves).
    NoGradGuard no_grad;
    const Tensor qkv = model.transformer.h[1].attn.c_attn.weight;
    CHECK(core_test::same_bits(f.at("model.layers.1.self_attn.k_proj.weight"), qkv.narrow(0, 32, 32).contiguous()));
    // Back in, the same model bit for bit.
    const serialize::LoadedModel back = serialize::load_model(dir);
    CHECK(back.model->config() == c);
    CHECK(same_state(*back.model, model));
  }
  // Switches that are neither GPT-2's block nor Llama's.
  const std::pair<const char*, void (*)(nn::GPTConfig&)> others[] = {
      {"norm_weight = false", [](nn::GPTConfig& x) { x.norm_weight = false; }},
      {"activation = \"squared_relu\"", [](nn::GPTConfig& x) { x.activation = nn::Activation::squared_relu; }},
      {"qk_norm = true", [](nn::GPTConfig& x) { x.qk_norm = true; }},
      {"logit_softcap = 30", [](nn::GPTConfig& x) { x.logit_softcap = 30; }},
      {"bias = true", [](nn::GPTConfig& x) { x.bias = true; }},
  };
  for (const auto& [says, set] : others) {
    INFO(says);
    nn::GPTConfig x = c;
    set(x);
    serialize::save_model(d.file("other.safetensors"), nn::GPT(x, 3));
    const std::string e =
        error_of([&] { train::convert_weights(d.file("other.safetensors"), d.file("hf_other"), to(serialize::WeightsFormat::hf)); });
    CHECK_MESSAGE(e.find(std::string("the model's config has ") + says) != std::string::npos, e);
    CHECK_FALSE(fs::exists(d.file("hf_other")));
  }
  // A Llama config.json lathe cannot compute, named by field.
  const std::string dir = d.file("hf_untied");
  const nlohmann::json good = nlohmann::json::parse(slurp(dir + "/config.json"));
  const std::pair<const char*, nlohmann::json> fields[] = {{"num_key_value_heads", 1}, {"rms_norm_eps", 1e-6},
                                                           {"intermediate_size", 100}, {"hidden_act", "gelu"},
                                                           {"attention_bias", true}, {"rope_scaling", {{"type", "linear"}}}};
  for (const auto& [field, value] : fields) {
    INFO(field);
    nlohmann::json bad = good;
    bad[field] = value;
    d.write("hf_untied/config.json", bad.dump());
    CHECK(error_of([&] { serialize::load_model(dir); }).find(std::string(field) + " = ") != std::string::npos);
  }
}

TEST_CASE("convert: Hugging Face configs lathe cannot represent are refused, naming the field and its value") {
  TempDir d("convert_bad_config");
  struct Bad {
    const char* label;
    std::function<void(nlohmann::json&)> edit;
    const char* expected;
  };
  const std::vector<Bad> bad = {
      {"llama", [](auto& j) { j["model_type"] = "llama"; }, "model_type = \"llama\""},
      {"no_type", [](auto& j) { j.erase("model_type"); }, "no model_type"},
      {"gelu", [](auto& j) { j["activation_function"] = "gelu"; }, "activation_function = \"gelu\""},
      {"inner", [](auto& j) { j["n_inner"] = 48; }, "n_inner = 48"},
      {"eps", [](auto& j) { j["layer_norm_epsilon"] = 1e-6; }, "layer_norm_epsilon = 1e-06"},
      {"unscaled", [](auto& j) { j["scale_attn_weights"] = false; }, "scale_attn_weights = false"},
      {"by_layer", [](auto& j) { j["scale_attn_by_inverse_layer_idx"] = true; }, "scale_attn_by_inverse_layer_idx = true"},
      {"upcast", [](auto& j) { j["reorder_and_upcast_attn"] = true; }, "reorder_and_upcast_attn = true"},
      {"cross", [](auto& j) { j["add_cross_attention"] = true; }, "add_cross_attention = true"},
      {"untied", [](auto& j) { j["tie_word_embeddings"] = false; }, "tie_word_embeddings = false"},
      {"dropouts", [](auto& j) { j["attn_pdrop"] = 0.0; }, "attn_pdrop 0 differ"},
      {"heads", [](auto& j) { j["n_head"] = 3; }, "must be a multiple of n_head"},
      {"size_type", [](auto& j) { j["n_embd"] = "16"; }, "field \"n_embd\" must be a positive integer"},
      {"layers", [](auto& j) { j["n_layer"] = 3; }, "n_layer 3 but the weights hold tensors of 2 blocks"},
      {"not_object", [](auto& j) { j = nlohmann::json::array(); }, "expected a JSON object"},
  };
  for (const Bad& b : bad) {
    INFO(std::string(b.label));
    const std::string dir = hf_with_config(d, b.label, b.edit);
    const std::string err = error_of([&] { serialize::read_hf_gpt2(dir); });
    CHECK(err.find(b.expected) != std::string::npos);
    CHECK(err.find(dir) != std::string::npos);
  }
}

TEST_CASE("convert: Hugging Face weights missing, misshapen, unknown or with another head are refused") {
  TempDir d("convert_bad_weights");
  auto drop = [](const std::string& name) {
    return [name](std::vector<std::pair<std::string, Tensor>>& ts) {
      std::erase_if(ts, [&](const auto& p) { return p.first == name; });
    };
  };
  auto set = [](const std::string& name, Tensor t) {
    return [name, t](std::vector<std::pair<std::string, Tensor>>& ts) {
      for (auto& [n, x] : ts)
        if (n == name) x = t;
    };
  };
  const auto c_attn = "transformer.h.1.attn.c_attn.weight";
  struct Bad {
    std::string dir, expected;
  };
  const std::vector<Bad> bad = {
      {hf_with_tensors(d, "missing", drop("transformer.h.0.ln_2.bias")), "no tensor 'h.0.ln_2.bias'"},
      // An nn.Linear weight where Conv1D's transpose belongs.
      {hf_with_tensors(d, "linear_layout", set(c_attn, Tensor::zeros({48, 16}))),
       "'transformer.h.1.attn.c_attn.weight' is f32[48, 16] on cpu, expected [16, 48] (Conv1D's [in, out])"},
      {hf_with_tensors(d, "int_weight", set("transformer.wpe.weight", Tensor::zeros({16, 16}, DType::i32))),
       "'transformer.wpe.weight' is i32[16, 16] on cpu; weights must be floating"},
      {hf_with_tensors(d, "unknown",
                       [](auto& ts) { ts.emplace_back("score.weight", Tensor::zeros({2, 16})); }),
       "tensor 'score.weight' is not part of GPT-2"},
      {hf_with_tensors(d, "other_head", set("lm_head.weight", Tensor::zeros({100, 16})), kHfLegacy),
       "tensor 'lm_head.weight' differs from wte.weight"},
      {hf_with_tensors(d, "both_names",
                       [](auto& ts) { ts.emplace_back("wpe.weight", Tensor::zeros({16, 16})); }),
       "'transformer.wpe.weight' and 'wpe.weight' are two names for one weight"},
  };
  for (const Bad& b : bad) {
    INFO(b.dir);
    const std::string err = error_of([&] { serialize::read_hf_gpt2(b.dir); });
    CHECK_MESSAGE(err.find(b.expected) != std::string::npos, err);
    CHECK(err.find(b.dir) != std::string::npos);
  }
  // No config.json, no weights, the pickle format only.
  const std::string no_config = hf_copy(d, "no_config");
  fs::remove(no_config + "/config.json");
  CHECK(error_of([&] { serialize::read_hf_gpt2(no_config); }).find(no_config + ": no config.json") != std::string::npos);
  const std::string no_weights = hf_copy(d, "no_weights");
  fs::remove(no_weights + "/model.safetensors");
  CHECK(error_of([&] { serialize::read_hf_gpt2(no_weights); }).find("no weights: neither model.safetensors") !=
        std::string::npos);
  d.write("no_weights/pytorch_model.bin", "pickle");
  CHECK(error_of([&] { serialize::read_hf_gpt2(no_weights); }).find("only pytorch_model.bin") != std::string::npos);
}

TEST_CASE("convert: llm.c files with a bad header, a wrong size or truncated are refused with the offset and field") {
  TempDir d("convert_bad_llmc");
  const std::string v3 = slurp(kLlmcV3);
  struct Bad {
    std::string path, expected;
  };
  const std::vector<Bad> bad = {
      {llmc_with_header(d, "shard_magic.bin", 0, 20240520), "byte 0, magic: 20240520, expected 20240326"},
      {llmc_with_header(d, "version.bin", 1, 4), "byte 4, version: 4, expected 3 (f32 weights) or 5"},
      {llmc_with_header(d, "zero_layers.bin", 4, 0), "byte 16, L (n_layer): 0, must be positive"},
      {llmc_with_header(d, "vocab_past_padding.bin", 3, 129), "byte 28, Vp (padded vocab_size): 128 is smaller than V"},
      {llmc_with_header(d, "heads.bin", 5, 3), "byte 24, C (n_embd): 16 is not a multiple of NH (n_head) 3"},
      {llmc_with_header(d, "more_layers.bin", 4, 3), "tensor fcb (f32[3, 64], from byte 36352, 768 bytes) runs past "
                                                    "the end of the file at byte 36608"},
      {llmc_with_header(d, "wide.bin", 6, 1 << 30), "tensor wte (f32[128, 1073741824], from byte 1024, 549755813888 "
                                                   "bytes) runs past"},
      {d.write("truncated.bin", v3.substr(0, v3.size() - 1)), "tensor lnfb (f32[16], from byte 36544, 64 bytes) runs "
                                                             "past the end of the file at byte 36607"},
      {d.write("header_only.bin", v3.substr(0, 1000)), "1000 bytes, shorter than llm.c's 1024-byte header"},
      {d.write("extra.bin", v3 + "x"), "1 bytes after the last tensor (lnfb ends at byte 36608 of 36609)"},
  };
  for (const Bad& b : bad) {
    INFO(b.path);
    const std::string err = error_of([&] { serialize::read_llmc(b.path); });
    CHECK_MESSAGE(err.find(b.expected) != std::string::npos, err);
    CHECK(err.rfind(b.path, 0) == 0);
  }
}

TEST_CASE("convert: a failed conversion writes nothing: the output is left as it was") {
  TempDir d("convert_nothing_written");
  const std::string bad = llmc_with_header(d, "bad.bin", 1, 4);
  for (const serialize::WeightsFormat format : {serialize::WeightsFormat::lathe, serialize::WeightsFormat::llmc}) {
    const std::string out = d.write("out_" + std::string(serialize::weights_format_name(format)), "previous contents");
    CHECK_FALSE(error_of([&] { train::convert_weights(bad, out, to(format)); }).empty());
    CHECK(slurp(out) == "previous contents");
  }
  CHECK_FALSE(error_of([&] { train::convert_weights(bad, d.file("new_hf"), to(serialize::WeightsFormat::hf)); }).empty());
  CHECK_FALSE(fs::exists(d.file("new_hf")));
  // A directory is written beside its name and renamed into place whole: no temporary is left.
  train::convert_weights(kLlmcV3, d.file("new_hf"), to(serialize::WeightsFormat::hf));
  CHECK(d.entries() == std::vector<std::string>{"bad.bin", "new_hf", "out_lathe", "out_llmc"});
}

TEST_CASE("convert: lathe convert, then sample a Hugging Face GPT-2 with GPT-2's tokenizer as lathe samples it") {
  TempDir d("convert_cli");
  const std::string vocab_dir = data::gpt2_vocab_dir();
  if (!fs::exists(vocab_dir + "/vocab.bpe") || !fs::exists(vocab_dir + "/encoder.json"))
    FAIL("GPT-2's vocabulary is missing from ", vocab_dir, ": run tools/fetch_gpt2_vocab.sh");
  // A GPT-2 of GPT-2's vocabulary, small, as a Hugging Face directory.
  nn::GPT model(nn::GPTConfig{50257, 32, 1, 2, 8}, /*seed=*/11);
  serialize::write_hf_gpt2(d.file("gpt2"), model.config(), model.state_dict());
  const std::string prompt = "The lathe turns";
  const std::string args = " --prompt '" + prompt + "' --temperature 0 --tokens 8";
  Run r = run_lathe("sample --checkpoint '" + d.file("gpt2") + "'" + args);
  CHECK(r.code == 1);
  CHECK(r.output.find("do not say which tokenizer they take; give --tokenizer") != std::string::npos);
  r = run_lathe("sample --checkpoint '" + d.file("gpt2") + "' --tokenizer gpt2" + args);
  REQUIRE(r.code == 0);
  // The same continuation drawn in-process: GPT-2's ids of the prompt, eight greedy steps, decoded.
  const data::BpeTokenizer tok = data::load_tokenizer("gpt2");
  std::vector<int64_t> ids;
  for (uint32_t id : tok.encode(prompt)) ids.push_back(id);
  const Tensor out = model.generate(Tensor::from_vector(ids, {1, int64_t(ids.size())}), 8, 0.0, 0, 0, true, 50257);
  const std::vector<int64_t> drawn = out.flatten().to_vector<int64_t>();
  const std::string want = tok.decode(std::vector<uint32_t>(drawn.begin(), drawn.end()));
  CHECK(r.output == want + "\n");
  // Converted with --tokenizer gpt2, the weights file records it and samples alike without the flag.
  r = run_lathe("convert '" + d.file("gpt2") + "' '" + d.file("gpt2.safetensors") + "' --tokenizer gpt2");
  REQUIRE(r.code == 0);
  CHECK(r.output.find("(hf) -> " + d.file("gpt2.safetensors") + " (lathe): vocab_size 50257") != std::string::npos);
  r = run_lathe("sample --checkpoint '" + d.file("gpt2.safetensors") + "'" + args);
  CHECK(r.code == 0);
  CHECK(r.output == want + "\n");
  // Usage errors: one line, exit 2.
  for (const char* bad : {"--to onnx", "--bf16", "--to hf --tokenizer gpt2"}) {
    INFO(bad);
    r = run_lathe("convert '" + d.file("gpt2") + "' '" + d.file("x") + "' " + std::string(bad));
    CHECK(r.code == 2);
  }
  r = run_lathe("convert '" + d.file("gpt2") + "' '" + d.file("x.bin") + "'");
  CHECK(r.code == 2);
  CHECK(r.output.find("give --to llmc") != std::string::npos);
  r = run_lathe("convert '" + d.file("gpt2") + "' '" + d.file("x.bin") + "' --to llmc --bf16");
  CHECK(r.code == 0);
  CHECK(r.output.find("(llmc, bf16)") != std::string::npos);
}

TEST_CASE("convert: lathe train --init-from a Hugging Face directory starts from its weights and resumes as any run") {
  TempDir d("convert_init_from");
  // A byte-level GPT-2 exported by lathe, as someone else's fine-tuning start.
  nn::GPT start(nn::GPTConfig{256, 16, 1, 2, 16, true, 0.0}, /*seed=*/5);
  serialize::write_hf_gpt2(d.file("start"), start.config(), start.state_dict());
  std::string text;
  for (int i = 0; i < 200; ++i) text += "the lathe turns the wood; ";
  const std::string corpus = d.write("corpus.txt", text);
  train::TrainOptions o;
  o.data = corpus;
  o.config = "";  // the file's model
  o.init_from = d.file("start");
  o.steps = 4;
  o.batch = 2;
  o.warmup = 1;
  o.eval_iters = 1;
  o.eval_interval = 2;
  o.ckpt_interval = 2;
  o.sample_tokens = 0;
  o.quiet = true;
  o.out = d.file("run");
  {
    train::Trainer t(o);
    CHECK(t.state().model_choice.config == start.config());
    CHECK(t.state().model_choice.name == "start");
    CHECK(same_state(*t.state().model, start));
    // The optimizer starts fresh: whatever state it holds before its first step is zero.
    for (const optim::StateEntry& e : t.state().optimizer->state_entries()) {
      INFO(e.name);
      CHECK(core_test::same_bits(e.tensor, Tensor::zeros(e.tensor.shape(), e.tensor.dtype())));
    }
    t.run(nullptr);
  }
  // The checkpoint records where the run started; resumed at step 2, it ends where the run ended.
  const serialize::LoadedModel finished = serialize::load_model(d.file("run/model.safetensors"));
  CHECK(finished.metadata.at("init_from") == d.file("start"));
  const serialize::TrainingCheckpoint ckpt = serialize::TrainingCheckpoint::read(d.file("run/ckpt-00000002.safetensors"));
  CHECK(train::read_program_state(ckpt).options.init_from == d.file("start"));
  train::TrainOptions given;
  given.out = d.file("resumed");
  train::Trainer resumed = train::Trainer::resume(d.file("run/ckpt-00000002.safetensors"), given, {"out"});
  resumed.run(nullptr);
  CHECK(same_state(*serialize::load_model(d.file("resumed/model.safetensors")).model, *finished.model));

  // --config may set the dropout, and must agree with the file on everything else.
  std::ofstream(d.file("dropout.json")) << R"({"vocab_size": 256, "block_size": 16, "n_layer": 1, "n_head": 2,
                                             "n_embd": 16, "dropout": 0.25})";
  o.config = d.file("dropout.json");
  o.out = d.file("run_dropout");
  CHECK(train::Trainer(o).state().model->config().dropout == 0.25);
  std::ofstream(d.file("wider.json")) << R"({"vocab_size": 256, "block_size": 16, "n_layer": 1, "n_head": 2, "n_embd": 32})";
  o.config = d.file("wider.json");
  try {
    train::Trainer t(o);
    FAIL("a --config that contradicts --init-from was accepted");
  } catch (const train::InitSettingsError& e) {
    CHECK(std::string(e.what()).find("has n_embd = 32, but --init-from " + d.file("start") +
                                     " holds a model with n_embd = 16") != std::string::npos);
  }
  // Through the command line: a usage error, exit 2, one line.
  const Run r = run_lathe("train --init-from '" + d.file("start") + "' --config '" + d.file("wider.json") + "' --data '" +
                          corpus + "' --steps 1 --quiet --out '" + d.file("cli") + "'");
  CHECK(r.code == 2);
  CHECK(r.output.find("n_embd = 32") != std::string::npos);
}

TEST_CASE("convert: --init-from weights trained on another tokenizer's tokens is refused") {
  TempDir d("convert_init_tokenizer");
  nn::GPT model(nn::GPTConfig{300, 16, 1, 1, 8}, 3);
  const std::string tok = R"({"kind": "bpe", "path": "/elsewhere/tok.json", "checksum": "0123456789abcdef"})";
  serialize::save_model(d.file("bpe.safetensors"), model, {{"tokenizer", tok}});
  train::TrainOptions o;
  o.data = d.write("corpus.txt", std::string(4000, 'a'));
  o.config = "";
  o.init_from = d.file("bpe.safetensors");
  o.quiet = true;
  const std::string err = error_of([&] { train::Trainer t(o); });
  CHECK(err.find("its weights were trained on tokens of bpe (/elsewhere/tok.json), but --data") != std::string::npos);
}
