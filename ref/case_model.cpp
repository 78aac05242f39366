#include "ref/case_model.h"

#include <vector>

#include "core/error.h"
#include "serialize/json_document.h"

namespace lathe::ref {

namespace {

void expect_tensor(const serialize::SafetensorsFile& c, const std::string& name, const Shape& shape,
                   const std::string& K) {
  const Tensor* t = c.find(name);
  LATHE_CHECK(t != nullptr, K, "missing parameter tensor \"", name, "\"");
  LATHE_CHECK(t->shape() == shape, K, "\"", name, "\": expected ", shape_str(shape), ", got ", shape_str(t->shape()));
}

// Before the model is built: the case holds the embeddings and every layer's attention weight the
// config implies. A document asking for a model far larger than the case's tensors would
// otherwise allocate and initialise it first, for minutes or until memory runs out. The check
// runs in the order that keeps it cheap: the layer count is bounded by the tensor count, and
// n_embd by the embedding the case holds (so 3 * n_embd cannot overflow).
void check_case_holds_config(const serialize::SafetensorsFile& c, const nn::GPTConfig& g, const std::string& K) {
  LATHE_CHECK(g.n_layer <= int64_t(c.tensors.size()), K, "\"config\" has n_layer ", g.n_layer,
              " but the case holds only ", c.tensors.size(), " tensors");
  expect_tensor(c, "transformer.wte.weight", {g.vocab_size, g.n_embd}, K);
  if (!g.rope) expect_tensor(c, "transformer.wpe.weight", {g.block_size, g.n_embd}, K);
  for (int64_t i = 0; i < g.n_layer; ++i)
    expect_tensor(c, "transformer.h." + std::to_string(i) + ".attn.c_attn.weight", {3 * g.n_embd, g.n_embd}, K);
}

}  // namespace

std::unique_ptr<nn::GPT> case_gpt(const serialize::SafetensorsFile& c, const nlohmann::json& spec, Device device,
                                  const std::string& kind, const std::function<bool(const std::string&)>& is_input,
                                  const std::string& inputs) {
  const std::string K = "case kind \"" + kind + "\": ";
  LATHE_CHECK(spec.contains("config"), K, "the case document has no \"config\"");
  nn::GPTConfig config = nn::GPTConfig::from_json(spec["config"]);
  config.dropout = 0.0;
  check_case_holds_config(c, config, K);
  auto model = std::make_unique<nn::GPT>(config, nn::GPT::kToBeLoaded, device);

  // Every parameter under its nanoGPT name; a tied lm_head.weight may repeat wte (load_state_dict
  // checks that the two are equal). Anything else in the case is an error, not silently ignored.
  nn::NamedTensors weights;
  std::vector<std::string> missing;
  for (const auto& [name, p] : model->state_dict()) {
    if (const Tensor* t = c.find(name)) weights.emplace_back(name, *t);
    else if (name != "lm_head.weight" || !config.tie_embeddings) missing.push_back(name);
  }
  if (!missing.empty()) {
    std::string all;
    for (const auto& m : missing) all += (all.empty() ? "\"" : ", \"") + m + "\"";
    LATHE_FAIL(K, "missing parameter tensor", missing.size() > 1 ? "s " : " ", all);
  }
  for (const auto& [name, t] : c.tensors) {
    bool known = is_input(name);
    for (const auto& [n, _] : weights) known = known || n == name;
    LATHE_CHECK(known, K, "unexpected tensor \"", name, "\" (not a parameter of this config, nor ", inputs, ")");
  }
  model->load_state_dict(weights, /*strict=*/true);
  return model;
}

Tensor case_tokens(const serialize::SafetensorsFile& c, const std::string& name, const nn::GPT& model, Device device,
                   const std::string& kind, bool targets) {
  const Tensor* t = c.find(name);
  LATHE_CHECK(t != nullptr, "case kind \"", kind, "\": missing tensor \"", name, "\"");
  LATHE_CHECK(t->dtype() == DType::i64 || t->dtype() == DType::i32, "case kind \"", kind, "\": \"", name,
              "\" must hold i64 or i32 token ids, got ", t->desc());
  LATHE_CHECK(t->dim() == 2, "case kind \"", kind, "\": \"", name, "\" must be [B, T], got ", t->desc());
  // On the host, where reading ids costs nothing.
  model.check_token_ids(name.c_str(), t->to(Device::cpu()), /*allow_ignore=*/targets);
  return t->to(DType::i64).to(device);
}

nn::Precision case_precision(const nlohmann::json& spec, const std::string& kind) {
  const std::string K = "case kind \"" + kind + "\": ";
  const nlohmann::json p = spec.value("precision", nlohmann::json("f32"));
  LATHE_CHECK(p.is_string(), K, "\"precision\" must be \"f32\", \"bf16\" or \"fp16\", got ", serialize::quote_json(p));
  try {
    return nn::parse_precision(p.get<std::string>(), "\"precision\"");
  } catch (const Error& e) {
    LATHE_FAIL(K, e.what());
  }
}

}  // namespace lathe::ref
