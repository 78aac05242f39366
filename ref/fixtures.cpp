#include "ref/fixtures.h"

#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <vector>

#include "core/error.h"
#include "core/ops.h"
#include "core/random.h"
#include "nn/gpt.h"
#include "ref/case_registry.h"
#include "ref/op_registry.h"
#include "ref/op_samples.h"
#include "ref/result_check.h"
#include "serialize/atomic_file.h"
#include "serialize/safetensors.h"

namespace lathe::ref {

namespace {

namespace fs = std::filesystem;
using Tensors = std::vector<std::pair<std::string, Tensor>>;

// One case of the pack: its inputs and document, the tolerance another implementation compares
// lathe's answer at (negative: the dtype's default), and a line on what it covers.
struct Fixture {
  std::string name, kind, covers;
  Tensors tensors;
  nlohmann::json document;
  double rtol = -1, atol = -1;
};

class Pack {
 public:
  Pack(std::string dir, Device device) : dir_(std::move(dir)), device_(device) {}

  // Runs the case and writes its two files; returns lathe's answer.
  RefOutput add(const Fixture& f) {
    serialize::SafetensorsFile c;
    c.tensors = f.tensors;
    c.metadata["case"] = f.document.dump();
    c.path = f.name + ".case.safetensors";
    RefOutput out = run_reference_case(c, device_);
    serialize::write_safetensors((fs::path(dir_) / c.path).string(), c.tensors, c.metadata);
    serialize::Metadata meta;
    if (!out.result.is_null()) meta["result"] = out.result.dump();
    serialize::write_safetensors((fs::path(dir_) / (f.name + ".expected.safetensors")).string(), out.tensors, meta);
    nlohmann::json entry = {{"name", f.name},
                            {"kind", f.kind},
                            {"covers", f.covers},
                            {"case", f.name + ".case.safetensors"},
                            {"expected", f.name + ".expected.safetensors"}};
    if (f.rtol >= 0) entry["tolerance"] = {{"rtol", f.rtol}, {"atol", f.atol}};
    else entry["tolerance"] = "the dtype's default";
    manifest_.push_back(entry);
    return out;
  }

  int64_t size() const { return int64_t(manifest_.size()); }
  const nlohmann::json& manifest() const { return manifest_; }

