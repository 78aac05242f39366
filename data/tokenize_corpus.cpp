#include "data/tokenize_corpus.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <exception>
#include <filesystem>
#include <regex>

#include "core/error.h"
#include "data/corpus_file.h"
#include "data/text_dataset.h"
#include "serialize/directory_lock.h"
#include "serialize/staged_directory.h"

namespace lathe::data {

namespace fs = std::filesystem;

namespace {

// Text read and encoded at a time: enough documents to keep every thread busy, few enough that
// their ids (4 bytes per token) stay well within memory.
constexpr size_t kBatchBytes = size_t(64) << 20;

// `p` absolute, without links, "." or ".." as far as it exists, and without a trailing slash.
fs::path resolved(const std::string& p) {
  std::error_code ec;
  fs::path r = fs::weakly_canonical(fs::absolute(p, ec), ec);
  if (ec) r = fs::path(p).lexically_normal();
  if (!r.has_filename() && r.has_parent_path()) r = r.parent_path();
  return r;
}

// Whether `inner` is `outer` or lies under it.
bool within(const fs::path& inner, const fs::path& outer) {
  return std::mismatch(outer.begin(), outer.end(), inner.begin(), inner.end()).first == outer.end();
}

// --out may neither be --data nor lie inside it: the next tokenize of that corpus would read the
// manifest as a document. Nor may it hold --data: --out is rewritten.
void check_apart(const std::string& data, const std::string& out) {
  const fs::path d = resolved(data), o = resolved(out);
  const std::string again = ": the next lathe tokenize of that corpus would read the shards and tokenizer.json "
                            "written here as documents; choose an --out outside the corpus";
  LATHE_CHECK(d != o, "--out ", out, " and --data ", data, " are the same directory", again);
  LATHE_CHECK(!within(o, d), "--out ", out, " lies inside --data ", data, again);
  LATHE_CHECK(!within(d, o), "--data ", data, " lies inside --out ", out,
              ", which lathe tokenize rewrites; choose an --out that does not hold the corpus");
}

// What lathe tokenize writes in OUT: the shards, the manifest, the lock, and the temporary files of
// their atomic writes (serialize/atomic_file.cpp names them .<name>.tmp-<pid>-<counter>-<clock>-<attempt>).
bool is_tokenize_entry(const std::string& name) {
  static const std::regex temp(R"(\.(shard_[0-9]+\.bin|tokenizer\.json)\.tmp-[0-9]+-[0-9]+-[0-9a-f]+-[0-9]+)");
  return is_shard_name(name) || name == "tokenizer.json" || name == ".lock" || std::regex_match(name, temp);
}

// Names the entries of `out` that lathe tokenize did not write (kept across the swap) on `log`.
void note_foreign_entries(const std::string& out, const std::vector<std::string>& held, std::FILE* log) {
  std::vector<std::string> others;
  for (const std::string& name : held)
    if (!is_tokenize_entry(name)) others.push_back(name);
  if (log == nullptr || others.empty()) return;
  std::sort(others.begin(), others.end());
  std::string names;
  for (size_t i = 0; i < others.size() && i < 5; ++i) names += (i ? ", " : "") + others[i];
  if (others.size() > 5) names += ", ...";
  std::fprintf(log, "note: %s also holds %zu entr%s that lathe tokenize did not write, kept as they are: %s\n",
               out.c_str(), others.size(), others.size() == 1 ? "y" : "ies", names.c_str());
}

// OUT as an existing directory, created if need be.
void make_out_directory(const std::string& out) {
  struct stat st {};
  if (::stat(out.c_str(), &st) == 0) {
    LATHE_CHECK(S_ISDIR(st.st_mode), "--out ", out, ": is ", file_kind_name(st.st_mode), ", not a directory");
    return;
  }
  std::error_code ec;
  fs::create_directories(out, ec);
  LATHE_CHECK(!ec, "--out ", out, ": cannot create the directory: ", ec.message());
}

}  // namespace

ShardManifest tokenize_corpus(const BpeTokenizer& tok, const std::string& data, const std::string& out,
                              size_t shard_tokens, int threads, std::FILE* log, bool overwrite) {
  check_apart(data, out);
  const TextCorpus corpus = TextCorpus::open(data);
  make_out_directory(out);
  const serialize::DirectoryLock lock(out, "lathe tokenize", "shard directory");
  std::vector<std::string> held;
  std::error_code ec;
  for (auto it = fs::directory_iterator(out, ec); !ec && it != fs::directory_iterator(); it.increment(ec))
    if (it->path().filename() != ".lock") held.push_back(it->path().filename().string());
  LATHE_CHECK(!ec, "--out ", out, ": cannot list the directory: ", ec.message());
  if (!held.empty()) {
    LATHE_CHECK(overwrite, "--out ", out, " is not empty (", held.size(), held.size() == 1 ? " entry" : " entries",
                "); give --overwrite to replace the token shards there (other files are kept), or choose another --out");
    check_manifest_replaceable(out, "--out");
    note_foreign_entries(out, held, log);
  }
  // The new corpus is written whole beside OUT, then swapped in: until the swap, readers find the
  // old corpus whole; after it, the new one (serialize/staged_directory.h).
  serialize::StagedDirectory stage(out, /*replace=*/true, "--out " + out);
  const serialize::DirectoryLock stage_lock(stage.path(), "lathe tokenize", "shard directory");

  ShardManifest m;
  m.tokenizer = tok.identity();
  m.vocab_size = tok.vocab_size();
  m.end_of_text = tok.end_of_text();
  ShardWriter writer(stage.path(), m.vocab_size, shard_tokens);
  const uint32_t eot = tok.end_of_text();
  // Documents are read and encoded in batches of about kBatchBytes: a large document on all
  // threads at once (cut at piece boundaries), a batch of small ones one per thread. Either way
  // they are appended in path order.
  size_t next = 0;
  while (next < corpus.file_count()) {
    size_t end = next, bytes = 0;
    while (end < corpus.file_count() && (end == next || bytes + corpus.file_size(end) <= kBatchBytes))
      bytes += corpus.file_size(end++);
    std::vector<std::string> texts(end - next);
    std::vector<std::vector<uint32_t>> ids(end - next);
    for (size_t i = next; i < end; ++i) texts[i - next] = corpus.text(corpus.file_begin(i), corpus.file_size(i));
    if (texts.size() == 1) {
      ids[0] = tok.encode(texts[0], threads);
    } else {
      std::exception_ptr failure;
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
      for (size_t i = 0; i < texts.size(); ++i) {
        try {
          ids[i] = tok.encode(texts[i], 1);
        } catch (...) {
#pragma omp critical
          failure = std::current_exception();
        }
      }
      if (failure) std::rethrow_exception(failure);
    }
    for (size_t i = 0; i < texts.size(); ++i) {
      writer.append(&eot, 1);
      writer.append(ids[i].data(), ids[i].size());
      m.documents += 1;
      m.tokens += 1 + ids[i].size();
      m.text_bytes += texts[i].size();
    }
    next = end;
  }
  m.shards = writer.finish();
  write_shard_manifest(stage.path(), m);
  stage.commit([](const std::string& name) { return !is_tokenize_entry(name); });
  if (log != nullptr)
    std::fprintf(log, "tokenized %s: %llu documents, %llu bytes -> %llu tokens (%.3f bytes/token) in %zu shard%s of %s\n",
                 data.c_str(), (unsigned long long)m.documents, (unsigned long long)m.text_bytes,
                 (unsigned long long)m.tokens, double(m.text_bytes) / double(m.tokens), m.shards.size(),
                 m.shards.size() == 1 ? "" : "s", out.c_str());
  return m;
}

}  // namespace lathe::data
