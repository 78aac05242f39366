// Muon (optim/muon.h) beyond its goldens (tests/test_optim.cpp): the learning-rate adjustments, the
// Newton-Schulz iteration's shape rules, the refusal of anything but a matrix and of bad options;
// the composite optimizer (optim/composite.h) that steps Muon beside AdamW as one optimizer; and
// `lathe train --optimizer muon` and the reference kind "train" with "muon" (train/muon_groups.h).
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <memory>

#include "core/ops.h"
#include "optim/adam.h"
#include "optim/composite.h"
#include "optim/muon.h"
#include "optim/prodigy.h"
#include "ref/kinds.h"
#include "ref/result_check.h"
#include "serialize/safetensors.h"
#include "tests/temp_dir.h"
#include "tests/test_helpers.h"
#include "train/muon_groups.h"
#include "train/trainer.h"

using namespace lathe;
using namespace lathe::optim;
using lathe::testing::error_of;
using lathe::testing::TempDir;

namespace {

const std::string kGolden = LATHE_GOLDEN_DIR;

Tensor param_like(const Shape& shape, uint64_t seed) { return mul(Tensor::randn(shape, seed), 0.02).requires_grad_(true); }

Tensor copy_of(const Tensor& p) { return p.detach().clone().requires_grad_(true); }

bool same_bits(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
  const Tensor x = a.detach().to(Device::cpu()).contiguous(), y = b.detach().to(Device::cpu()).contiguous();
  return std::memcmp(x.data_ptr(), y.data_ptr(), x.nbytes()) == 0;
}

void check_error(const std::function<void()>& f, const std::vector<std::string>& needles) {
  const std::string msg = error_of(f);
  INFO("message: ", msg);
  REQUIRE_FALSE(msg.empty());
  for (const std::string& n : needles) CHECK(msg.find(n) != std::string::npos);
}

// Gradients for step t, the same for every copy of the parameters.
void set_grads(std::vector<Tensor>& ps, uint64_t t) {
  for (size_t i = 0; i < ps.size(); ++i)
    ps[i].set_grad(mul(Tensor::randn(ps[i].shape(), 1000 * t + i), 0.1).to(ps[i].device()));
}

// Muon over {a, b} beside AdamW over {c} (two groups: {c}, {d}), as a composite.
std::unique_ptr<Composite> muon_adamw(const std::vector<Tensor>& ps) {
  auto muon = std::make_unique<Muon>(nlohmann::json{{"lr", 0.02}});
  muon->add_param_group({ps[0], ps[1]});
  auto adamw = std::make_unique<AdamW>(nlohmann::json{{"lr", 3e-3}});
  adamw->add_param_group({ps[2]});
  adamw->add_param_group({ps[3]}, {{"weight_decay", 0.0}});
  std::vector<std::unique_ptr<Optimizer>> parts;
  parts.push_back(std::move(muon));
  parts.push_back(std::move(adamw));
  return std::make_unique<Composite>(std::move(parts));
}

std::vector<Tensor> four_params() {
  return {param_like({6, 4}, 1), param_like({3, 5}, 2), param_like({7, 3}, 3), param_like({5}, 4)};
}

std::vector<Tensor> copies(const std::vector<Tensor>& ps) {
  std::vector<Tensor> out;
  for (const Tensor& p : ps) out.push_back(copy_of(p));
  return out;
}

}  // namespace

TEST_CASE("muon: the learning rate adjustments of torch.optim.Muon") {
  // null and "original": sqrt(max(1, rows / cols)); "match_rms_adamw": 0.2 sqrt(max(rows, cols)).
  CHECK(muon_adjusted_lr(0.02, MuonLrAdjust::none, 8, 2) == 0.02 * 2.0);
  CHECK(muon_adjusted_lr(0.02, MuonLrAdjust::original, 8, 2) == 0.02 * 2.0);
  CHECK(muon_adjusted_lr(0.02, MuonLrAdjust::original, 2, 8) == 0.02);  // wide: never below lr
  CHECK(muon_adjusted_lr(0.02, MuonLrAdjust::none, 6, 4) == 0.02 * std::sqrt(1.5));
  CHECK(muon_adjusted_lr(0.01, MuonLrAdjust::match_rms_adamw, 2, 16) == 0.01 * (0.2 * 4.0));
  CHECK(muon_adjusted_lr(0.01, MuonLrAdjust::match_rms_adamw, 9, 4) == 0.01 * (0.2 * 3.0));
}

