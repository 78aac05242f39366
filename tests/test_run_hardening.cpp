// The adversarial round's findings on `lathe train` runs ("no valid checkpoint lost, no crash, no
// hang"), one case each: rotation after a resume from an older file, the run directory's lock,
// non-finite weights never saved, absurd model sizes, config files and flags, sampling a model
// whose vocabulary exceeds the bytes, a resume at the final step, torn or null metrics, and
// checksums in model.safetensors.
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>

#include "core/error.h"
#include "serialize/checksum.h"
#include "serialize/directory_lock.h"
#include "serialize/model_file.h"
#include "serialize/safetensors.h"
#include "tests/temp_dir.h"
#include "tests/test_helpers.h"
#include "train/metrics_log.h"
#include "train/model_config.h"
#include "train/run_checkpoints.h"
#include "train/trainer.h"

using namespace lathe;
using lathe::testing::TempDir;
using lathe::testing::error_of;
using lathe::testing::read_jsonl;
using lathe::testing::run_lathe;
using namespace lathe::train;
using namespace lathe::data;
namespace fs = std::filesystem;

namespace {

const char* const kModel =
    R"({"vocab_size": 256, "block_size": 16, "n_layer": 1, "n_head": 2, "n_embd": 32, "batch": 4})";

TrainOptions small_run(const TempDir& d, const std::string& model_json = kModel) {
  std::ofstream(d.path / "model.json") << model_json;
  std::ofstream text(d.path / "corpus.txt");
  for (int i = 0; i < 60; ++i) text << "the quick brown fox " << i << " jumps over the lazy dog. ";
  text.close();
  TrainOptions o;
  o.data = (d.path / "corpus.txt").string();
  o.config = (d.path / "model.json").string();
  o.lr = 3e-3;
  o.steps = 8;
  o.warmup = 2;
  o.eval_interval = 4;
  o.eval_iters = 2;
  o.ckpt_interval = 4;
  o.keep_last = 2;
  o.sample_tokens = 0;
  o.threads = 1;
  o.quiet = true;
  o.out = (d.path / "run").string();
  return o;
}

void flip_byte(const std::string& path, std::streamoff from_end) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(-from_end, std::ios::end);
  const char c = char(f.get());
  f.seekp(-from_end, std::ios::end);
  f.put(char(c ^ 0x5a));
}

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// The id of a process that has exited and been reaped.
pid_t dead_pid() {
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(0);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return pid;
}

// What `lathe train --resume FILE_OR_DIR --out DIR` does, with `given` on top.
Trainer resume_into(const std::string& from, const std::string& dir, std::vector<std::string> keys = {},
                    TrainOptions given = {}) {
  given.quiet = true;
  given.out = dir;
  keys.push_back("out");
  return Trainer::resume(from, given, keys);
}

}  // namespace

TEST_CASE("run hardening: a resume from an older checkpoint file keeps it and every new checkpoint") {
  TempDir d("older_file");
  TrainOptions o = small_run(d);
  Trainer(o).run(nullptr);
  const std::string dir = o.out, older = checkpoint_path(dir, 4), newest = checkpoint_path(dir, 8);
  flip_byte(newest, 5);  // what the damaged-newest error then tells the user to resume from: `older`
  CHECK(contains(error_of([&] { open_resume_checkpoint(dir); }), older));

  // A process resumed from the older file, checkpointing every step, killed mid-run.
  const std::string cmd = std::string("exec ") + LATHE_CLI_PATH + " train --quiet --resume " + older +
                          " --steps 100000 --ckpt-interval 1 --keep-last 2 --eval-interval 0 >/dev/null 2>&1";
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::execl("/bin/sh", "sh", "-c", cmd.c_str(), (char*)nullptr);
    ::_exit(127);
  }
  for (int i = 0; i < 600 && (list_checkpoints(dir).empty() || list_checkpoints(dir).back().first < 9); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);

  const auto ckpts = list_checkpoints(dir);
  REQUIRE(ckpts.size() >= 2);
  CHECK(ckpts.front().second == older);  // the checkpoint resumed from survives the rotation
  CHECK(ckpts.back().first >= 9);        // and so do the new ones
  for (const auto& [step, path] : ckpts) {
    INFO(path);
    CHECK(error_of([&] { serialize::TrainingCheckpoint::read(path); }) == "");
  }
  // The damaged checkpoint of step 8 was moved aside, not deleted.
  int moved = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (!e.is_directory() || e.path().filename().string().rfind("superseded-4-", 0) != 0) continue;
    moved += fs::exists(e.path() / fs::path(newest).filename());
  }
  CHECK(moved == 1);
}

