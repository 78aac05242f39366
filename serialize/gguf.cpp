#include "serialize/gguf.h"

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/autograd.h"
#include "core/error.h"

namespace lathe::serialize {

namespace {

constexpr uint32_t kVersion = 3;
constexpr uint64_t kAlignment = 32;   // general.alignment's default
constexpr size_t kMaxNameBytes = 63;  // GGML_MAX_NAME is 64, with the terminating zero
constexpr size_t kQ8Block = 32;

// GGUF's value types.
enum : uint32_t { kInt32 = 5, kUint32 = 4, kFloat32 = 6, kBool = 7, kString = 8, kArray = 9 };

template <class T>
void put(std::string& out, T v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof v);
}
void put_string(std::string& out, const std::string& s) {
  put<uint64_t>(out, s.size());
  out += s;
}
uint64_t padded(uint64_t n) { return (n + kAlignment - 1) / kAlignment * kAlignment; }

uint16_t half_bits(float v) {
  return Eigen::numext::bit_cast<uint16_t>(Eigen::half(v));  // round to nearest even, as GGML_FP32_TO_FP16
}
float half_value(uint16_t bits) { return float(Eigen::numext::bit_cast<Eigen::half>(bits)); }

}  // namespace

const char* gguf_type_name(GgufType t) {
  switch (t) {
    case GgufType::f32: return "F32";
    case GgufType::f16: return "F16";
    case GgufType::q8_0: return "Q8_0";
  }
  return "?";
}

