// lathe tokenizer train | encode | decode | bench, and lathe tokenize: byte-level BPE tokenizers
// (data/bpe_tokenizer.h) and the token shards `lathe train --data DIR` reads (data/token_shards.h).
// TOK names a tokenizer: a file written by `tokenizer train`, a GPT-2 vocab.bpe (encoder.json
// beside it), `gpt2` (fetched by tools/fetch_gpt2_vocab.sh) or `bytes`.
#include <omp.h>

#include <charconv>
#include <chrono>
#include <cstdio>
#include <thread>

#include "data/bpe_trainer.h"
#include "data/corpus_file.h"
#include "data/text_dataset.h"
#include "data/tokenize_corpus.h"
#include "data/tokenizer_file.h"
#include "examples/cli/commands.h"
#include "serialize/json_document.h"
#include "train/train_options.h"

namespace lathe::cli {

namespace {

constexpr uint64_t kMaxVocabSize = uint64_t(1) << 32;

int default_threads() { return std::max(1, omp_get_num_procs()); }

// The whole of one regular file, with the corpus reader's errors (they name the file).
std::string read_input(const std::string& path, const char* what) {
  data::CorpusFile info;
  data::FileHandle fd = data::open_regular_file(path, what, info);
  std::string text(info.size, '\0');
  data::read_exact(fd.get(), info, 0, info.size, reinterpret_cast<uint8_t*>(text.data()));
  return text;
}

void write_stdout(const std::string& bytes) {
  LATHE_CHECK(std::fwrite(bytes.data(), 1, bytes.size(), stdout) == bytes.size(), "cannot write to standard output");
}

// ---- tokenizer train

struct TrainTokenizerOptions {
  std::string data = train::kDefaultCorpus;
  uint64_t vocab_size = 0;
  std::string out;
  std::string pattern = "gpt2";
};

void run_train_tokenizer(const TrainTokenizerOptions& o) {
  if (o.out.empty()) throw UsageError("--out must name the tokenizer file to write, got an empty string");
  if (o.vocab_size < 256 || o.vocab_size > kMaxVocabSize)
    throw UsageError("--vocab-size must be in [256, 2^32] (256 byte tokens plus merges), got " +
                     std::to_string(o.vocab_size));
  data::PretokenPattern pattern;
  try {
    pattern = data::parse_pretoken_pattern(o.pattern);
  } catch (const Error& e) {
    throw UsageError(std::string("--pattern: ") + e.what());
  }
  const auto t0 = std::chrono::steady_clock::now();
  const data::TextCorpus corpus = data::TextCorpus::open(o.data);
  const data::TrainedTokenizer trained = data::train_tokenizer(corpus, o.vocab_size, pattern);
  const data::TokenizerFile& file = trained.file;
  const data::BpeTrainingEnd end = trained.end;
  data::write_tokenizer_file(o.out, file);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const uint64_t made = 256 + file.merges.size();
  std::printf("trained %s: %llu tokens (%zu merges) + end-of-text id %llu, pattern %s, on %s (%zu bytes, %llu pieces) in %.2f s\n",
              o.out.c_str(), (unsigned long long)made, file.merges.size(), (unsigned long long)made,
              data::pretoken_pattern_name(pattern), o.data.c_str(), corpus.size(),
              (unsigned long long)trained.pieces, s);
  if (end == data::BpeTrainingEnd::no_pair_left)
    std::printf("note: the corpus has no adjacent pair left to merge after %zu merges (asked for %llu tokens)\n",
                file.merges.size(), (unsigned long long)o.vocab_size);
  if (end == data::BpeTrainingEnd::vocabulary_bytes)
    std::printf("note: stopped after %zu merges (asked for %llu tokens): the next would take the tokens past the "
                "%llu bytes a vocabulary may hold\n",
                file.merges.size(), (unsigned long long)o.vocab_size, (unsigned long long)data::kMaxVocabularyBytes);
}

// ---- tokenizer encode / decode / bench

// The operands of encode, decode and bench: a tokenizer, a file, and for some a thread count.
struct RunOptions {
  std::string tokenizer;
  std::string file;
  int threads = 0;  // 0: all processors
  int repeats = 3;  // bench only
};

void run_encode(const RunOptions& o) {
  if (o.threads < 0) throw UsageError("--threads must be >= 0 (0: all processors), got " + std::to_string(o.threads));
  const data::BpeTokenizer tok = data::load_tokenizer(o.tokenizer);
  const std::string text = read_input(o.file, "input");
  const std::vector<uint32_t> ids = tok.encode(text, o.threads == 0 ? default_threads() : o.threads);
  std::string out = "[";
  out.reserve(ids.size() * 6 + 2);
  char buf[16];
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) out += ", ";
    const auto r = std::to_chars(buf, buf + sizeof buf, ids[i]);
    out.append(buf, r.ptr);
  }
  out += "]\n";
  write_stdout(out);
}

