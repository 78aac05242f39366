#include "data/shard_manifest.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "core/error.h"
#include "data/corpus_file.h"
#include "serialize/atomic_file.h"
#include "serialize/json_document.h"

namespace lathe::data {

namespace {

// The whole of a manifest file; errors name it and say what it is when it is not a regular file.
std::string read_manifest_text(const std::string& path) {
  CorpusFile info;
  FileHandle fd = open_regular_file(path, "token shard manifest", info);
  LATHE_CHECK(info.size <= serialize::kMaxListJsonBytes, path, ": ", info.size, " bytes, more than the ",
              serialize::kMaxListJsonBytes, " a shard manifest may hold");
  std::string text(info.size, '\0');
  read_exact(fd.get(), info, 0, info.size, reinterpret_cast<uint8_t*>(text.data()));
  return text;
}

void write_manifest(const std::string& dir, const nlohmann::json& j) {
  const std::string text = j.dump(2) + "\n";
  serialize::write_file_atomically(shard_tokenizer_path(dir),
                                   [&](serialize::AtomicFile& f) { f.write(text.data(), text.size()); });
}

bool is_hex16(const std::string& s) {
  return s.size() == 16 && std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

// Reads the fields of a manifest, each checked for presence and type; errors name the file, and
// `where` the element ("files[3]: ") when the field is not at the top.
class ManifestFields {
 public:
  explicit ManifestFields(const std::string& path) : path_(path) {}

  const nlohmann::json& at(const nlohmann::json& object, const char* key, const std::string& where = "") const {
    LATHE_CHECK(object.is_object() && object.contains(key), path_, ": ", where, "no \"", key, "\"");
    return object[key];
  }
  uint64_t count(const nlohmann::json& object, const char* key, const std::string& where = "") const {
    const nlohmann::json& v = at(object, key, where);
    LATHE_CHECK(v.is_number_unsigned(), path_, ": ", where, "\"", key, "\" is ", serialize::quote_json(v),
                ", not a count (an integer >= 0)");
    return v.get<uint64_t>();
  }
  std::string text(const nlohmann::json& object, const char* key, const std::string& where = "") const {
    const nlohmann::json& v = at(object, key, where);
    LATHE_CHECK(v.is_string(), path_, ": ", where, "\"", key, "\" is ", serialize::quote_json(v), ", not a string");
    return v.get<std::string>();
  }

 private:
  const std::string& path_;
};

}  // namespace

std::string shard_name(size_t index) {
  char name[32];
  std::snprintf(name, sizeof name, "shard_%06zu.bin", index);
  return name;
}

std::string shard_path(const std::string& dir, size_t index) { return (std::filesystem::path(dir) / shard_name(index)).string(); }

std::string shard_tokenizer_path(const std::string& dir) { return (std::filesystem::path(dir) / "tokenizer.json").string(); }

bool is_shard_name(const std::string& name) {
  return name.size() > 10 && name.rfind("shard_", 0) == 0 && name.compare(name.size() - 4, 4, ".bin") == 0 &&
         std::all_of(name.begin() + 6, name.end() - 4, [](char c) { return c >= '0' && c <= '9'; });
}

void write_shard_manifest(const std::string& dir, const ShardManifest& m) {
  nlohmann::json files = nlohmann::json::array();
  for (const ShardRecord& r : m.shards) files.push_back({{"name", r.name}, {"tokens", r.tokens}, {"checksum", r.checksum}});
  write_manifest(dir, {{"format", kShardManifestFormat}, {"version", kShardManifestVersion}, {"state", "complete"},
                       {"tokenizer", m.tokenizer.to_json()}, {"vocab_size", m.vocab_size},
                       {"end_of_text", m.end_of_text}, {"documents", m.documents}, {"tokens", m.tokens},
                       {"text_bytes", m.text_bytes}, {"shards", m.shards.size()}, {"files", std::move(files)}});
}

void write_writing_manifest(const std::string& dir, const std::string& writer) {
  write_manifest(dir, {{"format", kShardManifestFormat}, {"version", kShardManifestVersion}, {"state", "writing"},
                       {"writer", writer}});
}

ShardManifest read_shard_manifest(const std::string& dir) {
  const std::string path = shard_tokenizer_path(dir);
  struct stat st {};
  LATHE_CHECK(::stat(path.c_str(), &st) == 0 || errno != ENOENT, "token shards ", dir, ": no ", path,
              " (write shards with `lathe tokenize`)");
  const nlohmann::json j = serialize::parse_json_document(read_manifest_text(path), path, serialize::kMaxListJsonBytes);
  const ManifestFields f(path);
  LATHE_CHECK(j.is_object(), path, ": not a JSON object");
  LATHE_CHECK(f.at(j, "format") == kShardManifestFormat, path, ": format ", serialize::quote_json(j["format"]),
              ", expected \"", kShardManifestFormat, "\"");
  LATHE_CHECK(j.contains("version"), "token shards ", dir, ": ", path, " was written by an older lathe, without a ",
              "record of each shard to check them against; run `lathe tokenize` again to rewrite the directory");
  LATHE_CHECK(j["version"] == kShardManifestVersion, path, ": version ", serialize::quote_json(j["version"]),
              " (this lathe reads version ", kShardManifestVersion, ")");
  const std::string state = f.text(j, "state");
  if (state == "writing") {
    const std::string writer = j.contains("writer") && j["writer"].is_string() ? j["writer"].get<std::string>()
                                                                               : std::string("lathe tokenize");
    LATHE_FAIL("token shards ", dir, ": ", writer, " began rewriting this directory and has not finished (it was ",
               "killed, or is still running); run `lathe tokenize` again");
  }
  LATHE_CHECK(state == "complete", path, ": state ", serialize::quote_json(j["state"]),
              ", expected \"complete\" or \"writing\"");

  ShardManifest m;
  m.tokenizer = TokenizerIdentity::from_json(f.at(j, "tokenizer"), path);
  m.vocab_size = f.count(j, "vocab_size");
  LATHE_CHECK(m.vocab_size >= 1 && m.vocab_size <= (uint64_t(1) << 32), path, ": vocab_size ", m.vocab_size,
              " is not in [1, 2^32]");
  const uint64_t eot = f.count(j, "end_of_text");
  LATHE_CHECK(eot < m.vocab_size, path, ": end_of_text ", eot, " is not below vocab_size ", m.vocab_size);
  m.end_of_text = uint32_t(eot);
  m.documents = f.count(j, "documents");
  m.tokens = f.count(j, "tokens");
  m.text_bytes = f.count(j, "text_bytes");
  const uint64_t shards = f.count(j, "shards");
  const nlohmann::json& files = f.at(j, "files");
  LATHE_CHECK(files.is_array(), path, ": \"files\" is not an array");
  LATHE_CHECK(files.size() == shards, path, ": \"shards\" says ", shards, " shards, \"files\" lists ", files.size());
  uint64_t total = 0;
  for (size_t i = 0; i < files.size(); ++i) {
    const std::string where = "files[" + std::to_string(i) + "]: ";
    ShardRecord r;
    r.name = f.text(files[i], "name", where);
    LATHE_CHECK(r.name == shard_name(i), path, ": ", where, "\"name\" is ", serialize::quote_json(files[i]["name"]),
                ", expected \"", shard_name(i), "\" (the shards are numbered from 000000 in stream order)");
    r.tokens = f.count(files[i], "tokens", where);
    LATHE_CHECK(r.tokens <= uint64_t(INT32_MAX), path, ": ", where, "\"tokens\" is ", r.tokens,
                ", past the 2^31 - 1 a shard can hold");
    r.checksum = f.text(files[i], "checksum", where);
    LATHE_CHECK(is_hex16(r.checksum), path, ": ", where, "\"checksum\" is ", serialize::quote_json(files[i]["checksum"]),
                ", not 16 lowercase hex digits");
    total += r.tokens;
    m.shards.push_back(std::move(r));
  }
  LATHE_CHECK(total == m.tokens, path, ": \"tokens\" says ", m.tokens, ", but the shards in \"files\" hold ", total);
  return m;
}

void check_manifest_replaceable(const std::string& dir, const std::string& flag) {
  const std::string path = shard_tokenizer_path(dir);
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) {
    LATHE_CHECK(errno == ENOENT, flag, " ", dir, ": cannot look at ", path, ": ", std::strerror(errno));
    return;
  }
  const std::string refuse = " is not the manifest of lathe's token shards, and lathe tokenize would replace it; "
                             "move it away or choose another " + flag;
  LATHE_CHECK(S_ISREG(st.st_mode), flag, " ", dir, ": ", path, " is ", serialize::file_kind_name(st.st_mode), refuse);
  nlohmann::json j;
  try {
    j = serialize::parse_json_document(read_manifest_text(path), path, serialize::kMaxListJsonBytes);
  } catch (const Error&) {
    LATHE_FAIL(flag, " ", dir, ": ", path, " is not JSON, so it", refuse);
  }
  LATHE_CHECK(j.is_object() && j.contains("format") && j["format"] == kShardManifestFormat, flag, " ", dir, ": ", path,
              refuse);
}

}  // namespace lathe::data
