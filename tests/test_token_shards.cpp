// A directory of token shards is one self-checking unit: its manifest (tokenizer.json) lists every
// shard with its token count and checksum, and a reader refuses a directory that disagrees with
// it or with the tokenizer it names -- a shard missing or left over, a header or a total that does
// not add up, a changed byte (found at the shard's first read), a manifest of an older lathe or of
// an unfinished rewrite. `lathe tokenize` rewrites a directory under a lock, never reads its own
// output, removes every old shard and killed writer's temporary file, and keeps what is not its own.
// Opened as a run's data (open_dataset), token shards and a byte corpus answer one interface.
#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "core/error.h"
#include "data/bpe_tokenizer.h"
#include "data/dataset.h"
#include "data/shard_manifest.h"
#include "data/token_dataset.h"
#include "data/token_shards.h"
#include "data/tokenize_corpus.h"
#include "data/tokenizer_file.h"
#include "serialize/checksum.h"
#include "serialize/directory_lock.h"
#include "tests/temp_dir.h"
#include "tests/test_helpers.h"

using namespace lathe;
using namespace lathe::data;
using lathe::testing::error_of;
using lathe::testing::TempDir;
namespace fs = std::filesystem;

namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void overwrite(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// A trained-format tokenizer of `merges` merges: first every pair of two bytes, then those pairs
// followed by 'a'; distinct pairs, distinct tokens, at most 131,072 merges.
BpeTokenizer made_tokenizer(const TempDir& d, size_t merges) {
  TokenizerFile file;
  for (size_t i = 0; i < merges; ++i)
    file.merges.emplace_back(i < 65536 ? std::make_pair(uint32_t(i / 256), uint32_t(i % 256))
                                       : std::make_pair(uint32_t(256 + i - 65536), uint32_t('a')));
  const std::string path = d.file("made_" + std::to_string(merges) + ".json");
  write_tokenizer_file(path, file);
  return load_tokenizer(path);
}

// `ids` written into `dir` as `lathe tokenize` writes a stream: shards of `shard_tokens`, then the manifest.
ShardManifest write_shards(const std::string& dir, const BpeTokenizer& tok, const std::vector<uint32_t>& ids,
                           size_t shard_tokens) {
  fs::create_directories(dir);
  ShardWriter w(dir, tok.vocab_size(), shard_tokens);
  w.append(ids.data(), ids.size());
  ShardManifest m;
  m.tokenizer = tok.identity();
  m.vocab_size = tok.vocab_size();
  m.end_of_text = tok.end_of_text();
  m.documents = 1;
  m.tokens = ids.size();
  m.text_bytes = ids.size();
  m.shards = w.finish();
  write_shard_manifest(dir, m);
  return m;
}

std::string open_error(const std::string& dir, const BpeTokenizer& tok) {
  return error_of([&] { TokenShards::open(dir, read_shard_manifest(dir), tok); });
}

// Rewrites DIR/tokenizer.json with one change.
void edit_manifest(const std::string& dir, const std::function<void(nlohmann::json&)>& change) {
  nlohmann::json j = nlohmann::json::parse(slurp(shard_tokenizer_path(dir)));
  change(j);
  overwrite(shard_tokenizer_path(dir), j.dump(2));
}

std::vector<uint32_t> iota_ids(size_t n, uint32_t modulo) {
  std::vector<uint32_t> ids(n);
  for (size_t i = 0; i < n; ++i) ids[i] = uint32_t(i * 7 % modulo);
  return ids;
}

}  // namespace

