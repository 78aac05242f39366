// `lathe ref --check` against torch.testing.assert_close: the committed pairs of
// tests/golden/make_check_pairs.py (equal, within tolerance, on the edge and one representable
// step past it in every floating dtype, NaN, infinities, integers, booleans, shape and dtype
// mismatches, missing and extra tensors) get PyTorch's verdict, tensor by tensor, under the
// default tolerances, under given ones and with equal_nan; and the program's exit status and report.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "ref/result_check.h"
#include "serialize/safetensors.h"
#include "tests/temp_dir.h"
#include "tests/test_helpers.h"

using namespace lathe;
using lathe::testing::TempDir;

namespace {

const std::string kGot = std::string(LATHE_GOLDEN_DIR) + "/check_pairs.got.safetensors";
const std::string kWant = std::string(LATHE_GOLDEN_DIR) + "/check_pairs.want.safetensors";

void check_setting(const std::string& setting, const ref::CheckOptions& options) {
  const auto got = serialize::read_safetensors(kGot);
  const auto want = serialize::read_safetensors(kWant);
  const nlohmann::json torch = nlohmann::json::parse(want.metadata.at("verdicts")).at(setting);
  const auto verdicts = ref::check_results(got, want, options);
  REQUIRE(verdicts.size() == torch.size());
  int passes = 0, fails = 0;
  for (const ref::TensorVerdict& v : verdicts) {
    INFO(setting, ": ", ref::format_verdict(v));
    CHECK(v.pass == torch.at(v.name).get<bool>());
    (v.pass ? passes : fails) += 1;
  }
  CHECK(passes > 10);
  CHECK(fails > 10);
}

}  // namespace

TEST_CASE("ref check: the verdicts of torch.testing.assert_close at its default tolerances") {
  check_setting("default", {});
}

TEST_CASE("ref check: the verdicts of assert_close at given tolerances and with equal_nan") {
  ref::CheckOptions given;
  given.tolerance = ref::Tolerance{1e-2, 1e-4};
  check_setting("rtol=0.01,atol=0.0001", given);
  ref::CheckOptions nan;
  nan.equal_nan = true;
  check_setting("equal_nan", nan);
}

TEST_CASE("ref check: default tolerances by dtype are assert_close's") {
  CHECK(ref::default_tolerance(DType::f32).rtol == 1.3e-6);
  CHECK(ref::default_tolerance(DType::f32).atol == 1e-5);
  CHECK(ref::default_tolerance(DType::f64).rtol == 1e-7);
  CHECK(ref::default_tolerance(DType::bf16).rtol == 1.6e-2);
  CHECK(ref::default_tolerance(DType::f16).rtol == 1e-3);
  CHECK(ref::default_tolerance(DType::i64).atol == 0);
}

TEST_CASE("ref check: the program prints a verdict per tensor and the worst, and exits 0 only when all pass") {
  TempDir dir;
  // A file against itself: every tensor passes.
  const std::string same = dir.file("same.safetensors");
  serialize::write_safetensors(same, {{"a", Tensor::ones({2, 3})}, {"b", Tensor::zeros({4}, DType::f64)}});
  auto r = lathe::testing::run_lathe("ref --check '" + same + "' '" + same + "'");
  CHECK(r.code == 0);
  CHECK(r.output.find("PASS a [2, 3] f32") != std::string::npos);
  CHECK(r.output.find("2 of 2 tensors pass") != std::string::npos);

  // The committed pairs: failures, a worst line naming one, exit 1.
  r = lathe::testing::run_lathe("ref --check '" + kGot + "' '" + kWant + "'");
  CHECK(r.code == 1);
  CHECK(r.output.find("FAIL f32.hair_above_0 [64] f32 (rtol 1.3e-06, atol 1e-05): 1 of 64 elements differ") !=
        std::string::npos);
  CHECK(r.output.find("FAIL shape.transposed [3, 4] f32: shape [4, 3] but want [3, 4]") != std::string::npos);
  CHECK(r.output.find("FAIL dtype.f32_vs_f64 [3, 4] f32: dtype f64 but want f32") != std::string::npos);
  CHECK(r.output.find("FAIL only_in_want [3, 4] f32: missing from") != std::string::npos);
  CHECK(r.output.find("worst: FAIL") != std::string::npos);
  CHECK(r.output.find("lathe:") == std::string::npos);  // a verdict, not an error

  // Tolerances come in pairs; bad paths and files are errors naming them.
  r = lathe::testing::run_lathe("ref --check '" + same + "' '" + same + "' --rtol 1e-3");
  CHECK(r.code == 2);
  CHECK(r.output.find("both --rtol and --atol") != std::string::npos);
  r = lathe::testing::run_lathe("ref --check '" + same + "' '" + dir.file("nope.safetensors") + "'");
  CHECK(r.code == 2);
  CHECK(r.output.find("nope.safetensors") != std::string::npos);
  const std::string junk = dir.write("junk.safetensors", "not a safetensors file");
  r = lathe::testing::run_lathe("ref --check '" + same + "' '" + junk + "'");
  CHECK(r.code == 1);
  CHECK(r.output.find("junk.safetensors") != std::string::npos);
  r = lathe::testing::run_lathe("ref '" + same + "' '" + same + "' --check '" + same + "' '" + same + "'");
  CHECK(r.code == 2);
}

