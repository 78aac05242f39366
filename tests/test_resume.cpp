// `lathe train --resume`: a run resumed at step k is bitwise identical to the run that never
// stopped (logged losses, learning rates, validation losses, final weights and optimizer state),
// for every optimizer, on the cpu and on the sim device; a resume that fails touches no file; a
// process killed at any moment leaves only whole checkpoints behind.
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>

#include "core/error.h"
#include "serialize/checksum.h"
#include "tests/temp_dir.h"
#include "tests/test_helpers.h"
#include "train/run_checkpoints.h"
#include "train/trainer.h"

using namespace lathe;
using lathe::testing::TempDir;
using lathe::testing::read_jsonl;
using lathe::testing::error_of;
using namespace lathe::train;
using namespace lathe::data;
namespace fs = std::filesystem;

namespace {

// A small model with dropout (so the dropout generator's state matters) on a structured text.
TrainOptions small_run(const TempDir& d, const std::string& optimizer, const std::string& device) {
  std::ofstream(d.path / "model.json")
      << R"({"vocab_size": 256, "block_size": 16, "n_layer": 1, "n_head": 2, "n_embd": 32, "dropout": 0.1, "batch": 4})";
  std::ofstream text(d.path / "corpus.txt");
  for (int i = 0; i < 60; ++i) text << "the quick brown fox " << i << " jumps over the lazy dog. ";
  text.close();
  TrainOptions o;
  o.data = (d.path / "corpus.txt").string();
  o.config = (d.path / "model.json").string();
  o.optimizer = optimizer;
  o.device = device;
  o.lr = optimizer == "prodigy" ? 1.0 : optimizer == "sgd" ? 0.1 : optimizer == "muon" ? 0.02 : 3e-3;
  o.steps = 12;
  o.warmup = 3;
  o.eval_interval = 4;
  o.eval_iters = 2;
  o.ckpt_interval = 4;
  o.keep_last = 10;
  o.sample_tokens = 0;
  o.threads = 1;
  o.quiet = true;
  o.out = (d.path / "full").string();
  return o;
}

// Every tensor of a checkpoint by name -> checksum (weights and optimizer state).
std::map<std::string, std::string> tensor_sums(const std::string& path) {
  std::map<std::string, std::string> out;
  for (const auto& [name, t] : serialize::read_safetensors(path).tensors) out[name] = serialize::tensor_checksum(t);
  return out;
}

std::map<std::string, std::string> dir_contents(const fs::path& dir) {
  std::map<std::string, std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    std::ifstream in(e.path(), std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    out[e.path().filename().string()] = ss.str();
  }
  return out;
}

// Resumes the run directory `dir` with the options of its checkpoint (what `lathe train --resume
// DIR` does).
void resume(const fs::path& dir, std::vector<std::string> given_keys = {}, TrainOptions given = {}) {
  given.quiet = true;
  given.out = dir.string();
  given_keys.push_back("out");
  Trainer::resume(dir.string(), given, given_keys).run(nullptr);
}

}  // namespace

TEST_CASE("resume: bitwise identical to the run that never stopped, for every optimizer, on cpu and sim") {
  for (const char* device : {"cpu", "sim"}) {
    for (const char* optimizer : {"adamw", "adam", "sgd", "prodigy", "muon"}) {
      INFO(optimizer, " on ", device);
      TempDir d(std::string(optimizer) + "_" + device);
      TrainOptions o = small_run(d, optimizer, device);
      Trainer(o).run(nullptr);
      const fs::path full = o.out;
      const auto full_ckpts = list_checkpoints(full.string());
      REQUIRE(full_ckpts.size() == 3);

      // The run "stopped" at step 4: its directory holds the checkpoint of step 4, and metrics
      // written after it (by the process that was killed) that the resume must drop.
      const fs::path part = d.path / "part";
      fs::create_directories(part);
      fs::copy_file(checkpoint_path(full.string(), 4), checkpoint_path(part.string(), 4));
      {
        std::ifstream in(full / "metrics.jsonl");
        std::ofstream out(part / "metrics.jsonl");
        std::string line;
        for (int i = 0; i < 6 && std::getline(in, line); ++i) out << line << "\n";
      }
      resume(part);

      const auto a = read_jsonl(full / "metrics.jsonl"), b = read_jsonl(part / "metrics.jsonl");
      REQUIRE(a.size() == b.size());
      for (size_t i = 0; i < a.size(); ++i) {
        INFO("metrics line ", i);
        CHECK(a[i]["step"] == b[i]["step"]);
        CHECK(a[i]["loss"].get<double>() == b[i]["loss"].get<double>());
        CHECK(a[i]["lr"].get<double>() == b[i]["lr"].get<double>());
        CHECK(a[i].value("val_loss", -1.0) == b[i].value("val_loss", -1.0));
      }
      CHECK(tensor_sums(checkpoint_path(full.string(), 12)) == tensor_sums(checkpoint_path(part.string(), 12)));
      CHECK(tensor_sums((full / "model.safetensors").string()) == tensor_sums((part / "model.safetensors").string()));
    }
  }
}