TEST_CASE("token shards: uint32 tokens under llm.c's second magic for vocabularies past 65,536") {
  TempDir d("shards_wide");
  const BpeTokenizer tok = made_tokenizer(d, 100000 - 256);  // 100,000 ordinary ids and end-of-text
  REQUIRE(tok.vocab_size() == 100001);
  const std::string dir = d.file("shards");
  const std::vector<uint32_t> ids = {1, 70000, 99999, 5, 65536};
  CHECK(write_shards(dir, tok, ids, 3).shards.size() == 2);
  const std::string bytes = slurp(shard_path(dir, 0));
  int32_t header[3];
  std::memcpy(header, bytes.data(), sizeof header);
  CHECK(header[0] == 20240801);
  CHECK(header[1] == 7);
  CHECK(header[2] == 3);
  const TokenShards s = TokenShards::open(dir, read_shard_manifest(dir), tok);
  std::vector<int64_t> back(5);
  s.read(0, 5, back.data());
  CHECK(std::equal(back.begin(), back.end(), ids.begin()));
}

TEST_CASE("token shards: the manifest records each shard's name, token count and checksum") {
  TempDir d("shards_records");
  d.write("corpus/a.txt", "the first document, with some words in it\n");
  d.write("corpus/b.txt", "and a second one\n");
  const BpeTokenizer tok = load_tokenizer("bytes");
  const ShardManifest m = tokenize_corpus(tok, d.file("corpus"), d.file("shards"), 20, 1, nullptr);
  const ShardManifest back = read_shard_manifest(d.file("shards"));
  REQUIRE(back.shards.size() == m.shards.size());
  CHECK(m.shards.size() == (m.tokens + 19) / 20);
  uint64_t total = 0;
  for (size_t i = 0; i < back.shards.size(); ++i) {
    CHECK(back.shards[i].name == shard_name(i));
    const std::string file = slurp(shard_path(d.file("shards"), i));
    CHECK(back.shards[i].checksum == serialize::checksum_hex(serialize::checksum_bytes(file.data(), file.size())));
    CHECK(back.shards[i].tokens * 2 + 1024 == file.size());
    total += back.shards[i].tokens;
  }
  CHECK(total == back.tokens);
  CHECK(back.tokenizer.kind == "bytes");
  CHECK(back.vocab_size == 257);
  CHECK(back.end_of_text == 256);
  const nlohmann::json j = nlohmann::json::parse(slurp(shard_tokenizer_path(d.file("shards"))));
  CHECK(j.at("version") == 2);
  CHECK(j.at("state") == "complete");
  CHECK(j.at("shards") == m.shards.size());
}

TEST_CASE("token shards: a shard missing, or one the manifest does not list, is refused by name") {
  TempDir d("shards_set");
  const BpeTokenizer tok = made_tokenizer(d, 43);  // 300 ids
  const std::string dir = d.file("shards");
  write_shards(dir, tok, iota_ids(100, 300), 30);  // shards 0..3
  CHECK(open_error(dir, tok) == "");
  // A stale shard past a gap, as a run with smaller shards leaves behind.
  fs::copy_file(shard_path(dir, 0), shard_path(dir, 9));
  std::string e = open_error(dir, tok);
  CHECK(contains(e, shard_path(dir, 9)));
  CHECK(contains(e, "is not one of the 4 shards"));
  fs::remove(shard_path(dir, 9));
  // Any number of digits is a shard name.
  fs::copy_file(shard_path(dir, 0), d.file("shards/shard_1234567.bin"));
  CHECK(contains(open_error(dir, tok), "shard_1234567.bin is not one of the 4 shards"));
  fs::remove(d.file("shards/shard_1234567.bin"));
  fs::rename(shard_path(dir, 2), d.file("elsewhere.bin"));
  e = open_error(dir, tok);
  CHECK(contains(e, shard_path(dir, 2) + " is missing"));
  CHECK(contains(e, "lists 4 shards"));
}

