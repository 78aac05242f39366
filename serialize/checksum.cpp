#include "serialize/checksum.h"

#include <xxhash.h>

#include <cstdio>
#include <new>
#include <nlohmann/json.hpp>

#include "core/autograd.h"
#include "serialize/json_document.h"

namespace lathe::serialize {

uint64_t checksum_bytes(const void* data, size_t nbytes) {
  static const char empty = 0;  // XXH3 wants a valid pointer even for zero bytes
  return XXH3_64bits(nbytes ? data : &empty, nbytes);
}

StreamingChecksum::StreamingChecksum() : state_(XXH3_createState()) {
  if (state_ == nullptr) throw std::bad_alloc();
  XXH3_64bits_reset(state_);
}

StreamingChecksum::~StreamingChecksum() { XXH3_freeState(state_); }

void StreamingChecksum::update(const void* data, size_t nbytes) {
  if (nbytes > 0) XXH3_64bits_update(state_, data, nbytes);
}

uint64_t StreamingChecksum::value() const { return XXH3_64bits_digest(state_); }

std::string checksum_hex(uint64_t checksum) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", (unsigned long long)checksum);
  return buf;
}

std::string tensor_checksum(const Tensor& t) {
  LATHE_CHECK(t.defined(), "tensor_checksum: undefined tensor");
  NoGradGuard no_grad;
  Tensor host = t.detach();
  if (!host.device().is_cpu()) host = host.to(Device::cpu());
  host = host.contiguous();
  return checksum_hex(checksum_bytes(host.data_ptr(), host.nbytes()));
}

std::map<std::string, std::string> recorded_checksums(const Metadata& metadata, const std::string& file) {
  std::map<std::string, std::string> out;
  auto it = metadata.find(kLatheMetadataKey);
  if (it == metadata.end()) return out;
  const nlohmann::json doc = parse_json_document(it->second, file + ": metadata \"" + kLatheMetadataKey + "\"");
  LATHE_CHECK(doc.is_object(), file, ": metadata \"", kLatheMetadataKey, "\" is not a JSON object");
  auto tensors = doc.find("tensors");
  if (tensors == doc.end()) return out;
  LATHE_CHECK(tensors->is_object(), file, ": metadata \"lathe\": \"tensors\" is not an object");
  for (const auto& [name, entry] : tensors->items()) {
    if (!entry.is_object() || !entry.contains("checksum")) continue;
    const auto& sum = entry["checksum"];
    LATHE_CHECK(sum.is_string(), file, ": metadata \"lathe\": checksum of tensor '", name,
                "' is not a string");
    out[name] = sum.get<std::string>();
  }
  return out;
}

void verify_checksums(const SafetensorsFile& file) {
  for (const auto& [name, expected] : recorded_checksums(file.metadata, file.path)) {
    const Tensor* t = file.find(name);
    LATHE_CHECK(t != nullptr, file.path, ": metadata records a checksum for tensor '", name,
                "', which the file does not hold");
    std::string actual = tensor_checksum(*t);
    LATHE_CHECK(actual == expected, file.path, ": tensor '", name, "' is damaged: checksum ", actual,
                " does not match the recorded ", expected);
  }
}

}  // namespace lathe::serialize
