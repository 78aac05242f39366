// `lathe ref`: the reference cases, every kind in one table.
//
// A case is a safetensors file whose metadata key "case" holds a JSON document with a "kind";
// the kind's runner reads the case's tensors, computes, and returns the output tensors and the
// `result` document. The CLI (examples/cli/ref.cpp) only reads the case and writes the output;
// tests run kinds in-process.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "core/device.h"
#include "core/tensor.h"
#include "serialize/safetensors.h"

namespace lathe::ref {

struct RefOutput {
  std::vector<std::pair<std::string, Tensor>> tensors;
  nlohmann::json result;  // stored under metadata key "result" when not null
};

// A runner gets the case (already read as a safetensors file) and its document; it throws
// lathe::Error naming what is wrong with the case.
using CaseRunner = RefOutput (*)(const serialize::SafetensorsFile& c, const nlohmann::json& spec, Device device);

struct CaseKind {
  const char* name;
  CaseRunner run;
};

const std::vector<CaseKind>& case_kinds();

// Parses the case document of `c`, runs its kind on `device`. Every error names c.path.
RefOutput run_reference_case(const serialize::SafetensorsFile& c, Device device);

}  // namespace lathe::ref