std::string quantize_q8_0(const float* x, size_t n) {
  LATHE_CHECK(n % kQ8Block == 0, "Q8_0: ", n, " values are not whole blocks of 32");
  std::string out;
  out.reserve(n / kQ8Block * 34);
  for (size_t b = 0; b < n; b += kQ8Block) {
    float amax = 0;
    for (size_t i = 0; i < kQ8Block; ++i) amax = std::max(amax, std::fabs(x[b + i]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    put<uint16_t>(out, half_bits(d));
    for (size_t i = 0; i < kQ8Block; ++i) out += char(int8_t(std::roundf(x[b + i] * id)));  // half away from zero
  }
  return out;
}

std::vector<float> dequantize_q8_0(const std::string& blocks) {
  LATHE_CHECK(blocks.size() % 34 == 0, "Q8_0: ", blocks.size(), " bytes are not whole blocks of 34");
  std::vector<float> out;
  for (size_t b = 0; b < blocks.size(); b += 34) {
    uint16_t bits;
    std::memcpy(&bits, blocks.data() + b, 2);
    const float d = half_value(bits);
    for (size_t i = 0; i < kQ8Block; ++i) out.push_back(d * float(int8_t(blocks[b + 2 + i])));
  }
  return out;
}

void GgufWriter::check_new_key(const std::string& key) const {
  LATHE_CHECK(!key.empty(), "GGUF: an empty metadata key");
  for (const Entry& e : metadata_) LATHE_CHECK(e.key != key, "GGUF: metadata key \"", key, "\" added twice");
}

void GgufWriter::add(const std::string& key, uint32_t v) { check_new_key(key), metadata_.push_back({key, v}); }
void GgufWriter::add(const std::string& key, float v) { check_new_key(key), metadata_.push_back({key, v}); }
void GgufWriter::add(const std::string& key, bool v) { check_new_key(key), metadata_.push_back({key, v}); }
void GgufWriter::add(const std::string& key, const std::string& v) { check_new_key(key), metadata_.push_back({key, v}); }
void GgufWriter::add(const std::string& key, const std::vector<std::string>& v) {
  check_new_key(key), metadata_.push_back({key, v});
}
void GgufWriter::add(const std::string& key, const std::vector<int32_t>& v) {
  check_new_key(key), metadata_.push_back({key, v});
}

void GgufWriter::add_tensor(const std::string& name, const Tensor& t, GgufType type) {
  LATHE_CHECK(!name.empty() && name.size() <= kMaxNameBytes, "GGUF: tensor name \"", name, "\" must be 1 to ",
              kMaxNameBytes, " bytes");
  for (const TensorEntry& e : tensors_) LATHE_CHECK(e.name != name, "GGUF: tensor \"", name, "\" added twice");
  LATHE_CHECK(t.defined() && is_floating(t.dtype()) && t.dim() >= 1, "GGUF: tensor \"", name,
              "\" must be a floating tensor of one dimension or more, got ", t.defined() ? t.desc() : "undefined");
  NoGradGuard no_grad;
  const Tensor f = t.detach().to(Device::cpu()).to(DType::f32).contiguous();
  TensorEntry e{name, {}, type, {}};
  for (int64_t d = f.dim() - 1; d >= 0; --d) e.ne.push_back(uint64_t(f.size(d)));
  const float* x = f.data<float>();
  const size_t n = size_t(f.numel());
  switch (type) {
    case GgufType::f32: e.bytes.assign(reinterpret_cast<const char*>(x), n * 4); break;
    case GgufType::f16:
      e.bytes.reserve(n * 2);
      for (size_t i = 0; i < n; ++i) put<uint16_t>(e.bytes, half_bits(x[i]));
      break;
    case GgufType::q8_0:
      LATHE_CHECK(e.ne[0] % kQ8Block == 0, "GGUF: tensor \"", name, "\" ", f.desc(), " cannot be Q8_0: its last ",
                  "dimension is not a multiple of 32");
      e.bytes = quantize_q8_0(x, n);
      break;
  }
  tensors_.push_back(std::move(e));
}

void GgufWriter::write(const std::string& path, Existing existing) const {
  std::string head = "GGUF";
  put<uint32_t>(head, kVersion);
  put<uint64_t>(head, tensors_.size());
  put<uint64_t>(head, metadata_.size());
  for (const Entry& e : metadata_) {
    put_string(head, e.key);
    std::visit(
        [&](const auto& v) {
          using V = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<V, uint32_t>) put<uint32_t>(head, kUint32), put<uint32_t>(head, v);
          else if constexpr (std::is_same_v<V, float>) put<uint32_t>(head, kFloat32), put<float>(head, v);
          else if constexpr (std::is_same_v<V, bool>) put<uint32_t>(head, kBool), put<uint8_t>(head, v ? 1 : 0);
          else if constexpr (std::is_same_v<V, std::string>) put<uint32_t>(head, kString), put_string(head, v);
          else if constexpr (std::is_same_v<V, std::vector<std::string>>) {
            put<uint32_t>(head, kArray), put<uint32_t>(head, kString), put<uint64_t>(head, v.size());
            for (const std::string& s : v) put_string(head, s);
          } else {
            put<uint32_t>(head, kArray), put<uint32_t>(head, kInt32), put<uint64_t>(head, v.size());
            for (int32_t i : v) put<int32_t>(head, i);
          }
        },
        e.value);
  }
  uint64_t offset = 0;
  for (const TensorEntry& t : tensors_) {
    put_string(head, t.name);
    put<uint32_t>(head, uint32_t(t.ne.size()));
    for (uint64_t n : t.ne) put<uint64_t>(head, n);
    put<uint32_t>(head, uint32_t(t.type));
    put<uint64_t>(head, offset);
    offset += padded(t.bytes.size());
  }
  head.append(padded(head.size()) - head.size(), '\0');
  const std::string zeros(kAlignment, '\0');
  write_file_atomically(path, [&](AtomicFile& f) {
    f.write(head.data(), head.size());
    for (const TensorEntry& t : tensors_) {
      f.write(t.bytes.data(), t.bytes.size());
      f.write(zeros.data(), padded(t.bytes.size()) - t.bytes.size());
    }
  }, existing);
}

}  // namespace lathe::serialize
