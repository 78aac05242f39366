// The op registry's samples as cases of the reference kind "op" (docs/reference-cases.md): one case
// per sample and dtype, its inputs in that dtype and a grad_output of the result's shape. The
// fixtures pack takes the fixture samples (fixtures.cpp); `lathe ref --write-op-samples FILE`
// bundles every golden one into one file, which tests/golden/make_op_goldens.py answers with
// PyTorch and tests/test_op_cases.cpp and test_ref_op.cpp read back.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "ref/op_registry.h"

namespace lathe::ref {

struct OpSampleCase {
  std::string name;  // the sample's name and the dtype's: "add.bcast.f32"
  DType dtype;
  nlohmann::json document;  // {"kind": "op", "op": ..., "args": ...}
  std::vector<std::pair<std::string, Tensor>> tensors;  // input.0, input.1, ..., grad_output
};

// The cases of `sample`, one per dtype of sample_dtypes: its operands drawn once (the floating ones
// cast to each dtype) and, when the result has a gradient, a grad_output drawn after them.
std::vector<OpSampleCase> op_sample_cases(const OpEntry& op, const OpSample& sample);

// The name of a sample's case in the bundle: "<sample name>.<dtype>".
std::string op_sample_case_name(const OpEntry& op, const OpSample& sample, DType dtype);

// Every golden and fixture sample of every entry in each of its dtypes, bundled into one
// safetensors file at `path` (tensors "<case>/input.<k>", "<case>/grad_output"; metadata "cases":
// {case: document}). Returns the number of cases.
int64_t write_op_samples(const std::string& path);

}  // namespace lathe::ref
