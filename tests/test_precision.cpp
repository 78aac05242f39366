// Mixed precision (nn/precision.h): the policy table, 16-bit forward and backward against f32,
// fp16's loss scaler in `lathe train` (skipped steps in the metrics), bitwise resume of bf16 and
// fp16 runs with fused AdamW in a new process on cpu and sim, a restore onto the other device
// with a fresh run's transfers, the "precision" of the train reference case, and bad input.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "core/autograd.h"
#include "core/ops.h"
#include "core/storage.h"
#include "nn/gpt.h"
#include "nn/precision.h"
#include "serialize/checksum.h"
#include "serialize/safetensors.h"
#include "tests/temp_dir.h"
#include "tests/test_helpers.h"
#include "train/run_checkpoints.h"
#include "train/trainer.h"

using namespace lathe;
using lathe::testing::TempDir;
using lathe::testing::error_of;
using lathe::testing::read_jsonl;
using lathe::testing::run_lathe;
namespace fs = std::filesystem;

namespace {

const std::string kGolden = LATHE_GOLDEN_DIR;

nn::GPTConfig small_config() {
  nn::GPTConfig c;
  c.vocab_size = 64;
  c.block_size = 16;
  c.n_layer = 2;
  c.n_head = 2;
  c.n_embd = 32;
  return c;
}

// ||a - b|| / ||b|| over all elements (both f32).
double rel_diff(const Tensor& a, const Tensor& b) {
  const auto x = a.to(Device::cpu()).to_vector<double>(), y = b.to(Device::cpu()).to_vector<double>();
  double num = 0, den = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    num += (x[i] - y[i]) * (x[i] - y[i]);
    den += y[i] * y[i];
  }
  return std::sqrt(num / std::max(den, 1e-30));
}

// The run directory inputs of the resume tests (the model and corpus of tests/test_resume.cpp).
struct RunInputs {
  std::string data, config;
};

RunInputs write_inputs(const TempDir& d) {
  std::ofstream(d.path / "model.json")
      << R"({"vocab_size": 256, "block_size": 16, "n_layer": 1, "n_head": 2, "n_embd": 32, "dropout": 0.1, "batch": 4})";
  std::ofstream text(d.path / "corpus.txt");
  for (int i = 0; i < 60; ++i) text << "the quick brown fox " << i << " jumps over the lazy dog. ";
  return {(d.path / "corpus.txt").string(), (d.path / "model.json").string()};
}

train::TrainOptions run_options(const TempDir& d, const std::string& precision, const std::string& device) {
  const RunInputs in = write_inputs(d);
  train::TrainOptions o;
  o.data = in.data;
  o.config = in.config;
  o.device = device;
  o.precision = precision;
  o.fused = true;
  o.lr = 3e-3;
  o.steps = 12;
  o.warmup = 3;
  o.eval_interval = 4;
  o.eval_iters = 2;
  o.ckpt_interval = 4;
  o.keep_last = 10;
  o.sample_tokens = 0;
  o.threads = 1;
  o.quiet = true;
  o.init_scale = 1 << 20;
  o.scale_growth_interval = 3;
  o.out = (d.path / "full").string();
  return o;
}

std::map<std::string, std::string> tensor_sums(const std::string& path) {
  std::map<std::string, std::string> out;
  for (const auto& [name, t] : serialize::read_safetensors(path).tensors) out[name] = serialize::tensor_checksum(t);
  return out;
}

}  // namespace

TEST_CASE("precision: names parse, an unknown one is one error naming the option") {
  CHECK(nn::parse_precision("f32") == nn::Precision::f32);
  CHECK(nn::parse_precision("bf16") == nn::Precision::bf16);
  CHECK(nn::parse_precision("fp16") == nn::Precision::fp16);
  for (auto p : {nn::Precision::f32, nn::Precision::bf16, nn::Precision::fp16})
    CHECK(nn::parse_precision(nn::precision_name(p)) == p);
  const std::string err = error_of([] { nn::parse_precision("fp8", "--precision"); });
  CHECK(err.find("--precision") != std::string::npos);
  CHECK(err.find("fp8") != std::string::npos);
  CHECK(err.find("bf16") != std::string::npos);
  CHECK(error_of([] { nn::parse_precision("F32"); }) != "");
  CHECK(nn::needs_loss_scaling(nn::Precision::fp16));
  CHECK_FALSE(nn::needs_loss_scaling(nn::Precision::bf16));
}