TEST_CASE("run hardening: rotation keeps the checkpoint just written and the one resumed from") {
  TempDir d("rotation");
  TrainOptions o = small_run(d);
  o.keep_last = 1;
  Trainer(o).run(nullptr);  // leaves ckpt-8 only
  const std::string dir = o.out;
  REQUIRE(list_checkpoints(dir).size() == 1);
  // A checkpoint of another run in a second directory: resuming DIR's into it moves it aside.
  const std::string other = (d.path / "other").string();
  fs::create_directories(other);
  fs::copy_file(checkpoint_path(dir, 8), checkpoint_path(other, 2));
  TrainOptions given;
  given.steps = 10;
  given.ckpt_interval = 1;
  resume_into(checkpoint_path(dir, 8), other, {"steps", "ckpt_interval"}, given).run(nullptr);
  const auto ckpts = list_checkpoints(other);
  REQUIRE(ckpts.size() == 1);
  CHECK(ckpts.back().first == 10);
  bool moved = false;
  for (const auto& e : fs::directory_iterator(other))
    moved = moved || (e.is_directory() && fs::exists(e.path() / fs::path(checkpoint_path(other, 2)).filename()));
  CHECK(moved);

  // In its own directory, with keep_last 1, the checkpoint resumed from stays beside the newest.
  resume_into(checkpoint_path(dir, 8), dir, {"steps", "ckpt_interval"}, given).run(nullptr);
  const auto own = list_checkpoints(dir);
  REQUIRE(own.size() == 2);
  CHECK(own.front().first == 8);
  CHECK(own.back().first == 10);
}

TEST_CASE("run hardening: a second run on the same directory is refused at once, naming the first") {
  TempDir d("lock");
  TrainOptions o = small_run(d);
  fs::create_directories(o.out);
  {
    serialize::DirectoryLock held(o.out, "lathe train", "run directory");  // as a first `lathe train` holds it
    const std::string err = error_of([&] { Trainer(o).run(nullptr); });
    CHECK(contains(err, "process " + std::to_string(::getpid())));
    CHECK(contains(err, o.out));
    CHECK(list_checkpoints(o.out).empty());
    const lathe::testing::Run r = run_lathe("train --quiet --steps 2 --data " + o.data + " --config " + o.config +
                                            " --out " + o.out);
    CHECK(r.code == 1);
    CHECK(contains(r.output, "process " + std::to_string(::getpid())));
    CHECK(std::count(r.output.begin(), r.output.end(), '\n') == 1);
  }
  CHECK(error_of([&] { Trainer(o).run(nullptr); }) == "");  // released with its holder
}

TEST_CASE("run hardening: parameters made non-finite by an update are never saved") {
  TempDir d("nonfinite");
  TrainOptions o = small_run(d);
  o.lr = 1e39;  // finite as a double; the f32 update makes the weights infinite, then NaN
  o.steps = 1;
  o.warmup = 0;
  o.min_lr = 0;
  const std::string err = error_of([&] { Trainer(o).run(nullptr); });
  CHECK(contains(err, "step 1"));
  CHECK(contains(err, "non-finite"));
  CHECK((contains(err, "transformer.") || contains(err, "lm_head")));
  CHECK(list_checkpoints(o.out).empty());
  CHECK(!fs::exists(fs::path(o.out) / "model.safetensors"));
}

TEST_CASE("run hardening: absurd model sizes are refused before anything is built, naming the field") {
  TempDir d("sizes");
  const std::string huge_vocab =
      d.write("vocab.json", R"({"vocab_size": 288230376151691776, "block_size": 8, "n_layer": 1, "n_head": 1, "n_embd": 64})");
  std::string err = error_of([&] { resolve_model_config(huge_vocab); });
  CHECK(contains(err, huge_vocab));
  CHECK(contains(err, "vocab_size"));
  CHECK(contains(err, "overflow"));

  const std::string huge_embd =
      d.write("embd.json", R"({"vocab_size": 256, "block_size": 8, "n_layer": 1, "n_head": 1, "n_embd": 4294967296})");
  err = error_of([&] { resolve_model_config(huge_embd); });
  CHECK(contains(err, "n_embd"));
  CHECK(contains(err, "overflow"));

  // No overflow, but far more than any machine's memory: the bytes are named.
  TrainOptions o = small_run(d, R"({"vocab_size": 1099511627776, "block_size": 8, "n_layer": 1, "n_head": 1, "n_embd": 64})");
  err = error_of([&] { Trainer t(o); });
  CHECK(contains(err, "vocab_size 1099511627776"));
  CHECK(contains(err, "bytes"));
  CHECK(contains(err, "memory"));
  CHECK(!fs::exists(o.out));
  const lathe::testing::Run r = run_lathe("train --steps 1 --data " + o.data + " --config " + o.config);
  CHECK(r.code == 2);
  CHECK(contains(r.output, "vocab_size"));
}

