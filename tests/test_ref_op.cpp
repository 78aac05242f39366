// `lathe ref` kind "op" against PyTorch (every golden sample of every op of the kind in the op
// registry, in f32, f64, bf16 and f16, forward and backward: tools/make_op_goldens.sh), compared at
// the dtype's tolerance of torch.testing.assert_close through lathe's own checker; its bad inputs; explicit param_groups in
// a train case against torch.optim.AdamW (make_optim_goldens.py); and the fixtures pack.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <map>
#include <nlohmann/json.hpp>

#include "core/backend.h"
#include "core/error.h"
#include "core/ops.h"
#include "ref/case_registry.h"
#include "ref/fixtures.h"
#include "ref/op_registry.h"
#include "ref/op_samples.h"
#include "ref/result_check.h"
#include "serialize/safetensors.h"
#include "tests/gpu_cases.h"
#include "tests/temp_dir.h"
#include "tests/test_helpers.h"

using namespace lathe;
using lathe::testing::TempDir;
namespace fs = std::filesystem;

namespace {

const std::string kGolden = LATHE_GOLDEN_DIR;

// The golden bundle split into one case file per case, as a user would write them.
std::map<std::string, serialize::SafetensorsFile> split_bundle(const serialize::SafetensorsFile& bundle,
                                                               const nlohmann::json& documents) {
  std::map<std::string, serialize::SafetensorsFile> out;
  for (const auto& [name, t] : bundle.tensors) {
    const auto slash = name.find('/');
    REQUIRE(slash != std::string::npos);
    serialize::SafetensorsFile& c = out[name.substr(0, slash)];
    c.tensors.emplace_back(name.substr(slash + 1), t);
  }
  for (auto& [name, c] : out) {
    c.path = name;
    if (!documents.is_null()) c.metadata["case"] = documents.at(name).dump();
  }
  return out;
}

std::map<std::string, serialize::SafetensorsFile> op_cases() {
  const auto bundle = serialize::read_safetensors(kGolden + "/op_samples.safetensors");
  return split_bundle(bundle, nlohmann::json::parse(bundle.metadata.at("cases")));
}

std::map<std::string, serialize::SafetensorsFile> op_expected() {
  return split_bundle(serialize::read_safetensors(kGolden + "/op_samples.expected.safetensors"), nullptr);
}

// lathe's answer as a result file.
serialize::SafetensorsFile answer(const serialize::SafetensorsFile& c, Device device) {
  serialize::SafetensorsFile got;
  got.path = c.path + " (lathe)";
  for (auto& [name, t] : ref::run_reference_case(c, device).tensors) got.tensors.emplace_back(name, t.to(Device::cpu()));
  return got;
}

// Every golden sample of every op of the kind, in each of its dtypes, as a case file run by
// `lathe ref`'s code against PyTorch's answer.
void check_ops_against_torch(Device device) {
  const auto cases = op_cases();
  const auto expected = op_expected();
  std::set<std::string> ops, kind, dtypes;
  for (const ref::OpEntry& op : ref::op_registry()) {
    if (!op.in_ref_kind) continue;
    kind.insert(op.name);
    for (const ref::OpSample& sample : op.samples) {
      if (sample.use == ref::SampleUse::sweep) continue;
      for (DType dtype : ref::sample_dtypes(op, sample)) {
        const std::string name = ref::op_sample_case_name(op, sample, dtype);
        INFO("case ", name, " on ", device.str());
        REQUIRE_MESSAGE((cases.count(name) && expected.count(name)), "no case or answer ", name, " (tools/make_op_goldens.sh)");
        const auto got = answer(cases.at(name), device);
        for (const ref::TensorVerdict& v : ref::check_results(got, expected.at(name), {}))
          CHECK_MESSAGE(v.pass, ref::format_verdict(v));
        ops.insert(op.name);
        dtypes.insert(dtype_name(dtype));
      }
    }
  }
  CHECK(ops == kind);  // every op of the kind has PyTorch's answers
  CHECK(dtypes == std::set<std::string>{"f32", "f64", "bf16", "f16"});
}

// Runs case `c` on the cpu and returns its error message ("" when it ran).
std::string case_error(const serialize::SafetensorsFile& c) {
  try {
    ref::run_reference_case(c, Device::cpu());
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// The error of an op case `doc` over `tensors`.
std::string op_error(const nlohmann::json& doc, const std::vector<std::pair<std::string, Tensor>>& tensors) {
  serialize::SafetensorsFile c;
  c.path = "bad.case";
  c.tensors = tensors;
  c.metadata["case"] = doc.dump();
  return case_error(c);
}

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

Tensor f32(const Shape& s) { return Tensor::ones(s, DType::f32); }
Tensor i64(const std::vector<int64_t>& v) { return Tensor::from_vector(v, {int64_t(v.size())}); }

}  // namespace

TEST_CASE("ref op: every op in every dtype matches PyTorch on the cpu") { check_ops_against_torch(Device::cpu()); }

TEST_CASE("ref op: every op in every dtype matches PyTorch on sim") { check_ops_against_torch(Device::sim()); }

TEST_CASE("ref op: every op in every dtype matches PyTorch on cuda") {
  GPU_CASE();
  check_ops_against_torch(Device::cuda());
}

TEST_CASE("ref op: a 16-bit case rounds once what f32 computes") {
  // exp of a bf16 input: f32's exp of the widened value, rounded to bf16, nothing in between.
  const Tensor x = Tensor::from_vector<double>({0.3, -1.7, 2.2}, {3}).to(DType::bf16);
  serialize::SafetensorsFile c;
  c.path = "exp_bf16";
  c.tensors = {{"input.0", x}, {"grad_output", Tensor::ones({3}, DType::bf16)}};
  c.metadata["case"] = R"({"kind": "op", "op": "exp"})";
  const auto out = ref::run_reference_case(c, Device::cpu());
  const Tensor want = lathe::exp(x.to(DType::f32)).to(DType::bf16);
  REQUIRE(out.tensors.size() == 2);
  CHECK(out.tensors[0].second.dtype() == DType::bf16);
  CHECK(out.tensors[0].second.to_vector<float>() == want.to_vector<float>());
  CHECK(out.tensors[1].first == "grad.input.0");
  CHECK(out.tensors[1].second.to_vector<float>() == want.to_vector<float>());  // d exp = exp
}

TEST_CASE("ref op: bad cases get one error naming the fault") {
  const nlohmann::json add = {{"kind", "op"}, {"op", "add"}};
  CHECK(op_error({{"kind", "op"}, {"op", "erfinv"}}, {{"input.0", f32({2})}}).find("unknown op \"erfinv\"") !=
        std::string::npos);
  CHECK(op_error({{"kind", "op"}}, {}).find("needs \"op\"") != std::string::npos);
  CHECK(op_error({{"kind", "op"}, {"op", "add"}, {"args", {{"alpha", 2}}}}, {{"input.0", f32({2})}, {"input.1", f32({2})}})
            .find("op \"add\" has no argument \"alpha\" (it takes other)") != std::string::npos);
  CHECK(op_error({{"kind", "op"}, {"op", "maximum"}, {"args", {{"other", 2}}}}, {{"input.0", f32({2})}, {"input.1", f32({2})}})
            .find("op \"maximum\" has no argument \"other\" (it takes none)") != std::string::npos);
  CHECK(op_error({{"kind", "op"}, {"op", "sum"}, {"args", {{"dims", 0}}}}, {{"input.0", f32({2})}})
            .find("has no argument \"dims\" (it takes dim, keepdim)") != std::string::npos);
  CHECK(op_error({{"kind", "op"}, {"op", "sum"}, {"args", {{"keepdim", 1}}}}, {{"input.0", f32({2})}})
            .find("\"keepdim\" must be true or false") != std::string::npos);
  CHECK(op_error({{"kind", "op"}, {"op", "maximum"}}, {{"input.0", f32({2})}})
            .find("takes 2 tensor operands (input.0 .. input.1), the case has 1") != std::string::npos);
  CHECK(op_error(add, {{"input.0", f32({2})}, {"input.1", f32({2})}, {"input.2", f32({2})}})
            .find("takes 1 to 2 tensor operands (input.0 .. input.1), the case has 3") != std::string::npos);
  // PyTorch's number form of a binary op: `other` stands for input.1, never beside it
  CHECK(op_error(add, {{"input.0", f32({2})}}).find("op \"add\" takes input.1 or the argument \"other\" (a number)") !=
        std::string::npos);
  CHECK(op_error({{"kind", "op"}, {"op", "add"}, {"args", {{"other", 2}}}}, {{"input.0", f32({2})}, {"input.1", f32({2})}})
            .find("\"other\" stands for input.1; give one of them, not both") != std::string::npos);
  CHECK(op_error({{"kind", "op"}, {"op", "stack"}}, {}).find("takes one or more tensor operands") != std::string::npos);
  CHECK(op_error(add, {{"input.0", f32({2})}, {"input.2", f32({2})}}).find("input.1 is missing") != std::string::npos);
  CHECK(op_error(add, {{"input.0", f32({2})}, {"input.1", f32({2})}, {"weights", f32({2})}})
            .find("unexpected tensor \"weights\"") != std::string::npos);
  CHECK(op_error(add, {{"input.0", f32({2})}, {"input.1", Tensor::ones({2}, DType::f64)}})
            .find("input.0 is f32[2] on cpu and input.1 is f64[2]") != std::string::npos);
  CHECK(op_error(add, {{"input.0", f32({2})}, {"input.1", f32({3})}}).find("[2]") != std::string::npos);
  CHECK(op_error({{"kind", "op"}, {"op", "matmul"}}, {{"input.0", f32({2, 3})}, {"input.1", f32({4, 2})}})
            .find("matmul") != std::string::npos);
  CHECK(op_error({{"kind", "op"}, {"op", "softmax"}}, {{"input.0", f32({2, 3})}}).find("needs the argument \"dim\"") !=
        std::string::npos);
  CHECK(op_error({{"kind", "op"}, {"op", "gelu"}, {"args", {{"approximate", "fast"}}}}, {{"input.0", f32({2})}})
            .find("must be one of \"none\", \"tanh\", got \"fast\"") != std::string::npos);
  CHECK(op_error({{"kind", "op"}, {"op", "clamp"}}, {{"input.0", f32({2})}}).find("needs \"min\" or \"max\"") !=
        std::string::npos);
  // ids out of range, for every op that takes ids
  CHECK(op_error({{"kind", "op"}, {"op", "embedding"}}, {{"input.0", i64({0, 7})}, {"input.1", f32({5, 3})}})
            .find("7") != std::string::npos);
  CHECK(op_error({{"kind", "op"}, {"op", "cross_entropy"}}, {{"input.0", f32({2, 5})}, {"input.1", i64({1, 5})}})
            .find("5") != std::string::npos);
  CHECK(op_error({{"kind", "op"}, {"op", "index_select"}, {"args", {{"dim", 0}}}},
                 {{"input.0", f32({4, 2})}, {"input.1", i64({-1})}})
            .find("-1") != std::string::npos);
  CHECK(op_error({{"kind", "op"}, {"op", "gather"}, {"args", {{"dim", 0}}}},
                 {{"input.0", f32({4, 2})}, {"input.1", Tensor::from_vector<int64_t>({9, 0}, {1, 2})}})
            .find("9") != std::string::npos);
  // grad_output of the wrong shape or dtype; a result that would not fit
  CHECK(op_error({{"kind", "op"}, {"op", "exp"}}, {{"input.0", f32({2})}, {"grad_output", f32({3})}})
            .find("grad_output f32[3] on cpu must have the shape of the output [2]") != std::string::npos);
  CHECK(op_error({{"kind", "op"}, {"op", "exp"}}, {{"input.0", f32({2})}, {"grad_output", Tensor::ones({2}, DType::f64)}})
            .find("must have the case's dtype f32") != std::string::npos);
  CHECK(op_error(add, {{"input.0", f32({1 << 15, 1})}, {"input.1", f32({1, 1 << 15})}})
            .find("more than the limit") != std::string::npos);
  // an op of the registry outside the kind (PyTorch has no softcap) is unknown to it
  CHECK(op_error({{"kind", "op"}, {"op", "softcap"}, {"args", {{"cap", 2.0}}}}, {{"input.0", f32({2})}})
            .find("unknown op \"softcap\"") != std::string::npos);
  // every message names the case file
  CHECK(op_error({{"kind", "op"}, {"op", "erfinv"}}, {}).rfind("bad.case: ", 0) == 0);
}

TEST_CASE("ref train: explicit param_groups follow torch.optim.AdamW over them") {
  for (const char* device : {"cpu", "sim"}) {
    INFO("device ", device);
    const auto c = serialize::read_safetensors(kGolden + "/train_param_groups.case.safetensors");
    const auto want = serialize::read_safetensors(kGolden + "/train_param_groups.expected.safetensors");
    const auto got = answer(c, Device::parse(device));
    int compared = 0;
    for (const auto& [name, w] : want.tensors) {
      const Tensor* g = got.find(name);
      REQUIRE_MESSAGE(g != nullptr, name);
      // As the train_tiny golden: Adam's step on a zero-gradient bias follows rounding noise.
      serialize::SafetensorsFile a, b;
      a.tensors = {{name, *g}};
      b.tensors = {{name, w}};
      ref::CheckOptions tol;
      tol.tolerance = ref::Tolerance{1e-3, name.find("exp_avg_sq") != std::string::npos ? 1e-9 : 2e-5};
      const auto v = ref::check_results(a, b, tol).front();
      CHECK_MESSAGE(v.pass, ref::format_verdict(v));
      ++compared;
    }
    CHECK(compared > 50);  // losses, weights and both moments of every parameter
  }
}

TEST_CASE("ref train: param_groups that miss, repeat or misname a parameter are refused") {
  auto c = serialize::read_safetensors(kGolden + "/train_param_groups.case.safetensors");
  const nlohmann::json doc = nlohmann::json::parse(c.metadata.at("case"));
  auto error_with = [&](const nlohmann::json& groups) -> std::string {
    nlohmann::json d = doc;
    d["param_groups"] = groups;
    c.metadata["case"] = d.dump();
    return case_error(c);
  };
  nlohmann::json groups = doc["param_groups"];
  nlohmann::json missing = groups;
  missing[1]["params"].erase(missing[1]["params"].begin());
  CHECK(error_with(missing).find("parameter \"transformer.h.0.ln_1.weight\" is in no group") != std::string::npos);
  nlohmann::json repeated = groups;
  repeated[1]["params"].push_back("transformer.wte.weight");
  CHECK(error_with(repeated).find("\"transformer.wte.weight\" is in param_groups[0] and again in param_groups[1]") !=
        std::string::npos);
  nlohmann::json unknown = groups;
  unknown[0]["params"].push_back("transformer.wxe.weight");
  CHECK(error_with(unknown).find("names \"transformer.wxe.weight\", which is not a parameter") != std::string::npos);
  nlohmann::json bad_option = groups;
  bad_option[0]["momentum"] = 0.9;
  CHECK(error_with(bad_option).find("param_groups[0]") != std::string::npos);
  CHECK(error_with(nlohmann::json::array()).find("non-empty list") != std::string::npos);
}

TEST_CASE("ref fixtures: the pack's cases give its answers again, bitwise, from the files") {
  TempDir dir;
  const std::string pack = dir.file("pack");
  const ref::FixturesSummary s = ref::write_fixtures(pack, Device::cpu());
  CHECK(s.cases > 150);
  const nlohmann::json manifest = nlohmann::json::parse(slurp(pack + "/manifest.json"));
  REQUIRE(int64_t(manifest.size()) == s.cases);
  std::set<std::string> kinds;
  for (const auto& e : manifest) {
    const std::string name = e["name"];
    INFO("fixture ", name);
    kinds.insert(e["kind"].get<std::string>());
    const auto c = serialize::read_safetensors(pack + "/" + e["case"].get<std::string>());
    const auto want = serialize::read_safetensors(pack + "/" + e["expected"].get<std::string>());
    ref::CheckOptions exact;
    exact.tolerance = ref::Tolerance{0, 0};
    for (const auto& v : ref::check_results(answer(c, Device::sim()), want, exact))
      CHECK_MESSAGE(v.pass, ref::format_verdict(v));
  }
  CHECK(kinds == std::set<std::string>{"op", "gpt", "train"});
  CHECK(slurp(pack + "/README.md").find("resume_second_half") != std::string::npos);
  CHECK(slurp(pack + "/README.md").find("resume_fp16_second_half") != std::string::npos);
  CHECK(slurp(pack + "/README.md").find("train_adamw_bf16") != std::string::npos);
  // Written again over itself: fine. Into a folder of other files: refused, nothing written.
  CHECK(ref::write_fixtures(pack, Device::cpu()).cases == s.cases);
  const std::string other = dir.file("other");
  fs::create_directories(other);
  dir.write("other/notes.txt", "mine");
  CHECK_THROWS_WITH_AS(ref::write_fixtures(other, Device::cpu()), doctest::Contains("holds no fixtures pack"), Error);
  CHECK(std::distance(fs::directory_iterator(other), fs::directory_iterator()) == 1);
}

TEST_CASE("ref optim and train: groups as PyTorch's param_groups list them are accepted as they are") {
  // foreach, capturable, differentiable, fused and an LR scheduler's initial_lr choose PyTorch's
  // implementation or record its schedule; with neutral values they change nothing.
  auto c = serialize::read_safetensors(kGolden + "/optim_adamw.case.safetensors");
  const auto plain = answer(c, Device::cpu());
  nlohmann::json doc = nlohmann::json::parse(c.metadata.at("case"));
  for (auto& g : doc["groups"])
    g.update({{"foreach", nullptr}, {"capturable", false}, {"differentiable", false}, {"fused", nullptr},
              {"initial_lr", 0.001}});
  c.metadata["case"] = doc.dump();
  ref::CheckOptions exact;
  exact.tolerance = ref::Tolerance{0, 0};
  for (const auto& v : ref::check_results(answer(c, Device::cpu()), plain, exact)) CHECK_MESSAGE(v.pass, ref::format_verdict(v));

  auto error_with = [&](const char* key, const nlohmann::json& value) -> std::string {
    nlohmann::json d = doc;
    d["groups"][1][key] = value;
    c.metadata["case"] = d.dump();
    return case_error(c);
  };
  CHECK(error_with("differentiable", true).find("group 1: \"differentiable\": true") != std::string::npos);
  CHECK(error_with("fused", true).find("group 1: \"fused\" is true but the case's optimizer is not fused") !=
        std::string::npos);
  CHECK(error_with("foreach", "yes").find("\"foreach\" must be true, false or null") != std::string::npos);

  // The same in a train case's optimizer and param_groups.
  auto t = serialize::read_safetensors(kGolden + "/train_param_groups.case.safetensors");
  const auto t_plain = answer(t, Device::cpu());
  nlohmann::json tdoc = nlohmann::json::parse(t.metadata.at("case"));
  tdoc["optimizer"].update({{"foreach", false}, {"fused", nullptr}, {"capturable", false}});
  for (auto& g : tdoc["param_groups"]) g.update({{"differentiable", false}, {"initial_lr", 0.003}});
  t.metadata["case"] = tdoc.dump();
  for (const auto& v : ref::check_results(answer(t, Device::cpu()), t_plain, exact)) CHECK_MESSAGE(v.pass, ref::format_verdict(v));
}
