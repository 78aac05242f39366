// The training program's loop: a short run on a small text lowers the loss, writes metrics that
// parse, a loss plot and weights that rebuild the model; the whole state hangs off one object.
#include <doctest/doctest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "core/error.h"
#include "core/storage.h"
#include "serialize/model_file.h"
#include "tests/temp_dir.h"
#include "tests/test_helpers.h"
#include "train/loss_plot.h"
#include "train/trainer.h"

using namespace lathe;
using lathe::testing::TempDir;
using lathe::testing::read_jsonl;
using namespace lathe::train;
using namespace lathe::data;
namespace fs = std::filesystem;

namespace {

// A model small enough for the sanitizer build, and a text with plenty of structure to learn.
TrainOptions small_run(const TempDir& d) {
  std::ofstream(d.path / "model.json")
      << R"({"vocab_size": 256, "block_size": 16, "n_layer": 1, "n_head": 2, "n_embd": 32, "batch": 8})";
  std::ofstream text(d.path / "corpus.txt");
  for (int i = 0; i < 80; ++i) text << "the quick brown fox jumps over the lazy dog. ";
  text.close();
  TrainOptions o;
  o.data = (d.path / "corpus.txt").string();
  o.config = (d.path / "model.json").string();
  o.steps = 30;
  o.lr = 1e-2;
  o.warmup = 3;
  o.eval_interval = 10;
  o.eval_iters = 2;
  o.sample_tokens = 0;
  o.threads = 1;
  o.quiet = true;
  o.out = (d.path / "run").string();
  return o;
}

}  // namespace

TEST_CASE("train: a short run lowers the loss and writes metrics, plot and weights") {
  TempDir d("run");
  Trainer trainer(small_run(d));
  TrainSummary s = trainer.run(nullptr);
  CHECK(s.steps == 30);

  const auto metrics = read_jsonl(fs::path(trainer.options().out) / "metrics.jsonl");
  REQUIRE(metrics.size() == 30);
  double first = 0, last = 0;
  for (size_t i = 0; i < metrics.size(); ++i) {
    const nlohmann::json& m = metrics[i];
    CHECK(m["step"].get<int64_t>() == int64_t(i) + 1);
    for (const char* key : {"loss", "lr", "tok_per_s"}) CHECK(m[key].is_number());
    CHECK(m.contains("val_loss") == ((i + 1) % 10 == 0));
    if (i < 5) first += m["loss"].get<double>() / 5;
    if (i >= 25) last += m["loss"].get<double>() / 5;
  }
  CHECK(first > 5.0);         // about ln(256) = 5.55 at the start
  CHECK(last < first - 1.5);  // the repeated sentence is quickly learned
  CHECK(metrics[29]["val_loss"].get<double>() < metrics[9]["val_loss"].get<double>());
  CHECK(metrics[29]["val_loss"].get<double>() == doctest::Approx(s.final_val_loss));
  // The cosine schedule: warm-up, peak, decay to lr / 10.
  CHECK(metrics[0]["lr"].get<double>() == doctest::Approx(1e-2 / 4));
  CHECK(metrics[3]["lr"].get<double>() == doctest::Approx(1e-2));
  CHECK(metrics[29]["lr"].get<double>() < 1.2e-3);

  const std::string svg_path = (fs::path(trainer.options().out) / "loss.svg").string();
  std::ifstream svg(svg_path);
  std::string svg_text((std::istreambuf_iterator<char>(svg)), std::istreambuf_iterator<char>());
  CHECK(svg_text.rfind("<svg", 0) == 0);
  CHECK(svg_text.find("validation") != std::string::npos);
  CHECK(svg_text.find("</svg>") != std::string::npos);

  // The weights file rebuilds the same model.
  serialize::LoadedModel loaded = serialize::load_model((fs::path(trainer.options().out) / "model.safetensors").string());
  CHECK(loaded.model->config() == trainer.state().model->config());
  CHECK(loaded.metadata.at("step") == "30");
  const auto a = trainer.state().model->named_parameters(), b = loaded.model->named_parameters();
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) CHECK(a[i].second.to_vector<float>() == b[i].second.to_vector<float>());
}

