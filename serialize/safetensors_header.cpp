#include "serialize/safetensors_header.h"

#include <algorithm>
#include <charconv>
#include <limits>
#include <nlohmann/json.hpp>
#include <string_view>
#include <tuple>
#include <functional>
#include <utility>

#include "core/error.h"

namespace lathe::serialize {

namespace {

using json = nlohmann::json;

// A header never nests deeper than root -> entry -> shape; a little slack for fields lathe does not
// read, then refuse.
constexpr int kMaxHeaderDepth = 16;

// "[2,3]", a list of integers as the header writes it, for messages (the header's own text is not
// kept).
std::string list_str(const std::vector<uint64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s + "]";
}

// The SAX events of one header. The parse is in one of a few places: the root object, the
// metadata object, a tensor's entry, a list (shape or data_offsets) in an entry, or a value of a
// field lathe does not read (skipped, however it nests).
class HeaderBuilder {
 public:
  // The shortest entry a header can hold ("a":{"dtype":"F32","shape":[],"data_offsets":[0,0]},) is
  // 50 bytes, so `text_bytes` / 50 entries is room for every one, and the names take fewer bytes
  // than the text: neither list grows by copying.
  HeaderBuilder(const std::string& file, size_t text_bytes) : file_(file) {
    header_.entries.reserve(text_bytes / 50 + 1);
    header_.names.reserve(text_bytes);
  }

  bool null() { return scalar("null", nullptr); }
  bool boolean(bool) { return scalar("boolean", nullptr); }
  bool number_integer(json::number_integer_t v) {
    const std::string text = std::to_string(v);
    return scalar("number", &text);
  }
  bool number_unsigned(json::number_unsigned_t v) {
    if (in_ == In::list && skip_ == 0) {
      list_.push_back(v);
      return true;
    }
    const std::string text = std::to_string(v);
    return scalar("number", &text);
  }
  bool number_float(json::number_float_t, const json::string_t& text) { return scalar("number", &text); }
  bool string(json::string_t& s) {
    if (skip_ > 0) return true;
    if (in_ == In::metadata) {
      header_.metadata.emplace(std::move(key_), std::move(s));
      return true;
    }
    if (in_ == In::entry && field_ == Field::dtype) {
      entry_.dtype = s == "F32" ? DType::f32 : s == "BF16" ? DType::bf16 : dtype_from_safetensors(s, where());
      entry_.stored_as_u8 = s == "U8";
      dtype_text_ = std::move(s);
      return true;
    }
    return scalar("string", nullptr, &s);
  }
  bool binary(json::binary_t&) { return scalar("binary", nullptr); }

  bool start_object(std::size_t) {
    deeper();
    if (skip_ > 0) return ++skip_, true;
    switch (in_) {
      case In::start: in_ = In::root; return true;
      case In::root:
        if (key_ == "__metadata__") {
          in_ = In::metadata;
        } else {
          in_ = In::entry;
          entry_ = HeaderEntry{};
          entry_.name_begin = header_.names.size();
          entry_.name_size = key_.size();
          header_.names += key_;
          seen_ = 0;
        }
        return true;
      case In::entry:
        if (field_ == Field::other) return skip_ = 1, true;
        return scalar("object", nullptr);
      default: return scalar("object", nullptr);
    }
  }
  bool start_array(std::size_t) {
    deeper();
    if (skip_ > 0) return ++skip_, true;
    if (in_ == In::entry && (field_ == Field::shape || field_ == Field::offsets)) {
      in_ = In::list;
      list_.clear();
      return true;
    }
    if (in_ == In::entry && field_ == Field::other) return skip_ = 1, true;
    return scalar("array", nullptr);
  }
  bool end_object() {
    --depth_;
    if (skip_ > 0) return --skip_, true;
    if (in_ == In::entry) finish_entry();
    in_ = in_ == In::root ? In::done : In::root;
    return true;
  }
  bool end_array() {
    --depth_;
    if (skip_ > 0) return --skip_, true;
    if (field_ == Field::shape) finish_shape();
    else finish_offsets();
    in_ = In::entry;
    return true;
  }
  bool key(json::string_t& k) {
    if (skip_ > 0) return true;
    if (in_ == In::root) {
      if (k == "__metadata__") {
        LATHE_CHECK(!metadata_seen_, file_, ": header names '__metadata__' twice (duplicate tensor name)");
        metadata_seen_ = true;
      }
    } else if (in_ == In::metadata) {
      LATHE_CHECK(!header_.metadata.count(k), file_, ": header names '", k, "' twice inside one JSON object");
    } else if (in_ == In::entry) {
      field_ = k == "dtype" ? Field::dtype : k == "shape" ? Field::shape : k == "data_offsets" ? Field::offsets
                                                                                               : Field::other;
      const unsigned bit = field_ == Field::other ? 0 : 1u << unsigned(field_);
      LATHE_CHECK(!(seen_ & bit), file_, ": header names '", k, "' twice inside one JSON object");
      seen_ |= bit;
    }
    key_ = std::move(k);
    return true;
  }
  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& e) {
    LATHE_FAIL(file_, ": header is not valid JSON (byte ", position, ": ", e.what(), ")");
  }