 private:
  std::string dir_;
  Device device_;
  nlohmann::json manifest_ = nlohmann::json::array();
};

Tensor find_tensor(const RefOutput& out, const std::string& name) {
  for (const auto& [n, t] : out.tensors)
    if (n == name) return t;
  LATHE_FAIL("fixtures: lathe's answer has no tensor \"", name, "\"");
}

// Every op of the reference kind in every dtype: each sample of its registry entry marked as a
// fixture (ref/op_registry.cpp), as the bundle PyTorch answers holds it (op_samples.cpp).
void add_op_fixtures(Pack& pack) {
  for (const OpEntry& op : op_registry()) {
    if (!op.in_ref_kind) continue;
    for (const OpSample& sample : op.samples) {
      if (sample.use != SampleUse::fixture) continue;
      const std::string name = std::string(op.name) + (sample.label.empty() ? "" : "_" + sample.label);
      for (OpSampleCase& c : op_sample_cases(op, sample)) {
        const std::string dtype = dtype_name(c.dtype);
        Fixture fx;
        fx.name = "op_" + name + "_" + dtype;
        fx.kind = "op";
        fx.covers = std::string(op.name) + " " + sample.args.dump() + " in " + dtype + ", forward and backward";
        fx.document = c.document;
        fx.tensors = std::move(c.tensors);
        pack.add(fx);
      }
    }
  }
}

// The model of the GPT and training fixtures: two layers, 16 wide, a vocabulary of 32.
nn::GPTConfig fixture_config() {
  nn::GPTConfig c;
  c.vocab_size = 32;
  c.block_size = 8;
  c.n_layer = 2;
  c.n_head = 2;
  c.n_embd = 16;
  c.bias = true;
  return c;
}

// nanoGPT's initial weights under its names (the output projection is tied to wte, so left out).
Tensors fixture_weights(uint64_t seed) {
  nn::GPT model(fixture_config(), seed, Device::cpu());
  Tensors out;
  for (const auto& [name, p] : model.state_dict())
    if (name != "lm_head.weight") out.emplace_back(name, p.detach().clone());
  return out;
}

void add_gpt_fixture(Pack& pack) {
  Draw draw(7);
  Fixture f;
  f.name = "gpt_forward_backward";
  f.kind = "gpt";
  f.covers = "a 2-layer GPT (vocabulary 32, 16 wide): logits, loss and every weight's gradient";
  f.document = {{"kind", "gpt"}, {"config", fixture_config().to_json()}};
  f.tensors = fixture_weights(7);
  f.tensors.emplace_back("idx", draw.ids({2, 8}, 32));
  f.tensors.emplace_back("targets", draw.ids({2, 8}, 32));
  f.rtol = 1e-3;
  f.atol = 1e-5;
  pack.add(f);
}

// The step inputs idx.<t>, targets.<t> for t in [0, steps) of one fixed token stream from step
// `first` on, so that two cases can cut one run in two.
void add_steps(Fixture& f, int64_t first, int64_t steps) {
  for (int64_t t = 0; t < first + steps; ++t) {
    Draw draw(100 + uint64_t(t));
    Tensor idx = draw.ids({2, 8}, 32), targets = draw.ids({2, 8}, 32);
    if (t < first) continue;
    f.tensors.emplace_back("idx." + std::to_string(t - first), idx);
    f.tensors.emplace_back("targets." + std::to_string(t - first), targets);
  }
}

Fixture train_fixture(const std::string& name, const nlohmann::json& optimizer, int64_t first, int64_t steps) {
  Fixture f;
  f.name = name;
  f.kind = "train";
  f.document = {{"kind", "train"}, {"config", fixture_config().to_json()}, {"steps", steps},
                {"grad_clip", 1.0}, {"optimizer", optimizer}};
  f.tensors = fixture_weights(11);
  add_steps(f, first, steps);
  f.rtol = 1e-3;
  f.atol = 1e-5;
  return f;
}

void add_train_fixtures(Pack& pack) {
  const std::vector<std::pair<std::string, nlohmann::json>> optimizers = {
      {"sgd", {{"name", "sgd"}, {"lr", 0.1}, {"momentum", 0.9}, {"nesterov", true}, {"weight_decay", 0.01}}},
      {"adam", {{"name", "adam"}, {"lr", 0.01}, {"amsgrad", true}}},
      {"adamw", {{"name", "adamw"}, {"lr", 0.01}, {"betas", {0.9, 0.95}}, {"weight_decay", 0.1}}},
      {"prodigy", {{"name", "prodigy"}, {"lr", 1.0}, {"weight_decay", 0.1}}},
  };
  for (const auto& [name, opt] : optimizers) {
    Fixture f = train_fixture("train_" + name, opt, 0, 4);
    f.covers = "4 steps of nanoGPT's training loop with " + name + " over nanoGPT's parameter groups, gradients clipped at 1";
    pack.add(f);
  }

  // Muon beside AdamW, split as `lathe train --optimizer muon` splits a GPT (train/muon_groups.h).
  const nlohmann::json muon = {{"name", "muon"}, {"lr", 0.02}, {"adamw", {{"lr", 0.01}, {"betas", {0.9, 0.95}}}}};
  Fixture pair = train_fixture("train_muon", muon, 0, 4);
  pair.covers = "4 steps of Muon on the blocks' matrices beside AdamW on the rest (lathe train --optimizer muon), "
                "gradients clipped at 1";
  pack.add(pair);

  // Explicit groups: AdamW over every parameter with one weight decay, as
  // torch.optim.AdamW(model.parameters(), weight_decay=0.1), but the embeddings at half the rate.
  Fixture f = train_fixture("train_adamw_param_groups", {{"name", "adamw"}, {"lr", 0.01}, {"weight_decay", 0.1}}, 0, 4);
  nlohmann::json embeddings = {{"params", {"transformer.wte.weight", "transformer.wpe.weight"}}, {"lr", 0.005}};
  nlohmann::json rest = {{"params", nlohmann::json::array()}};
  for (const auto& [name, t] : fixture_weights(11))
    if (name != "transformer.wte.weight" && name != "transformer.wpe.weight") rest["params"].push_back(name);
  f.document["param_groups"] = {embeddings, rest};
  f.covers = "AdamW over explicit param_groups (every parameter decays; the embeddings at lr 0.005)";
  pack.add(f);

  // Mixed precision: the policy of nn/precision.h (products and GELU in 16 bits, each op computed
  // in f32 and rounded once; LayerNorm, softmax, residual stream and loss in f32; f32 master
  // weights), fp16 with the loss scaler from a scale its first steps overflow.
  const nlohmann::json adamw = {{"name", "adamw"}, {"lr", 0.01}, {"weight_decay", 0.1}};
  Fixture bf16 = train_fixture("train_adamw_bf16", adamw, 0, 4);
  bf16.document["precision"] = "bf16";
  bf16.covers = "4 AdamW steps under the bf16 mixed-precision policy";
  // Another implementation rounds its 16-bit products in another order: bf16's resolution (2^-8),
  // and an Adam step (lr) that a near-zero gradient may take the other way.
  bf16.rtol = 1.6e-2;
  bf16.atol = 2e-2;
  pack.add(bf16);
  Fixture fp16 = train_fixture("train_adamw_fp16_scaler", adamw, 0, 6);
  fp16.document["precision"] = "fp16";
  fp16.document["scaler"] = {{"init_scale", 1048576.0}, {"growth_interval", 2}};
  fp16.covers = "6 AdamW steps in fp16 with the loss scaler from 2^20: skipped steps (result \"skipped\"), the "
                "scale backing off and growing (scaler.scale, scaler.growth_tracker)";
  fp16.rtol = 2e-3;  // fp16's resolution (2^-10), and an Adam step that a near-zero gradient may flip
  fp16.atol = 2e-2;
  pack.add(fp16);
}

// A run of 6 AdamW steps, and the same run cut in two: the second half starts from the first
// half's weights and optimizer state (what a checkpoint holds) and must end bitwise where the
// whole run ends. `prefix` "resume_" is the f32 run; "resume_fp16_" the same in fp16 with the
// loss scaler, whose state (scaler.*) the cut carries too.
void add_resume_fixtures(Pack& pack, const std::string& prefix = "resume_", bool fp16 = false) {
  const nlohmann::json adamw = {{"name", "adamw"}, {"lr", 0.01}, {"weight_decay", 0.1}};
  auto make = [&](const std::string& name, int64_t first, int64_t steps) {
    Fixture f = train_fixture(name, adamw, first, steps);
    f.document["return_state"] = true;
    if (fp16) {
      f.document["precision"] = "fp16";
      f.document["scaler"] = {{"init_scale", 1048576.0}, {"growth_interval", 2}};
      f.rtol = 2e-3;
      f.atol = 2e-2;
    }
    return f;
  };
  const std::string what = fp16 ? "fp16 AdamW steps with the loss scaler" : "AdamW steps";
  Fixture whole = make(prefix + "whole", 0, 6);
  whole.covers = "6 " + what + ", the optimizer state returned: the run the two halves reproduce";
  const RefOutput whole_out = pack.add(whole);

  Fixture first = make(prefix + "first_half", 0, 3);
  first.covers = "steps 0-2 of " + prefix + "whole, returning weights and optimizer state (a checkpoint)";
  const RefOutput first_out = pack.add(first);

  Fixture second = make(prefix + "second_half", 3, 3);
  second.covers = "steps 3-5 from " + prefix + "first_half's weights, optimizer_state.*" +
                  (fp16 ? " and scaler.*" : "") + " tensors; ends bitwise as " + prefix + "whole";
  for (auto& [name, t] : second.tensors)
    if (name.rfind("transformer.", 0) == 0) t = find_tensor(first_out, name);
  for (const auto& [name, t] : first_out.tensors)
    if (name.rfind("optimizer_state.", 0) == 0 || name.rfind("scaler.", 0) == 0) second.tensors.emplace_back(name, t);
  const RefOutput second_out = pack.add(second);

  // The pack's promise, checked as it is written.
  for (const auto& [name, t] : whole_out.tensors) {
    if (name == "losses" || name == "skipped") continue;
    const Tensor got = find_tensor(second_out, name);
    CheckOptions exact;
    exact.tolerance = Tolerance{0, 0};
    serialize::SafetensorsFile a, b;
    a.tensors = {{name, got}};
    b.tensors = {{name, t}};
    LATHE_CHECK(check_results(a, b, exact).front().pass, "fixtures: the resumed run differs from the whole run in ",
                name);
  }
}

std::string readme(const nlohmann::json& manifest) {
  std::ostringstream os;
  os << "# lathe's reference fixtures\n\n"
        "Written by `lathe ref --write-fixtures DIR`. Each case is two safetensors files:\n\n"
        "- `<name>.case.safetensors`: the inputs, with the case document (JSON) in the metadata key `case`;\n"
        "- `<name>.expected.safetensors`: lathe's answer.\n\n"
        "The formats are lathe's reference cases (docs/reference-cases.md in lathe's repository): run your\n"
        "implementation on the case's inputs, write its answer under the same tensor names, and compare\n"
        "with `lathe ref --check YOURS <name>.expected.safetensors [--rtol R --atol A]`, or with any code\n"
        "that tests |got - want| <= atol + rtol * |want| element by element.\n\n"
        "`manifest.json` lists every case: its kind, what it covers, and the tolerance to compare at (for\n"
        "ops, the dtype's default of torch.testing.assert_close: f32 1.3e-6 / 1e-5, f64 1e-7 / 1e-7,\n"
        "bf16 1.6e-2 / 1e-5, f16 1e-3 / 1e-5). A 16-bit op case computes in f32 from the 16-bit inputs\n"
        "and rounds its output and gradients once.\n\n"
        "`resume_first_half` and `resume_second_half` cut `resume_whole` in two: the second half starts\n"
        "from the first half's weights and `optimizer_state.*` tensors, as a run restored from a checkpoint,\n"
        "and ends with bitwise the weights and optimizer state of the whole run.\n\n"
        "| case | kind | covers |\n| --- | --- | --- |\n";
  for (const auto& e : manifest)
    os << "| `" << e["name"].get<std::string>() << "` | " << e["kind"].get<std::string>() << " | "
       << e["covers"].get<std::string>() << " |\n";
  return os.str();
}

void write_text(const std::string& path, const std::string& text) {
  serialize::write_file_atomically(path, [&](serialize::AtomicFile& f) { f.write(text.data(), text.size()); });
}

// DIR may be new, empty, or an earlier pack: never a folder of other files.
void prepare_dir(const std::string& dir) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) {
    fs::create_directories(dir, ec);
    LATHE_CHECK(!ec, dir, ": cannot create the fixtures folder: ", ec.message());
    return;
  }
  LATHE_CHECK(fs::is_directory(dir, ec), dir, ": exists and is not a folder");
  const bool empty = fs::is_empty(dir, ec);
  LATHE_CHECK(empty || fs::exists(fs::path(dir) / "manifest.json"), dir,
              ": the folder is not empty and holds no fixtures pack (manifest.json); choose an empty or new folder");
}

}  // namespace

FixturesSummary write_fixtures(const std::string& dir, Device device) {
  prepare_dir(dir);
  Pack pack(dir, device);
  add_op_fixtures(pack);
  add_gpt_fixture(pack);
  add_train_fixtures(pack);
  add_resume_fixtures(pack);
  add_resume_fixtures(pack, "resume_fp16_", /*fp16=*/true);
  write_text((fs::path(dir) / "manifest.json").string(), pack.manifest().dump(2) + "\n");
  write_text((fs::path(dir) / "README.md").string(), readme(pack.manifest()));
  return {pack.size()};
}

}  // namespace lathe::ref