TEST_CASE("precision: the policy table gives each op class its dtype") {
  using nn::OpClass;
  const OpClass all[] = {OpClass::matmul,   OpClass::activation, OpClass::softmax, OpClass::layer_norm,
                         OpClass::residual, OpClass::embedding,  OpClass::loss};
  for (OpClass c : all) CHECK(nn::PrecisionPolicy(nn::Precision::f32).dtype(c) == DType::f32);
  for (auto [p, low] : {std::pair{nn::Precision::bf16, DType::bf16}, std::pair{nn::Precision::fp16, DType::f16}}) {
    const nn::PrecisionPolicy policy(p);
    INFO(nn::precision_name(p));
    for (OpClass c : {OpClass::matmul, OpClass::activation, OpClass::layer_norm})
      CHECK_MESSAGE(policy.dtype(c) == low, nn::op_class_name(c));
    for (OpClass c : {OpClass::softmax, OpClass::residual, OpClass::embedding})
      CHECK_MESSAGE(policy.dtype(c) == DType::f32, nn::op_class_name(c));
    // bf16's logits go to the fused classifier as they are; fp16's unscaled gradient would underflow.
    CHECK(policy.dtype(OpClass::loss) == (p == nn::Precision::bf16 ? DType::bf16 : DType::f32));
    // An op that writes its own dtype (LayerNorm) writes the table's; under f32, its input's.
    CHECK(policy.output_dtype(OpClass::layer_norm, DType::f32) == low);
    CHECK(nn::PrecisionPolicy().output_dtype(OpClass::layer_norm, DType::f64) == DType::f64);
    // cast: to the class's dtype, the same tensor when it already is, an undefined one passes.
    Tensor x = Tensor::ones({2, 2});
    CHECK(policy.cast(OpClass::matmul, x).dtype() == low);
    CHECK(policy.cast(OpClass::softmax, x).id() == x.id());
    CHECK_FALSE(policy.cast(OpClass::matmul, Tensor()).defined());
  }
}

TEST_CASE("precision: bf16 and fp16 forward and backward give f32 gradients close to f32's") {
  for (const Device device : {Device::cpu(), Device::parse("sim")}) {
    nn::GPT ref(small_config(), 7, device);
    Tensor idx = Tensor::randint(0, 64, {2, 16}, 1, 0, DType::i64, device);
    Tensor tgt = Tensor::randint(0, 64, {2, 16}, 2, 0, DType::i64, device);
    nn::GPTOutput r = ref.forward(idx, tgt);
    r.loss.backward();
    for (auto [p, tol] : {std::pair{nn::Precision::bf16, 0.05}, std::pair{nn::Precision::fp16, 0.01}}) {
      INFO(nn::precision_name(p), " on ", device.str());
      nn::GPT m(small_config(), 7, device);
      m.set_precision(p);
      CHECK(m.precision() == p);
      nn::GPTOutput out = m.forward(idx, tgt);
      // The loss class: the fused classifier reads bf16 logits as they are, fp16's in f32.
      CHECK(out.logits.dtype() == m.precision_policy().dtype(nn::OpClass::loss));
      CHECK(out.loss.dtype() == DType::f32);
      CHECK(std::abs(out.loss.item() - r.loss.item()) < 0.02);
      // The training forward (the logits handed to the classifier) gives the same loss, to the bit.
      CHECK(m.loss(idx, tgt).item() == out.loss.item());
      CHECK(rel_diff(out.logits, r.logits) < tol);
      out.loss.backward();
      const auto a = m.named_parameters(), b = ref.named_parameters();
      for (size_t i = 0; i < a.size(); ++i) {
        INFO(a[i].first);
        CHECK(a[i].second.dtype() == DType::f32);  // master weights
        REQUIRE(a[i].second.grad().defined());
        CHECK(a[i].second.grad().dtype() == DType::f32);
        CHECK(rel_diff(a[i].second.grad(), b[i].second.grad()) < 4 * tol);
      }
    }
  }
}

