#include "data/tokenize_corpus.h"

#include <exception>
#include <filesystem>

#include "core/error.h"
#include "data/text_dataset.h"

namespace lathe::data {

namespace {

// Text read and encoded at a time: enough documents to keep every thread busy, few enough that
// their ids (4 bytes per token) stay well within memory.
constexpr size_t kBatchBytes = size_t(64) << 20;

}  // namespace

ShardManifest tokenize_corpus(const BpeTokenizer& tok, const std::string& data, const std::string& out,
                              size_t shard_tokens, int threads, std::FILE* log) {
  const TextCorpus corpus = TextCorpus::open(data);
  std::error_code ec;
  std::filesystem::create_directories(out, ec);
  LATHE_CHECK(!ec, "--out ", out, ": cannot create the directory: ", ec.message());
  // Old shards past the new last one would join the stream when it is read.
  for (size_t i = 0; std::filesystem::exists(shard_path(out, i)); ++i) std::filesystem::remove(shard_path(out, i));

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
                 (unsigned long long)m.tokens, double(m.text_bytes) / double(m.tokens), m.shards,
                 m.shards == 1 ? "" : "s", out.c_str());
  return m;
}

}  // namespace lathe::data
