// GGUF, version 3: the model file of llama.cpp (and ggml), written from tensors and metadata.
//
//   "GGUF", u32 version 3, u64 tensor count, u64 metadata count
//   metadata   key (u64 length + bytes), u32 value type, value; an array is u32 element type,
//              u64 count, the elements; strings are u64 length + UTF-8 bytes
//   tensors    name, u32 dimensions, u64 extents fastest first (ne[0]: a row-major [out, in]
//              matrix is written [in, out]), u32 ggml type, u64 offset in the data section
//   padding to general.alignment (32), then each tensor's data at its offset, each padded to 32
//
// Types lathe writes: F32 (0), F16 (1: IEEE half, rounded to nearest even) and Q8_0 (8: blocks of 32
// values along ne[0], each an f16 scale d = max|x| / 127 and 32 int8 q = round(x / d), rounding half
// away from zero, as ggml's quantize_row_q8_0_ref; ne[0] must be a multiple of 32). The layout and
// rules follow ggml's gguf.cpp (offsets the running sum of padded sizes, names under 64 bytes, no key
// or name twice); what a model's keys and tensors mean is train/gguf_export.h's.
#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "core/tensor.h"
#include "serialize/atomic_file.h"

namespace lathe::serialize {

enum class GgufType : uint32_t { f32 = 0, f16 = 1, q8_0 = 8 };
const char* gguf_type_name(GgufType t);  // "F32", "F16", "Q8_0"

class GgufWriter {
 public:
  // Metadata, in the order added (llama.cpp reads keys by name; the order is for readers' eyes).
  // Integers are UINT32 (llama.cpp's loader requires that type for counts and ids), reals FLOAT32.
  void add(const std::string& key, uint32_t value);
  void add(const std::string& key, float value);
  void add(const std::string& key, bool value);
  void add(const std::string& key, const std::string& value);
  void add(const std::string& key, const char* value) { add(key, std::string(value)); }
  void add(const std::string& key, const std::vector<std::string>& values);
  void add(const std::string& key, const std::vector<int32_t>& values);

  // A tensor stored as `type`; `t` (any device, any floating dtype) is read as f32. Its extents are
  // written fastest first. Errors name the tensor: a name of 64 bytes or more, one given twice, a
  // Q8_0 tensor whose last dimension is not a multiple of 32.
  void add_tensor(const std::string& name, const Tensor& t, GgufType type);

  // Writes the file atomically (serialize/atomic_file.h).
  void write(const std::string& path, Existing existing = Existing::replace) const;

 private:
  using Value = std::variant<uint32_t, float, bool, std::string, std::vector<std::string>, std::vector<int32_t>>;
  struct Entry {
    std::string key;
    Value value;
  };
  struct TensorEntry {
    std::string name;
    std::vector<uint64_t> ne;  // fastest first
    GgufType type;
    std::string bytes;         // the encoded data
  };
  void check_new_key(const std::string& key) const;
  std::vector<Entry> metadata_;
  std::vector<TensorEntry> tensors_;
};

// The bytes of `values` (n a multiple of 32) as Q8_0 blocks, and those blocks back as values: the
// quantizer and its inverse, exposed for tests.
std::string quantize_q8_0(const float* values, size_t n);
std::vector<float> dequantize_q8_0(const std::string& blocks);

}  // namespace lathe::serialize
