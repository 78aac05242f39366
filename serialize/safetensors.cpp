// The safetensors reader and writer. Validation follows the reference implementation
// (huggingface/safetensors) check for check, so a file lathe accepts opens in Python and the other
// way round; every error names the file, the tensor when there is one, and what is wrong.
//
// Choices where the format leaves room:
// - lathe has no u8 dtype. U8 tensors are read as b8 when every byte is 0 or 1 (masks that tools
//   store as uint8) and rejected otherwise; BOOL tensors must also hold only 0 and 1, since any
//   other byte is not a valid bool. lathe writes b8 as BOOL.
// - The writer orders tensors as the reference writer does: by dtype, widest first (I64, F64, F32,
//   I32, BF16, F16, BOOL), then by name. With the header padded to a multiple of 8 every tensor
//   starts at a multiple of its element size, and the byte layout matches Python's save_file.
#include "serialize/safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "core/autograd.h"
#include "serialize/atomic_file.h"
#include "serialize/file_reading.h"

static_assert(std::endian::native == std::endian::little,
              "safetensors stores little-endian bytes; lathe copies them as they are");

namespace lathe::serialize {

namespace {

using json = nlohmann::json;

// The reference implementation's limit on the JSON header.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;
// A header never nests deeper than root -> entry -> shape; a little slack, then refuse early.
constexpr int kMaxJsonDepth = 16;

// One tensor as the header describes it, already checked on its own.
struct Entry {
  std::string name;
  DType dtype;
  bool stored_as_u8 = false;  // a U8 tensor read as b8 (see the file comment)
  Shape shape;
  uint64_t begin = 0, end = 0;  // in the byte buffer
};

struct Header {
  std::vector<Entry> entries;  // sorted by offset
  Metadata metadata;
};


// The reference writer's dtype order (its Dtype enum); larger sorts first.
int writer_rank(DType t) {
  switch (t) {
    case DType::b8: return 0;
    case DType::f16: return 7;
    case DType::bf16: return 8;
    case DType::i32: return 9;
    case DType::f32: return 11;
    case DType::f64: return 12;
    case DType::i64: return 13;
  }
  return 0;
}

// Reads the 8-byte length prefix and checks it against the limit and the file size.
uint64_t header_length(const uint8_t* prefix, uint64_t file_size, const std::string& file) {
  uint64_t n = 0;
  std::memcpy(&n, prefix, 8);
  LATHE_CHECK(n <= kMaxHeaderBytes, file, ": header length ", n, " exceeds the limit of ",
              kMaxHeaderBytes, " bytes (damaged file, or not a safetensors file)");
  LATHE_CHECK(n <= file_size - 8, file, ": header length ", n, " runs past the end of the file (",
              file_size, " bytes); the file is truncated or not a safetensors file");
  return n;
}

// Parses the JSON, rejecting duplicate keys (which nlohmann would silently collapse) and absurd
// nesting before it costs memory.
json parse_json(const char* text, size_t n, const std::string& file) {
  std::vector<std::set<std::string>> open_objects;
  auto callback = [&](int depth, json::parse_event_t event, json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start:
        LATHE_CHECK(depth < kMaxJsonDepth, file, ": header nests JSON deeper than a safetensors header can");
        open_objects.emplace_back();
        break;
      case json::parse_event_t::array_start:
        LATHE_CHECK(depth < kMaxJsonDepth, file, ": header nests JSON deeper than a safetensors header can");
        break;
      case json::parse_event_t::object_end:
        if (!open_objects.empty()) open_objects.pop_back();
        break;
      case json::parse_event_t::key: {
        const std::string& key = parsed.get_ref<const std::string&>();
        bool fresh = open_objects.empty() || open_objects.back().insert(key).second;
        // Depth 1 is the root object: its keys are tensor names (and __metadata__).
        LATHE_CHECK(fresh, file, ": header names '", key, "' twice",
                    depth <= 1 ? " (duplicate tensor name)" : " inside one JSON object");
        break;
      }
      default:
        break;
    }
    return true;
  };
  try {
    return json::parse(text, text + n, callback);
  } catch (const json::exception& e) {
    LATHE_FAIL(file, ": header is not valid JSON: ", e.what());
  }
}

// A JSON value that must be an unsigned integer; `what` names it for the message.
uint64_t unsigned_value(const json& v, const std::string& file, const std::string& what) {
  LATHE_CHECK(v.is_number_unsigned(), file, ": ", what, " must be a non-negative integer, got ", v.dump());
  return v.get<uint64_t>();
}

Entry parse_entry(const std::string& name, const json& info, const std::string& file) {
  const std::string where = file + ": tensor '" + name + "'";
  LATHE_CHECK(info.is_object(), where, ": entry must be an object with dtype, shape and data_offsets, got ",
              info.type_name());
  for (const char* field : {"dtype", "shape", "data_offsets"})
    LATHE_CHECK(info.contains(field), where, ": entry has no \"", field, "\"");
  Entry e;
  e.name = name;

  const json& dtype = info["dtype"];
  LATHE_CHECK(dtype.is_string(), where, ": dtype must be a string, got ", dtype.dump());
  const std::string& dtype_str = dtype.get_ref<const std::string&>();
  e.dtype = dtype_from_safetensors(dtype_str, where);
  e.stored_as_u8 = dtype_str == "U8";

  const json& shape = info["shape"];
  LATHE_CHECK(shape.is_array(), where, ": shape must be an array of non-negative integers, got ", shape.dump());
  // numel (ignoring zero dims) must fit in int64 so that strides and sizes never overflow.
  uint64_t nonzero_product = 1, numel = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    uint64_t d = unsigned_value(shape[i], file, "tensor '" + name + "': shape[" + std::to_string(i) + "]");
    bool overflow = d > uint64_t(std::numeric_limits<int64_t>::max()) ||
                    (d != 0 && __builtin_mul_overflow(nonzero_product, d, &nonzero_product)) ||
                    nonzero_product > uint64_t(std::numeric_limits<int64_t>::max());
    LATHE_CHECK(!overflow, where, ": shape ", shape.dump(), " has more elements than fit in 64 bits");
    numel *= d;  // <= nonzero_product, cannot overflow
    e.shape.push_back(int64_t(d));
  }
  uint64_t nbytes = 0;
  LATHE_CHECK(!__builtin_mul_overflow(numel, uint64_t(dtype_size(e.dtype)), &nbytes), where, ": shape ",
              shape.dump(), " of ", dtype_str, " has more bytes than fit in 64 bits");

