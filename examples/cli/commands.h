// The subcommands of the `lathe` program. Each lives in its own file and registers itself on the
// CLI11 app; main.cpp only calls these and maps errors to exit codes.
//
// Exit codes: 0 success; 1 runtime error (bad data, damaged file, ...); 2 usage error (a bad flag
// or value). A command reports a usage error by throwing UsageError.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

#include "nn/gpt.h"
#include "serialize/safetensors.h"

namespace lathe::cli {

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

void add_info_command(CLI::App& app);
void add_ref_command(CLI::App& app);
void add_train_command(CLI::App& app);
void add_sample_command(CLI::App& app);
void add_bench_command(CLI::App& app);
void add_inspect_command(CLI::App& app);

// ---- lathe ref: one function per case kind (ref_<kind>.cpp) ----
// Each reads the case (already validated as a safetensors file), computes, and returns the
// output tensors and the `result` metadata (empty when the kind has none). It throws lathe::Error
// naming what is wrong with the case; the caller then writes nothing.
struct RefOutput {
  std::vector<std::pair<std::string, Tensor>> tensors;
  nlohmann::json result;  // stored under metadata key "result" when not null
};
RefOutput run_ref_gpt(const serialize::SafetensorsFile& c, const nlohmann::json& spec, Device device);
RefOutput run_ref_optim(const serialize::SafetensorsFile& c, const nlohmann::json& spec, Device device);
RefOutput run_ref_train(const serialize::SafetensorsFile& c, const nlohmann::json& spec, Device device);

// Shared by the gpt and train kinds (ref_case_gpt.cpp). The case's GPT: spec["config"] with
// dropout off, on `device`, with the case's weights under nanoGPT's names (lm_head.weight
// optional); a tensor that is neither a weight nor `is_input` is an error ("nor <inputs>").
std::unique_ptr<nn::GPT> case_gpt(const serialize::SafetensorsFile& c, const nlohmann::json& spec, Device device,
                                  const std::string& kind, const std::function<bool(const std::string&)>& is_input,
                                  const std::string& inputs);
// Token ids `name` of the case: [B, T], i64 or i32, within the vocabulary; as i64 on `device`.
Tensor case_tokens(const serialize::SafetensorsFile& c, const std::string& name, const nn::GPT& model, Device device,
                   const std::string& kind);

}  // namespace lathe::cli
