#include "data/model_tokenizer.h"

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "serialize/json_document.h"

namespace lathe::data {

BpeTokenizer model_tokenizer(const serialize::LoadedModel& loaded, const std::string& path, const std::string& given) {
  if (!given.empty()) return load_tokenizer(given);
  const auto recorded = loaded.metadata.find("tokenizer");
  if (recorded == loaded.metadata.end() || recorded->second == "bytes") return load_tokenizer("bytes");
  LATHE_CHECK(recorded->second != serialize::kUnknownTokenizer, path, ": the weights (",
              serialize::weights_format_name(loaded.format), ") do not say which tokenizer they take; give --tokenizer (gpt2 for GPT-2's vocabulary, bytes for a "
              "byte-level model, or a tokenizer file)");
  // Checked against its checksum, so a changed file is an error, not garbled text.
  const nlohmann::json j = serialize::parse_json_document(recorded->second, path + ": metadata \"tokenizer\"");
  return load_tokenizer(TokenizerIdentity::from_json(j, path), "checkpoint " + path);
}

}  // namespace lathe::data
