#include "train/tokenize_corpus.h"

#include <filesystem>

#include "core/error.h"
#include "train/data.h"

namespace lathe::app {

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
  for (size_t i = 0; i < corpus.file_count(); ++i) {
    // A document is read whole: encoding needs its text in one piece to cut it at piece boundaries.
    const std::string text = corpus.text(corpus.file_begin(i), corpus.file_size(i));
    const std::vector<uint32_t> ids = tok.encode(text, threads);
    writer.append(&eot, 1);
    writer.append(ids.data(), ids.size());
    m.documents += 1;
    m.tokens += 1 + ids.size();
    m.text_bytes += text.size();
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

}  // namespace lathe::app
