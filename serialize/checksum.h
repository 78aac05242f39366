// Checksums of tensor contents: XXH3-64 over the tensor's bytes in row-major (contiguous) order,
// little-endian, written as 16 lowercase hex digits. They cover the bytes only; dtype and shape
// are checked by the safetensors header itself.
//
// Where files keep them: the JSON document under the metadata key "lathe" may hold an object
// "tensors" mapping a tensor name to {"checksum": "<16 hex digits>", ...}. `lathe inspect`,
// load_weights and the checkpoint loader verify every checksum found there.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

#include "core/tensor.h"
#include "serialize/safetensors.h"

struct XXH3_state_s;  // xxhash.h's streaming state

namespace lathe::serialize {

// Metadata key of lathe's own JSON document in a safetensors file.
inline constexpr const char* kLatheMetadataKey = "lathe";

uint64_t checksum_bytes(const void* data, size_t nbytes);
std::string checksum_hex(uint64_t checksum);  // 16 lowercase hex digits

// The checksum of bytes that arrive in pieces: equal to checksum_bytes of the pieces joined.
class StreamingChecksum {
 public:
  StreamingChecksum();
  ~StreamingChecksum();
  StreamingChecksum(const StreamingChecksum&) = delete;
  StreamingChecksum& operator=(const StreamingChecksum&) = delete;
  void update(const void* data, size_t nbytes);
  uint64_t value() const;

 private:
  XXH3_state_s* state_;
};
// The checksum of a tensor on any device, with any strides (copied to host contiguous if needed).
std::string tensor_checksum(const Tensor& t);

// name -> checksum as recorded in metadata["lathe"]["tensors"][name]["checksum"]. Empty when the
// file carries none; an error naming the file when the document is there but malformed.
std::map<std::string, std::string> recorded_checksums(const Metadata& metadata, const std::string& file);

// Checks every recorded checksum against the file's tensors; the error names the file, the tensor
// and both checksums, or a recorded name the file does not hold.
void verify_checksums(const SafetensorsFile& file);

}  // namespace lathe::serialize