  const json& offsets = info["data_offsets"];
  LATHE_CHECK(offsets.is_array() && offsets.size() == 2, where,
              ": data_offsets must be [begin, end], got ", offsets.dump());
  e.begin = unsigned_value(offsets[0], file, "tensor '" + name + "': data_offsets[0]");
  e.end = unsigned_value(offsets[1], file, "tensor '" + name + "': data_offsets[1]");
  LATHE_CHECK(e.begin <= e.end, where, ": data_offsets [", e.begin, ", ", e.end, "] end before they begin");
  LATHE_CHECK(e.end - e.begin == nbytes, where, ": ", dtype_str, " ", shape.dump(), " needs ", nbytes,
              " bytes but data_offsets [", e.begin, ", ", e.end, "] hold ", e.end - e.begin);
  return e;
}

// Parses and checks the header against a byte buffer of `buffer_size` bytes: every entry valid,
// and the tensors covering the buffer exactly, in order, with no overlap and no hole.
Header parse_header(const char* text, size_t n, uint64_t buffer_size, const std::string& file) {
  json root = parse_json(text, n, file);
  LATHE_CHECK(root.is_object(), file, ": header must be a JSON object, got ", root.type_name());
  Header h;
  for (const auto& [key, value] : root.items()) {
    if (key == "__metadata__") {
      if (value.is_null()) continue;  // the reference reads null as "no metadata"
      LATHE_CHECK(value.is_object(), file, ": __metadata__ must be an object of strings, got ", value.type_name());
      for (const auto& [mk, mv] : value.items()) {
        LATHE_CHECK(mv.is_string(), file, ": __metadata__ value of '", mk, "' must be a string, got ",
                    mv.type_name(), " (safetensors metadata maps strings to strings)");
        h.metadata[mk] = mv.get<std::string>();
      }
      continue;
    }
    h.entries.push_back(parse_entry(key, value, file));
  }
  std::sort(h.entries.begin(), h.entries.end(), [](const Entry& a, const Entry& b) {
    return std::tie(a.begin, a.end, a.name) < std::tie(b.begin, b.end, b.name);
  });
  uint64_t covered = 0;  // end of the previous tensor
  const Entry* previous = nullptr;
  for (const Entry& e : h.entries) {
    LATHE_CHECK(e.end <= buffer_size, file, ": tensor '", e.name, "': data_offsets [", e.begin, ", ", e.end,
                "] run past the end of the data buffer (", buffer_size, " bytes); the file is truncated");
    LATHE_CHECK(e.begin >= covered, file, ": tensor '", e.name, "' (bytes ", e.begin, "..", e.end,
                ") overlaps tensor '", previous ? previous->name : "", "' (bytes ", previous ? previous->begin : 0,
                "..", covered, ")");
    LATHE_CHECK(e.begin == covered, file, ": hole of ", e.begin - covered, " bytes before tensor '", e.name,
                "' (bytes ", covered, "..", e.begin, " belong to no tensor)");
    covered = e.end;
    previous = &e;
  }
  LATHE_CHECK(covered == buffer_size, file, ": the last ", buffer_size - covered,
              " bytes of the data buffer belong to no tensor (the tensors cover ", covered, " of ",
              buffer_size, " bytes)");
  return h;
}

