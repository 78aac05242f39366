// The reference case kind "optim" (../shared/REFERENCE_CASES.md) as a library function, so that
// tests run it in-process and `lathe ref` (examples/cli/ref_optim.cpp) only reads and writes files.
//
// Inputs: tensors param.<i> (initial values) and grad.<t>.<i> (gradient of parameter i at step t;
// missing = no gradient that step), and the case document {"optimizer", "steps", "groups",
// optional "fused"}. Outputs param.<i>, state.<i>.<key> (PyTorch keys) and {"groups": [...]} with
// each group's scalar state. Malformed input is an Error naming the fault.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace lathe::optim {

struct OptimCaseResult {
  std::vector<std::pair<std::string, Tensor>> tensors;
  nlohmann::json result;
};

OptimCaseResult run_optim_case(const std::vector<std::pair<std::string, Tensor>>& tensors, const nlohmann::json& spec,
                               Device device);

}  // namespace lathe::optim
