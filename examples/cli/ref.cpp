// lathe ref CASE OUT [--device D]: runs a reference case (../shared/REFERENCE_CASES.md).
// OUT is written only when the whole case succeeded.
#include <filesystem>

#include "examples/cli/commands.h"

namespace lathe::cli {

namespace {
void run_ref(const std::string& case_path, const std::string& out_path, const std::string& device_name) {
  Device device = Device::parse(device_name);
  serialize::SafetensorsFile c = serialize::read_safetensors(case_path);
  auto it = c.metadata.find("case");
  LATHE_CHECK(it != c.metadata.end(), case_path, ": no \"case\" key in __metadata__");
  nlohmann::json spec;
  try {
    spec = nlohmann::json::parse(it->second);
  } catch (const nlohmann::json::exception& e) {
    LATHE_FAIL(case_path, ": metadata \"case\" is not valid JSON: ", e.what());
  }
  LATHE_CHECK(spec.is_object() && spec.contains("kind") && spec["kind"].is_string(), case_path,
              ": the case document needs a string \"kind\"");
  const std::string kind = spec["kind"];
  RefOutput out;
  try {
    if (kind == "gpt") out = run_ref_gpt(c, spec, device);
    else if (kind == "optim") out = run_ref_optim(c, spec, device);
    else if (kind == "train") out = run_ref_train(c, spec, device);
    else LATHE_FAIL("unknown case kind \"", kind, "\" (expected gpt, optim or train)");
  } catch (const nlohmann::json::exception& e) {
    LATHE_FAIL(case_path, ": malformed case document: ", e.what());
  } catch (const Error& e) {
    LATHE_FAIL(case_path, ": ", e.what());
  }
  serialize::Metadata meta;
  if (!out.result.is_null()) meta["result"] = out.result.dump();
  serialize::write_safetensors(out_path, out.tensors, meta);
}
}  // namespace

void add_ref_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("ref", "Run a reference case (see REFERENCE_CASES.md) and write its result");
  auto case_path = std::make_shared<std::string>();
  auto out_path = std::make_shared<std::string>();
  auto device = std::make_shared<std::string>("cpu");
  cmd->add_option("CASE", *case_path, "the case, a safetensors file")->required()->check(CLI::ExistingFile);
  cmd->add_option("OUT", *out_path, "where to write the result (safetensors)")->required();
  cmd->add_option("--device", *device, "cpu, sim or cuda[:N]");
  cmd->callback([=] { run_ref(*case_path, *out_path, *device); });
}

}  // namespace lathe::cli
