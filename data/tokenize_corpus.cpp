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

// The temporary files of atomic writes of shards and manifests (serialize/atomic_file.cpp names
// them .<name>.tmp-<pid>-<counter>-<clock>-<attempt>): under the lock, every one is a killed
// writer's.
bool is_shard_temp_name(const std::string& name) {
  static const std::regex temp(R"(\.(shard_[0-9]+\.bin|tokenizer\.json)\.tmp-[0-9]+-[0-9]+-[0-9a-f]+-[0-9]+)");
  return std::regex_match(name, temp);
}

void sync_directory(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  LATHE_CHECK(fd >= 0, "--out ", dir, ": cannot open the directory to sync it: ", std::strerror(errno));
  const int rc = ::fsync(fd), err = errno;
  ::close(fd);
  LATHE_CHECK(rc == 0 || err == EINVAL || err == ENOTSUP, "--out ", dir, ": cannot sync the directory: ",
              std::strerror(err));
}

// Removes every shard and every temporary file of a killed writer from `out` (whatever their
// numbering), durably, and names on `log` the entries it leaves because they are not lathe's.
void remove_old_shards(const std::string& out, std::FILE* log) {
  std::vector<std::string> others;
  std::error_code ec;
  for (auto it = fs::directory_iterator(out, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (is_shard_name(name) || is_shard_temp_name(name)) {
      std::error_code rm;
      fs::remove(it->path(), rm);
      LATHE_CHECK(!rm, "--out ", out, ": cannot remove the old ", name, ": ", rm.message());
    } else if (name != ".lock" && name != "tokenizer.json") {
      others.push_back(name);
    }
  }
  LATHE_CHECK(!ec, "--out ", out, ": cannot list the directory: ", ec.message());
  sync_directory(out);
  if (log == nullptr || others.empty()) return;
  std::sort(others.begin(), others.end());
  std::string names;
  for (size_t i = 0; i < others.size() && i < 5; ++i) names += (i ? ", " : "") + others[i];
  if (others.size() > 5) names += ", ...";
  std::fprintf(log, "note: %s also holds %zu entr%s that lathe tokenize did not write, left as they are: %s\n",
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
                              size_t shard_tokens, int threads, std::FILE* log) {
  check_apart(data, out);
  const TextCorpus corpus = TextCorpus::open(data);
  make_out_directory(out);
  const serialize::DirectoryLock lock(out, "lathe tokenize", "shard directory");
  // From here until the last line a reader finds the "writing" manifest, never old and new shards
  // mixed: the old manifest goes first (atomically, durably), then every old shard, and the new
  // manifest is written last, after every new shard is durable.
  check_manifest_replaceable(out, "--out");
  write_writing_manifest(out, "lathe tokenize (process " + std::to_string(::getpid()) + ")");
  remove_old_shards(out, log);

  ShardManifest m;
  m.tokenizer = tok.identity();
  m.vocab_size = tok.vocab_size();
  m.end_of_text = tok.end_of_text();
  ShardWriter writer(out, m.vocab_size, shard_tokens);
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
  write_shard_manifest(out, m);
  if (log != nullptr)
    std::fprintf(log, "tokenized %s: %llu documents, %llu bytes -> %llu tokens (%.3f bytes/token) in %zu shard%s of %s\n",
                 data.c_str(), (unsigned long long)m.documents, (unsigned long long)m.text_bytes,
                 (unsigned long long)m.tokens, double(m.text_bytes) / double(m.tokens), m.shards.size(),
                 m.shards.size() == 1 ? "" : "s", out.c_str());
  return m;
}

}  // namespace lathe::data
