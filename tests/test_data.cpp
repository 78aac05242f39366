// Training data: the byte tokenizer, the corpus (read with pread), the train / validation split and the random
// windows that depend only on the generator's state.
#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <string>

#include "core/error.h"
#include "data/byte_tokenizer.h"
#include "data/text_dataset.h"
#include "tests/temp_dir.h"
#include "tests/test_helpers.h"

using namespace lathe;
using lathe::testing::error_of;
using lathe::testing::TempDir;
using namespace lathe::data;
namespace fs = std::filesystem;

namespace {

std::string digits(size_t n) {
  std::string s(n, '0');
  for (size_t i = 0; i < n; ++i) s[i] = char('0' + i % 10);
  return s;
}

}  // namespace

TEST_CASE("byte tokenizer round-trips all 256 bytes") {
  ByteTokenizer tok;
  std::string all(256, '\0');
  std::iota(all.begin(), all.end(), char(0));
  std::vector<int64_t> ids = tok.encode(all);
  REQUIRE(ids.size() == 256);
  for (int64_t i = 0; i < 256; ++i) CHECK(ids[size_t(i)] == i);
  CHECK(tok.decode(ids) == all);
  CHECK(tok.decode(tok.encode("h\xc3\xa9llo\n")) == "h\xc3\xa9llo\n");  // UTF-8 survives byte by byte
  CHECK(ByteTokenizer::kVocabSize == 256);
  CHECK_THROWS_WITH_AS(tok.decode({65, 256}), doctest::Contains("256 at position 1"), Error);
  CHECK_THROWS_AS(tok.decode({-1}), Error);
}

TEST_CASE("corpus: a directory is its text files, sorted, each once") {
  TempDir d("dir");
  d.write("b.txt", "BBB");
  d.write("a.txt", "AA");
  d.write("sub/c.txt", "C");
  d.write("a.dat", std::string("\0\0\0\2index", 9));  // binary: skipped
  d.write(".hidden", "hidden");                         // hidden: skipped
  d.write("empty.txt", "");                             // empty: skipped
  fs::create_symlink(d.path / "a.txt", d.path / "a.u8");  // a link to a file already read
  TextCorpus c = TextCorpus::open(d.path.string());
  CHECK(c.file_count() == 3);
  CHECK(c.size() == 6);
  CHECK(c.text(0, 6) == "AABBBC");
  CHECK(c.text(1, 4) == "ABBB");  // a read across file boundaries
  CHECK_THROWS_WITH_AS(c.text(4, 3), doctest::Contains("past its end (6 bytes)"), Error);
}

TEST_CASE("corpus errors name the path and the sizes") {
  TempDir d("errors");
  const std::string missing = (d.path / "nope.txt").string();
  const std::string missing_msg = missing + ": no such file";
  CHECK_THROWS_WITH_AS(TextCorpus::open(missing), doctest::Contains(missing_msg.c_str()), Error);
  const std::string empty = d.write("empty.txt", "");
  CHECK_THROWS_WITH_AS(TextCorpus::open(empty), doctest::Contains("empty (0 bytes)"), Error);
  fs::create_directories(d.path / "nothing");
  d.write("nothing/x.bin", std::string("\0\1", 2));
  CHECK_THROWS_WITH_AS(TextCorpus::open((d.path / "nothing").string()), doctest::Contains("no non-empty text file"),
                       Error);

  const std::string short_file = d.write("short.txt", digits(8));
  CHECK_THROWS_WITH_AS(TextDataset(TextCorpus::open(short_file), 8),
                       doctest::Contains("8 bytes is shorter than one window of 9 bytes"), Error);
  // 50 bytes: train 45, val 5, so block_size 8 fits the train split but not the validation one.
  const std::string small = d.write("small.txt", digits(50));
  CHECK_THROWS_WITH_AS(TextDataset(TextCorpus::open(small), 8), doctest::Contains("val 5"), Error);
  CHECK_NOTHROW(TextDataset(TextCorpus::open(small), 4));
}