// BOOL and U8 bytes must be 0 or 1 to be valid lathe b8 values.
void check_mask_bytes(const Entry& e, const uint8_t* bytes, const std::string& file) {
  if (e.dtype != DType::b8) return;
  size_t n = size_t(e.end - e.begin);
  for (size_t i = 0; i < n; ++i) {
    if (bytes[i] <= 1) continue;
    if (e.stored_as_u8)
      LATHE_FAIL(file, ": tensor '", e.name, "': U8 element ", i, " is ", int(bytes[i]),
                 "; lathe has no u8 dtype and reads U8 only as a 0/1 mask (b8)");
    LATHE_FAIL(file, ": tensor '", e.name, "': BOOL element ", i, " is the byte ", int(bytes[i]),
               ", not 0 or 1");
  }
}

}  // namespace

// ---------------------------------------------------------------- dtypes

const char* safetensors_dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "F32";
    case DType::f64: return "F64";
    case DType::bf16: return "BF16";
    case DType::f16: return "F16";
    case DType::i32: return "I32";
    case DType::i64: return "I64";
    case DType::b8: return "BOOL";
  }
  LATHE_FAIL("safetensors: dtype ", int(t), " has no safetensors name");
}

DType dtype_from_safetensors(const std::string& name, const std::string& where) {
  if (name == "F32") return DType::f32;
  if (name == "F64") return DType::f64;
  if (name == "BF16") return DType::bf16;
  if (name == "F16") return DType::f16;
  if (name == "I32") return DType::i32;
  if (name == "I64") return DType::i64;
  if (name == "BOOL") return DType::b8;
  if (name == "U8") return DType::b8;  // only 0/1 masks; the reader checks the values
  static const std::set<std::string> known_elsewhere = {"I8", "I16", "U16", "U32", "U64", "F8_E4M3",
                                                        "F8_E5M2", "F8_E8M0", "F6_E2M3", "F6_E3M2",
                                                        "F4", "C64"};
  LATHE_CHECK(!known_elsewhere.count(name), where, ": dtype ", name,
              " is valid safetensors but lathe has no such dtype (it reads F32, F64, BF16, F16, I32, I64, BOOL, "
              "and U8 holding 0/1)");
  LATHE_FAIL(where, ": unknown dtype \"", name, "\"");
}

// ---------------------------------------------------------------- lookup

const Tensor* SafetensorsFile::find(const std::string& name) const {
  for (const auto& [n, t] : tensors)
    if (n == name) return &t;
  return nullptr;
}

const Tensor& SafetensorsFile::at(const std::string& name) const {
  const Tensor* t = find(name);
  if (t) return *t;
  std::string names;
  for (size_t i = 0; i < tensors.size() && i < 8; ++i) names += (i ? ", " : "") + tensors[i].first;
  if (tensors.size() > 8) names += ", ...";
  LATHE_FAIL(path, ": no tensor named '", name, "' (the file holds ", tensors.size(), " tensors",
             tensors.empty() ? "" : ": ", names, ")");
}

// ---------------------------------------------------------------- reading