TEST_CASE("muon: Newton-Schulz treats a tall matrix as its transpose, in bf16, and keeps a zero update zero") {
  MuonOptions o{};
  o.ns_coefficients = {3.4445, -4.775, 2.0315};
  o.eps = 1e-7;
  o.ns_steps = 5;
  for (bool addmm : {true, false}) {
    INFO("use_addmm ", addmm);
    o.use_addmm = addmm;
    const Tensor wide = Tensor::randn({5, 9}, 3);
    const Tensor x = muon_orthogonalize(wide, o), y = muon_orthogonalize(wide.transpose(0, 1).contiguous(), o);
    CHECK(x.dtype() == DType::bf16);
    CHECK(x.shape() == Shape{5, 9});
    CHECK(y.shape() == Shape{9, 5});
    CHECK(same_bits(x, y.transpose(0, 1).contiguous()));
    // Orthogonalised: the quintic's coefficients push every singular value into about [0.68, 1.13],
    // so the squared Frobenius norm of 5 of them is within 5 [0.68^2, 1.13^2].
    const double fro2 = sum(square(x.to(DType::f64))).item();
    CHECK(fro2 > 5 * 0.68 * 0.68);
    CHECK(fro2 < 5 * 1.13 * 1.13);
    // A zero update: the norm is clamped to eps, and zero stays zero (no 0 / 0).
    const Tensor z = muon_orthogonalize(Tensor::zeros({3, 4}), o);
    CHECK(same_bits(z, Tensor::zeros({3, 4}, DType::bf16)));
  }
}

TEST_CASE("muon: parameters that are not matrices are refused, named with their shape") {
  check_error([] { Muon({param_like({4, 3}, 1), param_like({5}, 2)}); },
              {"muon: parameter 1 of the new group", "[5]", "not a matrix", "AdamW"});
  check_error([] { Muon({param_like({2, 3, 4}, 1)}); }, {"parameter 0 of the new group", "[2, 3, 4]", "not a matrix"});
  Muon named;
  check_error([&] { named.add_param_group({param_like({8}, 3)}, {}, {"transformer.ln_f.weight"}); },
              {"parameter \"transformer.ln_f.weight\" (f32[8] on cpu) is not a matrix"});
  CHECK(named.num_params() == 0);
}

TEST_CASE("muon: bad options are errors naming the option and the value") {
  const Tensor p = param_like({4, 3}, 1);
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  check_error([&] { Muon({p}, {{"lr", -0.1}}); }, {"muon", "lr", "-0.1"});
  check_error([&] { Muon({p}, {{"lr", inf}}); }, {"lr", "inf"});
  check_error([&] { Muon({p}, {{"weight_decay", -0.1}}); }, {"weight_decay", "-0.1"});
  check_error([&] { Muon({p}, {{"weight_decay", inf}}); }, {"weight_decay", "inf"});
  check_error([&] { Muon({p}, {{"momentum", -0.5}}); }, {"momentum", "-0.5"});
  check_error([&] { Muon({p}, {{"momentum", nan}}); }, {"momentum", "nan"});
  check_error([&] { Muon({p}, {{"eps", 0.0}}); }, {"eps", "0", "> 0"});
  check_error([&] { Muon({p}, {{"eps", -1e-7}}); }, {"eps", "-1e-07"});
  check_error([&] { Muon({p}, {{"ns_steps", 0}}); }, {"ns_steps", "0"});
  check_error([&] { Muon({p}, {{"ns_steps", 100}}); }, {"ns_steps", "100", "below 100"});
  check_error([&] { Muon({p}, {{"ns_steps", 2.5}}); }, {"ns_steps", "2.5", "integer"});
  check_error([&] { Muon({p}, {{"ns_coefficients", {3.4, -4.7}}}); }, {"ns_coefficients", "three numbers"});
  check_error([&] { Muon({p}, {{"ns_coefficients", {3.4, inf, 2.0}}}); }, {"ns_coefficients", "inf"});
  check_error([&] { Muon({p}, {{"adjust_lr_fn", "spectral"}}); }, {"adjust_lr_fn", "spectral", "match_rms_adamw"});
  check_error([&] { Muon({p}, {{"adjust_lr_fn", 1}}); }, {"adjust_lr_fn", "1"});
  check_error([&] { Muon({p}, {{"nesterov", "yes"}}); }, {"nesterov", "true or false"});
  check_error([&] { Muon({p}, {{"betas", {0.9, 0.99}}}); }, {"unknown option", "betas"});
  // The defaults are PyTorch's, and null stands for adjust_lr_fn None.
  const nlohmann::json g = Muon({p}).groups_json()[0];
  CHECK(g["lr"] == 1e-3);
  CHECK(g["weight_decay"] == 0.1);
  CHECK(g["momentum"] == 0.95);
  CHECK(g["nesterov"] == true);
  CHECK(g["ns_coefficients"] == nlohmann::json({3.4445, -4.775, 2.0315}));
  CHECK(g["eps"] == 1e-7);
  CHECK(g["ns_steps"] == 5);
  CHECK(g["adjust_lr_fn"].is_null());
  CHECK(g["use_addmm"] == true);
}