  Header take() {
    LATHE_CHECK(in_ == In::done, file_, ": header must be a JSON object");
    return std::move(header_);
  }

 private:
  enum class In { start, root, metadata, entry, list, done };
  enum class Field { dtype, shape, offsets, other };

  std::string where() const { return file_ + ": tensor '" + std::string(header_.name(entry_)) + "'"; }
  void deeper() {
    LATHE_CHECK(++depth_ <= kMaxHeaderDepth, file_, ": header nests JSON deeper than a safetensors header can");
  }

  // A value where the parse is: fine only as a field lathe skips; else an error saying what was
  // expected there. `text` quotes a number, `str` a string.
  bool scalar(const char* type, const std::string* text, const std::string* str = nullptr) {
    if (skip_ > 0) return true;
    const std::string got = text ? *text : str ? json(*str).dump(-1, ' ', true, json::error_handler_t::replace) : type;
    switch (in_) {
      case In::start: LATHE_FAIL(file_, ": header must be a JSON object, got ", type);
      case In::root:
        if (key_ == "__metadata__" && std::string(type) == "null") return true;  // the reference: no metadata
        if (key_ == "__metadata__")
          LATHE_FAIL(file_, ": __metadata__ must be an object of strings, got ", type);
        LATHE_FAIL(file_, ": tensor '", key_, "': entry must be an object with dtype, shape and data_offsets, got ",
                   type);
      case In::metadata:
        LATHE_FAIL(file_, ": __metadata__ value of '", key_, "' must be a string, got ", type,
                   " (safetensors metadata maps strings to strings)");
      case In::entry:
        if (field_ == Field::dtype) LATHE_FAIL(where(), ": dtype must be a string, got ", got);
        if (field_ == Field::shape) LATHE_FAIL(where(), ": shape must be an array of non-negative integers, got ", got);
        if (field_ == Field::offsets) LATHE_FAIL(where(), ": data_offsets must be [begin, end], got ", got);
        return true;  // another field: the reference ignores it
      case In::list: {
        const char* list = field_ == Field::shape ? "shape" : "data_offsets";
        LATHE_FAIL(where(), ": ", list, "[", list_.size(), "] must be a non-negative integer, got ", got);
      }
      default: LATHE_FAIL(file_, ": header has text after its JSON object");
    }
  }

  void finish_shape() {
    // numel (ignoring zero dims) must fit in int64 so that strides and sizes never overflow.
    uint64_t nonzero_product = 1;
    numel_ = 1;
    for (uint64_t d : list_) {
      const bool overflow = d > uint64_t(std::numeric_limits<int64_t>::max()) ||
                            (d != 0 && __builtin_mul_overflow(nonzero_product, d, &nonzero_product)) ||
                            nonzero_product > uint64_t(std::numeric_limits<int64_t>::max());
      LATHE_CHECK(!overflow, where(), ": shape ", list_str(list_), " has more elements than fit in 64 bits");
      numel_ *= d;  // at most nonzero_product
    }
    // A repeated "shape" is refused by key(), so this entry's dimensions are the last in the pool.
    entry_.dims_begin = header_.dims.size();
    entry_.dims_size = list_.size();
    header_.dims.insert(header_.dims.end(), list_.begin(), list_.end());
    shape_text_ = list_str(list_);
  }
  void finish_offsets() {
    LATHE_CHECK(list_.size() == 2, where(), ": data_offsets must be [begin, end], got ", list_str(list_));
    entry_.begin = list_[0];
    entry_.end = list_[1];
  }
  void finish_entry() {
    for (Field f : {Field::dtype, Field::shape, Field::offsets})
      LATHE_CHECK(seen_ & (1u << unsigned(f)), where(), ": entry has no \"",
                  f == Field::dtype ? "dtype" : f == Field::shape ? "shape" : "data_offsets", "\"");
    uint64_t nbytes = 0;
    LATHE_CHECK(!__builtin_mul_overflow(numel_, uint64_t(dtype_size(entry_.dtype)), &nbytes), where(), ": shape ",
                shape_text_, " of ", dtype_text_, " has more bytes than fit in 64 bits");
    LATHE_CHECK(entry_.begin <= entry_.end, where(), ": data_offsets [", entry_.begin, ", ", entry_.end,
                "] end before they begin");
    LATHE_CHECK(entry_.end - entry_.begin == nbytes, where(), ": ", dtype_text_, " ", shape_text_, " needs ", nbytes,
                " bytes but data_offsets [", entry_.begin, ", ", entry_.end, "] hold ", entry_.end - entry_.begin);
    header_.entries.push_back(entry_);
  }