TEST_CASE("token shards: headers, totals and the manifest's own fields must agree") {
  TempDir d("shards_fields");
  const BpeTokenizer tok = made_tokenizer(d, 43);  // 300 ids
  const std::string dir = d.file("shards");
  write_shards(dir, tok, iota_ids(100, 300), 30);
  const std::string manifest = slurp(shard_tokenizer_path(dir));
  auto with = [&](const std::function<void(nlohmann::json&)>& change) {
    overwrite(shard_tokenizer_path(dir), manifest);
    edit_manifest(dir, change);
    return open_error(dir, tok);
  };
  const std::string path = shard_tokenizer_path(dir);
  // "tokens" edited: the shards hold 100.
  std::string e = with([](nlohmann::json& j) { j["tokens"] = 5; });
  CHECK(contains(e, path));
  CHECK(contains(e, "\"tokens\" says 5, but the shards in \"files\" hold 100"));
  CHECK(contains(with([](nlohmann::json& j) { j["tokens"] = -1; }), "\"tokens\" is -1, not a count"));
  CHECK(contains(with([](nlohmann::json& j) { j["shards"] = 3; }), "\"shards\" says 3 shards, \"files\" lists 4"));
  // A shard's count edited with the total: its header still says 30.
  e = with([](nlohmann::json& j) {
    j["files"][1]["tokens"] = 31;
    j["tokens"] = 101;
  });
  CHECK(contains(e, shard_path(dir, 1) + ": the header says 30 tokens, " + path + " records 31"));
  CHECK(contains(with([](nlohmann::json& j) { std::swap(j["files"][0], j["files"][1]); }),
                 "files[0]: \"name\" is \"shard_000001.bin\", expected \"shard_000000.bin\""));
  CHECK(contains(with([](nlohmann::json& j) { j["files"][2]["checksum"] = "xyz"; }), "files[2]: \"checksum\""));
  CHECK(contains(with([](nlohmann::json& j) { j["files"][3].erase("tokens"); }), "files[3]: no \"tokens\""));
  CHECK(contains(with([](nlohmann::json& j) { j["end_of_text"] = 400; }), "end_of_text 400 is not below vocab_size 300"));
  // A file of the right count whose size disagrees.
  overwrite(path, manifest);
  const std::string shard = slurp(shard_path(dir, 3));
  overwrite(shard_path(dir, 3), shard + "xx");
  CHECK(contains(open_error(dir, tok), shard_path(dir, 3) + ": the header says 10 tokens"));
  overwrite(shard_path(dir, 3), shard);
  CHECK(open_error(dir, tok) == "");
}

TEST_CASE("token shards: vocab_size, end_of_text and kind are checked against the tokenizer") {
  TempDir d("shards_tokenizer");
  d.write("corpus.txt", std::string(3000, 'x') + "the end of the corpus\n");
  const BpeTokenizer bytes = load_tokenizer("bytes");
  tokenize_corpus(bytes, d.file("corpus.txt"), d.file("shards"), 1000, 1, nullptr);
  const std::string dir = d.file("shards");
  const std::string manifest = slurp(shard_tokenizer_path(dir));
  auto dataset_error = [&](const std::function<void(nlohmann::json&)>& change) {
    overwrite(shard_tokenizer_path(dir), manifest);
    edit_manifest(dir, change);
    return error_of([&] { TokenDataset(dir, 8); });
  };
  CHECK(dataset_error([](nlohmann::json&) {}) == "");
  std::string e = dataset_error([](nlohmann::json& j) { j["vocab_size"] = 300; });
  CHECK(contains(e, "vocab_size 300, but its tokenizer bytes has 257 ids"));
  e = dataset_error([](nlohmann::json& j) { j["end_of_text"] = 255; });
  CHECK(contains(e, "end_of_text 255, but its tokenizer bytes has end-of-text 256"));
  // Another tokenizer's record: its vocabulary is not the shards'.
  const BpeTokenizer trained = made_tokenizer(d, 43);
  e = dataset_error([&](nlohmann::json& j) { j["tokenizer"] = trained.identity().to_json(); });
  CHECK(contains(e, "vocab_size 257, but its tokenizer bpe (" + trained.identity().path + ") has 300 ids"));
  // The kind edited: a trained file's record under kind "gpt2", bytes with a checksum.
  e = dataset_error([&](nlohmann::json& j) {
    j["tokenizer"] = trained.identity().to_json();
    j["tokenizer"]["kind"] = "gpt2";
  });
  CHECK(contains(e, "is recorded as gpt2, but the file is a trained tokenizer (bpe)"));
  e = dataset_error([&](nlohmann::json& j) { j["tokenizer"]["checksum"] = "0123456789abcdef"; });
  CHECK(contains(e, "says bytes, but with path \"\" and checksum 0123456789abcdef"));
  // Shards opened with a tokenizer other than the one the manifest names.
  overwrite(shard_tokenizer_path(dir), manifest);
  e = error_of([&] { TokenShards::open(dir, read_shard_manifest(dir), trained); });
  CHECK(contains(e, "the tokenizer is recorded as bytes (checksum 0000000000000000), but the one loaded is bpe"));
}