TEST_CASE("precision: the modern block in bf16 and fp16 gives f32 gradients close to f32's") {
  // The speedrun combination (RoPE, RMSNorm without weights, ReLU^2, QK-norm, untied head, soft
  // cap), and SwiGLU with weighted RMSNorm: every new op in 16 bits, forward and backward.
  nn::GPTConfig speedrun = small_config();
  speedrun.bias = false;
  speedrun.rope = true;
  speedrun.norm = nn::NormKind::rms_norm;
  speedrun.norm_weight = false;
  speedrun.activation = nn::Activation::squared_relu;
  speedrun.qk_norm = true;
  speedrun.tie_embeddings = false;
  speedrun.logit_softcap = 30.0;
  nn::GPTConfig swiglu = small_config();
  swiglu.norm = nn::NormKind::rms_norm;
  swiglu.activation = nn::Activation::swiglu;
  for (const nn::GPTConfig& config : {speedrun, swiglu}) {
    for (const Device device : {Device::cpu(), Device::parse("sim")}) {
      nn::GPT ref(config, 7, device);
      Tensor idx = Tensor::randint(0, 64, {2, 16}, 1, 0, DType::i64, device);
      Tensor tgt = Tensor::randint(0, 64, {2, 16}, 2, 0, DType::i64, device);
      nn::GPTOutput r = ref.forward(idx, tgt);
      r.loss.backward();
      for (auto [p, tol] : {std::pair{nn::Precision::bf16, 0.05}, std::pair{nn::Precision::fp16, 0.01}}) {
        INFO(config.to_json().dump(), " in ", nn::precision_name(p), " on ", device.str());
        nn::GPT m(config, 7, device);
        m.set_precision(p);
        nn::GPTOutput out = m.forward(idx, tgt);
        // Soft-capped or not, the logits are in the loss class: bf16 into the classifier, fp16's f32.
        CHECK(out.logits.dtype() == m.precision_policy().dtype(nn::OpClass::loss));
        CHECK(std::abs(out.loss.item() - r.loss.item()) < 0.02);
        // The training forward (the logits handed to the classifier) gives the same loss, to the bit.
        CHECK(m.loss(idx, tgt).item() == out.loss.item());
        CHECK(rel_diff(out.logits, r.logits) < tol);
        out.loss.backward();
        const auto a = m.named_parameters(), b = ref.named_parameters();
        for (size_t i = 0; i < a.size(); ++i) {
          INFO(a[i].first);
          REQUIRE(a[i].second.grad().defined());
          CHECK(a[i].second.grad().dtype() == DType::f32);
          CHECK(rel_diff(a[i].second.grad(), b[i].second.grad()) < 4 * tol);
        }
      }
    }
    // Generation in 16 bits: rotary embeddings at the cache's positions, the same tokens.
    nn::GPT m(config, 3);
    m.set_precision(nn::Precision::bf16);
    Tensor idx = Tensor::randint(0, 64, {1, 3}, 5, 0, DType::i64);
    CHECK(m.generate(idx, 20, 0.0, 0, 1, true).to_vector<int64_t>() ==
          m.generate(idx, 20, 0.0, 0, 1, false).to_vector<int64_t>());
  }
}

TEST_CASE("precision: generation with a KV cache runs in 16 bits and matches the uncached path") {
  nn::GPT m(small_config(), 3);
  m.set_precision(nn::Precision::bf16);
  Tensor idx = Tensor::randint(0, 64, {1, 3}, 5, 0, DType::i64);
  Tensor a = m.generate(idx, 8, 0.0, 0, 1, true), b = m.generate(idx, 8, 0.0, 0, 1, false);
  CHECK(a.to_vector<int64_t>() == b.to_vector<int64_t>());
}