TEST_CASE("muon: frozen and gradient-less parameters are skipped and hold no momentum buffer") {
  Tensor p = param_like({4, 3}, 1), q = param_like({3, 3}, 2), frozen = param_like({2, 2}, 3);
  frozen.requires_grad_(false);
  Muon opt({p, q, frozen}, {{"lr", 0.02}});
  const Tensor q_before = q.detach().clone(), frozen_before = frozen.detach().clone();
  p.set_grad(Tensor::ones({4, 3}));
  frozen.set_grad(Tensor::ones({2, 2}));
  opt.step();
  CHECK(opt.state(0, "momentum_buffer").defined());
  CHECK_FALSE(opt.state(1, "momentum_buffer").defined());
  CHECK_FALSE(opt.state(2, "momentum_buffer").defined());
  CHECK(same_bits(q, q_before));
  CHECK(same_bits(frozen, frozen_before));
  // buf = lerp(0, g, 1 - 0.95): 0.05 in f32 for a gradient of ones.
  const std::vector<float> buf = opt.state(0, "momentum_buffer").to_vector<float>();
  for (float v : buf) CHECK(v == float(0.05f * 1.0f));
}

TEST_CASE("muon composite: parts numbered in order, stepped together, the same bits as each alone") {
  std::vector<Tensor> ps = four_params();
  std::vector<Tensor> qs = copies(ps);
  auto composite = muon_adamw(ps);
  CHECK(composite->kind() == "muon+adamw");
  CHECK(composite->num_params() == 4);
  REQUIRE(composite->param_groups().size() == 3);
  CHECK(composite->param_groups()[1].indices == std::vector<int64_t>{2});
  CHECK(composite->part_of_group(2).first->kind() == "adamw");
  CHECK(composite->part_of_group(2).second == 1);
  // The same optimizers, apart.
  Muon muon({qs[0], qs[1]}, {{"lr", 0.02}});
  AdamW adamw(nlohmann::json{{"lr", 3e-3}});
  adamw.add_param_group({qs[2]});
  adamw.add_param_group({qs[3]}, {{"weight_decay", 0.0}});
  for (uint64_t t = 0; t < 4; ++t) {
    set_grads(ps, t);
    set_grads(qs, t);
    if (t == 1) {  // a step without parameter 1's gradient
      ps[1].set_grad(Tensor());
      qs[1].set_grad(Tensor());
    }
    composite->step();
    muon.step();
    adamw.step();
    composite->zero_grad();
  }
  for (size_t i = 0; i < ps.size(); ++i) {
    INFO("parameter ", i);
    CHECK(same_bits(ps[i], qs[i]));
    CHECK_FALSE(ps[i].grad().defined());
  }
  CHECK(same_bits(composite->state(1, "momentum_buffer"), muon.state(1, "momentum_buffer")));
  CHECK(same_bits(composite->state(3, "exp_avg_sq"), adamw.state(1, "exp_avg_sq")));
  CHECK(composite->step_count() == 4);
  // The checkpoint's view: names in the composite's numbering, each group with its optimizer.
  std::map<std::string, Placement> names;
  for (const StateEntry& e : composite->state_entries()) names[e.name] = e.placement;
  CHECK(names.count("param.0.momentum_buffer"));
  CHECK(names.count("param.2.exp_avg"));
  CHECK(names.at("param.3.step") == Placement::host);
  CHECK(names.count("global.step"));
  CHECK_FALSE(names.count("param.0.exp_avg"));
  const nlohmann::json groups = composite->groups_json();
  CHECK(groups[0]["optimizer"] == "muon");
  CHECK(groups[0]["params"] == nlohmann::json({0, 1}));
  CHECK(groups[2]["optimizer"] == "adamw");
  CHECK(groups[2]["params"] == nlohmann::json({3}));
  CHECK(groups[2]["weight_decay"] == 0.0);
  // Each group's lr is its part's.
  composite->set_lr(2, 1e-4);
  CHECK(composite->lr(2) == 1e-4);
  CHECK(composite->part_of_group(2).first->lr(1) == 1e-4);
  CHECK(composite->lr(0) == 0.02);
  check_error([&] { composite->set_lr(0, -1); }, {"lr", "-1"});
  check_error([&] { composite->add_param_group({param_like({2, 2}, 9)}); }, {"muon+adamw", "no new groups"});
}

