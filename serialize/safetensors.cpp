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
#include <set>

#include "core/autograd.h"
#include "serialize/atomic_file.h"
#include "serialize/file_reading.h"
#include "serialize/safetensors_header.h"

static_assert(std::endian::native == std::endian::little,
              "safetensors stores little-endian bytes; lathe copies them as they are");

namespace lathe::serialize {

namespace {

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
  LATHE_CHECK(n <= kMaxSafetensorsHeaderBytes, file, ": header length ", n, " exceeds the limit of ",
              kMaxSafetensorsHeaderBytes, " bytes (damaged file, or not a safetensors file)");
  LATHE_CHECK(n <= file_size - 8, file, ": header length ", n, " runs past the end of the file (",
              file_size, " bytes); the file is truncated or not a safetensors file");
  return n;
}

// BOOL and U8 bytes must be 0 or 1 to be valid lathe b8 values.
void check_mask_bytes(const Header& h, const HeaderEntry& e, const uint8_t* bytes, const std::string& file) {
  if (e.dtype != DType::b8) return;
  size_t n = size_t(e.end - e.begin);
  for (size_t i = 0; i < n; ++i) {
    if (bytes[i] <= 1) continue;
    if (e.stored_as_u8)
      LATHE_FAIL(file, ": tensor '", h.name(e), "': U8 element ", i, " is ", int(bytes[i]),
                 "; lathe has no u8 dtype and reads U8 only as a 0/1 mask (b8)");
    LATHE_FAIL(file, ": tensor '", h.name(e), "': BOOL element ", i, " is the byte ", int(bytes[i]),
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
  if (indexed_at_ != tensors.data() || indexed_size_ != tensors.size()) {
    index_.clear();
    index_.reserve(tensors.size());
    for (size_t i = 0; i < tensors.size(); ++i) index_.emplace(tensors[i].first, i);  // the first of a repeated name
    indexed_at_ = tensors.data();
    indexed_size_ = tensors.size();
  }
  // The index answers a hit, checked; a miss is confirmed by a scan, so that a name changed in place
  // since the index was built is still found. (Loaders look up names that are there.)
  if (const auto it = index_.find(name); it != index_.end() && tensors[it->second].first == name)
    return &tensors[it->second].second;
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
  Header h = parse_safetensors_header(reinterpret_cast<const char*>(data + 8), size_t(n), size - 8 - n, name);
  const uint8_t* buffer = data + 8 + n;
  SafetensorsFile out;
  out.tensors.reserve(h.entries.size());
  out.path = name;
  out.metadata = std::move(h.metadata);
  for (const HeaderEntry& e : h.entries) {
    check_mask_bytes(h, e, buffer + e.begin, name);
    out.tensors.emplace_back(h.name(e), Tensor::from_bytes(buffer + e.begin, h.shape(e), e.dtype, device));
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
  Header h = parse_safetensors_header(text.data(), text.size(), size - 8 - n, path);

  SafetensorsFile out;
  out.tensors.reserve(h.entries.size());
  out.path = path;
  out.metadata = std::move(h.metadata);
  if (sink.on_metadata) sink.on_metadata(out.metadata);
  // Each tensor is read straight into its own host storage, then placed: no copy of the whole file.
  // Small ones come through a staging chunk, one read for many of them instead of a system call
  // each (a file of a million scalars would otherwise take a million reads).
  constexpr uint64_t kChunkBytes = uint64_t(4) << 20;
  std::vector<uint8_t> chunk;
  uint64_t chunk_begin = 0, chunk_end = 0;  // in the data buffer
  const uint64_t data_bytes = size - 8 - n;
  for (const HeaderEntry& e : h.entries) {
    Tensor host = Tensor::empty(h.shape(e), e.dtype, Device::cpu());
    const uint64_t nbytes = e.end - e.begin;
    if (nbytes >= kChunkBytes / 4) {
      read_exactly(f.fd, host.data_ptr(), nbytes, 8 + n + e.begin, path);
    } else if (nbytes > 0) {
      if (e.begin < chunk_begin || e.end > chunk_end) {
        chunk_begin = e.begin;
        chunk_end = std::min(data_bytes, e.begin + kChunkBytes);
        chunk.resize(size_t(chunk_end - chunk_begin));
        read_exactly(f.fd, chunk.data(), chunk.size(), 8 + n + chunk_begin, path);
      }
      std::memcpy(host.data_ptr(), chunk.data() + (e.begin - chunk_begin), size_t(nbytes));
    }
    check_mask_bytes(h, e, static_cast<const uint8_t*>(host.data_ptr()), path);
    std::string name(h.name(e));
    Tensor placed = sink.place ? sink.place(name, host) : host;
    out.tensors.emplace_back(std::move(name), std::move(placed));
  }
  return out;
}

// ---------------------------------------------------------------- writing

void write_safetensors(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
                       const Metadata& metadata, Existing existing) {
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

  std::vector<HeaderTensor> header;
  header.reserve(order.size());
  uint64_t offset = 0;
  for (size_t i : order) {
    const auto& [name, t] = tensors[i];
    const uint64_t nbytes = t.nbytes();
    header.push_back({&name, t.dtype(), &t.shape(), offset, offset + nbytes});
    offset += nbytes;
  }
  std::string text = safetensors_header_text(header, metadata, path);
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
  }, existing);
}

}  // namespace lathe::serialize