TEST_CASE("precision: fp16 from an absurd initial scale skips steps, backs off, and still learns") {
  TempDir d("absurd");
  const RunInputs in = write_inputs(d);
  const fs::path out = d.path / "run";
  const auto r = run_lathe("train --precision fp16 --init-scale 1099511627776 --steps 60 --warmup 5 --lr 3e-3 "
                           "--threads 1 --sample-tokens 0 --eval-interval 0 --eval-iters 2 --data '" + in.data +
                           "' --config '" + in.config + "' --out '" + out.string() + "'");
  REQUIRE_MESSAGE(r.code == 0, r.output);
  CHECK(r.output.find("| scale ") != std::string::npos);
  CHECK(r.output.find("steps skipped") != std::string::npos);
  const auto m = read_jsonl(out / "metrics.jsonl");
  REQUIRE(m.size() == 60);
  // 2^40 overflows fp16's gradients: skipped, halving the scale each time, until they fit.
  int skipped = 0;
  double prev_scale = 0;
  for (const auto& rec : m) {
    const double scale = rec.at("scale").get<double>();
    if (rec.value("skipped", false)) {
      ++skipped;
      CHECK_FALSE(rec.contains("grad_norm"));
    }
    if (prev_scale > 0) CHECK(scale <= prev_scale);  // growth interval 2000: no growth in 60 steps
    prev_scale = scale;
  }
  CHECK(m.front().value("skipped", false));
  CHECK(m.front().at("scale").get<double>() == std::ldexp(1.0, 40));
  CHECK(skipped >= 10);  // fp16 overflows past 2^16: the scale must come down at least 2^24
  CHECK(skipped < 50);
  CHECK_FALSE(m.back().value("skipped", false));
  CHECK(m.back().at("scale").get<double>() == std::ldexp(1.0, 40 - skipped));
  CHECK(r.output.find("skipped " + std::to_string(skipped)) != std::string::npos);
  CHECK(m.back().at("loss").get<double>() < m.front().at("loss").get<double>() - 0.5);
}

TEST_CASE("precision: bf16 and fp16 runs with fused AdamW resume bitwise in a new process, on cpu and sim") {
  for (const char* device : {"cpu", "sim"}) {
    for (const char* precision : {"bf16", "fp16"}) {
      const std::string what = std::string(precision) + " on " + device;
      INFO(what);
      TempDir d(std::string("resume_") + precision + "_" + device);
      const RunInputs in = write_inputs(d);
      const fs::path full = d.path / "full", part = d.path / "part";
      // fp16: a scale that overflows at first and grows every 7 good steps, so that the scaler's
      // scale and growth tracker at step 20 both matter to the steps after it.
      const std::string args = std::string("train --quiet --fused --precision ") + precision + " --device " + device +
                               " --init-scale 1048576 --scale-growth-interval 7 --steps 40 --warmup 5 --lr 3e-3 "
                               "--threads 1 --sample-tokens 0 --eval-interval 10 --eval-iters 2 --ckpt-interval 20 "
                               "--data '" + in.data + "' --config '" + in.config + "'";
      const auto r = run_lathe(args + " --out '" + full.string() + "'");
      REQUIRE_MESSAGE(r.code == 0, r.output);
      fs::create_directories(part);
      fs::copy_file(train::checkpoint_path(full.string(), 20), train::checkpoint_path(part.string(), 20));
      {
        std::ifstream src(full / "metrics.jsonl");
        std::ofstream dst(part / "metrics.jsonl");
        std::string line;
        for (int i = 0; i < 20 && std::getline(src, line); ++i) dst << line << "\n";
      }
      const auto r2 = run_lathe("train --quiet --resume '" + part.string() + "'");
      REQUIRE_MESSAGE(r2.code == 0, r2.output);

      const auto a = read_jsonl(full / "metrics.jsonl"), b = read_jsonl(part / "metrics.jsonl");
      REQUIRE(a.size() == 40);
      REQUIRE(b.size() == 40);
      int skipped = 0;
      for (size_t i = 0; i < a.size(); ++i) {
        INFO("step ", i + 1);
        CHECK(a[i]["loss"].get<double>() == b[i]["loss"].get<double>());
        CHECK(a[i]["lr"].get<double>() == b[i]["lr"].get<double>());
        CHECK(a[i].value("val_loss", -1.0) == b[i].value("val_loss", -1.0));
        CHECK(a[i].value("scale", -1.0) == b[i].value("scale", -1.0));
        CHECK(a[i].value("skipped", false) == b[i].value("skipped", false));
        skipped += a[i].value("skipped", false) ? 1 : 0;
      }
      if (std::string(precision) == "fp16") {
        CHECK(skipped > 0);
        CHECK(a.back()["scale"].get<double>() != a.front()["scale"].get<double>());
      } else {
        CHECK_FALSE(a.front().contains("scale"));  // bf16 has no scaler
      }
      const auto want = tensor_sums(train::checkpoint_path(full.string(), 40));
      CHECK(want == tensor_sums(train::checkpoint_path(part.string(), 40)));
      CHECK(want.count("scaler.scale") == (std::string(precision) == "fp16" ? 1u : 0u));
      CHECK(tensor_sums((full / "model.safetensors").string()) == tensor_sums((part / "model.safetensors").string()));

      // The checkpoint names the precision; resuming it in another one is refused by name.
      const auto r3 = run_lathe("train --quiet --resume '" + part.string() + "' --steps 41 --precision f32");
      CHECK(r3.code == 2);
      CHECK(r3.output.find("precision") != std::string::npos);
      CHECK(r3.output.find(precision) != std::string::npos);
    }
  }
}

