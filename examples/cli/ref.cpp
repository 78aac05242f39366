// lathe ref CASE OUT [--device D]: runs a reference case (docs/reference-cases.md).
// OUT is written only when the whole case succeeded. The kinds live in train/ref/.
#include "examples/cli/commands.h"
#include "train/ref/case_registry.h"

namespace lathe::cli {

namespace {
void run_ref(const std::string& case_path, const std::string& out_path, const std::string& device_name) {
  Device device = Device::parse(device_name);
  const serialize::SafetensorsFile c = serialize::read_safetensors(case_path);
  const app::RefOutput out = app::run_reference_case(c, device);
  serialize::Metadata meta;
  if (!out.result.is_null()) meta["result"] = out.result.dump();
  serialize::write_safetensors(out_path, out.tensors, meta);
}
}  // namespace

void add_ref_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("ref", "Run a reference case (see docs/reference-cases.md) and write its result");
  auto case_path = std::make_shared<std::string>();
  auto out_path = std::make_shared<std::string>();
  auto device = std::make_shared<std::string>("cpu");
  cmd->add_option("CASE", *case_path, "the case, a safetensors file")->required()->check(reachable_path());
  cmd->add_option("OUT", *out_path, "where to write the result (safetensors)")->required();
  cmd->add_option("--device", *device, "cpu, sim or cuda[:N]");
  cmd->callback([=] { run_ref(*case_path, *out_path, *device); });
}

}  // namespace lathe::cli
