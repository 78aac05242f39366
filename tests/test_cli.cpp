// The `lathe` program as a user meets it: exit codes (0 ok, 1 runtime error, 2 usage error) and
// one-line messages. Runs the built binary (LATHE_CLI_PATH) through the shell.
#include <doctest/doctest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/temp_dir.h"
#include "tests/test_helpers.h"

namespace fs = std::filesystem;
using lathe::testing::Run;
using lathe::testing::run_lathe;

namespace {

size_t line_count(const std::string& s) {
  size_t n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

// The inputs of a tiny training run in `dir`: model.json (a 1-layer, 16-wide byte model) and
// corpus.txt (a few hundred bytes).
void write_tiny_run_inputs(const fs::path& dir) {
  std::ofstream(dir / "model.json") << R"({"vocab_size": 256, "block_size": 8, "n_layer": 1, "n_head": 1, "n_embd": 16})";
  std::ofstream text(dir / "corpus.txt");
  for (int i = 0; i < 40; ++i) text << "hello lathe. ";
}

}  // namespace

TEST_CASE("cli: help and info succeed") {
  Run help = run_lathe("--help");
  CHECK(help.code == 0);
  CHECK(help.output.find("train") != std::string::npos);
  CHECK(run_lathe("train --help").code == 0);
  Run info = run_lathe("info");
  CHECK(info.code == 0);
  CHECK(info.output.find("Eigen") != std::string::npos);
  CHECK(info.output.find("CUDA") != std::string::npos);
  Run json = run_lathe("info --json");
  CHECK(json.code == 0);
  CHECK(json.output.find("\"version\"") != std::string::npos);
}

TEST_CASE("cli: usage errors exit 2 with one line") {
  for (const char* args : {"no-such-command", "train --steps -3", "train --steps abc", "train --config nope",
                           "train --optimizer rmsprop", "train --lr 0", "bench --config nope",
                           "sample --tokens 5"}) {
    CAPTURE(args);
    Run r = run_lathe(args);
    CHECK(r.code == 2);
    CHECK(line_count(r.output) == 1);
    CHECK(r.output.rfind("lathe: ", 0) == 0);
  }
}

TEST_CASE("cli: train flags out of range are usage errors, one line naming the flag") {
  for (const char* args : {"train --batch 0", "train --batch -2", "train --min-lr -0.5", "train --out ''",
                           "train --steps 99999999999999999999", "train --threads 99999999999",
                           "train --seed 99999999999999999999999", "train --eval-iters 0",
                           // once a bare std::bad_alloc; now refused before anything is allocated
                           "train --batch 100000000", "bench --batch 2000000"}) {
    CAPTURE(args);
    Run r = run_lathe(args);
    CHECK(r.code == 2);
    CHECK(line_count(r.output) == 1);
    CHECK(r.output.rfind("lathe: ", 0) == 0);
    const std::string a = args;
    const size_t start = a.find(' ') + 1;
    const std::string flag = a.substr(start, a.find(' ', start) - start);
    CHECK(r.output.find(flag) != std::string::npos);
  }
}

TEST_CASE("cli: an absurd --threads is capped with a warning instead of aborting in OpenMP") {
  const lathe::testing::TempDir temp("cli_threads");
  const fs::path& dir = temp.path;
  write_tiny_run_inputs(dir);
  Run t = run_lathe("train --quiet --steps 1 --eval-iters 1 --sample-tokens 0 --threads 10000 --config " +
                    (dir / "model.json").string() + " --data " + (dir / "corpus.txt").string() + " --out " +
                    (dir / "run").string());
  CHECK(t.code == 0);
  CHECK(line_count(t.output) == 1);
  CHECK(t.output.find("--threads 10000") != std::string::npos);
  CHECK(t.output.find("warning") != std::string::npos);
}

TEST_CASE("cli: runtime errors exit 1 with one line naming the path") {
  const std::string missing = (fs::temp_directory_path() / "lathe_no_such_corpus").string();
  Run r = run_lathe("train --steps 1 --data " + missing);
  CHECK(r.code == 1);
  CHECK(line_count(r.output) == 1);
  CHECK(r.output.find(missing) != std::string::npos);

  const fs::path empty = fs::temp_directory_path() / ("lathe_empty_corpus_" + std::to_string(::getpid()));
  std::ofstream(empty).close();
  Run e = run_lathe("train --steps 1 --data " + empty.string());
  fs::remove(empty);
  CHECK(e.code == 1);
  CHECK(line_count(e.output) == 1);
  CHECK(e.output.find("empty") != std::string::npos);

  Run s = run_lathe("sample --checkpoint " + missing);
  CHECK(s.code == 1);
  CHECK(s.output.find(missing) != std::string::npos);
}

TEST_CASE("cli: train, then sample from the weights it wrote, bench prints JSON, inspect and resume a checkpoint") {
  const fs::path dir = fs::temp_directory_path() / ("lathe_test_cli_run_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  write_tiny_run_inputs(dir);
  Run t = run_lathe("train --steps 3 --threads 1 --eval-iters 1 --sample-tokens 5 --config " + (dir / "model.json").string() +
                    " --data " + (dir / "corpus.txt").string() + " --out " + (dir / "run").string());
  CHECK(t.code == 0);
  CHECK(t.output.find("val loss") != std::string::npos);
  CHECK(fs::exists(dir / "run" / "model.safetensors"));
  CHECK(fs::exists(dir / "run" / "metrics.jsonl"));
  CHECK(fs::exists(dir / "run" / "loss.svg"));

  Run s = run_lathe("sample --tokens 7 --prompt hello --checkpoint " + (dir / "run" / "model.safetensors").string());
  CHECK(s.code == 0);
  CHECK(s.output.rfind("hello", 0) == 0);
  CHECK(s.output.size() == 5 + 7 + 1);  // prompt, continuation, newline

  Run b = run_lathe("bench --json --steps 1 --warmup 0 --threads 1 --peak-tflops 0.002 --config " +
                    (dir / "model.json").string());
  CHECK(b.code == 0);
  CHECK(b.output.find("\"tok_per_s\"") != std::string::npos);
  // MFU: the achieved rate over --peak-tflops (here 2 GFLOP/s, so that a tiny model shows a share).
  const nlohmann::json bj = nlohmann::json::parse(b.output);
  CHECK(bj.at("peak_tflops").get<double>() == 0.002);
  CHECK(bj.at("mfu").get<double>() == doctest::Approx(bj.at("gflop_per_s").get<double>() / 2.0).epsilon(1e-12));
  CHECK(bj.at("mfu").get<double>() > 0);
  // --profile: each kernel's share and rate, set against the vector units' measured peak, and the
  // bound that the products' operations at that peak put on a step.
  Run p = run_lathe("bench --profile --steps 1 --warmup 0 --threads 1 --config " + (dir / "model.json").string());
  CHECK(p.code == 0);
  for (const char* want : {"peak: f32 multiply-adds ", "f32 GEMM 1024^3 ", "of peak", "of GEMM", "matmul",
                           "causal_attention", "bound: "}) {
    CAPTURE(want);
    CHECK(p.output.find(want) != std::string::npos);
  }
  const std::string peak_label = "multiply-adds ";
  const size_t at = p.output.find(peak_label);
  REQUIRE(at != std::string::npos);
  CHECK(std::stod(p.output.substr(at + peak_label.size())) > 0);

  // The training checkpoint: inspect shows what the checkpoint issue asks for and verifies it.
  const std::string ckpt = (dir / "run" / "ckpt-00000003.safetensors").string();
  Run i = run_lathe("inspect " + ckpt);
  CHECK(i.code == 0);
  for (const char* want : {"format version 1", "kind training_state", "step: 3", "model: ", "n_embd=16",
                           "optimizer: adamw, 2 groups", "weight_decay=0.1", "optim.param.0.exp_avg", "policy with_param",
                           "optim.param.0.step", "policy host", "transformer.wte.weight", "F32", "[256, 16]", "ok"}) {
    CAPTURE(want);
    CHECK(i.output.find(want) != std::string::npos);
  }
  CHECK(run_lathe("sample --tokens 3 --checkpoint " + ckpt).code == 0);
  // Changing what the run computes is a usage error naming the setting.
  Run lr = run_lathe("train --resume " + (dir / "run").string() + " --lr 0.5");
  CHECK(lr.code == 2);
  CHECK(lr.output.find("lr") != std::string::npos);
  // A flipped data byte: inspect names the tensor and fails; --resume refuses the file and writes nothing.
  {
    std::fstream f(ckpt, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-2, std::ios::end);
    f.put('\x55');
  }
  Run bad = run_lathe("inspect " + ckpt);
  CHECK(bad.code == 1);
  CHECK(bad.output.find("checksum") != std::string::npos);
  Run r = run_lathe("train --resume " + (dir / "run").string() + " --steps 5");
  CHECK(r.code == 1);
  CHECK(r.output.find(ckpt) != std::string::npos);
  CHECK(!fs::exists(dir / "run" / "ckpt-00000005.safetensors"));
  fs::remove_all(dir);
}

TEST_CASE("cli: tokenizer train, encode, decode, tokenize, train on the shards, sample decodes with the tokenizer") {
  lathe::testing::TempDir d("cli_tokenizer");
  std::string text;
  for (int i = 0; i < 300; ++i) text += "The lathe turns " + std::to_string(i % 13) + " times; it's quiet.\n";
  d.write("corpus/a.txt", text);
  d.write("corpus/b.txt", "Unicode: na\xc3\xafve \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x98\x80 and bad \xff bytes\n");
  const std::string tok = d.file("tok.json"), corpus = d.file("corpus");
  Run r = run_lathe("tokenizer train --data '" + corpus + "' --vocab-size 320 --pattern gpt4 --out '" + tok + "'");
  REQUIRE(r.code == 0);
  CHECK(r.output.find("320 tokens") != std::string::npos);
  // encode prints one JSON array; decode gives the bytes back.
  r = run_lathe("tokenizer encode --tokenizer '" + tok + "' --threads 2 '" + d.file("corpus/b.txt") + "'");
  REQUIRE(r.code == 0);
  REQUIRE(r.output.front() == '[');
  d.write("ids.json", r.output);
  r = run_lathe("tokenizer decode --tokenizer '" + tok + "' '" + d.file("ids.json") + "'");
  CHECK(r.code == 0);
  CHECK(r.output == "Unicode: na\xc3\xafve \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x98\x80 and bad \xff bytes\n");
  // Shards, then a short run on them whose weights name the tokenizer.
  r = run_lathe("tokenize --tokenizer '" + tok + "' --data '" + corpus + "' --out '" + d.file("shards") + "' --shard-tokens 1000");
  REQUIRE(r.code == 0);
  CHECK(fs::exists(d.file("shards/shard_000000.bin")));
  CHECK(fs::exists(d.file("shards/shard_000001.bin")));
  std::ofstream(d.path / "model.json") << R"({"vocab_size": 256, "block_size": 8, "n_layer": 1, "n_head": 1, "n_embd": 16})";
  r = run_lathe("train --data '" + d.file("shards") + "' --config '" + d.file("model.json") +
                "' --steps 3 --eval-iters 1 --sample-tokens 5 --out '" + d.file("run") + "'");
  REQUIRE(r.code == 0);
  CHECK(r.output.find("bits/byte") != std::string::npos);
  CHECK(r.output.find("token shards") != std::string::npos);
  r = run_lathe("sample --checkpoint '" + d.file("run/model.safetensors") + "' --tokens 5 --prompt 'The lathe'");
  CHECK(r.code == 0);
  r = run_lathe("sample --checkpoint '" + d.file("run/ckpt-00000003.safetensors") + "' --tokens 5");
  CHECK(r.code == 0);
  // A changed tokenizer file: sampling is refused, naming it.
  std::ofstream(tok, std::ios::app) << "\n";
  r = run_lathe("sample --checkpoint '" + d.file("run/model.safetensors") + "' --tokens 5");
  CHECK(r.code == 1);
  CHECK(line_count(r.output) == 1);
  CHECK(r.output.find(tok) != std::string::npos);
  CHECK(r.output.find("has changed") != std::string::npos);
}