SafetensorsFile parse_safetensors(const uint8_t* data, size_t size, const std::string& name, Device device) {
  LATHE_CHECK(size >= 8, name, ": file is ", size, " bytes, too short for the 8-byte header length");
  uint64_t n = header_length(data, size, name);
  Header h = parse_header(reinterpret_cast<const char*>(data + 8), size_t(n), size - 8 - n, name);
  const uint8_t* buffer = data + 8 + n;
  SafetensorsFile out;
  out.path = name;
  out.metadata = std::move(h.metadata);
  for (const Entry& e : h.entries) {
    check_mask_bytes(e, buffer + e.begin, name);
    out.tensors.emplace_back(e.name, Tensor::from_bytes(buffer + e.begin, e.shape, e.dtype, device));
  }
  return out;
}

SafetensorsFile read_safetensors(const std::string& path, Device device) {
  TensorSink sink;
  sink.place = [device](const std::string&, const Tensor& host) { return device.is_cpu() ? host : host.to(device); };
  return read_safetensors(path, sink);
}

SafetensorsFile read_safetensors(const std::string& path, const TensorSink& sink) {
  FileHandle f;
  // O_NONBLOCK so that a FIFO given by mistake is refused below instead of blocking the open.
  f.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  LATHE_CHECK(f.fd >= 0, path, ": cannot open: ", std::strerror(errno));
  struct stat st {};
  LATHE_CHECK(::fstat(f.fd, &st) == 0, path, ": cannot stat: ", std::strerror(errno));
  LATHE_CHECK(S_ISREG(st.st_mode), path, ": not a regular file");
  uint64_t size = uint64_t(st.st_size);
  LATHE_CHECK(size >= 8, path, ": file is ", size, " bytes, too short for the 8-byte header length");

  uint8_t prefix[8];
  read_exactly(f.fd, prefix, 8, 0, path);
  uint64_t n = header_length(prefix, size, path);  // bounds the header allocation by the real file
  std::string text(size_t(n), '\0');
  read_exactly(f.fd, text.data(), text.size(), 8, path);
  Header h = parse_header(text.data(), text.size(), size - 8 - n, path);

  SafetensorsFile out;
  out.path = path;
  out.metadata = std::move(h.metadata);
  if (sink.on_metadata) sink.on_metadata(out.metadata);
  // Each tensor is read straight into its own host storage, then placed: no copy of the whole file.
  for (const Entry& e : h.entries) {
    Tensor host = Tensor::empty(e.shape, e.dtype, Device::cpu());
    read_exactly(f.fd, host.data_ptr(), host.nbytes(), 8 + n + e.begin, path);
    check_mask_bytes(e, static_cast<const uint8_t*>(host.data_ptr()), path);
    out.tensors.emplace_back(e.name, sink.place ? sink.place(e.name, host) : host);
  }
  return out;
}

// ---------------------------------------------------------------- writing

void write_safetensors(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
                       const Metadata& metadata) {
  // Check everything that can be checked before the first byte is written.
  std::set<std::string> names;
  for (const auto& [name, t] : tensors) {
    LATHE_CHECK(name != "__metadata__", path, ": a tensor cannot be called \"__metadata__\"");
    LATHE_CHECK(names.insert(name).second, path, ": two tensors are called '", name, "'");
    LATHE_CHECK(t.defined(), path, ": tensor '", name, "' is undefined");
  }
  std::vector<size_t> order(tensors.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    int ra = writer_rank(tensors[a].second.dtype()), rb = writer_rank(tensors[b].second.dtype());
    return ra != rb ? ra > rb : tensors[a].first < tensors[b].first;
  });

  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (size_t i : order) {
    const auto& [name, t] = tensors[i];
    uint64_t nbytes = t.nbytes();
    header[name] = {{"dtype", safetensors_dtype_name(t.dtype())},
                    {"shape", t.shape()},
                    {"data_offsets", {offset, offset + nbytes}}};
    offset += nbytes;
  }
  std::string text;
  try {
    text = header.dump();
  } catch (const nlohmann::json::exception& e) {
    LATHE_FAIL(path, ": a tensor name or metadata string is not valid UTF-8 (", e.what(), ")");
  }
  text.append((8 - text.size() % 8) % 8, ' ');  // the reference pads so the data starts 8-aligned
  uint64_t n = text.size();

  NoGradGuard no_grad;
  write_file_atomically(path, [&](AtomicFile& file) {
    file.write(&n, 8);
    file.write(text.data(), text.size());
    for (size_t i : order) {
      Tensor host = tensors[i].second.detach();
      if (!host.device().is_cpu()) host = host.to(Device::cpu());
      host = host.contiguous();
      if (host.nbytes()) file.write(host.data_ptr(), host.nbytes());
    }
  });
}

}  // namespace lathe::serialize