TEST_CASE("muon composite: saved state loads into a new one and continues bitwise, and bad loads change nothing") {
  std::vector<Tensor> ps = four_params();
  auto run = muon_adamw(ps);
  for (uint64_t t = 0; t < 3; ++t) {
    set_grads(ps, t);
    run->step();
  }
  // A second composite over copies of the parameters, restored from the first one's entries.
  std::vector<Tensor> qs = copies(ps);
  auto resumed = muon_adamw(qs);
  std::map<std::string, StateSource> sources;
  for (const StateEntry& e : run->state_entries()) sources[e.name] = StateSource{e.tensor};
  resumed->load_groups_json(run->groups_json());
  resumed->load_state(sources);
  CHECK(resumed->step_count() == 3);
  CHECK(resumed->parts()[1]->step_count() == 3);
  for (uint64_t t = 3; t < 5; ++t) {
    set_grads(ps, t);
    run->step();
    set_grads(qs, t);
    resumed->step();
  }
  for (size_t i = 0; i < ps.size(); ++i) CHECK(same_bits(ps[i], qs[i]));

  // A momentum buffer of the wrong shape for the Muon part, beside a valid AdamW entry: refused,
  // naming the composite's numbers, and the AdamW part is left as it was.
  auto fresh = muon_adamw(copies(ps));
  std::map<std::string, StateSource> bad = {
      {"param.2.exp_avg", StateSource{Tensor::ones({7, 3})}},
      {"param.1.momentum_buffer", StateSource{Tensor::ones({5, 3})}},
  };
  check_error([&] { fresh->load_state(bad); }, {"part 0", "param.1.momentum_buffer", "[5, 3]", "[3, 5]"});
  CHECK_FALSE(fresh->state(2, "exp_avg").defined());
  check_error([&] { fresh->load_state({{"param.4.exp_avg", StateSource{Tensor::ones({5})}}}); },
              {"param.4.exp_avg", "parameter 4", "4 parameters"});
  check_error([&] { fresh->load_state({{"global.d", StateSource{Tensor::ones({})}}}); }, {"global.d", "not declared"});
  // Groups saved for another split: refused, naming the group; nothing changes.
  nlohmann::json groups = run->groups_json();
  groups[1]["optimizer"] = "muon";
  check_error([&] { fresh->load_groups_json(groups); }, {"saved group 1", "\"muon\"", "\"adamw\""});
  groups = run->groups_json();
  groups[0]["lr"] = 0.5;
  groups[2]["betas"] = {2.0, 0.9};  // the AdamW part refuses: the Muon part keeps its lr
  check_error([&] { fresh->load_groups_json(groups); }, {"betas"});
  CHECK(fresh->lr(0) == 0.02);
  CHECK(fresh->parts()[0]->lr(0) == 0.02);
}

TEST_CASE("muon composite: refuses parts that overlap, hold nothing or disagree on the step count") {
  std::vector<Tensor> ps = four_params();
  auto compose = [](std::unique_ptr<Optimizer> a, std::unique_ptr<Optimizer> b) {
    std::vector<std::unique_ptr<Optimizer>> parts;
    parts.push_back(std::move(a));
    parts.push_back(std::move(b));
    return Composite(std::move(parts));
  };
  check_error([&] { compose(std::make_unique<Muon>(std::vector<Tensor>{ps[0]}), std::make_unique<AdamW>(std::vector<Tensor>{ps[0], ps[3]})); },
              {"part 1 (adamw)", "earlier part", "already parameter 0"});
  check_error([&] { compose(std::make_unique<Muon>(), std::make_unique<AdamW>(std::vector<Tensor>{ps[3]})); },
              {"part 0 (muon) holds no parameter"});
  auto stepped = std::make_unique<AdamW>(std::vector<Tensor>{ps[3]});
  ps[3].set_grad(Tensor::ones({5}));
  stepped->step();
  check_error([&] { compose(std::make_unique<Muon>(std::vector<Tensor>{ps[0]}), std::move(stepped)); },
              {"part 1 (adamw) has taken 1 steps", "part 0 (muon) 0"});
}

