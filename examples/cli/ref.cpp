// lathe ref: reference cases (docs/reference-cases.md). Four uses:
//   lathe ref CASE OUT [--device D]             runs a case; OUT is written only when it succeeded
//   lathe ref --check GOT WANT [--rtol R --atol A] [--equal-nan]
//                                               compares two results as torch.testing.assert_close
//   lathe ref --write-fixtures DIR              writes the fixtures pack (cases with lathe's answers)
//   lathe ref --write-op-samples FILE           bundles the op registry's samples for PyTorch to answer
// The kinds, the checker and the pack live in ref/.
#include <iostream>

#include "examples/cli/commands.h"
#include "ref/case_registry.h"
#include "ref/fixtures.h"
#include "ref/op_samples.h"
#include "ref/result_check.h"

namespace lathe::cli {

namespace {

struct RefArgs {
  std::string case_path, out_path, device = "cpu";
  std::vector<std::string> check;  // GOT WANT
  std::optional<double> rtol, atol;
  bool equal_nan = false;
  std::string fixtures_dir, op_samples_path;
};

void run_case(const RefArgs& a) {
  Device device = Device::parse(a.device);
  const serialize::SafetensorsFile c = serialize::read_safetensors(a.case_path);
  const ref::RefOutput out = ref::run_reference_case(c, device);
  serialize::Metadata meta;
  if (!out.result.is_null()) meta["result"] = out.result.dump();
  serialize::write_safetensors(a.out_path, out.tensors, meta);
}

void run_check(const RefArgs& a) {
  ref::CheckOptions options;
  if (a.rtol || a.atol) {
    // As assert_close: the two tolerances come together, or both from the dtype.
    if (!a.rtol || !a.atol) throw UsageError("ref --check: give both --rtol and --atol, or neither");
    if (!(*a.rtol >= 0) || !(*a.atol >= 0))
      throw UsageError("ref --check: --rtol and --atol must be numbers >= 0");
    options.tolerance = ref::Tolerance{*a.rtol, *a.atol};
  }
  options.equal_nan = a.equal_nan;
  const serialize::SafetensorsFile got = serialize::read_safetensors(a.check[0]);
  const serialize::SafetensorsFile want = serialize::read_safetensors(a.check[1]);
  const ref::CheckReport report = ref::check_report(ref::check_results(got, want, options));
  std::cout << report.text;
  if (!report.pass) throw NegativeVerdict{};
}

}  // namespace

void add_ref_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "ref", "Run a reference case (see docs/reference-cases.md) and write its result; or compare two results "
             "(--check); or write the fixtures pack (--write-fixtures) or the op samples (--write-op-samples)");
  auto a = std::make_shared<RefArgs>();
  cmd->add_option("CASE", a->case_path, "the case, a safetensors file")->check(reachable_path());
  cmd->add_option("OUT", a->out_path, "where to write the result (safetensors)");
  cmd->add_option("--device", a->device, "cpu, sim or cuda[:N]");
  cmd->add_option("--check", a->check, "compare result GOT with result WANT, tensor by tensor")
      ->expected(2)
      ->type_name("GOT WANT")
      ->check(reachable_path());
  cmd->add_option("--rtol", a->rtol, "--check: relative tolerance for every tensor (with --atol)");
  cmd->add_option("--atol", a->atol, "--check: absolute tolerance for every tensor (with --rtol)");
  cmd->add_flag("--equal-nan", a->equal_nan, "--check: NaN equals NaN");
  cmd->add_option("--write-fixtures", a->fixtures_dir, "write the fixtures pack into this directory");
  cmd->add_option("--write-op-samples", a->op_samples_path,
                  "write every golden sample of the op registry, in each of its dtypes, into this one file "
                  "(tests/golden/make_op_goldens.py answers it with PyTorch)");
  cmd->callback([a] {
    const bool running = !a->case_path.empty() || !a->out_path.empty();
    const int modes =
        int(running) + int(!a->check.empty()) + int(!a->fixtures_dir.empty()) + int(!a->op_samples_path.empty());
    if (modes != 1)
      throw UsageError(
          "ref: give CASE OUT, or --check GOT WANT, or --write-fixtures DIR, or --write-op-samples FILE (one of them)");
    if ((a->rtol || a->atol || a->equal_nan) && a->check.empty())
      throw UsageError("ref: --rtol, --atol and --equal-nan belong to --check");
    if (running) {
      if (a->out_path.empty()) throw UsageError("ref: CASE needs an OUT to write the result to");
      run_case(*a);
    } else if (!a->check.empty()) {
      run_check(*a);
    } else if (!a->op_samples_path.empty()) {
      const int64_t n = ref::write_op_samples(a->op_samples_path);
      std::cout << "wrote " << n << " op sample cases to " << a->op_samples_path << "\n";
    } else {
      const ref::FixturesSummary s = ref::write_fixtures(a->fixtures_dir, Device::parse(a->device));
      std::cout << "wrote " << s.cases << " cases with lathe's answers to " << a->fixtures_dir << " (see "
                << a->fixtures_dir << "/README.md)\n";
    }
  });
}

}  // namespace lathe::cli
