// What lathe's commands do to the outputs they are given (the third hardening round): a directory
// or file that holds something this command did not write is refused unless --overwrite, and then
// replaced as one unit (serialize/staged_directory.h, train/run_directory.h); what killed writers
// left beside an output is cleared; paths are bytes, stored whole in documents and shown escaped.
// (Kills at every write are tools/fault_kill.py's, a ctest test of its own.)
#include <doctest/doctest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "serialize/json_document.h"
#include "serialize/staged_directory.h"
#include "tests/temp_dir.h"
#include "tests/test_helpers.h"
#include "train/train_options.h"

using namespace lathe;
using lathe::testing::run_lathe;
using lathe::testing::TempDir;
namespace fs = std::filesystem;

namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// 'path', for a command line (appended, not prepended: GCC 12 warns falsely on "'" + a temporary).
std::string quoted(const std::string& path) {
  std::string q = "'";
  q += path;
  q += "' ";
  return q;
}

const std::string kQuick = " --config tiny --steps 2 --batch 2 --eval-iters 1 --sample-tokens 0 --quiet --threads 1";

// A corpus and the flags of a run of a few seconds on it.
std::string quick_run(const TempDir& d) {
  std::ofstream text(d.path / "corpus.txt");
  for (int i = 0; i < 40; ++i) text << "the quick brown fox " << i << " jumps over the lazy dog. ";
  text.close();
  return "--data '" + d.file("corpus.txt") + "'" + kQuick;
}

}  // namespace

TEST_CASE("outputs: a fresh run refuses an --out that holds files, and --overwrite replaces only the run's") {
  TempDir d("out_train");
  const std::string run = quick_run(d);
  REQUIRE(run_lathe("train " + run + " --out '" + d.file("first") + "'").code == 0);
  // A converted Hugging Face directory, as a fine-tuning's --out: its weights were overwritten.
  REQUIRE(run_lathe("convert '" + d.file("first/model.safetensors") + "' '" + d.file("hf") + "' --to hf").code == 0);
  d.write("hf/notes.txt", "mine");
  const std::string weights = slurp(d.file("hf/model.safetensors"));
  lathe::testing::Run r = run_lathe("train " + run + " --init-from '" + d.file("first/model.safetensors") + "' --out '" +
                                    d.file("hf") + "'");
  CHECK(r.code == 1);
  CHECK(contains(r.output, "--out " + d.file("hf") + " is not empty (3 entries: config.json, model.safetensors, notes.txt)"));
  CHECK(contains(r.output, "give --overwrite"));
  CHECK(slurp(d.file("hf/model.safetensors")) == weights);
  // Fine-tuning into the directory of its own weights: not even --overwrite.
  r = run_lathe("train " + run + " --init-from '" + d.file("hf") + "' --out '" + d.file("hf") + "' --overwrite");
  CHECK(r.code == 1);
  CHECK(contains(r.output, "which this run reads; --overwrite would delete it"));
  CHECK(slurp(d.file("hf/model.safetensors")) == weights);
  // --overwrite: the run's files replaced in one swap, the others carried over.
  r = run_lathe("train " + run + " --init-from '" + d.file("first/model.safetensors") + "' --out '" + d.file("hf") +
                "' --overwrite");
  CHECK(r.code == 0);
  CHECK(slurp(d.file("hf/notes.txt")) == "mine");
  CHECK(fs::exists(d.file("hf/config.json")));
  CHECK(fs::exists(d.file("hf/ckpt-00000002.safetensors")));
  CHECK(slurp(d.file("hf/model.safetensors")) != weights);
  for (const auto& e : fs::directory_iterator(d.path)) CHECK(e.path().filename().string().rfind(".hf.", 0) != 0);
  // A run's own directory: continued by --resume, replaced only by --overwrite.
  r = run_lathe("train " + run + " --out '" + d.file("first") + "'");
  CHECK(contains(r.output, "already holds checkpoints of a run"));
  CHECK(contains(r.output, "or give --overwrite to replace that run"));
  CHECK(run_lathe("train --resume '" + d.file("first") + "' --overwrite").code == 2);
}

TEST_CASE("outputs: what a run killed before its first checkpoint left is no run, and a fresh run takes it") {
  TempDir d("out_killed_start");
  const std::string run = quick_run(d);
  d.write("run/metrics.jsonl", "{\"step\": 1, \"loss\": 5.5}\n");
  d.write("run/.metrics.jsonl.tmp-999999-0-1a2b-0", "partial");
  d.write("run/.lock", "");
  const lathe::testing::Run r = run_lathe("train " + run + " --out '" + d.file("run") + "'");
  CHECK_MESSAGE(r.code == 0, r.output);
  CHECK(!fs::exists(d.file("run/.metrics.jsonl.tmp-999999-0-1a2b-0")));
  CHECK(lathe::testing::read_jsonl(d.file("run/metrics.jsonl")).size() >= 2);
}