TEST_CASE("token shards: a shard's checksum and tokens are checked at its first read, not at opening") {
  TempDir d("shards_lazy");
  const BpeTokenizer tok = made_tokenizer(d, 43);  // 300 ids
  const std::string dir = d.file("shards");
  write_shards(dir, tok, iota_ids(100, 300), 30);
  const ShardManifest m = read_shard_manifest(dir);
  // One token of shard 1 changed in place: a valid id, the same size, another checksum.
  std::string shard = slurp(shard_path(dir, 1));
  shard[1024] = char(shard[1024] ^ 1);
  overwrite(shard_path(dir, 1), shard);
  const TokenShards s = TokenShards::open(dir, m, tok);  // no pass over the data
  std::vector<int64_t> out(100);
  CHECK_NOTHROW(s.read(0, 30, out.data()));
  std::string e = error_of([&] { s.read(25, 10, out.data()); });  // spans shards 0 and 1
  CHECK(contains(e, shard_path(dir, 1) + ": checksum "));
  CHECK(contains(e, "records " + m.shards[1].checksum));
  CHECK(error_of([&] { s.read(30, 1, out.data()); }) == e);  // and on every later read
  CHECK_NOTHROW(s.read(60, 40, out.data()));
  // A token beyond the vocabulary under a matching checksum: refused at its first read.
  const std::vector<uint32_t> beyond = {1, 2, 299, 300, 4};
  write_shards(d.file("beyond"), tok, beyond, 100);
  const TokenShards b = TokenShards::open(d.file("beyond"), read_shard_manifest(d.file("beyond")), tok);
  e = error_of([&] { b.read(0, 1, out.data()); });
  CHECK(contains(e, shard_path(d.file("beyond"), 0) + ": token 3 is 300, beyond the vocabulary of 300 ids"));
  // Reads from several threads check each shard once and agree.
  const TokenShards fresh = TokenShards::open(d.file("beyond2"), write_shards(d.file("beyond2"), tok, iota_ids(1000, 300), 64), tok);
  std::vector<std::vector<int64_t>> got(4, std::vector<int64_t>(1000));
  std::vector<std::thread> readers;
  for (auto& g : got) readers.emplace_back([&fresh, &g] { fresh.read(0, 1000, g.data()); });
  for (std::thread& t : readers) t.join();
  for (const auto& g : got) CHECK(g == got[0]);
  CHECK(got[0][999] == int64_t(999 * 7 % 300));
}

