#include "serialize/json_document.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "core/format.h"
#include "serialize/file_reading.h"

namespace lathe::serialize {

namespace {

using json = nlohmann::json;

// nlohmann's SAX events, building the document as nlohmann's own DOM parser does (a stack of the
// open containers), with a duplicate key and excessive nesting refused where they appear.
class DocumentBuilder {
 public:
  explicit DocumentBuilder(const std::string& what) : what_(what) {}

  bool null() { return place(json(nullptr)); }
  bool boolean(bool v) { return place(json(v)); }
  bool number_integer(json::number_integer_t v) { return place(json(v)); }
  bool number_unsigned(json::number_unsigned_t v) { return place(json(v)); }
  bool number_float(json::number_float_t v, const json::string_t&) { return place(json(v)); }
  bool string(json::string_t& v) { return place(json(std::move(v))); }
  bool binary(json::binary_t& v) { return place(json::binary(std::move(v))); }
  bool start_object(std::size_t) { return open(json::value_t::object); }
  bool start_array(std::size_t) { return open(json::value_t::array); }
  bool end_object() { return close(); }
  bool end_array() { return close(); }
  bool key(json::string_t& k) {
    const json::object_t& object = open_.back()->get_ref<const json::object_t&>();
    LATHE_CHECK(object.find(k) == object.end(), what_, ": the key ", quote_json(k), " appears twice in one object",
                open_.size() > 1 ? " (at depth " + std::to_string(open_.size()) + ")" : std::string(),
                "; a JSON reader would silently keep one of them");
    key_ = std::move(k);
    return true;
  }
  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& e) {
    error_ = "byte " + std::to_string(position) + ": " + e.what();
    return false;
  }

  json take() { return std::move(root_); }
  const std::string& error() const { return error_; }

 private:
  // Puts `v` where the parse is (the root, the end of the open array, or the open object under the
  // last key) and returns where it went.
  json* put(json&& v) {
    if (open_.empty()) {
      root_ = std::move(v);
      return &root_;
    }
    json& top = *open_.back();
    if (top.is_array()) {
      json::array_t& array = top.get_ref<json::array_t&>();
      array.push_back(std::move(v));
      return &array.back();
    }
    return &top.get_ref<json::object_t&>().emplace(std::move(key_), std::move(v)).first->second;
  }
  bool place(json&& v) {
    put(std::move(v));
    return true;
  }
  bool open(json::value_t kind) {
    LATHE_CHECK(int(open_.size()) < kMaxJsonNesting, what_, ": JSON nested deeper than ", kMaxJsonNesting, " levels");
    // Later values go into this container; its address is stable until it closes, because its parent
    // takes nothing else meanwhile.
    open_.push_back(put(json(kind)));
    return true;
  }
  bool close() {
    open_.pop_back();
    return true;
  }

  const std::string& what_;
  json root_;
  std::vector<json*> open_;
  std::string key_;
  std::string error_;
};

char hex_digit(unsigned v) { return "0123456789abcdef"[v & 15]; }

}  // namespace

json parse_json_document(std::string_view text, const std::string& what, size_t max_bytes) {
  LATHE_CHECK(text.size() <= max_bytes, what, ": the JSON document is ", text.size(), " bytes, more than the ",
              max_bytes, " (", format_bytes(max_bytes), ") this kind of document may hold");
  DocumentBuilder builder(what);
  bool ok = false;
  try {
    ok = json::sax_parse(text.data(), text.data() + text.size(), &builder);
  } catch (const json::exception& e) {
    LATHE_FAIL(what, ": not valid JSON (", e.what(), ")");
  }
  LATHE_CHECK(ok, what, ": not valid JSON (", builder.error(), ")");
  return builder.take();
}

json read_json_file(const std::string& path, const std::string& what, size_t max_bytes) {
  FileHandle f;
  // O_NONBLOCK: a FIFO given by mistake is refused below instead of blocking the open.
  f.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  LATHE_CHECK(f.fd >= 0, what, ": cannot open ", path, ": ", std::strerror(errno));
  struct stat st {};
  LATHE_CHECK(::fstat(f.fd, &st) == 0, what, ": cannot stat ", path, ": ", std::strerror(errno));
  LATHE_CHECK(S_ISREG(st.st_mode), what, ": ", path, " is not a regular file");
  LATHE_CHECK(uint64_t(st.st_size) <= max_bytes, what, ": ", path, " is ", uint64_t(st.st_size), " bytes, more than the ",
              max_bytes, " (", format_bytes(max_bytes), ") this kind of JSON document may hold");
  std::string text(size_t(st.st_size), '\0');
  read_exactly(f.fd, text.data(), text.size(), 0, path);
  return parse_json_document(text, what, max_bytes);
}

json path_to_json(const std::string& path) {
  if (is_valid_utf8(path)) return path;
  std::string hex;
  hex.reserve(2 * path.size());
  for (unsigned char c : path) {
    hex += hex_digit(c >> 4);
    hex += hex_digit(c);
  }
  return {{"path_bytes", hex}};
}

std::string path_from_json(const json& v, const std::string& what) {
  if (v.is_string()) return v.get<std::string>();
  const bool bytes = v.is_object() && v.size() == 1 && v.contains("path_bytes") && v["path_bytes"].is_string();
  LATHE_CHECK(bytes, what, " must be a path (a string, or {\"path_bytes\": hex}), got ", quote_json(v));
  const std::string& hex = v["path_bytes"].get_ref<const std::string&>();
  auto nibble = [&](char c) -> unsigned {
    if (c >= '0' && c <= '9') return unsigned(c - '0');
    if (c >= 'a' && c <= 'f') return unsigned(c - 'a' + 10);
    LATHE_FAIL(what, ": \"path_bytes\" must be lower-case hexadecimal, got ", quote_json(v));
  };
  LATHE_CHECK(hex.size() % 2 == 0, what, ": \"path_bytes\" has an odd number of digits: ", quote_json(v));
  std::string path;
  for (size_t i = 0; i < hex.size(); i += 2) path += char(nibble(hex[i]) << 4 | nibble(hex[i + 1]));
  return path;
}

}  // namespace lathe::serialize
