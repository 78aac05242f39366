// Reference case kind "train": a few steps of nanoGPT's training loop (docs/reference-cases.md).
//
//   for t in range(steps):
//     logits, loss = model(idx.<t>, targets.<t>); losses[t] = loss   (before the update)
//     loss.backward(); clip_grad_norm_(params, grad_clip) if grad_clip != 0
//     optimizer.step(); optimizer.zero_grad(set_to_none=True)
//
// That is train_step (train/train_step.h), the step `lathe train` takes. The optimizer spec
// {"name": "sgd" | "adam" | "adamw" | "prodigy", <PyTorch option names>} is built as nanoGPT's
// configure_optimizers builds AdamW (train/nanogpt_groups.h): parameters with 2 or more dims take
// the given weight_decay, the others (biases, LayerNorm weights) weight_decay 0. Dropout is off.
#include <memory>

#include "core/error.h"
#include "core/ops.h"
#include "nn/gpt.h"
#include "train/nanogpt_groups.h"
#include "train/optimizer_registry.h"
#include "train/ref/case_model.h"
#include "train/ref/kinds.h"
#include "train/train_step.h"

namespace lathe::app {

namespace {

constexpr const char* K = "case kind \"train\": ";

// The case's optimizer spec {"name", <PyTorch option names>} over nanoGPT's groups: the options
// go to the groups (train/nanogpt_groups.h), the optimizer's defaults stay PyTorch's.
std::unique_ptr<optim::Optimizer> case_optimizer(const nlohmann::json& spec, const nn::GPT& model) {
  LATHE_CHECK(spec.is_object() && spec.contains("name") && spec["name"].is_string(), K,
              "\"optimizer\" must be an object with a \"name\" (", optimizer_names(), ")");
  nlohmann::json options = spec;
  options.erase("name");
  std::unique_ptr<optim::Optimizer> opt;
  try {
    opt = make_optimizer(spec["name"].get<std::string>(), nlohmann::json::object(), /*fused=*/false);
  } catch (const Error& e) {
    LATHE_FAIL(K, e.what());
  }
  add_nanogpt_param_groups(*opt, model, options);
  return opt;
}

// t for "<prefix><t>" written the way the case format writes it (decimal, no sign, no leading
// zero); -1 for any other name.
int64_t step_of(const std::string& name, const std::string& prefix) {
  if (name.size() <= prefix.size() || name.size() > prefix.size() + 18 || name.rfind(prefix, 0) != 0) return -1;
  const std::string digits = name.substr(prefix.size());
  if (digits.find_first_not_of("0123456789") != std::string::npos) return -1;
  const int64_t t = std::stoll(digits);
  return std::to_string(t) == digits ? t : -1;
}

bool is_step_input(const std::string& name, int64_t steps) {
  for (const char* prefix : {"idx.", "targets."}) {
    const int64_t t = step_of(name, prefix);
    if (t >= 0 && t < steps) return true;
  }
  return false;
}

bool has_step_inputs(const serialize::SafetensorsFile& c, int64_t t) {
  return c.find("idx." + std::to_string(t)) && c.find("targets." + std::to_string(t));
}

// How many steps, from 0 on, have both idx.<t> and targets.<t>; never more than the tensors.
int64_t steps_provided(const serialize::SafetensorsFile& c) {
  int64_t t = 0;
  while (has_step_inputs(c, t)) ++t;
  return t;
}

std::string first_missing_input(const serialize::SafetensorsFile& c, int64_t t) {
  const std::string idx = "idx." + std::to_string(t);
  return c.find(idx) ? "targets." + std::to_string(t) : idx;
}

}  // namespace

RefOutput run_train_case(const serialize::SafetensorsFile& c, const nlohmann::json& spec, Device device) {
  LATHE_CHECK(spec.contains("steps") && spec["steps"].is_number_integer() && spec["steps"].get<int64_t>() >= 1, K,
              "the case document needs \"steps\" (an integer >= 1)");
  LATHE_CHECK(spec.contains("optimizer"), K, "the case document has no \"optimizer\"");
  const int64_t steps = spec["steps"].get<int64_t>();
  // Every step reads its own inputs, so the case's tensors bound the steps: refused at once, not
  // after a loop over a count the document made up.
  const int64_t provided = steps_provided(c);
  LATHE_CHECK(steps <= provided, K, "\"steps\" is ", steps, " but the case holds inputs for ", provided,
              " step", provided == 1 ? "" : "s", " (\"", first_missing_input(c, provided), "\" is missing)");
  const double grad_clip = spec.value("grad_clip", 0.0);
  LATHE_CHECK(grad_clip >= 0, K, "invalid grad_clip = ", grad_clip, " (must be >= 0; 0 = no clipping)");
  auto model_ptr = case_gpt(c, spec, device, "train", [steps](const std::string& n) { return is_step_input(n, steps); },
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

  auto opt = case_optimizer(spec["optimizer"], model);
  std::vector<float> losses;
  for (int64_t s = 0; s < steps; ++s)
    losses.push_back(float(train_step(model, *opt, idx[size_t(s)], targets[size_t(s)], grad_clip).loss));

  RefOutput result;
  result.tensors.emplace_back("losses", Tensor::from_vector(losses, {steps}));
  for (const auto& [name, p] : model.state_dict()) {
    if (name == "lm_head.weight" && !c.find(name)) continue;
    result.tensors.emplace_back(name, p.detach());
  }
  return result;
}

}  // namespace lathe::app