TEST_CASE("token shards: an older lathe's manifest, or an unfinished rewrite's, says to run lathe tokenize again") {
  TempDir d("shards_state");
  d.write("corpus.txt", std::string(3000, 'x') + "the end of the corpus\n");
  const std::string dir = d.file("shards");
  tokenize_corpus(load_tokenizer("bytes"), d.file("corpus.txt"), dir, 1000, 1, nullptr);
  CHECK(error_of([&] { TokenDataset(dir, 8); }) == "");
  edit_manifest(dir, [](nlohmann::json& j) {
    j.erase("version");
    j.erase("state");
    j.erase("files");
  });
  std::string e = error_of([&] { TokenDataset(dir, 8); });
  CHECK(contains(e, "written by an older lathe"));
  CHECK(contains(e, "run `lathe tokenize` again"));
  // A rewrite killed after it marked the directory: every reader refuses it.
  write_writing_manifest(dir, "lathe tokenize (process 4242)");
  e = error_of([&] { TokenDataset(dir, 8); });
  CHECK(contains(e, "lathe tokenize (process 4242) began rewriting this directory and has not finished"));
  CHECK(contains(e, dir));
}

TEST_CASE("tokenize: a second run on the same directory is refused at once, naming the first") {
  TempDir d("tokenize_lock");
  d.write("corpus.txt", "some text to tokenize\n");
  const std::string out = d.file("shards");
  fs::create_directories(out);
  const BpeTokenizer tok = load_tokenizer("bytes");
  {
    serialize::DirectoryLock held(out, "lathe tokenize", "shard directory");  // as a first tokenize holds it
    const std::string e = error_of([&] { tokenize_corpus(tok, d.file("corpus.txt"), out, 100, 1, nullptr); });
    CHECK(contains(e, "--out " + out + ": another lathe tokenize (process " + std::to_string(::getpid()) + ")"));
    CHECK(contains(e, "is using this shard directory"));
    CHECK(!fs::exists(shard_tokenizer_path(out)));
    const lathe::testing::Run r = lathe::testing::run_lathe("tokenize --tokenizer bytes --data " + d.file("corpus.txt") +
                                                            " --out " + out);
    CHECK(r.code == 1);
    CHECK(contains(r.output, "process " + std::to_string(::getpid())));
    CHECK(std::count(r.output.begin(), r.output.end(), '\n') == 1);
  }
  CHECK(error_of([&] { tokenize_corpus(tok, d.file("corpus.txt"), out, 100, 1, nullptr); }) == "");
  // A lathe train holding a directory is named as what it is.
  fs::create_directories(d.file("run"));
  serialize::DirectoryLock train(d.file("run"), "lathe train", "run directory");
  CHECK(contains(error_of([&] { tokenize_corpus(tok, d.file("corpus.txt"), d.file("run"), 100, 1, nullptr); }),
                 "another lathe train (process"));
}

TEST_CASE("tokenize: every old shard and killed writer's temporary goes, what is not lathe's stays, named") {
  TempDir d("tokenize_clean");
  d.write("corpus.txt", std::string(500, 'y') + "\n");
  const std::string out = d.file("shards");
  const BpeTokenizer tok = load_tokenizer("bytes");
  tokenize_corpus(tok, d.file("corpus.txt"), out, 100, 1, nullptr);  // 6 shards
  // Leftovers: a shard past a gap, one of seven digits, temporaries of a killed writer; and files
  // of the user's.
  fs::copy_file(shard_path(out, 0), shard_path(out, 12));
  fs::copy_file(shard_path(out, 0), d.file("shards/shard_1000000.bin"));
  d.write("shards/.shard_000003.bin.tmp-999999-0-1a2b-0", "partial");
  d.write("shards/.tokenizer.json.tmp-999999-1-1a2b-0", "partial");
  d.write("shards/README", "my notes");
  d.write("shards/shard_notes.bin", "not a shard name");
  const std::string log_path = d.file("log.txt");
  std::FILE* log = std::fopen(log_path.c_str(), "w");
  CHECK(contains(error_of([&] { tokenize_corpus(tok, d.file("corpus.txt"), out, 1000, 1, nullptr); }),
                 "is not empty (13 entries); give --overwrite"));
  const ShardManifest m = tokenize_corpus(tok, d.file("corpus.txt"), out, 1000, 1, log, /*overwrite=*/true);
  std::fclose(log);
  CHECK(m.shards.size() == 1);
  CHECK(d.entries().size() == 3);  // corpus.txt, log.txt, shards
  std::vector<std::string> left;
  for (const auto& e : fs::directory_iterator(out)) left.push_back(e.path().filename().string());
  std::sort(left.begin(), left.end());
  CHECK(left == std::vector<std::string>{".lock", "README", "shard_000000.bin", "shard_notes.bin", "tokenizer.json"});
  CHECK(contains(slurp(log_path), "2 entries that lathe tokenize did not write, kept as they are: README, shard_notes.bin"));
  CHECK(error_of([&] { TokenDataset(out, 8); }) == "");
}