void run_decode(const RunOptions& o) {
  const std::string& path = o.file;
  const data::BpeTokenizer tok = data::load_tokenizer(o.tokenizer);
  const nlohmann::json j = serialize::parse_json_document(read_input(path, "token file"), path);
  LATHE_CHECK(j.is_array(), path, ": not a JSON array of token ids");
  std::vector<uint32_t> ids;
  ids.reserve(j.size());
  for (size_t i = 0; i < j.size(); ++i) {
    LATHE_CHECK(j[i].is_number_unsigned() && j[i].get<uint64_t>() < tok.vocab_size(), path, ": element ", i, " is ",
                serialize::quote_json(j[i]), ", not a token id below ", tok.vocab_size());
    ids.push_back(j[i].get<uint32_t>());
  }
  write_stdout(tok.decode(ids));
}

// Encode throughput on one thread and on all, best of `repeats` runs each.
void run_tokenizer_bench(const RunOptions& o) {
  if (o.repeats < 1) throw UsageError("--repeats must be >= 1, got " + std::to_string(o.repeats));
  if (o.threads < 0) throw UsageError("--threads must be >= 0 (0: all processors), got " + std::to_string(o.threads));
  const data::BpeTokenizer tok = data::load_tokenizer(o.tokenizer);
  const std::string text = read_input(o.file, "input");
  const int all = o.threads > 0 ? o.threads : default_threads();
  auto best_seconds = [&](int n, size_t& count) {
    double best = 1e30;
    for (int r = 0; r < o.repeats; ++r) {
      const auto t0 = std::chrono::steady_clock::now();
      count = tok.encode(text, n).size();
      best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    return best;
  };
  size_t tokens = 0;
  const double one = best_seconds(1, tokens);
  const double many = best_seconds(all, tokens);
  const double mb = double(text.size()) / 1e6;
  std::printf("{\"tokenizer\": \"%s\", \"bytes\": %zu, \"tokens\": %zu, \"single_thread_mb_s\": %.2f, "
              "\"threads\": %d, \"all_threads_mb_s\": %.2f}\n",
              o.tokenizer.c_str(), text.size(), tokens, mb / one, all, mb / many);
}

// ---- tokenize

struct TokenizeOptions {
  std::string tokenizer;
  std::string data = train::kDefaultCorpus;
  std::string out;
  uint64_t shard_tokens = data::kDefaultShardTokens;
  int threads = 0;
  bool overwrite = false;
};

void run_tokenize(const TokenizeOptions& o) {
  if (o.shard_tokens < 1 || o.shard_tokens > uint64_t(INT32_MAX))
    throw UsageError("--shard-tokens must be in [1, 2^31 - 1], got " + std::to_string(o.shard_tokens));
  if (o.threads < 0) throw UsageError("--threads must be >= 0 (0: all processors), got " + std::to_string(o.threads));
  if (o.out.empty()) throw UsageError("--out must name a directory, got an empty string");
  const data::BpeTokenizer tok = data::load_tokenizer(o.tokenizer);
  data::tokenize_corpus(tok, o.data, o.out, size_t(o.shard_tokens), o.threads == 0 ? default_threads() : o.threads, stdout,
                        o.overwrite);
}

}  // namespace

