#include "data/bpe_tokenizer.h"

#include <omp.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <optional>

#include "core/error.h"
#include "data/corpus_file.h"
#include "serialize/json_document.h"
#include "data/gpt2_vocab.h"
#include "data/piece_cache.h"
#include "data/tokenizer_file.h"
#include "serialize/checksum.h"

#ifndef LATHE_SOURCE_DIR
#define LATHE_SOURCE_DIR "."
#endif

namespace lathe::data {

namespace {

// Parts per thread of a parallel encode: unequal parts even out under dynamic scheduling.
constexpr size_t kPartsPerThread = 4;
// Below this a text is encoded on one thread: starting threads would cost more than it saves.
constexpr size_t kParallelMinBytes = size_t(1) << 20;

// The whole of a tokenizer file; errors name it and say what it is when it is not a regular file
// (a FIFO is not waited on).
std::string read_file(const std::string& path, const char* what) {
  CorpusFile info;
  FileHandle fd = open_regular_file(path, what, info);
  // Tokenizer files and GPT-2's are JSON lists or their text: bounded before they are read.
  LATHE_CHECK(info.size <= serialize::kMaxListJsonBytes, what, " ", path, ": ", info.size, " bytes, more than the ",
              serialize::kMaxListJsonBytes, " a tokenizer file may hold");
  std::string text(info.size, '\0');
  read_exact(fd.get(), info, 0, info.size, reinterpret_cast<uint8_t*>(text.data()));
  return text;
}

std::string absolute(const std::string& path) {
  std::error_code ec;
  const std::filesystem::path p = std::filesystem::absolute(path, ec);
  return ec ? path : p.lexically_normal().string();
}

std::string checksum_of(const std::string& bytes) {
  return serialize::checksum_hex(serialize::checksum_bytes(bytes.data(), bytes.size()));
}

// `bytes` has no file: its identity is its kind, and a fixed checksum keeps records uniform.
constexpr const char* kBytesChecksum = "0000000000000000";

BpeTokenizer load_gpt2(const std::string& vocab_bpe) {
  const std::string encoder_json = (std::filesystem::path(vocab_bpe).parent_path() / "encoder.json").string();
  // Read once: the checksum is of exactly the bytes parsed. Both files decide the ids, so it covers both.
  const std::string vocab = read_gpt2_file(vocab_bpe, "vocab.bpe"), encoder = read_gpt2_file(encoder_json, "encoder.json");
  Gpt2Vocab v = parse_gpt2_vocab(vocab, vocab_bpe, encoder, encoder_json);
  const std::string sum = checksum_of(vocab + encoder);
  return BpeTokenizer(std::move(v.model), PretokenPattern::gpt2, v.end_of_text, {"gpt2", absolute(vocab_bpe), sum});
}

}  // namespace

// The path is bytes (serialize/json_document.h): one that is not UTF-8 is recorded, not a failed write.
nlohmann::json TokenizerIdentity::to_json() const {
  return {{"kind", kind}, {"path", serialize::path_to_json(path)}, {"checksum", checksum}};
}

TokenizerIdentity TokenizerIdentity::from_json(const nlohmann::json& j, const std::string& what) {
  const bool ok = j.is_object() && j.contains("kind") && j["kind"].is_string() && j.contains("path") &&
                  j.contains("checksum") && j["checksum"].is_string();
  LATHE_CHECK(ok, what, ": the tokenizer record is not {\"kind\", \"path\", \"checksum\"}");
  return {j["kind"].get<std::string>(), serialize::path_from_json(j["path"], what + ": the tokenizer's \"path\""),
          j["checksum"].get<std::string>()};
}

std::string TokenizerIdentity::describe() const { return path.empty() ? kind : kind + " (" + path + ")"; }

BpeTokenizer::BpeTokenizer(BpeModel model, PretokenPattern pattern, uint32_t end_of_text, TokenizerIdentity identity)
    : model_(std::move(model)),
      pretokenizer_(std::make_unique<Pretokenizer>(pattern)),
      end_of_text_(end_of_text),
      identity_(std::move(identity)) {
  LATHE_CHECK(end_of_text_ == model_.size(), "tokenizer ", identity_.describe(), ": end-of-text is id ", end_of_text_,
              ", expected ", model_.size(), " (right after the ordinary tokens)");
}

void BpeTokenizer::encode_range(std::string_view text, size_t from, size_t to, std::vector<uint32_t>& out) const {
  PieceCache cache;
  pretokenizer_->for_each_piece(text, from, to, [&](size_t begin, size_t end) {
    const std::string_view piece = text.substr(begin, end - begin);
    if (piece.size() > PieceCache::kMaxPiece) {
      model_.encode_piece(piece, out);
    } else if (!cache.find(piece, out)) {
      const size_t first = out.size();
      model_.encode_piece(piece, out);
      cache.add(piece, out.data() + first, uint32_t(out.size() - first));
    }
  });
}

std::vector<uint32_t> BpeTokenizer::encode(std::string_view text, int threads) const {
  std::vector<uint32_t> ids;
  if (threads <= 1 || text.size() < kParallelMinBytes) {
    ids.reserve(text.size() / 3);
    encode_range(text, 0, text.size(), ids);
    return ids;
  }
  std::vector<size_t> cuts = Pretokenizer::split_points(text, size_t(threads) * kPartsPerThread);
  cuts.insert(cuts.begin(), 0);
  cuts.push_back(text.size());
  const size_t parts = cuts.size() - 1;
  std::vector<std::vector<uint32_t>> part_ids(parts);
  std::exception_ptr failure;
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
  for (size_t p = 0; p < parts; ++p) {
    try {
      encode_range(text, cuts[p], cuts[p + 1], part_ids[p]);
    } catch (...) {
#pragma omp critical
      failure = std::current_exception();
    }
  }
  if (failure) std::rethrow_exception(failure);
  size_t total = 0;
  for (const auto& v : part_ids) total += v.size();
  ids.reserve(total);
  for (const auto& v : part_ids) ids.insert(ids.end(), v.begin(), v.end());
  return ids;
}

std::string BpeTokenizer::decode(const uint32_t* ids, size_t n) const {
  std::string text;
  text.reserve(n * 4);
  for (size_t i = 0; i < n; ++i) {
    if (ids[i] == end_of_text_) {
      text += "<|endoftext|>";
      continue;
    }
    LATHE_CHECK(ids[i] < model_.size(), "decode: token ", ids[i], " at position ", i, " is outside the vocabulary of ",
                identity_.describe(), " (", vocab_size(), " ids)");
    text += model_.token_bytes(ids[i]);
  }
  return text;
}

std::vector<int64_t> BpeTokenizerView::encode(std::string_view text) const {
  const std::vector<uint32_t> ids = tokenizer_->encode(text);
  return {ids.begin(), ids.end()};
}

std::string BpeTokenizerView::decode(const std::vector<int64_t>& ids) const {
  std::vector<uint32_t> narrow(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    // Narrowed only when it fits, so that no id wraps onto another.
    LATHE_CHECK(ids[i] >= 0 && ids[i] < vocab_size(), "decode: token ", ids[i], " at position ", i,
                " is outside the vocabulary of ", tokenizer_->identity().describe(), " (", vocab_size(), " ids)");
    narrow[i] = uint32_t(ids[i]);
  }
  return tokenizer_->decode(narrow);
}

std::string gpt2_vocab_dir() {
  const char* env = std::getenv("LATHE_GPT2_DIR");
  if (env != nullptr && *env != '\0') return env;
  return std::string(LATHE_SOURCE_DIR) + "/.deps/gpt2";
}

BpeTokenizer load_tokenizer(const std::string& spec) {
  if (spec == "bytes") return BpeTokenizer(BpeModel::bytes_only(), PretokenPattern::gpt2, 256, {"bytes", "", kBytesChecksum});
  if (spec == "gpt2") {
    const std::string path = gpt2_vocab_dir() + "/vocab.bpe";
    struct stat st {};
    LATHE_CHECK(::stat(path.c_str(), &st) == 0, "tokenizer gpt2: ", path,
                " is missing; run tools/fetch_gpt2_vocab.sh (or set LATHE_GPT2_DIR to a directory holding vocab.bpe "
                "and encoder.json)");
    return load_gpt2(path);
  }
  struct stat st {};
  LATHE_CHECK(::stat(spec.c_str(), &st) == 0 || errno != ENOENT, "tokenizer ", spec,
              ": no such file (a tokenizer is a file from `lathe tokenizer train`, a GPT-2 vocab.bpe, gpt2 or bytes)");
  const std::string text = read_file(spec, "tokenizer");
  if (text.rfind("#version", 0) == 0) return load_gpt2(spec);
  TokenizerFile file = read_tokenizer_file(spec, text);
  std::optional<BpeModel> model;
  try {
    model.emplace(BpeModel::from_merges(file.merges));
  } catch (const Error& e) {
    LATHE_FAIL("tokenizer ", spec, ": ", e.what());
  }
  const auto eot = uint32_t(model->size());
  return BpeTokenizer(std::move(*model), file.pattern, eot, {"bpe", absolute(spec), checksum_of(text)});
}

BpeTokenizer load_tokenizer(const TokenizerIdentity& identity, const std::string& what) {
  if (identity.kind == "bytes") {
    LATHE_CHECK(identity.path.empty() && identity.checksum == kBytesChecksum, what, ": its tokenizer record says bytes, ",
                "but with path \"", identity.path, "\" and checksum ", identity.checksum, " (bytes has none and ",
                kBytesChecksum, ")");
    return load_tokenizer("bytes");
  }
  LATHE_CHECK(identity.kind == "gpt2" || identity.kind == "bpe", what, ": its tokenizer's kind \"", identity.kind,
              "\" is none of bytes, gpt2 and bpe");
  struct stat st {};
  LATHE_CHECK(::stat(identity.path.c_str(), &st) == 0, what, ": its tokenizer ", identity.describe(),
              " is gone; restore the file (checksum ", identity.checksum, ")");
  BpeTokenizer tok = load_tokenizer(identity.path);
  LATHE_CHECK(tok.identity().checksum == identity.checksum, what, ": its tokenizer ", identity.describe(),
              " has changed since (checksum ", tok.identity().checksum, ", recorded ", identity.checksum, ")");
  LATHE_CHECK(tok.identity().kind == identity.kind, what, ": its tokenizer ", identity.describe(), " is recorded as ",
              identity.kind, ", but the file is a ", tok.identity().kind == "gpt2" ? "GPT-2 vocab.bpe" : "trained tokenizer",
              " (", tok.identity().kind, ")");
  return tok;
}

}  // namespace lathe::data