TEST_CASE("muon composite: sharding gives each part its share of the range, and Prodigy's refusal holds") {
  std::vector<Tensor> ps = four_params();
  auto opt = muon_adamw(ps);
  set_grads(ps, 0);
  opt->step();
  opt->shard_state(1, 3);  // Muon's parameter 1 and AdamW's parameter 0
  CHECK(opt->sharded());
  CHECK(opt->parts()[0]->owns(1));
  CHECK_FALSE(opt->parts()[0]->owns(0));
  CHECK(opt->parts()[1]->owns(0));
  CHECK_FALSE(opt->parts()[1]->owns(1));
  CHECK_FALSE(opt->state(0, "momentum_buffer").defined());  // released
  CHECK(opt->state(1, "momentum_buffer").defined());
  CHECK(opt->state(2, "exp_avg").defined());
  CHECK_FALSE(opt->state(3, "exp_avg").defined());
  for (const StateEntry& e : opt->state_entries())  // AdamW's step counters stay on the host
    if (e.scope == StateScope::param && e.key != "step") CHECK(e.placement == Placement::sharded);

  std::vector<std::unique_ptr<Optimizer>> parts;
  parts.push_back(std::make_unique<Muon>(std::vector<Tensor>{copy_of(ps[0])}));
  parts.push_back(std::make_unique<Prodigy>(std::vector<Tensor>{copy_of(ps[3])}));
  Composite with_prodigy(std::move(parts));
  check_error([&] { with_prodigy.shard_state(0, 1); }, {"cannot be sharded"});
  CHECK_FALSE(with_prodigy.parts()[0]->sharded());
}

TEST_CASE("muon train: Muon on the blocks' matrices, AdamW on the rest, each group on its own schedule") {
  TempDir d("muon_train");
  std::ofstream(d.path / "model.json")
      << R"({"vocab_size": 256, "block_size": 16, "n_layer": 2, "n_head": 2, "n_embd": 32, "batch": 4})";
  std::ofstream(d.path / "corpus.txt") << std::string(4000, 'a') + "the quick brown fox jumps over the lazy dog";
  train::TrainOptions o;
  o.data = (d.path / "corpus.txt").string();
  o.config = (d.path / "model.json").string();
  o.optimizer = "muon";
  o.lr = 0.02;
  o.adam_lr = 4e-3;
  o.min_lr = 0.001;  // explicit: AdamW's floor scales with it, 4e-3 * (0.001 / 0.02)
  o.steps = 6;
  o.warmup = 2;
  o.eval_interval = 0;
  o.eval_iters = 1;
  o.sample_tokens = 0;
  o.threads = 1;
  o.quiet = true;
  o.out = (d.path / "run").string();
  train::Trainer t(o);
  Optimizer& opt = *t.state().optimizer;
  REQUIRE(opt.kind() == "muon+adamw");
  const auto& composite = dynamic_cast<const Composite&>(opt);
  std::map<const TensorImpl*, std::string> name_of;
  for (const auto& [name, p] : t.state().model->named_parameters()) name_of[p.id()] = name;
  REQUIRE(opt.param_groups().size() == 3);
  for (size_t g = 0; g < 3; ++g) {
    for (const Tensor& p : opt.param_groups()[g].params) {
      const std::string& name = name_of.at(p.id());
      INFO("group ", g, ": ", name);
      if (g == 0) CHECK((p.dim() == 2 && name.rfind("transformer.h.", 0) == 0));
      if (g == 1) CHECK((p.dim() == 2 && name.rfind("transformer.h.", 0) != 0));
      if (g == 2) CHECK(p.dim() != 2);
    }
  }
  CHECK(composite.part_of_group(0).first->kind() == "muon");
  CHECK(opt.param_groups()[0].params.size() == 8);  // c_attn, attn.c_proj, c_fc, mlp.c_proj of 2 blocks
  CHECK(opt.param_groups()[0].options["weight_decay"] == 0.1);
  CHECK(opt.param_groups()[1].options["weight_decay"] == 0.1);
  CHECK(opt.param_groups()[2].options["weight_decay"] == 0.0);
  CHECK(opt.param_groups()[1].options["betas"] == nlohmann::json({0.9, 0.99}));
  const optim::WarmupCosineLr muon_lr(0.02, 2, 6, 0.001), adam_lr(4e-3, 2, 6, 0.001 * (4e-3 / 0.02));
  for (int64_t s = 0; s < 6; ++s) {
    const train::StepResult r = t.train_step();
    INFO("step ", s);
    CHECK(r.lr == muon_lr.lr(s));
    CHECK(opt.lr(0) == muon_lr.lr(s));
    CHECK(opt.lr(1) == adam_lr.lr(s));
    CHECK(opt.lr(2) == adam_lr.lr(s));
  }
  CHECK(opt.state(0, "momentum_buffer").defined());
}

