// The JSON header of a safetensors file, read and written in time linear in its size.
//
// The reader is a SAX parse (nlohmann's sax_parse) straight into the tensor entries, never a JSON
// document: a header of a million tensors is a million small objects, which a document would
// allocate one by one (six times slower than the parse itself). It checks each entry as the
// reference implementation does (huggingface/safetensors), and refuses what a JSON document would
// hide: a name or a field given twice. The writer concatenates the header's text in the order of
// the tensors, as nlohmann's ordered_json dumped it (whose every insertion scanned the keys before
// it: quadratic in the tensor count), byte for byte.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "core/shape.h"
#include "serialize/safetensors.h"

namespace lathe::serialize {

// The reference implementation's limit on the JSON header.
inline constexpr uint64_t kMaxSafetensorsHeaderBytes = 100'000'000;

// One tensor as the header describes it, already checked on its own. Its name and dimensions are
// in the Header's pools: a million entries are then a million small records, not three million
// allocations (which cost this reader more than the parse itself).
struct HeaderEntry {
  size_t name_begin = 0, name_size = 0;  // in Header::names
  size_t dims_begin = 0, dims_size = 0;  // in Header::dims
  DType dtype = DType::f32;
  bool stored_as_u8 = false;  // a U8 tensor read as b8 (serialize/safetensors.h)
  uint64_t begin = 0, end = 0;  // in the byte buffer
};

struct Header {
  std::vector<HeaderEntry> entries;  // sorted by offset
  Metadata metadata;
  std::string names;          // every tensor name, one after the other
  std::vector<int64_t> dims;  // every shape, one after the other

  std::string_view name(const HeaderEntry& e) const { return std::string_view(names).substr(e.name_begin, e.name_size); }
  Shape shape(const HeaderEntry& e) const {
    return Shape(dims.begin() + ptrdiff_t(e.dims_begin), dims.begin() + ptrdiff_t(e.dims_begin + e.dims_size));
  }
};

// Parses and checks the header text against a byte buffer of `buffer_size` bytes: every entry
// valid, and the tensors covering the buffer exactly, in order, with no overlap and no hole.
// Errors name `file`, the tensor, and what is wrong.
Header parse_safetensors_header(const char* text, size_t n, uint64_t buffer_size, const std::string& file);

// One tensor of a header to write: its name, dtype, shape and bytes in the buffer.
struct HeaderTensor {
  const std::string* name;
  DType dtype;
  const Shape* shape;
  uint64_t begin, end;
};
// The header text (before the padding) of `tensors` in the order given, metadata first. Throws an
// error naming `file` when a name or a metadata string is not valid UTF-8.
std::string safetensors_header_text(const std::vector<HeaderTensor>& tensors, const Metadata& metadata,
                                    const std::string& file);

}  // namespace lathe::serialize