TEST_CASE("tokenize: --out may not be --data, lie inside it or hold it") {
  TempDir d("tokenize_apart");
  d.write("corpus/a.txt", "a document\n");
  const BpeTokenizer tok = load_tokenizer("bytes");
  auto error_for = [&](const std::string& data, const std::string& out) {
    return error_of([&] { tokenize_corpus(tok, data, out, 100, 1, nullptr); });
  };
  const std::string corpus = d.file("corpus");
  std::string e = error_for(corpus, corpus + "/");
  CHECK(contains(e, "--out " + corpus + "/ and --data " + corpus + " are the same directory"));
  e = error_for(corpus, corpus + "/sub/../shards");
  CHECK(contains(e, "--out " + corpus + "/sub/../shards lies inside --data " + corpus));
  e = error_for(d.file("corpus/a.txt"), d.path.string());
  CHECK(contains(e, "--data " + d.file("corpus/a.txt") + " lies inside --out " + d.path.string()));
  fs::create_directory_symlink(corpus, d.file("link"));
  CHECK(contains(error_for(corpus, d.file("link")), "are the same directory"));
  CHECK(!fs::exists(d.file("corpus/shards")));
  CHECK(!fs::exists(d.file("corpus/tokenizer.json")));
  CHECK(error_for(corpus, d.file("shards")) == "");
}

TEST_CASE("tokenize: a tokenizer.json that is not lathe's manifest is refused and left as it was") {
  TempDir d("tokenize_foreign");
  d.write("corpus.txt", "a document\n");
  const BpeTokenizer tok = load_tokenizer("bytes");
  const std::string hf = R"({"version": "1.0", "model": {"type": "BPE"}})";
  d.write("out/tokenizer.json", hf);
  // Not even --overwrite replaces it: the one name that lathe's corpus and another program's share.
  CHECK(contains(error_of([&] { tokenize_corpus(tok, d.file("corpus.txt"), d.file("out"), 100, 1, nullptr); }),
                 "is not empty (1 entry); give --overwrite"));
  std::string e = error_of([&] { tokenize_corpus(tok, d.file("corpus.txt"), d.file("out"), 100, 1, nullptr, true); });
  CHECK(contains(e, d.file("out/tokenizer.json") + " is not the manifest of lathe's token shards"));
  CHECK(slurp(d.file("out/tokenizer.json")) == hf);
  d.write("out/tokenizer.json", "{not json");
  CHECK(contains(error_of([&] { tokenize_corpus(tok, d.file("corpus.txt"), d.file("out"), 100, 1, nullptr, true); }),
                 "is not JSON"));
  // A file where the directory should be.
  d.write("file_out", "x");
  CHECK(contains(error_of([&] { tokenize_corpus(tok, d.file("corpus.txt"), d.file("file_out"), 100, 1, nullptr); }),
                 "--out " + d.file("file_out") + ": is a regular file, not a directory"));
}

