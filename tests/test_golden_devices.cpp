// Every golden reference case (tests/golden/*.case.safetensors: what `lathe ref` runs, made by
// PyTorch) on cuda against its expected result, with the tolerance the cpu's own golden tests give
// its kind: tests/test_gpt.cpp (gpt), tests/test_optim.cpp (optim), tests/test_optim_train.cpp and
// tests/test_ref_op.cpp (train). The cases are found by listing the directory, so a new one is
// checked here without a change. Runs on the emulator too (cuda/emulator/README.md).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "ref/case_registry.h"
#include "serialize/safetensors.h"
#include "tests/core_test_util.h"
#include "tests/gpu_cases.h"

using namespace lathe;
namespace fs = std::filesystem;

namespace {

// |got - want| <= atol + atol_of_max * max|want| + rtol * |want|, elementwise.
struct Tol {
  double rtol, atol, atol_of_max;
};

// The tolerance of tensor `name` of case `case_name` (kind `kind`), as the cpu's tests check it.
// A 16-bit case is held to 4 units of its type's roundoff, of the value and of the tensor's largest
// (its parameters compared as their displacements, below), as tests/test_precision_golden.cpp holds it.
Tol tolerance(const std::string& kind, const std::string& case_name, const std::string& name,
              const std::string& precision) {
  if (precision != "f32") {
    if (name == "skipped" || name.rfind("scaler.", 0) == 0) return {0, 0, 0};
    const double u = std::ldexp(1.0, precision == "bf16" ? -8 : -11);
    return {4 * u, 0, 4 * u};
  }
  if (kind == "gpt") return name.rfind("grad.", 0) == 0 ? Tol{1e-3, 1e-5, 0} : Tol{1e-4, 1e-6, 0};
  if (kind == "optim") return case_name.find("prodigy") != std::string::npos ? Tol{1e-3, 0, 1e-4} : Tol{1e-4, 1e-6, 0};
  // train: Adam's step on a bias with an (analytically) zero gradient follows rounding noise, hence
  // an absolute tolerance of a few lr-sized steps; second moments are tiny and held closer where
  // the case's test does.
  if (case_name == "train_param_groups" && name.find("exp_avg_sq") != std::string::npos) return {1e-3, 1e-9, 0};
  return {1e-3, 2e-5, 0};
}

std::vector<fs::path> golden_cases() {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(LATHE_GOLDEN_DIR)) {
    const std::string n = e.path().filename().string();
    if (n.size() > 17 && n.compare(n.size() - 17, 17, ".case.safetensors") == 0) out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

TEST_CASE("golden: every lathe ref case matches its expected result on cuda") {
  GPU_CASE();
  const std::vector<fs::path> cases = golden_cases();
  CHECK(cases.size() >= 12);
  for (const fs::path& path : cases) {
    const std::string file = path.filename().string();
    const std::string case_name = file.substr(0, file.size() - 17);
    INFO("case ", case_name);
    const auto c = serialize::read_safetensors(path.string());
    const auto want = serialize::read_safetensors((path.parent_path() / (case_name + ".expected.safetensors")).string());
    const nlohmann::json doc = nlohmann::json::parse(c.metadata.at("case"));
    const std::string kind = doc.at("kind").get<std::string>();
    const std::string precision = doc.value("precision", "f32");
    const ref::RefOutput got = ref::run_reference_case(c, Device::cuda(0));
    for (const auto& [name, w] : want.tensors) {
      INFO("tensor ", name);
      const auto it = std::find_if(got.tensors.begin(), got.tensors.end(), [&](const auto& p) { return p.first == name; });
      REQUIRE(it != got.tensors.end());
      Tensor e = w.to(DType::f64), a = it->second.to(Device::cpu()).to(DType::f64);
      // A 16-bit training case's parameters: their displacements from the start, the steps' updates.
      if (const Tensor* start = c.find(name); start && precision != "f32" && kind == "train") {
        e = sub(e, start->to(DType::f64));
        a = sub(a, start->to(DType::f64));
      }
      double emax = 0;
      for (double v : e.to_vector<double>()) emax = std::max(emax, std::abs(v));
      const Tol tol = tolerance(kind, case_name, name, precision);
      const std::string diff = core_test::compare(a, e, tol.rtol, tol.atol + tol.atol_of_max * emax);
      CHECK_MESSAGE(diff.empty(), diff);
    }
    // Optimizer cases also give each group's scalars (Prodigy's d, ...): within 1e-3, as on the cpu.
    if (want.metadata.count("result") && kind == "optim") {
      const auto expected = nlohmann::json::parse(want.metadata.at("result"));
      REQUIRE(got.result["groups"].size() == expected["groups"].size());
      for (size_t g = 0; g < expected["groups"].size(); ++g)
        for (const auto& [key, v] : expected["groups"][g].items()) {
          INFO("group ", g, " ", key);
          const double a = got.result["groups"][g][key].get<double>(), b = v.get<double>();
          CHECK(std::abs(a - b) <= 1e-3 * std::abs(b) + 1e-300);
        }
    }
  }
}