TEST_CASE("resume: every switch of the modern block, alone and together, resumes bitwise") {
  // The switches as a config file gives them (nn/gpt.h), the last the speedrun-small preset's.
  const char* const switches[] = {
      R"("rope": true)",
      R"("norm": "rms_norm")",
      R"("norm": "rms_norm", "norm_weight": false)",
      R"("activation": "squared_relu")",
      R"("activation": "swiglu")",
      R"("qk_norm": true)",
      R"("tie_embeddings": false)",
      R"("logit_softcap": 2.0)",
      R"("bias": false, "rope": true, "norm": "rms_norm", "norm_weight": false, "activation": "squared_relu",
         "qk_norm": true, "tie_embeddings": false, "logit_softcap": 30.0)",
  };
  int i = 0;
  for (const char* fields : switches) {
    INFO(fields);
    TempDir d("modern_" + std::to_string(i++));
    TrainOptions o = small_run(d, "adamw", "cpu");
    std::ofstream(d.path / "model.json") << R"({"vocab_size": 256, "block_size": 16, "n_layer": 1, "n_head": 2, )"
                                         << R"("n_embd": 32, "dropout": 0.1, "batch": 4, )" << fields << "}";
    Trainer(o).run(nullptr);
    const fs::path full = o.out, part = d.path / "part";
    fs::create_directories(part);
    fs::copy_file(checkpoint_path(full.string(), 4), checkpoint_path(part.string(), 4));
    fs::copy_file(full / "metrics.jsonl", part / "metrics.jsonl");  // the resume cuts it back to step 4
    resume(part);
    const auto a = read_jsonl(full / "metrics.jsonl"), b = read_jsonl(part / "metrics.jsonl");
    REQUIRE(a.size() == b.size());
    for (size_t k = 0; k < a.size(); ++k) {
      INFO("metrics line ", k);
      CHECK(a[k]["loss"].get<double>() == b[k]["loss"].get<double>());
      CHECK(a[k].value("val_loss", -1.0) == b[k].value("val_loss", -1.0));
    }
    CHECK(a.back()["loss"].get<double>() < a.front()["loss"].get<double>());  // it learns
    CHECK(tensor_sums(checkpoint_path(full.string(), 12)) == tensor_sums(checkpoint_path(part.string(), 12)));
    CHECK(tensor_sums((full / "model.safetensors").string()) == tensor_sums((part / "model.safetensors").string()));
  }
}

TEST_CASE("resume: more steps continue the run, changed settings are refused by name") {
  TempDir d("settings");
  TrainOptions o = small_run(d, "adamw", "cpu");
  o.steps = 6;
  o.ckpt_interval = 0;
  Trainer(o).run(nullptr);
  const fs::path dir = o.out;

  TrainOptions given;
  given.steps = 8;
  resume(dir, {"steps"}, given);
  CHECK(read_jsonl(dir / "metrics.jsonl").size() == 8);
  CHECK(list_checkpoints(dir.string()).back().first == 8);

  given.lr = 0.5;
  const std::string err = error_of([&] { resume(dir, {"steps", "lr"}, given); });
  CHECK(err.find("lr") != std::string::npos);
  CHECK(err.find("0.5") != std::string::npos);
}

