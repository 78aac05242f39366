// lathe's JSON documents (serialize/json_document.h, serialize/safetensors_header.h): what the
// reader refuses that nlohmann alone would let pass (a repeated key, nesting past the bound, a
// document past its size limit), integers reported as written, paths of any bytes, and text that
// is printed escaped. (Their speed is bench_json's: a benchmark, not a timed test.)
#include <doctest/doctest.h>
#include <sys/stat.h>

#include <cstdint>
#include <cstring>
#include <string>

#include "core/error.h"
#include "core/format.h"
#include "serialize/json_document.h"
#include "serialize/safetensors.h"
#include "tests/temp_dir.h"
#include "tests/test_helpers.h"

using namespace lathe;
using lathe::testing::error_of;
using lathe::testing::TempDir;
using nlohmann::json;

TEST_CASE("json documents: a key given twice in one object is refused, naming it") {
  CHECK_THROWS_WITH_AS(serialize::parse_json_document(R"({"n_layer": 2, "n_layer": 4})", "cfg.json"),
                       doctest::Contains("cfg.json: the key \"n_layer\" appears twice in one object"), Error);
  const std::string nested = error_of([] { serialize::parse_json_document(R"({"a": [{"x": 1, "x": 1}]})", "doc"); });
  CHECK(nested.find("\"x\" appears twice") != std::string::npos);
  CHECK(nested.find("depth 3") != std::string::npos);
  // The same key in two objects is no repeat.
  const json ok = serialize::parse_json_document(R"({"a": {"x": 1}, "b": {"x": 2}, "c": [{"x": 3}, {"x": 4}]})", "doc");
  CHECK(ok["c"][1]["x"] == 4);
  CHECK(ok["b"]["x"] == 2);
}

TEST_CASE("json documents: nesting past the bound and size past the limit are refused before they cost") {
  const std::string at_bound = std::string(serialize::kMaxJsonNesting, '[') + std::string(serialize::kMaxJsonNesting, ']');
  CHECK_NOTHROW(serialize::parse_json_document(at_bound, "doc"));
  CHECK_THROWS_WITH_AS(serialize::parse_json_document("[" + at_bound + "]", "doc"),
                       doctest::Contains("nested deeper than 64 levels"), Error);
  CHECK_THROWS_WITH_AS(serialize::parse_json_document(std::string(100, ' ') + "{}", "c.json", 64),
                       doctest::Contains("c.json: the JSON document is 102 bytes, more than the 64"), Error);

  TempDir dir;
  const std::string big = dir.write("big.json", "{\"a\": \"" + std::string(2000, 'x') + "\"}");
  CHECK_THROWS_WITH_AS(serialize::read_json_file(big, "--config big.json", 1024),
                       doctest::Contains("is 2009 bytes, more than the 1024"), Error);
  CHECK(serialize::read_json_file(big, "--config big.json", 4096)["a"].get<std::string>().size() == 2000);
  REQUIRE(::mkfifo(dir.file("fifo").c_str(), 0600) == 0);  // refused, not waited on
  CHECK_THROWS_WITH_AS(serialize::read_json_file(dir.file("fifo"), "--config fifo", 1024),
                       doctest::Contains("is not a regular file"), Error);
  CHECK_THROWS_WITH_AS(serialize::parse_json_document("{\"a\": 1,}", "doc"), doctest::Contains("doc: not valid JSON (byte"),
                       Error);
}