TEST_CASE("precision: a 16-bit checkpoint restores onto the other device and steps with a fresh run's transfers") {
  for (const char* precision : {"bf16", "fp16"}) {
    for (auto [from, to] : {std::pair{"cpu", "sim"}, std::pair{"sim", "cpu"}}) {
      const std::string what = std::string(precision) + ": " + from + " -> " + to;
      INFO(what);
      TempDir d(std::string("cross_") + precision + "_" + from);
      train::TrainOptions o = run_options(d, precision, from);
      train::Trainer(o).run(nullptr);
      const fs::path full = o.out, part = d.path / "part";
      fs::create_directories(part);
      fs::copy_file(train::checkpoint_path(full.string(), 8), train::checkpoint_path(part.string(), 8));

      train::TrainOptions given;
      given.device = to;
      given.quiet = true;
      given.out = part.string();
      train::Trainer resumed = train::Trainer::resume(part.string(), given, {"device", "out"});
      CHECK(resumed.device() == Device::parse(to));
      CHECK((resumed.state().scaler != nullptr) == (std::string(precision) == "fp16"));
      for (const auto& e : resumed.state().optimizer->state_entries())
        if (e.tensor.numel() > 1) CHECK(e.tensor.device() == Device::parse(to));
      reset_transfer_stats();
      const bool resumed_skipped = resumed.train_step().skipped;
      const TransferStats got = transfer_stats();

      // A fresh run on the target: the transfers of a step after the first that, like the resumed
      // one, stepped or was skipped (a skipped step reads no gradient norm).
      train::TrainOptions fresh_o = run_options(d, precision, to);
      fresh_o.out = (d.path / "fresh").string();
      train::Trainer fresh(fresh_o);
      fresh.train_step();
      TransferStats fresh_step;
      bool found = false;
      for (int i = 0; i < 10 && !found; ++i) {
        reset_transfer_stats();
        found = fresh.train_step().skipped == resumed_skipped;
        fresh_step = transfer_stats();
      }
      REQUIRE(found);
      CHECK_MESSAGE(got == fresh_step, "resumed h2d ", got.host_to_device, " d2h ", got.device_to_host, " syncs ",
                    got.syncs, " bytes ", got.bytes, "; fresh h2d ", fresh_step.host_to_device, " d2h ",
                    fresh_step.device_to_host, " syncs ", fresh_step.syncs, " bytes ", fresh_step.bytes);
      // The rest of the run, from the checkpoint: sim runs the cpu's kernels, so the same bits.
      train::Trainer::resume(part.string(), given, {"device", "out"}).run(nullptr);
      CHECK(tensor_sums(train::checkpoint_path(full.string(), 12)) == tensor_sums(train::checkpoint_path(part.string(), 12)));
    }
  }
}

