// The runners of the reference case kinds (one file each), as listed in case_registry.cpp.
#pragma once

#include "ref/case_registry.h"

namespace lathe::ref {

// "gpt": one forward and backward pass of a GPT with given weights (gpt_case.cpp).
RefOutput run_gpt_case(const serialize::SafetensorsFile& c, const nlohmann::json& spec, Device device);
// "op": one op, forward and optionally backward (op_case.cpp).
RefOutput run_op_case(const serialize::SafetensorsFile& c, const nlohmann::json& spec, Device device);
// "optim": an optimizer run on given gradients (optim_case.cpp).
RefOutput run_optim_case(const serialize::SafetensorsFile& c, const nlohmann::json& spec, Device device);
// "train": a few steps of nanoGPT's training loop (train_case.cpp).
RefOutput run_train_case(const serialize::SafetensorsFile& c, const nlohmann::json& spec, Device device);

}  // namespace lathe::ref
