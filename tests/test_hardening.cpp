// Regression tests of the hardening round: what hostile sizes, files and documents once did
// (a segfault, a replaced device node, a stack overflow) and the clear error each gets now.
#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "core/tensor.h"
#include "serialize/atomic_file.h"
#include "serialize/json_document.h"
#include "temp_dir.h"
#include "test_helpers.h"

using namespace lathe;
using lathe::testing::error_of;
using lathe::testing::TempDir;

TEST_CASE("hardening: shapes whose element count overflows 64 bits are refused by name") {
  const int64_t big = int64_t(1) << 40;
  CHECK(error_of([&] { numel_of({big, big}); }).find("[1099511627776, 1099511627776] has more elements") !=
        std::string::npos);
  CHECK(numel_of({big, big, 0}) == 0);  // empty, not an overflow
  CHECK(error_of([&] { Tensor::empty({big, big}); }).find("more elements than a 64-bit count") != std::string::npos);
  // Fits as a count, not as bytes.
  CHECK(error_of([&] { Tensor::empty({int64_t(1) << 62}, DType::f64); }).find("more bytes than a 64-bit size") !=
        std::string::npos);
}

TEST_CASE("hardening: an atomic write never replaces something that is not a regular file") {
  TempDir dir("atomic");
  const std::string target = (dir.path / "target").string();
  const std::string other = (dir.path / "other").string();
  { std::ofstream(other) << "keep me"; }
  auto write = [&] { serialize::write_file_atomically(target, [](serialize::AtomicFile& f) { f.write("new", 3); }); };

  // A symlink stays a symlink, and what it points to is untouched.
  std::filesystem::create_symlink(other, target);
  CHECK(error_of(write).find("refusing to replace a symbolic link") != std::string::npos);
  CHECK(std::filesystem::is_symlink(target));
  std::filesystem::remove(target);

  // A FIFO (and a device node, which only root can make) stays what it is; nothing blocks.
  REQUIRE(::mkfifo(target.c_str(), 0600) == 0);
  CHECK(error_of(write).find("refusing to replace a FIFO") != std::string::npos);
  CHECK(std::filesystem::is_fifo(target));
  std::filesystem::remove(target);

  // No temporary is left behind, and a regular file is replaced as before.
  write();
  std::ifstream in(target);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(text == "new");
  int entries = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir.path)) ++entries;
  CHECK(entries == 2);  // target and other
}

TEST_CASE("hardening: JSON documents nested past the limit are refused before anything recurses") {
  auto nested = [](int depth) { return std::string(size_t(depth), '[') + std::string(size_t(depth), ']'); };
  CHECK(serialize::parse_json_document(nested(serialize::kMaxJsonNesting), "doc").is_array());
  const std::string err = error_of([&] { serialize::parse_json_document(nested(serialize::kMaxJsonNesting + 1), "f.json: config"); });
  CHECK(err.find("f.json: config: JSON nested deeper than 64 levels") != std::string::npos);
  // Depths that once overflowed the stack in dump() and copies: a one-line error, quickly.
  CHECK(error_of([&] { serialize::parse_json_document(nested(100000), "deep"); }).find("nested deeper") !=
        std::string::npos);
  CHECK(error_of([&] { serialize::parse_json_document("{\"a\": ", "cut.json"); }).find("cut.json: not valid JSON") !=
        std::string::npos);
}

TEST_CASE("hardening: bad values are quoted briefly in messages") {
  const nlohmann::json long_value = std::string(1000, 'x');
  const std::string q = serialize::quote_json(long_value);
  CHECK(q.size() == 83);
  CHECK(q.substr(80) == "...");
  CHECK(serialize::quote_json(nlohmann::json{{"droput", 0.1}}) == "{\"droput\":0.1}");
}