TEST_CASE("outputs: convert refuses an existing OUT unless --overwrite, and clears what killed writers left") {
  TempDir d("out_convert");
  REQUIRE(run_lathe("train " + quick_run(d) + " --out '" + d.file("run") + "'").code == 0);
  const std::string in = quoted(d.file("run/model.safetensors"));
  d.write("taken.bin", "not mine");
  lathe::testing::Run r = run_lathe("convert " + in + "'" + d.file("taken.bin") + "' --to llmc");
  CHECK(r.code == 1);
  CHECK(contains(r.output, d.file("taken.bin") + " exists; give --overwrite to replace it"));
  CHECK(slurp(d.file("taken.bin")) == "not mine");
  CHECK(run_lathe("convert " + in + "'" + d.file("taken.bin") + "' --to llmc --overwrite").code == 0);
  CHECK(slurp(d.file("taken.bin")) != "not mine");
  // An empty directory takes a model; a killed writer's stage (its process gone, its lock free) and an
  // earlier lathe's temporary directory beside it are removed.
  fs::create_directories(d.file("hf"));
  d.write(".hf.stage-999999999-0/model.safetensors", "partial");
  d.write(".hf.tmp-999999999-3/config.json", "partial");
  r = run_lathe("convert " + in + "'" + d.file("hf") + "' --to hf");
  CHECK_MESSAGE(r.code == 0, r.output);
  CHECK(!fs::exists(d.file(".hf.stage-999999999-0")));
  CHECK(!fs::exists(d.file(".hf.tmp-999999999-3")));
  // A stage of a process that lives (this one) is not someone else's to remove.
  const std::string live = ".hf.stage-" + std::to_string(::getpid()) + "-77";
  d.write(live + "/x", "x");
  serialize::clear_stale_stages(d.file("hf"));
  CHECK(fs::exists(d.file(live)));
}

TEST_CASE("outputs: a swap killed between its two renames is undone by the next writer") {
  // Where renameat2 is missing the swap is two renames; a kill between leaves the old directory
  // moved aside and no target: the next writer puts it back before anything else.
  TempDir d("out_fallback");
  d.write(".model.old-999999999-0/config.json", "old");
  serialize::clear_stale_stages(d.file("model"));
  CHECK(slurp(d.file("model/config.json")) == "old");
  CHECK(!fs::exists(d.file(".model.old-999999999-0")));
}

TEST_CASE("outputs: paths are bytes: a run on a path that is not UTF-8 saves, resumes, and is named escaped") {
  TempDir d("out_bytes");
  const std::string run = quick_run(d);
  const std::string out = d.file("run\xff");
  lathe::testing::Run r = run_lathe("train " + run + " --out '" + out + "'");
  REQUIRE_MESSAGE(r.code == 0, r.output);  // it trained, then could not write its checkpoint
  CHECK(fs::exists(out + "/ckpt-00000002.safetensors"));
  r = run_lathe("train --resume '" + out + "' --steps 3 --quiet --sample-tokens 0");
  CHECK_MESSAGE(r.code == 0, r.output);
  // The path is stored as its bytes, and reads back as it was.
  train::TrainOptions o;
  o.out = out;
  const nlohmann::json j = train::to_json(o);
  CHECK(j["out"].is_object());
  CHECK(train::train_options_from_json(j).out == out);
  // An error names it escaped, on one line.
  r = run_lathe("sample --checkpoint '" + out + "/none.safetensors'");
  CHECK(r.code == 1);
  CHECK(contains(r.output, "run\\xFF/none.safetensors"));
  CHECK(!contains(r.output, "\xff"));
  // A tokenizer at such a path, over an existing corpus: the corpus is replaced whole, never lost.
  const std::string tok = d.file("tok\xff.json");
  REQUIRE(run_lathe("tokenizer train --data '" + d.file("corpus.txt") + "' --vocab-size 280 --out '" + tok + "'").code == 0);
  REQUIRE(run_lathe("tokenize --tokenizer bytes --data '" + d.file("corpus.txt") + "' --out '" + d.file("shards") + "'").code == 0);
  r = run_lathe("tokenize --tokenizer '" + tok + "' --data '" + d.file("corpus.txt") + "' --out '" + d.file("shards") +
                "' --overwrite");
  CHECK_MESSAGE(r.code == 0, r.output);
  CHECK(run_lathe("train --data '" + d.file("shards") + "' --out '" + d.file("on_shards") + "'" + kQuick).code == 0);
  r = run_lathe("convert '" + out + "/model.safetensors' '" + d.file("w\xff.safetensors") + "'");
  CHECK_MESSAGE(r.code == 0, r.output);
}
