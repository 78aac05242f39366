// `lathe ref` kind "train" against nanoGPT's loop on the reference GPT (golden train_tiny from
// tests/golden/make_optim_goldens.py: AdamW with decay / no-decay groups, grad_clip 1.0, 4 steps),
// and kind "optim" through the program, on cpu and sim. Malformed cases write nothing.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <nlohmann/json.hpp>
#include <sys/wait.h>

#include "serialize/safetensors.h"
#include "tests/temp_dir.h"
#include "tests/test_helpers.h"

#include "tests/core_test_util.h"

using namespace lathe;
using lathe::testing::TempDir;
namespace fs = std::filesystem;

namespace {

const std::string kGolden = LATHE_GOLDEN_DIR;

// Runs `lathe ref`; returns its exit status and fills `output` with what it printed.
int run_ref(const std::string& case_path, const std::string& out_path, const std::string& device, std::string& output) {
  const lathe::testing::Run r = lathe::testing::run_lathe("ref '" + case_path + "' '" + out_path + "' --device " + device);
  output = r.output;
  return r.code;
}

void check_all_close(const serialize::SafetensorsFile& got, const serialize::SafetensorsFile& want, double rtol,
                     double atol) {
  CHECK(got.tensors.size() == want.tensors.size());
  for (const auto& [name, e] : want.tensors) {
    const Tensor* g = got.find(name);
    REQUIRE_MESSAGE(g != nullptr, "tensor ", name, " missing");
    const std::string diff = core_test::compare(*g, e, rtol, atol);
    CHECK_MESSAGE(diff.empty(), "tensor ", name, ": ", diff);
  }
}

}  // namespace

TEST_CASE("optim train golden: lathe ref kind train follows nanoGPT's loop") {
  TempDir dir;
  for (const char* device : {"cpu", "sim"}) {
    INFO("device ", device);
    std::string output;
    const std::string out = dir.file(std::string("train_") + device + ".safetensors");
    REQUIRE(run_ref(kGolden + "/train_tiny.case.safetensors", out, device, output) == 0);
    // Key biases get (analytically) zero gradients, so Adam's step there follows rounding noise:
    // an absolute tolerance of a few lr-sized steps' worth of 1e-3 covers it.
    check_all_close(serialize::read_safetensors(out), serialize::read_safetensors(kGolden + "/train_tiny.expected.safetensors"),
                    1e-3, 2e-5);
  }
}

TEST_CASE("optim train golden: targets of -1 are left out of the loss, as nanoGPT's ignore_index") {
  // train_ignore: step 0 with a quarter of the targets -1, step 1 with a row all -1, step 2 with
  // every target -1, whose loss is NaN and whose gradients are zero (AdamW only decays).
  TempDir dir;
  for (const char* device : {"cpu", "sim"}) {
    INFO("device ", device);
    std::string output;
    const std::string out = dir.file(std::string("ignore_") + device + ".safetensors");
    REQUIRE_MESSAGE(run_ref(kGolden + "/train_ignore.case.safetensors", out, device, output) == 0, output);
    const auto got = serialize::read_safetensors(out);
    // The tolerances of train_tiny, for the same reason.
    check_all_close(got, serialize::read_safetensors(kGolden + "/train_ignore.expected.safetensors"), 1e-3, 2e-5);
    CHECK(std::isnan(got.at("losses").to_vector<double>().at(2)));
  }
}

TEST_CASE("optim ref: lathe ref kind optim writes the expected result") {
  TempDir dir;
  for (const char* name : {"adamw", "prodigy"}) {
    INFO("case ", name);
    std::string output;
    const std::string out = dir.file(std::string(name) + ".safetensors");
    REQUIRE(run_ref(kGolden + "/optim_" + name + ".case.safetensors", out, "cpu", output) == 0);
    auto got = serialize::read_safetensors(out);
    check_all_close(got, serialize::read_safetensors(kGolden + "/optim_" + name + ".expected.safetensors"), 1e-3, 1e-8);
    CHECK(got.metadata.count("result"));
  }
}

TEST_CASE("optim train: malformed train cases are errors and write nothing") {
  TempDir dir;
  // A case whose optimizer is unknown: rewrite the golden's document.
  auto c = serialize::read_safetensors(kGolden + "/train_tiny.case.safetensors");
  auto spec = nlohmann::json::parse(c.metadata.at("case"));
  spec["optimizer"]["name"] = "lion";
  const std::string bad = dir.file("bad.safetensors");
  serialize::write_safetensors(bad, c.tensors, serialize::Metadata{{"case", spec.dump()}});
  std::string output;
  const std::string out = dir.file("out.safetensors");
  CHECK(run_ref(bad, out, "cpu", output) != 0);
  CHECK(output.find("lion") != std::string::npos);
  CHECK_FALSE(fs::exists(out));
  spec["optimizer"]["name"] = "adamw";
  spec["steps"] = 5;  // idx.4 missing
  serialize::write_safetensors(bad, c.tensors, serialize::Metadata{{"case", spec.dump()}});
  CHECK(run_ref(bad, out, "cpu", output) != 0);
  CHECK(output.find("idx.4") != std::string::npos);
  CHECK_FALSE(fs::exists(out));
}