TEST_CASE("json documents: integers are read in range and reported as written") {
  auto integer = [](const char* text, int64_t min, int64_t max) {
    return serialize::json_integer(json::parse(text), min, max, "\"vocab_size\"");
  };
  CHECK(integer("4", 1, 10) == 4);
  CHECK(integer("4.0", 1, 10) == 4);  // JSON has one number type
  CHECK(integer("-9223372036854775808", INT64_MIN, 0) == INT64_MIN);
  CHECK(integer("9223372036854775807", 0, INT64_MAX) == INT64_MAX);
  // 2^64 - 1 is not -1, 1e30 not a wrapped integer, 2^63 not INT64_MIN.
  CHECK_THROWS_WITH_AS(integer("18446744073709551615", 1, INT64_MAX),
                       "\"vocab_size\" must be an integer from 1 to 9223372036854775807, got 18446744073709551615", Error);
  CHECK_THROWS_WITH_AS(integer("1e30", 1, INT64_MAX), doctest::Contains("got 1e+30"), Error);
  CHECK_THROWS_WITH_AS(integer("9223372036854775808.0", 1, INT64_MAX), doctest::Contains("got 9.223372036854776e+18"),
                       Error);
  CHECK_THROWS_WITH_AS(integer("4.5", 1, 10), doctest::Contains("got 4.5"), Error);
  CHECK_THROWS_WITH_AS(integer("0", 1, 10), doctest::Contains("from 1 to 10, got 0"), Error);
  CHECK_THROWS_WITH_AS(integer("\"4\"", 1, 10), doctest::Contains("got \"4\""), Error);
  CHECK_THROWS_WITH_AS(integer("true", 1, 10), doctest::Contains("got true"), Error);
}

TEST_CASE("json documents: a path of any bytes round-trips, one in UTF-8 stays a string") {
  const std::string plain = "runs/fine-tune é";
  CHECK(serialize::path_to_json(plain) == json(plain));
  CHECK(serialize::path_from_json(json(plain), "out") == plain);
  const std::string bytes = std::string("runs/\xff\xfe/x\x01", 10);
  const json j = serialize::path_to_json(bytes);
  CHECK(j == json{{"path_bytes", "72756e732fff"  "fe2f7801"}});
  CHECK(serialize::path_from_json(j, "out") == bytes);
  CHECK_NOTHROW(j.dump());  // what failed the whole checkpoint before
  CHECK_THROWS_WITH_AS(serialize::path_from_json(json{{"path_bytes", "zz"}}, "\"out\""),
                       doctest::Contains("lower-case hexadecimal"), Error);
  CHECK_THROWS_WITH_AS(serialize::path_from_json(json(3), "\"out\""), doctest::Contains("\"out\" must be a path"), Error);
}

TEST_CASE("printable: invalid UTF-8 and control characters are escaped, text stays text") {
  CHECK(printable("runs/\xff/x") == "runs/\\xFF/x");
  CHECK(printable("caf\xc3\xa9") == "caf\xc3\xa9");
  CHECK(printable("two\nlines\tand a tab") == "two\\x0Alines\tand a tab");
  CHECK(printable("\xc3") == "\\xC3");                  // a sequence cut short
  CHECK(printable("\xed\xa0\x80") == "\\xED\\xA0\\x80");  // a UTF-16 surrogate
  CHECK(printable("\xc0\xaf") == "\\xC0\\xAF");          // an overlong '/'
  CHECK(printable("a\\xFFb") == "a\\\\xFFb");           // a literal backslash-x is not an escape
  CHECK(is_valid_utf8("caf\xc3\xa9"));
  CHECK(!is_valid_utf8("\xf4\x90\x80\x80"));  // past U+10FFFF
}

TEST_CASE("safetensors header: a tensor or field named twice is refused, as the reference implementation does") {
  TempDir dir;
  auto header_error = [&](const std::string& header, const std::string& data) {
    std::string bytes(8, '\0');
    const uint64_t n = header.size();
    std::memcpy(bytes.data(), &n, 8);
    const std::string path = dir.write("f.safetensors", bytes + header + data);
    return error_of([&] { serialize::read_safetensors(path); });
  };
  CHECK(header_error(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                     std::string(8, 'x'))
            .find("header names 'a' twice (duplicate tensor name)") != std::string::npos);
  CHECK(header_error(R"({"a":{"dtype":"F32","dtype":"F16","shape":[1],"data_offsets":[0,4]}})", "abcd")
            .find("header names 'dtype' twice inside one JSON object") != std::string::npos);
  CHECK(header_error(R"({"__metadata__":{"k":"1","k":"2"}})", "").find("header names 'k' twice") != std::string::npos);
  CHECK(header_error(R"({"__metadata__":{},"__metadata__":{}})", "").find("'__metadata__' twice") != std::string::npos);
  // A field lathe does not read is skipped, however it nests.
  CHECK(header_error(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"extra":{"b":[1,{"c":null}]}}})", "abcd").empty());
}
