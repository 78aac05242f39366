// Reference case kind "gpt": one forward and backward pass of a GPT with given weights
// (docs/reference-cases.md). Dropout is off; "precision" picks the mixed-precision policy, as for
// kind "train".
#include "core/autograd.h"
#include "core/error.h"
#include "core/ops.h"
#include "nn/gpt.h"
#include "ref/case_model.h"
#include "ref/kinds.h"

namespace lathe::ref {

RefOutput run_gpt_case(const serialize::SafetensorsFile& c, const nlohmann::json& spec, Device device) {
  auto model_ptr = case_gpt(c, spec, device, "gpt", [](const std::string& n) { return n == "idx" || n == "targets"; },
                            "idx or targets");
  nn::GPT& model = *model_ptr;
  model.eval();
  model.set_precision(case_precision(spec, "gpt"));

  const Tensor idx = case_tokens(c, "idx", model, device, "gpt");
  const Tensor targets = case_tokens(c, "targets", model, device, "gpt", /*targets=*/true);
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

}  // namespace lathe::ref
