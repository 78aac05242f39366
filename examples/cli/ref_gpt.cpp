// lathe ref, case kind "gpt": one forward and backward pass of a GPT with given weights
// (../shared/REFERENCE_CASES.md). Dropout is off.
#include "core/autograd.h"
#include "core/ops.h"
#include "examples/cli/commands.h"
#include "nn/gpt.h"

namespace lathe::cli {

namespace {

// idx or targets from the case: [B, T] i64 or i32, checked on the host (where reading the ids
// costs nothing, whatever the device), as i64 on `device`.
Tensor token_tensor(const serialize::SafetensorsFile& c, const char* name, const nn::GPT& model, Device device) {
  const Tensor* t = c.find(name);
  LATHE_CHECK(t != nullptr, "case kind \"gpt\": missing tensor \"", name, "\"");
  LATHE_CHECK(t->dtype() == DType::i64 || t->dtype() == DType::i32, "case kind \"gpt\": \"", name,
              "\" must hold i64 or i32 token ids, got ", t->desc());
  model.check_token_ids(name, t->to(Device::cpu()));
  return t->to(DType::i64).to(device);
}

}  // namespace

RefOutput run_ref_gpt(const serialize::SafetensorsFile& c, const nlohmann::json& spec, Device device) {
  LATHE_CHECK(spec.contains("config"), "case kind \"gpt\": the case document has no \"config\"");
  nn::GPTConfig config = nn::GPTConfig::from_json(spec["config"]);
  config.dropout = 0.0;
  nn::GPT model(config, /*seed=*/0, device);

  // Every parameter under its nanoGPT name; lm_head.weight may repeat wte (load_state_dict checks
  // that the two are equal). Anything else in the case is an error, not silently ignored.
  nn::NamedTensors weights;
  std::vector<std::string> missing;
  for (const auto& [name, p] : model.state_dict()) {
    if (const Tensor* t = c.find(name)) weights.emplace_back(name, *t);
    else if (name != "lm_head.weight") missing.push_back(name);
  }
  if (!missing.empty()) {
    std::string all;
    for (const auto& m : missing) all += (all.empty() ? "\"" : ", \"") + m + "\"";
    LATHE_FAIL("case kind \"gpt\": missing parameter tensor", missing.size() > 1 ? "s " : " ", all);
  }
  for (const auto& [name, t] : c.tensors) {
    if (name == "idx" || name == "targets") continue;
    bool known = false;
    for (const auto& [n, _] : weights) known = known || n == name;
    LATHE_CHECK(known, "case kind \"gpt\": unexpected tensor \"", name, "\" (not a parameter of this config, nor idx or targets)");
  }
  model.load_state_dict(weights, /*strict=*/true);
  model.eval();

  const Tensor idx = token_tensor(c, "idx", model, device);
  const Tensor targets = token_tensor(c, "targets", model, device);
  LATHE_CHECK(targets.shape() == idx.shape(), "case kind \"gpt\": targets ", shape_str(targets.shape()),
              " must have the shape of idx ", shape_str(idx.shape()));

  nn::GPTOutput out = model.forward(idx, targets);
  out.loss.backward();

  RefOutput result;
  result.tensors.emplace_back("logits", out.logits.detach());
  result.tensors.emplace_back("loss", out.loss.detach());
  // Every name of the case gets its gradient; the tied weight's gradient (embedding plus output
  // projection) appears under both names when the case gave both.
  for (const auto& [name, p] : model.state_dict()) {
    if (name == "lm_head.weight" && !c.find(name)) continue;
    Tensor g = p.grad();
    result.tensors.emplace_back("grad." + name, g.defined() ? g : Tensor::zeros(p.shape(), p.dtype(), p.device()));
  }
  return result;
}

}  // namespace lathe::cli