  const std::string& file_;
  Header header_;
  In in_ = In::start;
  Field field_ = Field::other;
  int depth_ = 0;
  int skip_ = 0;  // > 0: inside a value lathe does not read, this many containers deep
  bool metadata_seen_ = false;
  unsigned seen_ = 0;  // the entry's fields seen, one bit per Field
  std::string key_, dtype_text_, shape_text_;
  HeaderEntry entry_;
  uint64_t numel_ = 1;
  std::vector<uint64_t> list_;
};

}  // namespace

Header parse_safetensors_header(const char* text, size_t n, uint64_t buffer_size, const std::string& file) {
  HeaderBuilder builder(file, n);
  try {
    json::sax_parse(text, text + n, &builder);
  } catch (const json::exception& e) {
    LATHE_FAIL(file, ": header is not valid JSON: ", e.what());
  }
  Header h = builder.take();

  // A name given twice: equal hashes are neighbours once the (hash, entry) pairs are sorted, and
  // only their names are compared (a hash set of a million names costs a cache miss per name).
  std::vector<std::pair<uint64_t, size_t>> hashed(h.entries.size());
  for (size_t i = 0; i < h.entries.size(); ++i) hashed[i] = {std::hash<std::string_view>{}(h.name(h.entries[i])), i};
  std::sort(hashed.begin(), hashed.end());
  for (size_t i = 1; i < hashed.size(); ++i) {
    if (hashed[i].first != hashed[i - 1].first) continue;
    for (size_t j = i; j-- > 0 && hashed[j].first == hashed[i].first;) {
      const std::string_view name = h.name(h.entries[hashed[i].second]);
      LATHE_CHECK(name != h.name(h.entries[hashed[j].second]), file, ": header names '", name,
                  "' twice (duplicate tensor name)");
    }
  }

  // In offset order; writers (lathe's, the reference's) write them so, which costs one pass to see.
  auto by_offset = [&](const HeaderEntry& a, const HeaderEntry& b) {
    return std::tie(a.begin, a.end) != std::tie(b.begin, b.end) ? std::tie(a.begin, a.end) < std::tie(b.begin, b.end)
                                                                : h.name(a) < h.name(b);
  };
  if (!std::is_sorted(h.entries.begin(), h.entries.end(), by_offset))
    std::sort(h.entries.begin(), h.entries.end(), by_offset);
  uint64_t covered = 0;  // end of the previous tensor
  const HeaderEntry* previous = nullptr;
  for (const HeaderEntry& e : h.entries) {
    const std::string_view name = h.name(e);
    LATHE_CHECK(e.end <= buffer_size, file, ": tensor '", name, "': data_offsets [", e.begin, ", ", e.end,
                "] run past the end of the data buffer (", buffer_size, " bytes); the file is truncated");
    LATHE_CHECK(e.begin >= covered, file, ": tensor '", name, "' (bytes ", e.begin, "..", e.end, ") overlaps tensor '",
                previous ? h.name(*previous) : "", "' (bytes ", previous ? previous->begin : 0, "..", covered, ")");
    LATHE_CHECK(e.begin == covered, file, ": hole of ", e.begin - covered, " bytes before tensor '", name, "' (bytes ",
                covered, "..", e.begin, " belong to no tensor)");
    covered = e.end;
    previous = &e;
  }
  LATHE_CHECK(covered == buffer_size, file, ": the last ", buffer_size - covered,
              " bytes of the data buffer belong to no tensor (the tensors cover ", covered, " of ", buffer_size,
              " bytes)");
  return h;
}

std::string safetensors_header_text(const std::vector<HeaderTensor>& tensors, const Metadata& metadata,
                                    const std::string& file) {
  std::string text;
  // nlohmann quotes each string (escapes as JSON needs them, UTF-8 checked); the rest is numbers.
  auto quote = [&](const std::string& s) {
    try {
      text += json(s).dump();
    } catch (const json::exception& e) {
      LATHE_FAIL(file, ": a tensor name or metadata string is not valid UTF-8 (", e.what(), ")");
    }
  };
  auto number = [&](uint64_t v) {
    char digits[24];
    text.append(digits, size_t(std::to_chars(digits, digits + sizeof digits, v).ptr - digits));
  };
  text.reserve(tensors.size() * 80 + 64);
  text += '{';
  if (!metadata.empty()) {
    text += "\"__metadata__\":{";
    for (auto it = metadata.begin(); it != metadata.end(); ++it) {
      if (it != metadata.begin()) text += ',';
      quote(it->first);
      text += ':';
      quote(it->second);
    }
    text += '}';
  }
  for (const HeaderTensor& t : tensors) {
    if (text.size() > 1) text += ',';
    quote(*t.name);
    text += ":{\"dtype\":\"";
    text += safetensors_dtype_name(t.dtype);
    text += "\",\"shape\":[";
    for (size_t i = 0; i < t.shape->size(); ++i) {
      if (i) text += ',';
      number(uint64_t((*t.shape)[i]));
    }
    text += "],\"data_offsets\":[";
    number(t.begin);
    text += ',';
    number(t.end);
    text += "]}";
  }
  text += '}';
  return text;
}

}  // namespace lathe::serialize
