// lathe ref, case kind "train": a few steps of nanoGPT's training loop (../shared/REFERENCE_CASES.md).
//
//   for t in range(steps):
//     logits, loss = model(idx.<t>, targets.<t>); losses[t] = loss   (before the update)
//     loss.backward(); clip_grad_norm_(params, grad_clip) if grad_clip != 0
//     optimizer.step(); optimizer.zero_grad(set_to_none=True)
//
// The optimizer spec {"name": "sgd" | "adam" | "adamw" | "prodigy", <PyTorch option names>} is
// built as nanoGPT's configure_optimizers builds AdamW: parameters with 2 or more dims take the
// given weight_decay, the others (biases, LayerNorm weights) weight_decay 0. Dropout is off.
#include <map>
#include <memory>

#include "core/autograd.h"
#include "core/ops.h"
#include "examples/cli/commands.h"
#include "nn/gpt.h"
#include "optim/adam.h"
#include "optim/clip.h"
#include "optim/prodigy.h"
#include "optim/sgd.h"

namespace lathe::cli {

namespace {

constexpr const char* K = "case kind \"train\": ";

std::unique_ptr<optim::Optimizer> make_optimizer(const nlohmann::json& spec, const nn::GPT& model) {
  LATHE_CHECK(spec.is_object() && spec.contains("name") && spec["name"].is_string(), K,
              "\"optimizer\" must be an object with a \"name\" (sgd, adam, adamw or prodigy)");
  const std::string name = spec["name"].get<std::string>();
  nlohmann::json options = spec;
  options.erase("name");
  std::unique_ptr<optim::Optimizer> opt;
  if (name == "sgd") opt = std::make_unique<optim::SGD>();
  else if (name == "adam") opt = std::make_unique<optim::Adam>();
  else if (name == "adamw") opt = std::make_unique<optim::AdamW>();
  else if (name == "prodigy") opt = std::make_unique<optim::Prodigy>();
  else LATHE_FAIL(K, "unknown optimizer \"", name, "\" (expected sgd, adam, adamw or prodigy)");
  std::vector<Tensor> decay, no_decay;
  for (const auto& [n, p] : model.named_parameters()) (p.dim() >= 2 ? decay : no_decay).push_back(p);
  opt->add_param_group(decay, options);
  if (!no_decay.empty()) {
    nlohmann::json nd = options;
    nd["weight_decay"] = 0.0;
    opt->add_param_group(no_decay, nd);
  }
  return opt;
}

}  // namespace

RefOutput run_ref_train(const serialize::SafetensorsFile& c, const nlohmann::json& spec, Device device) {
  LATHE_CHECK(spec.contains("steps") && spec["steps"].is_number_integer() && spec["steps"].get<int64_t>() >= 1, K,
              "the case document needs \"steps\" (an integer >= 1)");
  LATHE_CHECK(spec.contains("optimizer"), K, "the case document has no \"optimizer\"");
  const int64_t steps = spec["steps"].get<int64_t>();
  const double grad_clip = spec.value("grad_clip", 0.0);
  LATHE_CHECK(grad_clip >= 0, K, "invalid grad_clip = ", grad_clip, " (must be >= 0; 0 = no clipping)");

  auto is_step_input = [steps](const std::string& name) {
    for (int64_t s = 0; s < steps; ++s)
      if (name == "idx." + std::to_string(s) || name == "targets." + std::to_string(s)) return true;
    return false;
  };
  auto model_ptr = case_gpt(c, spec, device, "train", is_step_input,
                            "idx.<t> / targets.<t> for t < " + std::to_string(steps));
  nn::GPT& model = *model_ptr;
  model.train();

  std::vector<Tensor> idx, targets;
  for (int64_t s = 0; s < steps; ++s) {
    idx.push_back(case_tokens(c, "idx." + std::to_string(s), model, device, "train"));
    targets.push_back(case_tokens(c, "targets." + std::to_string(s), model, device, "train"));
    LATHE_CHECK(targets.back().shape() == idx.back().shape(), K, "targets.", s, " ",
                shape_str(targets.back().shape()), " must have the shape of idx.", s, " ", shape_str(idx.back().shape()));
  }

  auto opt = make_optimizer(spec["optimizer"], model);
  const std::vector<Tensor> params = model.parameters();
  std::vector<float> losses;
  for (int64_t s = 0; s < steps; ++s) {
    nn::GPTOutput out = model.forward(idx[size_t(s)], targets[size_t(s)]);
    losses.push_back(float(out.loss.item()));
    out.loss.backward();
    if (grad_clip != 0.0) optim::clip_grad_norm(params, grad_clip);
    opt->step();
    opt->zero_grad();
  }

  RefOutput result;
  result.tensors.emplace_back("losses", Tensor::from_vector(losses, {steps}));
  for (const auto& [name, p] : model.state_dict()) {
    if (name == "lm_head.weight" && !c.find(name)) continue;
    result.tensors.emplace_back(name, p.detach());
  }
  return result;
}

}  // namespace lathe::cli