TEST_CASE("tokenize: a rewrite with another tokenizer leaves the new corpus alone, manifest and shards agreeing") {
  TempDir d("tokenize_rewrite");
  std::string text;
  for (int i = 0; i < 200; ++i) text += "the quick brown fox jumps over the lazy dog " + std::to_string(i) + "\n";
  d.write("corpus.txt", text);
  const std::string out = d.file("shards");
  const BpeTokenizer trained = made_tokenizer(d, 300);
  tokenize_corpus(load_tokenizer("bytes"), d.file("corpus.txt"), out, 500, 1, nullptr);  // many small shards
  tokenize_corpus(trained, d.file("corpus.txt"), out, 100000, 1, nullptr, true);         // one shard
  const TokenDataset data(out, 8);
  CHECK(data.bpe_tokenizer().identity().checksum == trained.identity().checksum);
  CHECK(data.manifest().shards.size() == 1);
  CHECK(data.stream_size() == data.manifest().tokens);
  std::vector<int64_t> all(data.stream_size());
  const TokenShards s = TokenShards::open(out, data.manifest(), data.bpe_tokenizer());
  s.read(0, all.size(), all.data());
  CHECK(all[0] == trained.end_of_text());
}

TEST_CASE("open_dataset: a byte corpus and token shards, told apart by the path, seen through one interface") {
  TempDir d("open_dataset");
  std::string text;
  for (int i = 0; i < 200; ++i) text += "the quick brown fox jumps over the lazy dog " + std::to_string(i) + "\n";
  d.write("corpus.txt", text);
  const BpeTokenizer trained = made_tokenizer(d, 300);
  tokenize_corpus(trained, d.file("corpus.txt"), d.file("shards"), 100000, 1, nullptr);

  const std::unique_ptr<Dataset> bytes = open_dataset(d.file("corpus.txt"), 8);
  CHECK(std::string(bytes->kind()) == "corpus");
  CHECK(std::string(bytes->unit()) == "bytes");
  CHECK(bytes->stream_size() == text.size());
  const Tokenizer& byte_tok = bytes->tokenizer();
  CHECK(byte_tok.vocab_size() == 256);
  CHECK(byte_tok.identity() == nullptr);  // a byte corpus records no tokenizer
  CHECK(byte_tok.describe() == "bytes");
  CHECK(byte_tok.checksum() == "");
  CHECK(byte_tok.decode(byte_tok.encode("\xff fox")) == "\xff fox");

  const std::unique_ptr<Dataset> tokens = open_dataset(d.file("shards"), 8);
  CHECK(std::string(tokens->kind()) == "token shards");
  CHECK(std::string(tokens->unit()) == "tokens");
  const Tokenizer& bpe = tokens->tokenizer();
  CHECK(bpe.vocab_size() == int64_t(trained.vocab_size()));
  REQUIRE(bpe.identity() != nullptr);
  CHECK(bpe.checksum() == trained.identity().checksum);
  CHECK(bpe.describe() == trained.identity().describe());
  const std::vector<uint32_t> narrow = trained.encode("the lazy dog");
  const std::vector<int64_t> ids = bpe.encode("the lazy dog");
  CHECK(ids == std::vector<int64_t>(narrow.begin(), narrow.end()));
  CHECK(bpe.decode(ids) == "the lazy dog");
  // An id past the vocabulary is refused by position, also one that would wrap onto a valid id.
  CHECK(contains(error_of([&] { bpe.decode({ids[0], (int64_t(1) << 32) + ids[0]}); }), "at position 1"));
  CHECK(contains(error_of([&] { bpe.decode({-1}); }), "at position 0"));

  // The fingerprints the ranks compare: one byte of the corpus changed changes it; token shards
  // name their tokenizer's checksum and token count.
  text[text.size() / 2] ^= 1;
  d.write("changed.txt", text);
  CHECK(open_dataset(d.file("changed.txt"), 8)->fingerprint() != bytes->fingerprint());
  CHECK(contains(bytes->fingerprint(), "a corpus of " + std::to_string(text.size()) + " bytes"));
  CHECK(contains(tokens->fingerprint(), std::to_string(tokens->stream_size()) + " tokens of tokenizer " +
                                            trained.identity().checksum));
}
