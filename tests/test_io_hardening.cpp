// Regression tests for the adversarial round "no valid checkpoint lost, no crash, no hang", input
// side: corpus files that are not regular files or change under a run, corpora of many files,
// reference cases that ask for more steps than they hold, JSON nested past the bound in any
// metadata string, and commands whose standard output cannot be written.
#include <doctest/doctest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <limits>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>

#include "core/error.h"
#include "data/text_dataset.h"
#include "nn/gpt.h"
#include "ref/case_registry.h"
#include "serialize/checkpoint.h"
#include "serialize/checksum.h"
#include "serialize/model_file.h"
#include "serialize/safetensors.h"
#include "tests/temp_dir.h"
#include "tests/test_helpers.h"

using namespace lathe;
using lathe::testing::error_of;
using lathe::testing::TempDir;
namespace fs = std::filesystem;

namespace {

const std::string kGolden = LATHE_GOLDEN_DIR;

std::string corpus_error(const std::string& path) {
  return error_of([&] { data::TextCorpus::open(path); });
}

std::string nested_arrays(int depth) { return std::string(size_t(depth), '[') + std::string(size_t(depth), ']'); }

struct Result {
  int code;            // exit status; -1 when killed by a signal
  std::string stderr_text;
};

// Runs `lathe ARGS` with its standard output on /dev/full, where every write fails (ENOSPC).
Result run_to_dev_full(const std::string& args) {
  TempDir d("stderr");
  const std::string err = d.file("stderr.txt");
  const std::string cmd = std::string("'") + LATHE_CLI_PATH + "' " + args + " > /dev/full 2> '" + err + "'";
  const int status = std::system(cmd.c_str());
  std::ifstream in(err);
  std::stringstream ss;
  ss << in.rdbuf();
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, ss.str()};
}

// A reference case from the golden directory with its "case" document edited by `edit`.
template <class Edit>
std::string edited_case(const TempDir& d, const std::string& golden, Edit edit) {
  serialize::SafetensorsFile c = serialize::read_safetensors(kGolden + "/" + golden);
  nlohmann::json spec = nlohmann::json::parse(c.metadata.at("case"));
  edit(spec);
  const std::string path = d.file("edited." + golden);
  serialize::write_safetensors(path, c.tensors, serialize::Metadata{{"case", spec.dump()}});
  return path;
}