TEST_CASE("run hardening: config files refuse unknown keys, quote bad values short, and bound nesting") {
  TempDir d("config");
  std::string err = error_of([&] {
    resolve_model_config(d.write("typo.json", R"({"vocab_size": 256, "block_size": 8, "n_layer": 1, "n_head": 1,
                                                   "n_embd": 8, "droput": 0.1})"));
  });
  CHECK(contains(err, "\"droput\""));
  CHECK(contains(err, "unknown"));

  const std::string long_value(100000, 'x');
  err = error_of([&] {
    resolve_model_config(d.write("long.json", R"({"vocab_size": 256, "block_size": 8, "n_layer": ")" + long_value +
                                                  R"(", "n_head": 1, "n_embd": 8})"));
  });
  CHECK(contains(err, "n_layer"));
  CHECK(err.size() < 400);

  std::string deep = R"({"vocab_size": 256, "block_size": 8, "n_layer": 1, "n_head": 1, "n_embd": 8, "bias": )";
  deep += std::string(10000, '[') + std::string(10000, ']') + "}";
  err = error_of([&] { resolve_model_config(d.write("deep.json", deep)); });
  CHECK(contains(err, "nested deeper"));
  CHECK(err.size() < 400);
}

TEST_CASE("run hardening: a model whose vocab_size exceeds the bytes trains and samples only bytes") {
  TempDir d("vocab");
  TrainOptions o = small_run(d, R"({"vocab_size": 300, "block_size": 16, "n_layer": 1, "n_head": 2, "n_embd": 32})");
  o.steps = 3;
  o.ckpt_interval = 0;
  o.sample_tokens = 40;
  Trainer t(o);
  CHECK(error_of([&] { t.run(nullptr); }) == "");
  std::string text;
  CHECK(error_of([&] { text = t.sample("\n", 40); }) == "");
  CHECK(text.size() == 41);
  CHECK(t.sample("\n", 40) == text);  // seeded: the same sample again

  const lathe::testing::Run r = run_lathe("train --steps 2 --eval-iters 1 --sample-tokens 30 --threads 1 --data " +
                                          o.data + " --config " + o.config + " --out " + (d.path / "cli").string());
  CHECK(r.code == 0);
  CHECK(contains(r.output, "---- sample"));

  // lathe sample draws through the same limit: every id below 256, where without it a hot
  // temperature reaches the padded ids.
  const std::string weights = (d.path / "cli" / "model.safetensors").string();
  CHECK(run_lathe("sample --tokens 50 --temperature 2 --checkpoint " + weights).code == 0);
  serialize::LoadedModel m = serialize::load_model(weights);
  const Tensor prompt = Tensor::from_vector(std::vector<int64_t>{10}, {1, 1});
  const std::vector<int64_t> limited = m.model->generate(prompt, 200, 2.0, 0, 7, true, 256).to_vector<int64_t>();
  const std::vector<int64_t> free = m.model->generate(prompt, 200, 2.0, 0, 7).to_vector<int64_t>();
  CHECK(*std::max_element(limited.begin(), limited.end()) < 256);
  CHECK(*std::max_element(free.begin(), free.end()) >= 256);
}

TEST_CASE("run hardening: a resume at the final step says the run is complete and rewrites the weights") {
  TempDir d("complete");
  TrainOptions o = small_run(d);
  Trainer(o).run(nullptr);
  const fs::path dir = o.out;
  const std::string metrics_before = read_text(dir / "metrics.jsonl");
  // A stale model.safetensors (from another run) and a killed writer's temporary file.
  TrainOptions other = small_run(d);
  other.seed = 7;
  other.steps = 2;
  other.out = (d.path / "other").string();
  Trainer(other).run(nullptr);
  fs::copy_file(fs::path(other.out) / "model.safetensors", dir / "model.safetensors",
                fs::copy_options::overwrite_existing);
  const fs::path temp = dir / (".model.safetensors.tmp-" + std::to_string(dead_pid()) + "-1-9abc-2");
  std::ofstream(temp) << "partial";

  TrainOptions given;
  given.quiet = false;
  given.out = dir.string();
  std::FILE* log = std::tmpfile();
  REQUIRE(log != nullptr);
  TrainSummary summary;
  CHECK(error_of([&] { summary = Trainer::resume(dir.string(), given, {"out"}).run(log); }) == "");
  std::rewind(log);
  std::string said;
  for (int c; (c = std::fgetc(log)) != EOF;) said += char(c);
  std::fclose(log);
  CHECK(contains(said, "complete"));
  CHECK(!contains(said, "val loss"));
  CHECK(summary.steps == 8);
  CHECK(summary.final_val_loss > 0);  // the evaluation the run made at step 8, not a made-up 0

  const serialize::SafetensorsFile ckpt = serialize::read_safetensors(checkpoint_path(dir.string(), 8));
  const serialize::SafetensorsFile weights = serialize::read_safetensors((dir / "model.safetensors").string());
  int compared = 0;
  for (const auto& [name, t] : weights.tensors) {
    const Tensor* c = ckpt.find(name);
    if (c == nullptr) continue;
    CHECK(serialize::tensor_checksum(t) == serialize::tensor_checksum(*c));
    ++compared;
  }
  CHECK(compared > 3);
  CHECK(weights.metadata.at("step") == "8");
  CHECK(!fs::exists(temp));
  for (const auto& e : fs::directory_iterator(dir)) CHECK(!contains(e.path().filename().string(), ".tmp-"));
  CHECK(read_text(dir / "metrics.jsonl") == metrics_before);
}