TEST_CASE("precision: the train reference case takes \"precision\"") {
  TempDir dir;
  auto c = serialize::read_safetensors(kGolden + "/train_tiny.case.safetensors");
  const auto f32_result = serialize::read_safetensors(kGolden + "/train_tiny.expected.safetensors");
  const auto base = nlohmann::json::parse(c.metadata.at("case"));
  // bf16; fp16 with the default scaler (no overflow here); fp16 from 1e12, whose first steps overflow.
  for (const char* variant : {"bf16", "fp16", "fp16_absurd"}) {
    const std::string what = variant;
    INFO(what);
    const bool absurd = what == "fp16_absurd";
    const std::string precision = absurd ? "fp16" : what;
    auto spec = base;
    spec["precision"] = precision;
    if (absurd) spec["scaler"] = {{"init_scale", 1e12}, {"growth_interval", 2}};
    const std::string case_path = dir.file(what + ".case.safetensors");
    serialize::write_safetensors(case_path, c.tensors, serialize::Metadata{{"case", spec.dump()}});
    const std::string out = dir.file(what + ".safetensors");
    const auto r = run_lathe("ref '" + case_path + "' '" + out + "' --device cpu");
    REQUIRE_MESSAGE(r.code == 0, r.output);
    const auto got = serialize::read_safetensors(out);
    const auto losses = got.at("losses").to_vector<double>(), want = f32_result.at("losses").to_vector<double>();
    REQUIRE(losses.size() == want.size());
    // Before any update the loss is the f32 loss up to 16-bit rounding; a skipped update departs.
    for (size_t i = 0; i < (absurd ? 1 : losses.size()); ++i) {
      INFO("step ", i, ": ", losses[i], " vs f32 ", want[i]);
      CHECK(std::abs(losses[i] - want[i]) < 0.02);
    }
    if (precision == "fp16") {
      const auto skipped = got.at("skipped").to_vector<int64_t>();
      CHECK(skipped.front() == (absurd ? 1 : 0));
      REQUIRE(got.find("scaler.scale") != nullptr);
      if (absurd) CHECK(got.at("scaler.scale").item() < 1e12);
      else CHECK(got.at("scaler.scale").item() == 65536.0);
    } else {
      CHECK(got.find("skipped") == nullptr);
    }
  }
  // Bad precision and a scaler without fp16: one error each, nothing written.
  for (auto [key, value, needle] : {std::tuple{"precision", nlohmann::json("fp8"), "fp8"},
                                    std::tuple{"precision", nlohmann::json(16), "precision"}}) {
    auto spec = base;
    spec[key] = value;
    const std::string case_path = dir.file("bad.case.safetensors"), out = dir.file("bad.safetensors");
    serialize::write_safetensors(case_path, c.tensors, serialize::Metadata{{"case", spec.dump()}});
    const auto r = run_lathe("ref '" + case_path + "' '" + out + "' --device cpu");
    CHECK(r.code != 0);
    CHECK(r.output.find(needle) != std::string::npos);
    CHECK_FALSE(fs::exists(out));
  }
  auto spec = base;
  spec["precision"] = "bf16";
  spec["scaler"] = {{"init_scale", 2.0}};
  const std::string case_path = dir.file("bad2.case.safetensors"), out = dir.file("bad2.safetensors");
  serialize::write_safetensors(case_path, c.tensors, serialize::Metadata{{"case", spec.dump()}});
  const auto r = run_lathe("ref '" + case_path + "' '" + out + "' --device cpu");
  CHECK(r.code != 0);
  CHECK(r.output.find("fp16") != std::string::npos);
}