TEST_CASE("resume: a run saved on the cpu continues on the sim device, by policy, with the same bits") {
  TempDir d("device");
  TrainOptions o = small_run(d, "adamw", "cpu");
  Trainer(o).run(nullptr);
  const fs::path full = o.out, part = d.path / "part";
  fs::create_directories(part);
  fs::copy_file(checkpoint_path(full.string(), 8), checkpoint_path(part.string(), 8));
  TrainOptions given;
  given.device = "sim";
  resume(part, {"device"}, given);
  CHECK(tensor_sums(checkpoint_path(full.string(), 12)) == tensor_sums(checkpoint_path(part.string(), 12)));
}

TEST_CASE("resume: a failed resume changes no file") {
  TempDir d("failed");
  TrainOptions o = small_run(d, "adamw", "cpu");
  o.steps = 8;
  Trainer(o).run(nullptr);
  const fs::path dir = o.out;

  // Damage the newest checkpoint: the resume refuses it, names the older one, and writes nothing.
  const std::string newest = checkpoint_path(dir.string(), 8);
  {
    std::fstream f(newest, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-5, std::ios::end);
    f.put('\x7f');
  }
  const auto before = dir_contents(dir);
  const std::string err = error_of([&] { resume(dir); });
  CHECK(err.find(newest) != std::string::npos);
  CHECK(err.find(checkpoint_path(dir.string(), 4)) != std::string::npos);
  CHECK(dir_contents(dir) == before);

  // The older checkpoint, named as a file, resumes.
  TrainOptions given;
  const serialize::TrainingCheckpoint older = open_resume_checkpoint(checkpoint_path(dir.string(), 4));
  CHECK(older.step() == 4);

  // A corpus that changed under the run is refused before anything is written.
  std::ofstream(o.data, std::ios::app) << "more text";
  const auto before2 = dir_contents(dir);
  const std::string err2 = error_of([&] {
    Trainer::resume(checkpoint_path(dir.string(), 4), given, {});
  });
  CHECK(err2.find("corpus") != std::string::npos);
  CHECK(dir_contents(dir) == before2);

  CHECK(error_of([&] { open_resume_checkpoint((d.path / "nowhere").string()); }).find("nowhere") != std::string::npos);
  fs::create_directories(d.path / "empty");
  CHECK(error_of([&] { open_resume_checkpoint((d.path / "empty").string()); }).find("no checkpoint") !=
        std::string::npos);
}

TEST_CASE("resume: killing lathe train at any moment leaves every checkpoint whole") {
  TempDir d("kill");
  TrainOptions o = small_run(d, "adamw", "cpu");
  const fs::path dir = d.path / "killed";
  const std::string cmd = std::string(LATHE_CLI_PATH) + " train --quiet --sample-tokens 0 --threads 1 --steps 100000" +
                          " --ckpt-interval 1 --keep-last 2 --eval-interval 0 --data " + o.data + " --config " +
                          o.config + " --out " + dir.string();
  const std::string resume_cmd = std::string(LATHE_CLI_PATH) + " train --quiet --resume " + dir.string();
  bool first = true;
  for (int delay_ms : {130, 170, 260, 370}) {
    INFO("killed after ", delay_ms, " ms");
    const std::string line = "exec " + (first ? cmd : resume_cmd) + " >/dev/null 2>&1";
    first = false;
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      ::execl("/bin/sh", "sh", "-c", line.c_str(), (char*)nullptr);
      ::_exit(127);
    }
    // Let the run write its first checkpoint (slow under the sanitizers), then kill it mid-run.
    for (int i = 0; i < 400 && list_checkpoints(dir.string()).empty(); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
    ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
    for (const auto& [step, path] : list_checkpoints(dir.string())) {
      INFO("checkpoint ", path);
      CHECK(error_of([&] { serialize::TrainingCheckpoint::read(path); }) == "");
    }
  }
  // Every relaunch resumed the killed run; so does this one, to one step past its newest checkpoint.
  const auto ckpts = list_checkpoints(dir.string());
  REQUIRE(!ckpts.empty());
  TrainOptions given;
  given.steps = ckpts.back().first + 1;
  resume(dir, {"steps"}, given);
  CHECK(list_checkpoints(dir.string()).back().first == ckpts.back().first + 1);
  for (const auto& e : fs::directory_iterator(dir))  // the killed writers' temporary files are gone
    CHECK(e.path().filename().string().find(".tmp-") == std::string::npos);
}
