// GPT against PyTorch: the golden cases of tests/golden/make_gpt_goldens.py (the reference GPT of
// tools/torch_gpt_reference.py, computed in f64; GPT-2's model and each switch of the modern block,
// alone and together) run in-process (on cpu, sim, and cuda where a GPU exists) and through `lathe
// ref` on cpu and sim; malformed cases are errors that name what is wrong and leave no output file.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <sys/wait.h>

#include "core/autograd.h"
#include "core/ops.h"
#include "nn/gpt.h"
#include "serialize/safetensors.h"
#include "tests/gpu_cases.h"
#include "tests/temp_dir.h"
#include "tests/test_helpers.h"

#include "tests/core_test_util.h"

using namespace lathe;
using lathe::testing::TempDir;
using namespace lathe::nn;
namespace fs = std::filesystem;

namespace {

const std::string kGolden = LATHE_GOLDEN_DIR;

struct Tolerance {
  double rtol, atol;
};
constexpr Tolerance kOutputTol{1e-4, 1e-6};  // logits and loss
constexpr Tolerance kGradTol{1e-3, 1e-5};

void check_close(const std::string& name, const Tensor& actual, const Tensor& expected, Tolerance tol) {
  const std::string diff = core_test::compare(actual, expected, tol.rtol, tol.atol);
  CHECK_MESSAGE(diff.empty(), "tensor ", name, ": ", diff);
}

// Compares a result (logits, loss, grad.*) with the expected file, name by name.
void check_against_expected(const std::vector<std::pair<std::string, Tensor>>& out,
                            const serialize::SafetensorsFile& expected) {
  CHECK(out.size() == expected.tensors.size());
  for (const auto& [name, want] : expected.tensors) {
    const Tensor* got = nullptr;
    for (const auto& [n, t] : out)
      if (n == name) got = &t;
    INFO("output ", name);
    REQUIRE(got != nullptr);
    check_close(name, *got, want, name.rfind("grad.", 0) == 0 ? kGradTol : kOutputTol);
  }
}

// The case run in-process: the model built from the config, loaded by name, one forward and
// backward; outputs named as `lathe ref` names them.
std::vector<std::pair<std::string, Tensor>> run_case(const serialize::SafetensorsFile& c, Device device) {
  nlohmann::json spec = nlohmann::json::parse(c.metadata.at("case"));
  GPT model(GPTConfig::from_json(spec["config"]), 0, device);
  NamedTensors weights;
  for (const auto& [name, t] : c.tensors)
    if (name != "idx" && name != "targets") weights.emplace_back(name, t);
  model.load_state_dict(weights);
  GPTOutput out = model.forward(c.at("idx").to(device), c.at("targets").to(device));
  out.loss.backward();
  std::vector<std::pair<std::string, Tensor>> result = {{"logits", out.logits}, {"loss", out.loss}};
  for (const auto& [name, p] : model.state_dict())
    if (name != "lm_head.weight" || c.find(name)) result.emplace_back("grad." + name, p.grad());
  return result;
}

// Every golden GPT case: GPT-2's model, then the modern block's switches one by one and together.
const char* const kCases[] = {
    "gpt_tiny",   "gpt_nobias",  "gpt_ignore",  "gpt_rope",   "gpt_rms_norm", "gpt_layer_norm_noweight", "gpt_squared_relu",
    "gpt_swiglu", "gpt_qk_norm", "gpt_untied", "gpt_softcap",  "gpt_speedrun",
};

// Runs `lathe ref`; returns its exit status and fills `output` with what it printed.
int run_ref(const std::string& case_path, const std::string& out_path, const std::string& device, std::string& output) {
  const lathe::testing::Run r = lathe::testing::run_lathe("ref '" + case_path + "' '" + out_path + "' --device " + device);
  output = r.output;
  return r.code;
}

}  // namespace

// Every case in-process on `device`.
static void check_golden_cases(Device device) {
  for (const char* name : kCases) {
    INFO("case ", name, " on ", device.str());
    serialize::SafetensorsFile c = serialize::read_safetensors(kGolden + "/" + name + ".case.safetensors");
    serialize::SafetensorsFile e = serialize::read_safetensors(kGolden + "/" + name + ".expected.safetensors");
    check_against_expected(run_case(c, device), e);
  }
}

TEST_CASE("gpt golden: forward and backward match PyTorch, in-process, on cpu and sim") {
  check_golden_cases(Device::cpu());
  check_golden_cases(Device::sim());
}

TEST_CASE("gpt golden: forward and backward match PyTorch, in-process, on cuda") {
  GPU_CASE();
  check_golden_cases(Device::cuda());
}

TEST_CASE("gpt golden: lathe ref writes the expected result") {
  TempDir dir;
  for (const char* name : kCases) {
    for (const char* device : {"cpu", "sim"}) {
      INFO("case ", name, " on ", device);
      std::string output;
      const std::string out = dir.file(std::string(name) + "_" + device + ".out.safetensors");
      REQUIRE(run_ref(kGolden + "/" + name + ".case.safetensors", out, device, output) == 0);
      serialize::SafetensorsFile got = serialize::read_safetensors(out);
      check_against_expected(got.tensors,
                             serialize::read_safetensors(kGolden + "/" + name + ".expected.safetensors"));
    }
  }
}