TEST_CASE("precision: bad --precision is one usage error in train, bench and sample") {
  TempDir d("bad");
  const RunInputs in = write_inputs(d);
  for (const std::string& cmd :
       {std::string("train --steps 1 --data '") + in.data + "' --config '" + in.config + "' --out '" + d.file("o") + "'",
        std::string("bench --config tiny --steps 1 --warmup 0"),
        std::string("sample --checkpoint '") + d.file("nowhere.safetensors") + "'"}) {
    INFO(cmd);
    const auto r = run_lathe(cmd + " --precision fp8");
    CHECK(r.code == 2);
    CHECK(r.output.find("--precision") != std::string::npos);
    CHECK(r.output.find("fp8") != std::string::npos);
  }
  const auto r = run_lathe(std::string("train --steps 1 --fused --optimizer sgd --data '") + in.data + "' --config '" +
                           in.config + "' --out '" + d.file("o2") + "'");
  CHECK(r.code == 2);
  CHECK(r.output.find("fused") != std::string::npos);
}

// A two-step run in a directory of its own for the flag tests below: the options every command
// gives it (data, config, out; no sample, one validation batch) and what its newest checkpoint holds.
struct FlagRun {
  TempDir dir;
  RunInputs in;
  fs::path out;
  std::string common;
  explicit FlagRun(const char* name)
      : dir(name),
        in(write_inputs(dir)),
        out(dir.path / "run"),
        common("--threads 1 --sample-tokens 0 --eval-interval 0 --eval-iters 1 --data '" + in.data + "' --config '" +
               in.config + "' --out '" + out.string() + "'") {}
  train::TrainOptions stored() const {
    train::TrainOptions given;
    given.quiet = true;
    return train::Trainer::resume(out.string(), given, {}).options();
  }
};

TEST_CASE("precision: --tf32 is off by default, noted and ignored on the cpu, kept in the run's options, and a resume may change it") {
  const FlagRun run("tf32");
  const auto r = run_lathe("train --quiet --steps 2 " + run.common);
  REQUIRE_MESSAGE(r.code == 0, r.output);
  CHECK(r.output.find("tf32") == std::string::npos);
  CHECK_FALSE(run.stored().tf32);
  // A resume may turn it on (it changes how a GPU rounds f32 products, as a new --device does); the
  // cpu notes that it ignores it, and the next checkpoint records it.
  const auto r2 = run_lathe("train --quiet --resume '" + run.out.string() + "' --steps 3 --tf32");
  REQUIRE_MESSAGE(r2.code == 0, r2.output);
  CHECK(r2.output.find("lathe: note: --tf32 is for f32 products on cuda; the cpu device ignores it") != std::string::npos);
  CHECK(run.stored().tf32);
  const auto b = run_lathe("bench --config tiny --steps 1 --warmup 0 --threads 1 --tf32 --json");
  REQUIRE_MESSAGE(b.code == 0, b.output);
  CHECK(b.output.find("\"tf32\":true") != std::string::npos);
}

TEST_CASE("precision: --attention-backward is split by default, kept in the run's options, a resume may change it, and a wrong name is refused") {
  const FlagRun run("attention_backward");
  const auto r = run_lathe("train --quiet --steps 2 " + run.common);
  REQUIRE_MESSAGE(r.code == 0, r.output);
  CHECK(run.stored().attention_backward == "split");
  // A resume may change it (it changes the order of a GPU's sums, as a new --device does).
  const auto r2 = run_lathe("train --quiet --resume '" + run.out.string() + "' --steps 3 --attention-backward atomic");
  REQUIRE_MESSAGE(r2.code == 0, r2.output);
  CHECK(run.stored().attention_backward == "atomic");
  set_attention_backward(AttentionBackward::split);  // stored() resumed in this process, which set it
  // A wrong name: refused before anything runs, by the command line and by a checkpoint's options.
  const auto bad = run_lathe("train --quiet --steps 2 --attention-backward atomics " + run.common);
  CHECK(bad.code != 0);
  CHECK_MESSAGE(bad.output.find("--attention-backward") != std::string::npos, bad.output);
  CHECK_THROWS_WITH_AS(parse_attention_backward("atomics"),
                       doctest::Contains("the attention backward 'atomics' is not one of split"), Error);
  const auto b = run_lathe("bench --config tiny --steps 1 --warmup 0 --threads 1 --attention-backward atomic --json");
  REQUIRE_MESSAGE(b.code == 0, b.output);
  CHECK(b.output.find("\"attention_backward\":\"atomic\"") != std::string::npos);
}