TEST_CASE("muon ref train: Muon beside AdamW follows the PyTorch pair, split as lathe train splits") {
  const auto c = serialize::read_safetensors(kGolden + "/train_muon.case.safetensors");
  const auto want = serialize::read_safetensors(kGolden + "/train_muon.expected.safetensors");
  const nlohmann::json spec = nlohmann::json::parse(c.metadata.at("case"));
  for (const char* device : {"cpu", "sim"}) {
    INFO("device ", device);
    const ref::RefOutput out = ref::run_train_case(c, spec, Device::parse(device));
    serialize::SafetensorsFile got;
    for (const auto& [name, t] : out.tensors) got.tensors.emplace_back(name, t.to(Device::cpu()));
    int compared = 0;
    for (const auto& [name, w] : want.tensors) {
      const Tensor* g = got.find(name);
      REQUIRE_MESSAGE(g != nullptr, name);
      serialize::SafetensorsFile a, b;
      a.tensors = {{name, *g}};
      b.tensors = {{name, w}};
      ref::CheckOptions tol;
      // Relative 1e-3 as the optim goldens; absolute: AdamW's steps on zero-gradient biases follow
      // rounding noise, as in the train_tiny golden.
      tol.tolerance = ref::Tolerance{1e-3, name.find("exp_avg_sq") != std::string::npos ? 1e-9 : 2e-5};
      const auto v = ref::check_results(a, b, tol).front();
      CHECK_MESSAGE(v.pass, ref::format_verdict(v));
      ++compared;
    }
    CHECK(compared > 50);  // losses, weights, momentum buffers and AdamW's moments
  }
}

TEST_CASE("muon ref train: explicit param_groups name each group's optimizer, and give the same bits") {
  auto c = serialize::read_safetensors(kGolden + "/train_muon.case.safetensors");
  const nlohmann::json spec = nlohmann::json::parse(c.metadata.at("case"));
  const ref::RefOutput split = ref::run_train_case(c, spec, Device::cpu());
  // The same split written out as groups.
  nlohmann::json hidden = nlohmann::json::array(), matrices = nlohmann::json::array(), others = nlohmann::json::array();
  for (const auto& [name, t] : c.tensors) {
    if (name.rfind("transformer.", 0) != 0) continue;
    (t.dim() == 2 && name.rfind("transformer.h.", 0) == 0 ? hidden : t.dim() == 2 ? matrices : others).push_back(name);
  }
  nlohmann::json doc = spec;
  doc["param_groups"] = {{{"params", hidden}, {"optimizer", "muon"}},
                         {{"params", matrices}, {"optimizer", "adamw"}},
                         {{"params", others}, {"optimizer", "adamw"}, {"weight_decay", 0.0}}};
  const ref::RefOutput grouped = ref::run_train_case(c, doc, Device::cpu());
  std::map<std::string, Tensor> a(split.tensors.begin(), split.tensors.end()), b(grouped.tensors.begin(), grouped.tensors.end());
  CHECK(a.size() == b.size());
  for (const auto& [name, t] : a) {
    INFO(name);
    REQUIRE(b.count(name));
    CHECK(same_bits(t, b.at(name)));
  }
  // A group that does not say which optimizer updates it; a vector given to Muon.
  doc["param_groups"][1].erase("optimizer");
  check_error([&] { ref::run_train_case(c, doc, Device::cpu()); },
              {"param_groups[1] needs \"optimizer\": \"muon\" or \"adamw\""});
  doc["param_groups"][1]["optimizer"] = "adamw";
  doc["param_groups"][2]["optimizer"] = "muon";
  check_error([&] { ref::run_train_case(c, doc, Device::cpu()); },
              {"param_groups[2]", "muon: parameter \"transformer.", "not a matrix"});
  // AdamW's options must be an object of options.
  nlohmann::json bad = spec;
  bad["optimizer"]["adamw"] = 3e-3;
  check_error([&] { ref::run_train_case(c, bad, Device::cpu()); }, {"\"optimizer\".\"adamw\"", "object"});
}