TEST_CASE("gpt golden: malformed cases are errors naming the fault, and write nothing") {
  TempDir dir;
  const serialize::SafetensorsFile base = serialize::read_safetensors(kGolden + "/gpt_tiny.case.safetensors");
  // Writes `base` with `edit` applied and expects `lathe ref` to fail with `message`.
  auto expect_error = [&](const std::string& what, auto edit, const std::string& message) {
    INFO(what);
    std::vector<std::pair<std::string, Tensor>> tensors = base.tensors;
    serialize::Metadata meta = base.metadata;
    edit(tensors, meta);
    const std::string case_path = dir.file("bad.case.safetensors"), out = dir.file("bad.out.safetensors");
    serialize::write_safetensors(case_path, tensors, meta);
    std::string output;
    CHECK(run_ref(case_path, out, "cpu", output) == 1);
    CHECK_MESSAGE(output.find(message) != std::string::npos, output);
    CHECK_FALSE(fs::exists(out));
  };
  using Tensors = std::vector<std::pair<std::string, Tensor>>;
  auto replace = [](Tensors& ts, const std::string& name, const Tensor& t) {
    for (auto& [n, v] : ts)
      if (n == name) v = t;
  };
  auto drop = [](Tensors& ts, const std::string& name) {
    std::erase_if(ts, [&](const auto& p) { return p.first == name; });
  };

  expect_error("missing parameter", [&](Tensors& ts, serialize::Metadata&) { drop(ts, "transformer.h.1.ln_2.weight"); },
               "missing parameter tensor \"transformer.h.1.ln_2.weight\"");
  expect_error("wrong shape", [&](Tensors& ts, serialize::Metadata&) {
    replace(ts, "transformer.h.0.mlp.c_fc.weight", Tensor::zeros({128, 31}));
  }, "\"transformer.h.0.mlp.c_fc.weight\": expected [128, 32], got [128, 31]");
  expect_error("lm_head differs from wte", [&](Tensors& ts, serialize::Metadata&) {
    replace(ts, "lm_head.weight", Tensor::zeros({64, 32}));
  }, "tied parameter");
  expect_error("unexpected tensor", [&](Tensors& ts, serialize::Metadata&) {
    ts.emplace_back("transformer.h.2.ln_1.weight", Tensor::zeros({32}));
  }, "unexpected tensor \"transformer.h.2.ln_1.weight\"");
  expect_error("T > block_size", [&](Tensors& ts, serialize::Metadata&) {
    replace(ts, "idx", Tensor::zeros({1, 17}, DType::i64));
    replace(ts, "targets", Tensor::zeros({1, 17}, DType::i64));
  }, "sequence length 17 but block_size is 16");
  expect_error("id >= vocab_size", [&](Tensors& ts, serialize::Metadata&) {
    replace(ts, "idx", Tensor::full({2, 8}, 64, DType::i64));
  }, "token id 64 but vocab_size is 64");
  expect_error("float ids", [&](Tensors& ts, serialize::Metadata&) {
    replace(ts, "targets", Tensor::zeros({2, 8}));
  }, "\"targets\" must hold i64 or i32 token ids");
  expect_error("missing idx", [&](Tensors& ts, serialize::Metadata&) { drop(ts, "idx"); }, "missing tensor \"idx\"");
  // -1 marks a target the loss ignores; an idx of -1, or a target below it, is no token.
  expect_error("idx -1", [&](Tensors& ts, serialize::Metadata&) {
    replace(ts, "idx", Tensor::full({2, 8}, -1, DType::i64));
  }, "idx holds token id -1 (ids must be >= 0)");
  expect_error("target -2", [&](Tensors& ts, serialize::Metadata&) {
    replace(ts, "targets", Tensor::full({2, 8}, -2, DType::i64));
  }, "targets holds token id -2 (ids must be >= -1; -1 marks a position to ignore)");
  expect_error("config without n_head", [&](Tensors&, serialize::Metadata& meta) {
    meta["case"] = R"({"kind": "gpt", "config": {"vocab_size": 64, "block_size": 16, "n_layer": 2, "n_embd": 32}})";
  }, "missing field \"n_head\"");
  expect_error("no config", [&](Tensors&, serialize::Metadata& meta) { meta["case"] = R"({"kind": "gpt"})"; },
               "no \"config\"");
}

TEST_CASE("gpt golden: every target -1 gives a NaN loss and zero gradients, as PyTorch's cross_entropy") {
  // The mean over no targets is 0 / 0; the ignored positions pass no gradient back (PyTorch 1.13:
  // F.cross_entropy(x, full(-1), ignore_index=-1) is nan and x.grad is zeros). Through `lathe ref`.
  TempDir dir;
  serialize::SafetensorsFile c = serialize::read_safetensors(kGolden + "/gpt_tiny.case.safetensors");
  for (auto& [name, t] : c.tensors)
    if (name == "targets") t = Tensor::full(t.shape(), -1, DType::i64);
  const std::string case_path = dir.file("all_ignored.case.safetensors"), out = dir.file("all_ignored.out.safetensors");
  serialize::write_safetensors(case_path, c.tensors, c.metadata);
  for (const char* device : {"cpu", "sim"}) {
    INFO("device ", device);
    std::string output;
    REQUIRE_MESSAGE(run_ref(case_path, out, device, output) == 0, output);
    const serialize::SafetensorsFile got = serialize::read_safetensors(out);
    CHECK(std::isnan(got.at("loss").item()));
    int grads = 0;
    for (const auto& [name, t] : got.tensors) {
      if (name.rfind("grad.", 0) != 0) continue;
      ++grads;
      INFO(name);
      CHECK(core_test::same_bits(t, Tensor::zeros(t.shape(), t.dtype())));
    }
    CHECK(grads == 29);  // every parameter of the 2-layer config, and lm_head.weight
  }
}
