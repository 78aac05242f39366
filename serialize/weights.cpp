#include "serialize/weights.h"

#include <nlohmann/json.hpp>

#include "serialize/checksum.h"

namespace lathe::serialize {

void save_weights(const std::string& path, const NamedTensors& weights, const Metadata& metadata, Existing existing) {
  LATHE_CHECK(!metadata.count(kLatheMetadataKey), path, ": metadata key \"", kLatheMetadataKey,
              "\" is reserved for lathe's own document");
  nlohmann::json sums = nlohmann::json::object();
  for (const auto& [name, t] : weights) {
    LATHE_CHECK(t.defined(), path, ": weight '", name, "' is undefined");
    sums[name] = {{"checksum", tensor_checksum(t)}};
  }
  Metadata meta = metadata;
  meta.emplace("format", "pt");
  try {
    meta[kLatheMetadataKey] = nlohmann::json{{"format_version", 1}, {"kind", "weights"}, {"tensors", sums}}.dump();
  } catch (const nlohmann::json::exception& e) {
    LATHE_FAIL(path, ": a weight name is not valid UTF-8 (", e.what(), ")");
  }
  write_safetensors(path, weights, meta, existing);
}

NamedTensors load_weights(const std::string& path, Device device, Metadata* metadata) {
  SafetensorsFile file = read_safetensors(path, device);
  verify_checksums(file);
  if (metadata) *metadata = file.metadata;
  return std::move(file.tensors);
}

}  // namespace lathe::serialize