TEST_CASE("corpus: a subdirectory that cannot be read is named in the error") {
  TempDir d("unreadable");
  d.write("a.txt", "readable\n");
  d.write("locked/b.txt", "behind a directory no one may read\n");
  fs::permissions(d.path / "locked", fs::perms::none);
  const std::string locked = (d.path / "locked").string();
  if (::geteuid() != 0) {
    const std::string e = error_of([&] { TextCorpus::open(d.path.string()); });
    CHECK(e.find("cannot read the directory " + locked + ": Permission denied") != std::string::npos);
  } else if (std::system("setpriv --version > /dev/null 2>&1") == 0) {
    // Root reads every directory: the program runs as nobody, from a copy in a temporary directory
    // (readable by all; the build tree may not be, as a checkout under /root).
    TempDir bin("nobody_bin");
    const fs::path program = bin.path / "lathe";
    fs::copy_file(LATHE_CLI_PATH, program);
    fs::permissions(program, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                                 fs::perms::others_read | fs::perms::others_exec);
    const std::string as_nobody = "setpriv --reuid=65534 --regid=65534 --clear-groups '" + program.string() + "'";
    if (std::system((as_nobody + " --version > /dev/null 2>&1").c_str()) != 0) {
      MESSAGE("skipped: nobody (uid 65534) cannot run ", program.string(), " here");
    } else {
      const std::string out = (d.path / "out.txt").string();
      const std::string cmd = as_nobody + " tokenizer train --vocab-size 300 --data " + d.path.string() +
                              " --out " + (d.path / "tok.json").string() + " > " + out + " 2>&1";
      const int status = std::system(cmd.c_str());
      CHECK(WIFEXITED(status));
      CHECK(WEXITSTATUS(status) == 1);
      std::ifstream in(out);
      std::string line;
      std::getline(in, line);
      CHECK(line == "lathe: corpus " + d.path.string() + ": cannot read the directory " + locked +
                        ": Permission denied");
    }
  } else {
    MESSAGE("skipped: running as root without setpriv, no directory is unreadable");
  }
  fs::permissions(d.path / "locked", fs::perms::owner_all);
}

TEST_CASE("dataset split: the last 10% of the bytes is validation") {
  TempDir d("split");
  const std::string path = d.write("c.txt", digits(1005));
  TextDataset ds(TextCorpus::open(path), 16);
  CHECK(ds.split_size(Split::train) == 905);  // int(1005 * 0.9) = 904.5 -> 905 = n - n / 10
  CHECK(ds.split_size(Split::val) == 100);
  CHECK(ds.split_begin(Split::val) == 905);
  CHECK(ds.split_size(Split::train) + ds.split_size(Split::val) == ds.corpus().size());
}

TEST_CASE("dataset windows: y is x shifted by one, reproducible from the generator state") {
  TempDir d("windows");
  std::string text;
  for (int i = 0; i < 2000; ++i) text.push_back(char(i * 7 % 251));
  const std::string path = d.write("c.txt", text);
  const int64_t T = 12, B = 5;
  TextDataset ds(TextCorpus::open(path), T);

  Generator gen(1234, 0);
  Batch b1 = ds.sample(Split::train, B, gen);
  CHECK(gen.offset() == uint64_t(B));
  Batch b2 = ds.sample(Split::train, B, gen);
  CHECK(b1.x.shape() == Shape{B, T});
  CHECK(b1.x.dtype() == DType::i64);
  CHECK(b1.x.to_vector<int64_t>() != b2.x.to_vector<int64_t>());

  // Restoring (seed, offset) replays the second batch exactly.
  Generator replay(1234, uint64_t(B));
  Batch again = ds.sample(Split::train, B, replay);
  CHECK(again.x.to_vector<int64_t>() == b2.x.to_vector<int64_t>());
  CHECK(again.y.to_vector<int64_t>() == b2.y.to_vector<int64_t>());

  // Each row is a window of the split, y shifted by one.
  Generator g(99, 3);
  std::vector<size_t> starts = ds.window_starts(Split::val, B, g);
  Generator g2(99, 3);
  Batch v = ds.sample(Split::val, B, g2);
  std::vector<int64_t> x = v.x.to_vector<int64_t>(), y = v.y.to_vector<int64_t>();
  for (int64_t b = 0; b < B; ++b) {
    const size_t s = starts[size_t(b)];
    CHECK(s + size_t(T) < ds.split_size(Split::val));
    for (int64_t t = 0; t < T; ++t) {
      const size_t at = ds.split_begin(Split::val) + s + size_t(t);
      CHECK(x[size_t(b * T + t)] == int64_t(static_cast<unsigned char>(text[at])));
      CHECK(y[size_t(b * T + t)] == int64_t(static_cast<unsigned char>(text[at + 1])));
    }
  }
}

TEST_CASE("dataset windows cover the whole split, the last window included") {
  TempDir d("cover");
  const std::string path = d.write("c.txt", digits(200));
  TextDataset ds(TextCorpus::open(path), 10);  // val: 20 bytes, 10 possible starts
  Generator gen(7);
  std::vector<size_t> starts = ds.window_starts(Split::val, 400, gen);
  std::vector<int> hits(10, 0);
  for (size_t s : starts) {
    REQUIRE(s < 10);
    ++hits[s];
  }
  for (int h : hits) CHECK(h > 0);
}