void add_tokenizer_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("tokenizer", "Train, run and time byte-level BPE tokenizers");
  cmd->require_subcommand(1);
  const std::string tok_help = "a file from `lathe tokenizer train`, a GPT-2 vocab.bpe, gpt2 or bytes";

  auto* train = cmd->add_subcommand("train", "Train a BPE vocabulary on a text file or directory");
  auto t = std::make_shared<TrainTokenizerOptions>();
  train->add_option("--data", t->data, "text file or directory (read recursively, sorted by path)")->capture_default_str();
  train->add_option("--vocab-size", t->vocab_size, "ordinary tokens: 256 bytes + merges (end-of-text is one more id)")
      ->required();
  train->add_option("--out", t->out, "the tokenizer file to write (JSON)")->required();
  train->add_option("--pattern", t->pattern, "pre-tokenizer: gpt2 or gpt4")->capture_default_str();
  train->callback([t] { run_train_tokenizer(*t); });

  auto* encode = cmd->add_subcommand("encode", "Print the token ids of a file as one JSON array");
  auto e = std::make_shared<RunOptions>();
  encode->add_option("--tokenizer", e->tokenizer, tok_help)->required();
  encode->add_option("--threads", e->threads, "threads for inputs of 1 MiB and more (0: all processors)")->capture_default_str();
  encode->add_option("file", e->file, "the file to encode (any bytes)")->required();
  encode->callback([e] { run_encode(*e); });

  auto* decode = cmd->add_subcommand("decode", "Write the bytes of a JSON array of token ids to standard output");
  auto d = std::make_shared<RunOptions>();
  decode->add_option("--tokenizer", d->tokenizer, tok_help)->required();
  decode->add_option("file", d->file, "a JSON array of token ids (as `encode` prints)")->required();
  decode->callback([d] { run_decode(*d); });

  auto* bench = cmd->add_subcommand("bench", "Time encoding a file on one thread and on all (MB/s, best of --repeats)");
  auto b = std::make_shared<RunOptions>();
  bench->add_option("--tokenizer", b->tokenizer, tok_help)->required();
  bench->add_option("--repeats", b->repeats, "runs of each; the fastest counts")->capture_default_str();
  bench->add_option("--threads", b->threads, "threads of the parallel run (0: all processors)")->capture_default_str();
  bench->add_option("file", b->file, "the text to encode")->required();
  bench->callback([b] { run_tokenizer_bench(*b); });
}

void add_tokenize_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("tokenize", "Write a corpus as token shards (llm.c's format) for `lathe train --data DIR`");
  auto o = std::make_shared<TokenizeOptions>();
  cmd->add_option("--tokenizer", o->tokenizer, "a file from `lathe tokenizer train`, a GPT-2 vocab.bpe, gpt2 or bytes")
      ->required();
  cmd->add_option("--data", o->data, "text file or directory (each file a document, in sorted path order)")
      ->capture_default_str();
  cmd->add_option("--out", o->out, "directory of shard_000000.bin, ... and tokenizer.json (absent or empty)")->required();
  cmd->add_flag("--overwrite", o->overwrite,
                "--out holds files: replace its shards and tokenizer.json in one swap (other files are kept)");
  cmd->add_option("--shard-tokens", o->shard_tokens, "tokens per shard")->capture_default_str();
  cmd->add_option("--threads", o->threads, "encoding threads (0: all processors)")->capture_default_str();
  cmd->callback([o] { run_tokenize(*o); });
}

}  // namespace lathe::cli