std::string ref_error(const std::string& case_path) {
  return error_of([&] { ref::run_reference_case(serialize::read_safetensors(case_path), Device::cpu()); });
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

TEST_CASE("io hardening: a FIFO as the corpus is refused at once, naming what it is") {
  TempDir d("fifo");
  const std::string fifo = d.file("pipe");
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  const std::string err = corpus_error(fifo);  // before the fix: blocked forever in open()
  CHECK(err.find(fifo) != std::string::npos);
  CHECK(err.find("FIFO") != std::string::npos);
  // Inside a directory a FIFO is not a text file: skipped, never opened.
  d.write("dir/a.txt", "text");
  REQUIRE(::mkfifo((d.path / "dir" / "pipe").c_str(), 0600) == 0);
  CHECK(data::TextCorpus::open(d.file("dir")).text(0, 4) == "text");
}

TEST_CASE("io hardening: a character device as the corpus is named as one, not as empty") {
  for (const char* dev : {"/dev/null", "/dev/urandom"}) {
    if (!fs::exists(dev)) continue;
    const std::string err = corpus_error(dev);
    CHECK(err.find(dev) != std::string::npos);
    CHECK(err.find("character device") != std::string::npos);
    CHECK(err.find("empty") == std::string::npos);
  }
}

TEST_CASE("io hardening: a loop of symbolic links is reported as one, not as a missing file") {
  TempDir d("loop");
  fs::create_symlink(d.path / "b", d.path / "a");
  fs::create_symlink(d.path / "a", d.path / "b");
  const std::string err = corpus_error(d.file("a"));
  CHECK(err.find(d.file("a")) != std::string::npos);
  CHECK(err.find("symbolic links") != std::string::npos);
  CHECK(err.find("no such file") == std::string::npos);
  // The same loop inside a corpus directory names the entry.
  d.write("dir/a.txt", "text");
  fs::create_symlink(d.path / "dir" / "y", d.path / "dir" / "x");
  fs::create_symlink(d.path / "dir" / "x", d.path / "dir" / "y");
  const std::string in_dir = corpus_error(d.file("dir"));
  CHECK(in_dir.find((d.path / "dir" / "x").string()) != std::string::npos);
  CHECK(in_dir.find("symbolic links") != std::string::npos);
  // The commands that read a safetensors file say the same (CLI11's check said "does not exist").
  for (const std::string& args : {"inspect '" + d.file("a") + "'", "ref '" + d.file("a") + "' '" + d.file("out") + "'",
                                  "sample --checkpoint '" + d.file("a") + "'"}) {
    INFO(args);
    const testing::Run r = testing::run_lathe(args);
    CHECK((r.code == 1 || r.code == 2));
    CHECK(r.output.find("symbolic links") != std::string::npos);
  }
  // A dangling link stays what it was: skipped.
  fs::remove(d.path / "dir" / "x");
  CHECK(data::TextCorpus::open(d.file("dir")).size() == 4);
}

TEST_CASE("io hardening: a corpus file that shrinks during reading is an error naming it, not SIGBUS") {
  TempDir d("shrink");
  const std::string path = d.write("corpus.txt", std::string(4096, 'a'));
  data::TextDataset ds(data::TextCorpus::open(path), 16);
  Generator gen(1);
  CHECK_NOTHROW(ds.sample(data::Split::train, 4, gen));
  fs::resize_file(path, 100);
  const std::string err = error_of([&] { ds.corpus().text(1000, 64); });
  CHECK(err.find(path) != std::string::npos);
  CHECK(err.find("shrank") != std::string::npos);
  // Random windows reach past byte 100 almost surely: an error, never a signal.
  CHECK(error_of([&] {
          for (int i = 0; i < 64; ++i) ds.sample(data::Split::train, 4, gen);
        }).find("shrank") != std::string::npos);
}

TEST_CASE("io hardening: a corpus file reopened after eviction is checked for shrinking and replacement") {
  TempDir d("reopen");
  const size_t n = data::OpenFiles::kCapacity + 4;
  for (size_t i = 0; i < n; ++i) d.write("dir/f" + std::to_string(100 + i) + ".txt", std::string(10, char('a' + i % 26)));
  data::TextCorpus c = data::TextCorpus::open(d.file("dir"));
  REQUIRE(c.file_count() == n);
  CHECK(c.text(0, 10 * n).substr(10, 10) == std::string(10, 'b'));  // every file read once
  // The first file was evicted long ago; the reopen sees what became of it.
  fs::resize_file(c.file_path(0), 5);
  for (size_t i = 1; i <= data::OpenFiles::kCapacity; ++i) c.text(10 * i, 10);
  std::string err = error_of([&] { c.text(0, 10); });
  CHECK(err.find(c.file_path(0)) != std::string::npos);
  CHECK(err.find("shrank") != std::string::npos);
  const std::string replacement = d.write("other.txt", std::string(10, 'z'));
  fs::rename(replacement, c.file_path(1));
  for (size_t i = 2; i <= data::OpenFiles::kCapacity + 1; ++i) c.text(10 * i, 10);
  err = error_of([&] { c.text(10, 10); });
  CHECK(err.find(c.file_path(1)) != std::string::npos);
  CHECK(err.find("replaced") != std::string::npos);
}

TEST_CASE("io hardening: a corpus of 70,000 files opens and reads (no mapping per file)") {
  TempDir d("many");
  constexpr int kFiles = 70000;  // past the kernel's default of 65,530 mappings per process
  fs::create_directories(d.path / "c");
  for (int i = 0; i < kFiles; ++i) {
    char name[32];
    std::snprintf(name, sizeof name, "c/%06d.txt", i);
    std::ofstream(d.path / name) << char('a' + i % 26);
  }
  const auto t0 = std::chrono::steady_clock::now();
  data::TextCorpus c = data::TextCorpus::open(d.file("c"));
  CHECK(c.file_count() == size_t(kFiles));
  CHECK(c.size() == size_t(kFiles));
  const std::string all = c.text(0, c.size());
  CHECK(all.substr(0, 27) == "abcdefghijklmnopqrstuvwxyza");
  CHECK(all[kFiles - 1] == char('a' + (kFiles - 1) % 26));
  MESSAGE("opened and read ", kFiles, " files in ", seconds_since(t0), " s");
}

TEST_CASE("io hardening: a train case refuses steps beyond its inputs at once, naming the field") {
  TempDir d("ref_train");
  for (int64_t steps : {int64_t(5), int64_t(1) << 40, std::numeric_limits<int64_t>::max()}) {
    const std::string path = edited_case(d, "train_tiny.case.safetensors", [&](nlohmann::json& s) { s["steps"] = steps; });
    const auto t0 = std::chrono::steady_clock::now();
    const std::string err = ref_error(path);
    CHECK(seconds_since(t0) < 5.0);
    CHECK(err.find("\"steps\" is " + std::to_string(steps)) != std::string::npos);
    CHECK(err.find("idx.4") != std::string::npos);
  }
}

TEST_CASE("io hardening: an optim case refuses steps past the documented limit") {
  TempDir d("ref_optim");
  const std::string path = edited_case(d, "optim_adam.case.safetensors", [](nlohmann::json& s) { s["steps"] = int64_t(1) << 50; });
  const auto t0 = std::chrono::steady_clock::now();
  const std::string err = ref_error(path);
  CHECK(seconds_since(t0) < 5.0);
  CHECK(err.find("\"steps\"") != std::string::npos);
  CHECK(err.find("100000") != std::string::npos);
}

TEST_CASE("io hardening: a case config bigger than the case's tensors is refused before building it") {
  TempDir d("ref_config");
  const std::string layers = edited_case(d, "gpt_tiny.case.safetensors",
                                         [](nlohmann::json& s) { s["config"]["n_layer"] = 1000000000; });
  CHECK(ref_error(layers).find("n_layer 1000000000") != std::string::npos);
  const std::string wide = edited_case(d, "gpt_tiny.case.safetensors", [](nlohmann::json& s) {
    s["config"]["n_embd"] = int64_t(1) << 40;
    s["config"]["n_head"] = 1;
  });
  // n_embd^2 overflows 64 bits: the config itself is refused, before the tensors are looked at.
  CHECK(ref_error(wide).find("n_embd (1099511627776) x n_embd (1099511627776) overflows") != std::string::npos);
}

TEST_CASE("io hardening: JSON nested past the bound in a case, a checkpoint or any metadata is one error") {
  TempDir d("deep");
  const std::string deep = nested_arrays(20000);
  // A case document.
  serialize::SafetensorsFile c = serialize::read_safetensors(kGolden + "/optim_adam.case.safetensors");
  const std::string case_path = d.file("deep.case.safetensors");
  serialize::write_safetensors(case_path, c.tensors, serialize::Metadata{{"case", deep}});
  CHECK(ref_error(case_path).find("nested deeper") != std::string::npos);
  // A "lathe" document: taken for a checkpoint so that reading it names the fault.
  const serialize::Metadata lathe_meta{{serialize::kLatheMetadataKey, deep}};
  CHECK(serialize::TrainingCheckpoint::is_checkpoint(lathe_meta));
  const std::string ckpt = d.file("deep.ckpt.safetensors");
  serialize::write_safetensors(ckpt, c.tensors, lathe_meta);
  CHECK(error_of([&] { serialize::TrainingCheckpoint::read(ckpt); }).find("nested deeper") != std::string::npos);
  // Not JSON at all is still someone else's metadata.
  CHECK_FALSE(serialize::TrainingCheckpoint::is_checkpoint(serialize::Metadata{{serialize::kLatheMetadataKey, "[[[ not json"}}));
  // The CLI: one line, exit 1, for inspect and sample.
  const std::string other = d.file("deep.other.safetensors");
  serialize::write_safetensors(other, c.tensors, serialize::Metadata{{"note", deep}});
  for (const std::string& args : {"inspect '" + other + "'", "inspect '" + ckpt + "'", "sample --checkpoint '" + ckpt + "'"}) {
    INFO(args);
    const testing::Run r = testing::run_lathe(args);
    CHECK(r.code == 1);
    CHECK(r.output.rfind("lathe: ", 0) == 0);
    CHECK(r.output.find("nested deeper") != std::string::npos);
    CHECK(std::count(r.output.begin(), r.output.end(), '\n') == 1);
  }
}

TEST_CASE("io hardening: commands whose standard output cannot be written exit 1 and say so") {
  TempDir d("full");
  nn::GPTConfig cfg;
  cfg.vocab_size = 256;
  cfg.block_size = 8;
  cfg.n_layer = 1;
  cfg.n_head = 1;
  cfg.n_embd = 8;
  const std::string weights = d.file("w.safetensors");
  serialize::save_model(weights, nn::GPT(cfg, /*seed=*/0));
  for (const std::string& args : {std::string("info"), std::string("info --json"), std::string("--help"),
                                  "inspect '" + weights + "'", "sample --tokens 4 --checkpoint '" + weights + "'",
                                  std::string("bench --config tiny --steps 1 --warmup 0 --batch 1 --json")}) {
    INFO(args);
    const Result r = run_to_dev_full(args);
    CHECK(r.code == 1);
    CHECK(r.stderr_text.rfind("lathe: cannot write to standard output: ", 0) == 0);
    CHECK(std::count(r.stderr_text.begin(), r.stderr_text.end(), '\n') == 1);
  }
  // The same commands on a writable stdout still succeed.
  CHECK(testing::run_lathe("info").code == 0);
}

TEST_CASE("io hardening: the deep-nesting fuzz seeds are refused with lathe::Error, as the fuzz target expects") {
  for (const char* seed : {"deep_metadata_arrays.safetensors", "deep_metadata_objects.safetensors"}) {
    INFO(seed);
    std::ifstream in(kGolden + "/../fuzz/corpus/" + seed, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    REQUIRE(bytes.size() > 8);
    REQUIRE(bytes.size() <= 65536);  // tools/run_fuzzer.sh's -max_len
    // The steps of tests/fuzz/fuzz_safetensors.cpp.
    const std::string err = error_of([&] {
      serialize::SafetensorsFile f =
          serialize::parse_safetensors(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), seed);
      serialize::verify_checksums(f);
      if (serialize::TrainingCheckpoint::is_checkpoint(f.metadata)) serialize::TrainingCheckpoint::from_file(std::move(f));
    });
    CHECK(err.find("nested deeper") != std::string::npos);
  }
}
