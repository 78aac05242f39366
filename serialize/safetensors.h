// The safetensors format, exactly as the public specification has it:
//   8 bytes  little-endian u64 N, the header length
//   N bytes  a JSON object: name -> {"dtype", "shape", "data_offsets": [begin, end]}, plus an
//            optional "__metadata__" object of string -> string
//   rest     the byte buffer; offsets are relative to its start
// The reader validates as the reference implementation does (header size limit, offsets in range,
// contiguous and non-overlapping tensors, dtype x shape = byte length, unknown dtypes, duplicate
// names) and names the file in every error. The writer is atomic: temporary file in the same
// directory, fsync, rename, fsync of the directory (serialize/atomic_file.h).
//
// dtypes: F32 F64 BF16 F16 I32 I64 BOOL map to lathe's f32 f64 bf16 f16 i32 i64 b8. lathe has no u8:
// U8 tensors are read as b8 when every byte is 0 or 1 (masks stored as uint8) and refused otherwise;
// BOOL bytes must be 0 or 1 too. The writer orders tensors as the reference writer does (by dtype,
// widest first, then by name), so its bytes match Python's safetensors.torch.save_file.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "serialize/atomic_file.h"

namespace lathe::serialize {

using Metadata = std::map<std::string, std::string>;

struct SafetensorsFile {
  std::vector<std::pair<std::string, Tensor>> tensors;  // in file order (sorted by offset)
  Metadata metadata;                                    // the "__metadata__" object

  // The tensor called `name`; throws an error naming the file and the tensor when it is missing.
  const Tensor& at(const std::string& name) const;
  const Tensor* find(const std::string& name) const;  // nullptr when missing
  std::string path;                                   // where it was read from, for messages

 private:
  // find's index of `tensors` by name, built at the first lookup and again whenever the list has
  // grown, shrunk or moved since: a model loader looks up every tensor of a file, which a scan
  // per lookup made quadratic (minutes for a file of 100,000 tensors).
  mutable std::unordered_map<std::string_view, size_t> index_;
  mutable const void* indexed_at_ = nullptr;
  mutable size_t indexed_size_ = 0;
};

// Reads and validates a whole file; tensors are created on `device`.
SafetensorsFile read_safetensors(const std::string& path, Device device = Device::cpu());

// What a reader does with a file as it goes: `on_metadata` once, before any tensor is read (to
// parse a document the checks need), then `place` for each tensor in file order, with the tensor
// freshly read into host memory; it checks it and returns the tensor to keep (the host tensor, or a
// copy on a device). Reading one tensor at a time this way, a device target never holds the
// whole file in host memory.
struct TensorSink {
  std::function<void(const Metadata&)> on_metadata;
  std::function<Tensor(const std::string& name, const Tensor& host)> place;
};
SafetensorsFile read_safetensors(const std::string& path, const TensorSink& sink);
// Parses a file already in memory (the fuzzer's entry point); `name` is used in messages.
SafetensorsFile parse_safetensors(const uint8_t* data, size_t size, const std::string& name,
                                  Device device = Device::cpu());

// Writes tensors (any device, any strides; copied to host contiguous) atomically; `existing` says
// what happens to a file already at `path` (serialize/atomic_file.h).
void write_safetensors(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
                       const Metadata& metadata = {}, Existing existing = Existing::replace);

// safetensors dtype names ("F32", "BF16", ...) <-> lathe dtypes.
const char* safetensors_dtype_name(DType t);
DType dtype_from_safetensors(const std::string& name, const std::string& where);

}  // namespace lathe::serialize
