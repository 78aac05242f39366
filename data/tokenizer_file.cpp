#include "data/tokenizer_file.h"

#include "core/error.h"
#include "serialize/atomic_file.h"
#include "serialize/json_document.h"

namespace lathe::data {

void write_tokenizer_file(const std::string& path, const TokenizerFile& t) {
  const uint64_t n = 256 + t.merges.size();
  std::string text = std::string("{\"format\": \"") + kTokenizerFormat + "\", \"version\": 1, \"pattern\": \"" +
                     pretoken_pattern_name(t.pattern) + "\", \"vocab_size\": " + std::to_string(n) +
                     ", \"end_of_text\": " + std::to_string(n) + ",\n\"merges\": [";
  // One merge per line: the file diffs and greps like GPT-2's vocab.bpe.
  for (size_t i = 0; i < t.merges.size(); ++i)
    text += (i ? ",\n" : "\n") + std::string("[") + std::to_string(t.merges[i].first) + ", " +
            std::to_string(t.merges[i].second) + "]";
  text += "\n]}\n";
  serialize::write_file_atomically(path, [&](serialize::AtomicFile& f) { f.write(text.data(), text.size()); });
}

TokenizerFile read_tokenizer_file(const std::string& path, const std::string& text) {
  const nlohmann::json j = serialize::parse_json_document(text, "tokenizer " + path, serialize::kMaxListJsonBytes);
  auto field = [&](const char* key) -> const nlohmann::json& {
    LATHE_CHECK(j.is_object() && j.contains(key), "tokenizer ", path, ": no \"", key, "\" (not a file written by ",
                "`lathe tokenizer train`)");
    return j[key];
  };
  LATHE_CHECK(field("format") == kTokenizerFormat, "tokenizer ", path, ": format ",
              serialize::quote_json(field("format")), ", expected \"", kTokenizerFormat, "\"");
  LATHE_CHECK(field("version") == 1, "tokenizer ", path, ": version ", serialize::quote_json(field("version")),
              " (this lathe reads version 1)");
  TokenizerFile t;
  LATHE_CHECK(field("pattern").is_string(), "tokenizer ", path, ": \"pattern\" is not a string");
  try {
    t.pattern = parse_pretoken_pattern(field("pattern").get<std::string>());
  } catch (const Error& e) {
    LATHE_FAIL("tokenizer ", path, ": ", e.what());
  }
  const nlohmann::json& merges = field("merges");
  LATHE_CHECK(merges.is_array(), "tokenizer ", path, ": \"merges\" is not an array");
  for (size_t i = 0; i < merges.size(); ++i) {
    const nlohmann::json& m = merges[i];
    const uint64_t limit = 256 + i;  // merge i may join tokens made before it
    LATHE_CHECK(m.is_array() && m.size() == 2 && m[0].is_number_unsigned() && m[1].is_number_unsigned() &&
                    m[0].get<uint64_t>() < limit && m[1].get<uint64_t>() < limit,
                "tokenizer ", path, ": merge ", i, " is ", serialize::quote_json(m),
                ", expected [left, right] with both ids below ", limit);
    t.merges.emplace_back(m[0].get<uint32_t>(), m[1].get<uint32_t>());
  }
  const uint64_t n = 256 + t.merges.size();
  LATHE_CHECK(field("vocab_size") == n && field("end_of_text") == n, "tokenizer ", path, ": vocab_size ",
              serialize::quote_json(field("vocab_size")), " and end_of_text ", serialize::quote_json(field("end_of_text")),
              " disagree with its ", t.merges.size(), " merges (both should be ", n, "; truncated?)");
  return t;
}

}  // namespace lathe::data
