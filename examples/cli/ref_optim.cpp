// lathe ref, case kind "optim": an optimizer run on given gradients (../shared/REFERENCE_CASES.md).
// The computation is optim::run_optim_case (optim/reference_case.h), shared with the tests.
#include "examples/cli/commands.h"
#include "optim/reference_case.h"

namespace lathe::cli {

RefOutput run_ref_optim(const serialize::SafetensorsFile& c, const nlohmann::json& spec, Device device) {
  optim::OptimCaseResult r = optim::run_optim_case(c.tensors, spec, device);
  RefOutput out;
  out.tensors = std::move(r.tensors);
  out.result = std::move(r.result);
  return out;
}

}  // namespace lathe::cli