TEST_CASE("run hardening: metrics with null values and a torn last line resume, a bad line names the file") {
  TempDir d("metrics");
  TrainOptions o = small_run(d);
  o.keep_last = 10;
  Trainer(o).run(nullptr);
  const fs::path full = o.out;
  std::vector<std::string> lines;
  {
    std::ifstream in(full / "metrics.jsonl");
    for (std::string line; std::getline(in, line);) lines.push_back(line);
  }
  REQUIRE(lines.size() == 8);

  // The run stopped at step 6 with its checkpoint of step 4; step 2's loss was NaN (written as
  // null), and the disk filled while step 7 was appended.
  const fs::path part = d.path / "part";
  fs::create_directories(part);
  fs::copy_file(checkpoint_path(full.string(), 4), checkpoint_path(part.string(), 4));
  nlohmann::json two = nlohmann::json::parse(lines[1]);
  two["loss"] = nullptr;
  {
    std::ofstream out(part / "metrics.jsonl", std::ios::binary);
    out << lines[0] << "\n" << two.dump() << "\n";
    for (int i = 2; i < 6; ++i) out << lines[size_t(i)] << "\n";
    out << lines[6].substr(0, lines[6].size() / 2);
  }
  CHECK(error_of([&] { resume_into(part.string(), part.string()).run(nullptr); }) == "");
  const auto b = read_jsonl(part / "metrics.jsonl");
  REQUIRE(b.size() == 8);
  CHECK(b[1]["loss"].is_null());
  for (size_t i = 2; i < 8; ++i) {  // kept lines as they were, then the steps after the checkpoint again
    const nlohmann::json a = nlohmann::json::parse(lines[i]);
    CHECK(b[i]["step"] == a["step"]);
    CHECK(b[i]["loss"].get<double>() == a["loss"].get<double>());
    if (i < 4) CHECK(b[i].dump() == a.dump());
  }

  // A line that is not JSON in the middle of the file: the error names the file and the line.
  const fs::path bad = d.path / "bad";
  fs::create_directories(bad);
  fs::copy_file(checkpoint_path(full.string(), 4), checkpoint_path(bad.string(), 4));
  fs::copy_file(checkpoint_path(full.string(), 8), checkpoint_path(bad.string(), 8));
  std::ofstream(bad / "metrics.jsonl") << lines[0] << "\n{\"step\": 2, \"loss\": oops\n" << lines[2] << "\n";
  const std::string err =
      error_of([&] { resume_into(checkpoint_path(bad.string(), 4), bad.string()).run(nullptr); });
  CHECK(contains(err, (bad / "metrics.jsonl").string()));
  CHECK(contains(err, "line 2"));
  CHECK(list_checkpoints(bad.string()).size() == 2);  // the failed resume moved nothing aside
  CHECK(metric_value(nlohmann::json{{"loss", nullptr}}, "loss", "x") != metric_value({{"loss", nullptr}}, "loss", "x"));
}

TEST_CASE("run hardening: model.safetensors carries checksums, a flipped byte names the file and tensor") {
  TempDir d("weights");
  TrainOptions o = small_run(d);
  o.steps = 2;
  o.ckpt_interval = 0;
  Trainer(o).run(nullptr);
  const std::string path = (fs::path(o.out) / "model.safetensors").string();
  const serialize::SafetensorsFile f = serialize::read_safetensors(path);
  const auto sums = serialize::recorded_checksums(f.metadata, path);
  CHECK(sums.size() == f.tensors.size());
  CHECK(f.metadata.at("format") == serialize::kWeightsFormat);
  CHECK(error_of([&] { serialize::load_model(path); }) == "");

  flip_byte(path, 3);  // inside the data of the file's last tensor
  const std::string err = error_of([&] { serialize::load_model(path); });
  CHECK(contains(err, path));
  CHECK(contains(err, "tensor '"));
  CHECK(contains(err, "damaged"));
  const lathe::testing::Run r = run_lathe("sample --checkpoint " + path + " --tokens 5");
  CHECK(r.code == 1);
  CHECK(contains(r.output, "damaged"));
}