TEST_CASE("train: the whole state is one object, and a run is reproducible") {
  TempDir d("state");
  TrainOptions o = small_run(d);
  o.steps = 4;
  o.eval_interval = 0;
  Trainer t1(o), t2(o);
  std::vector<double> l1, l2;
  for (int i = 0; i < 4; ++i) {
    l1.push_back(t1.train_step().loss);
    l2.push_back(t2.train_step().loss);
  }
  CHECK(l1 == l2);  // same seed, same thread count: the same bits
  TrainState& st = t1.state();
  CHECK(st.step == 4);
  CHECK(st.data_gen.offset() == uint64_t(4 * t1.batch_size()));  // one draw per window
  CHECK(st.optimizer->step_count() == 4);
  CHECK(st.optimizer->num_params() == st.model->parameters().size());

  // nanoGPT's param groups: decay on 2-D parameters only.
  const auto& groups = st.optimizer->param_groups();
  REQUIRE(groups.size() == 2);
  for (const Tensor& p : groups[0].params) CHECK(p.dim() == 2);
  for (const Tensor& p : groups[1].params) CHECK(p.dim() == 1);
  CHECK(groups[0].number("weight_decay") == doctest::Approx(0.1));
  CHECK(groups[1].number("weight_decay") == 0.0);

  const std::string text = t1.sample("the ", 10);
  CHECK(text.size() == 14);
  CHECK(text.rfind("the ", 0) == 0);
}

TEST_CASE("train: a step waits for nothing on its device, and a run there reads each step behind with the CPU's bits") {
  TempDir d("behind");
  TrainOptions o = small_run(d);
  o.steps = 12;
  o.eval_interval = 5;
  o.grad_clip = 1.0;
  TrainOptions on_sim = o;
  on_sim.device = "sim";
  on_sim.out = (d.path / "run_sim").string();
  {
    Trainer t(on_sim);
    reset_transfer_stats();
    StepResult r = t.queue_step();
    CHECK(transfer_stats().device_to_host == 0);  // no loss, norm or scale read inside the step
    CHECK(transfer_stats().syncs == 0);
    t.read_step(r);
    CHECK(transfer_stats().device_to_host >= 2);  // the loss and the norm, when asked for
    CHECK(std::isfinite(r.loss));
    CHECK(r.grad_norm > 0);
  }
  // sim reads each step while the next one is queued (but at evaluations and the end): every
  // record is still the step's own, bit for bit the CPU run's.
  Trainer cpu(o), sim(on_sim);
  cpu.run(nullptr);
  sim.run(nullptr);
  const auto want = read_jsonl(fs::path(o.out) / "metrics.jsonl"), got = read_jsonl(fs::path(on_sim.out) / "metrics.jsonl");
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    INFO("record ", i);
    for (const char* key : {"step", "loss", "lr", "grad_norm", "val_loss"}) CHECK(got[i].value(key, -1.0) == want[i].value(key, -1.0));
  }
}

TEST_CASE("train: bad options and data are errors that name them") {
  TempDir d("errors");
  TrainOptions o = small_run(d);
  o.steps = 0;
  CHECK_THROWS_WITH_AS(Trainer{o}, doctest::Contains("--steps"), Error);
  o = small_run(d);
  o.optimizer = "rmsprop";
  CHECK_THROWS_WITH_AS(Trainer{o}, doctest::Contains("rmsprop"), Error);
  o = small_run(d);
  o.config = "no-such-preset";
  CHECK_THROWS_WITH_AS(Trainer{o}, doctest::Contains("no-such-preset"), Error);
  o = small_run(d);
  o.data = (d.path / "missing.txt").string();
  CHECK_THROWS_WITH_AS(Trainer{o}, doctest::Contains("missing.txt"), Error);
}

TEST_CASE("loss plot: a valid image with or without data") {
  LossCurves empty;
  const std::string svg = loss_curves_svg(empty);
  CHECK(svg.find("no data yet") != std::string::npos);
  LossCurves c;
  c.title = "a < b & c";
  c.train = {{1, 5.5}, {2, std::nan("")}, {3, 4.0}};
  c.val = {{3, 4.2}};
  const std::string s = loss_curves_svg(c);
  CHECK(s.find("a &lt; b &amp; c") != std::string::npos);
  CHECK(s.find("nan") == std::string::npos);
  CHECK(s.find("validation (last 4.200") != std::string::npos);
}