TEST_CASE("ref check: NaN and infinities are reported by where they are and how they differ") {
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  auto file = [](const std::string& name, const std::vector<double>& values) {
    serialize::SafetensorsFile f;
    f.path = name;
    f.tensors.emplace_back("x", Tensor::from_vector(values, {2, 4}));
    return f;
  };
  // [0, 1] NaN in got only, [0, 2] NaN in want only, [0, 3] and [1, 0] NaN in both, [1, 1] infinite
  // in got only, [1, 2] infinities of opposite signs; [0, 0] and [1, 3] finite, 0.5 apart at most.
  const auto got = file("got", {1.0, nan, 2.0, nan, nan, inf, -inf, 3.5});
  const auto want = file("want", {1.25, 7.0, nan, nan, nan, 4.0, inf, 3.0});
  const ref::TensorVerdict v = ref::check_results(got, want, {}).at(0);
  const std::string text = ref::format_verdict(v);
  INFO(text);
  CHECK(!v.pass);
  CHECK(v.mismatched == 8);
  CHECK(text.find("8 of 8 elements differ") != std::string::npos);
  CHECK(text.find("NaN in got only: 1 element, at [0, 1] (got nan, want 7)") != std::string::npos);
  CHECK(text.find("NaN in want only: 1 element, at [0, 2] (got 2, want nan)") != std::string::npos);
  CHECK(text.find("NaN in both (equal only with --equal-nan): 2 elements, the first at [0, 3]") != std::string::npos);
  CHECK(text.find("infinite in got only: 1 element, at [1, 1] (got inf, want 4)") != std::string::npos);
  CHECK(text.find("infinities of opposite signs: 1 element, at [1, 2] (got -inf, want inf)") != std::string::npos);
  CHECK(text.find("over the finite elements: max |got - want| 0.5; worst at [1, 3]") != std::string::npos);
  // With equal_nan the NaN pairs pass, and the rest is reported as before.
  ref::CheckOptions nan_equal;
  nan_equal.equal_nan = true;
  const ref::TensorVerdict e = ref::check_results(got, want, nan_equal).at(0);
  CHECK(e.mismatched == 6);
  CHECK(ref::format_verdict(e).find("NaN in both") == std::string::npos);
  // A scalar that is NaN against a number: no finite element to measure, and no "max |got - want| 0".
  serialize::SafetensorsFile a, b;
  a.tensors.emplace_back("loss", Tensor::scalar(nan));
  b.tensors.emplace_back("loss", Tensor::scalar(2.5));
  const std::string scalar = ref::format_verdict(ref::check_results(a, b, {}).at(0));
  CHECK(scalar == "FAIL loss [] f32 (rtol 1.3e-06, atol 1e-05): 1 of 1 elements differ; NaN in got only: 1 element, "
                  "at [] (got nan, want 2.5); no element with two finite values");
}
