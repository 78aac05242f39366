// safetensors: round trips of every dtype and shape, files written by PyTorch, one test per kind
// of damaged file (each checks that the error names the file and the problem), atomic writes that
// leave the previous file intact, checksums, and weights import/export.
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "core/autograd.h"
#include "serialize/atomic_file.h"
#include "serialize/checksum.h"
#include "serialize/safetensors.h"
#include "serialize/weights.h"
#include "tests/temp_dir.h"

using namespace lathe;
using namespace lathe::serialize;
namespace fs = std::filesystem;
using lathe::testing::TempDir;

namespace {

std::string read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), std::streamsize(bytes.size()));
}

std::string u64_le(uint64_t n) {
  std::string s(8, '\0');
  std::memcpy(s.data(), &n, 8);
  return s;
}

// A file from a header text and a data buffer, exactly as given (no padding, no checks).
std::string raw_file(const std::string& header, const std::string& buffer) {
  return u64_le(header.size()) + header + buffer;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

// A damaged file must be refused by both entry points with a message naming the file and `problem`.
void check_damaged(const std::string& bytes, const std::string& problem) {
  TempDir dir;
  std::string path = dir.file("damaged.safetensors");
  write_bytes(path, bytes);
  std::string from_file = error_of([&] { read_safetensors(path); });
  CHECK_MESSAGE(from_file.find(path) != std::string::npos, from_file);
  CHECK_MESSAGE(from_file.find(problem) != std::string::npos, from_file);
  std::string from_memory = error_of([&] {
    parse_safetensors(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), "mem.safetensors");
  });
  CHECK_MESSAGE(from_memory.find("mem.safetensors") != std::string::npos, from_memory);
  CHECK_MESSAGE(from_memory.find(problem) != std::string::npos, from_memory);
}

// Element values in a dtype-independent form for comparisons (exact for every dtype used here).
std::vector<double> values(const Tensor& t) { return t.to_vector<double>(); }

// Distinct values that every dtype represents exactly: small integers, halves for floats.
Tensor sample(const Shape& shape, DType dtype, Device device = Device::cpu()) {
  int64_t n = numel_of(shape);
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    double x = double(i % 7) - 3.0;
    if (dtype == DType::b8) x = double(i % 3 == 0);
    else if (is_floating(dtype)) x += 0.5;
    v[size_t(i)] = x;
  }
  return Tensor::from_vector(v, shape).to(dtype).to(device);
}

void check_same(const Tensor& got, const Tensor& want) {
  CHECK(got.dtype() == want.dtype());
  CHECK(got.shape() == want.shape());
  CHECK(values(got) == values(want));
}

}  // namespace

// ---------------------------------------------------------------- round trips

TEST_CASE("safetensors: round trip of every dtype and shape") {
  TempDir dir;
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (DType t : {DType::f32, DType::f64, DType::bf16, DType::f16, DType::i32, DType::i64, DType::b8})
    for (const Shape& s : std::vector<Shape>{{}, {0}, {2, 0, 3}, {5}, {3, 4}, {2, 3, 4}})
      tensors.emplace_back(std::string(dtype_name(t)) + shape_str(s), sample(s, t));
  std::string path = dir.file("all.safetensors");
  write_safetensors(path, tensors);
  SafetensorsFile f = read_safetensors(path);
  CHECK(f.path == path);
  CHECK(f.tensors.size() == tensors.size());
  for (const auto& [name, t] : tensors) {
    CAPTURE(name);
    check_same(f.at(name), t);
  }
  // The header is padded so that the data buffer starts 8-aligned, as the reference writer does.
  std::string bytes = read_bytes(path);
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  CHECK(n % 8 == 0);
  CHECK(dir.entries() == std::vector<std::string>{"all.safetensors"});
}

TEST_CASE("safetensors: i64 and i32 extremes survive exactly") {
  TempDir dir;
  Tensor big = Tensor::from_vector<int64_t>({INT64_MIN, INT64_MAX, 0, -1}, {2, 2});
  Tensor mid = Tensor::from_vector<int32_t>({INT32_MIN, INT32_MAX}, {2});
  write_safetensors(dir.file("i.safetensors"), {{"big", big}, {"mid", mid}});
  SafetensorsFile f = read_safetensors(dir.file("i.safetensors"));
  CHECK(f.at("big").to_vector<int64_t>() == big.to_vector<int64_t>());
  CHECK(f.at("mid").to_vector<int32_t>() == mid.to_vector<int32_t>());
}

TEST_CASE("safetensors: non-contiguous sources are written in row-major order") {
  TempDir dir;
  Tensor base = sample({4, 6}, DType::f32);
  std::vector<std::pair<std::string, Tensor>> tensors = {
      {"transposed", base.t()},
      {"strided", base.slice(1, 0, 6, 2)},
      {"narrowed", base.narrow(0, 1, 2)},
      {"expanded", Tensor::from_vector<float>({1, 2}, {2, 1}).expand({2, 3})},
      {"permuted", sample({2, 3, 4}, DType::bf16).permute({2, 0, 1})},
  };
  write_safetensors(dir.file("views.safetensors"), tensors);
  SafetensorsFile f = read_safetensors(dir.file("views.safetensors"));
  for (const auto& [name, t] : tensors) {
    CAPTURE(name);
    CHECK(f.at(name).is_contiguous());
    check_same(f.at(name), t.contiguous());
  }
}

TEST_CASE("safetensors: tensors on sim:0 are written and read back onto the requested device") {
  TempDir dir;
  Tensor a = sample({3, 5}, DType::f32, Device::sim(0));
  Tensor m = sample({7}, DType::b8, Device::sim(0));
  Tensor t = sample({4, 2}, DType::f16, Device::sim(0)).t();  // non-contiguous on the device
  write_safetensors(dir.file("sim.safetensors"), {{"a", a}, {"m", m}, {"t", t}});
  SafetensorsFile f = read_safetensors(dir.file("sim.safetensors"), Device::sim(0));
  for (const auto& [name, x] : f.tensors) CHECK(x.device() == Device::sim(0));
  check_same(f.at("a"), a);
  check_same(f.at("m"), m);
  check_same(f.at("t"), t.contiguous());
  SafetensorsFile on_cpu = read_safetensors(dir.file("sim.safetensors"));
  CHECK(on_cpu.at("a").device() == Device::cpu());
  // parse_safetensors honours the device too
  std::string bytes = read_bytes(dir.file("sim.safetensors"));
  SafetensorsFile mem = parse_safetensors(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), "mem",
                                          Device::sim(1));
  CHECK(mem.at("a").device() == Device::sim(1));
  check_same(mem.at("a"), a);
}

TEST_CASE("safetensors: metadata round trip and files without tensors") {
  TempDir dir;
  Metadata meta = {{"format", "pt"},
                   {"empty", ""},
                   {"json", R"({"step": 3, "lr": [0.1, 0.2]})"},
                   {"unicode", "caf\xc3\xa9 \xe2\x9c\x93"},
                   {"quotes", "a \"quoted\"\nline\\"}};
  write_safetensors(dir.file("meta.safetensors"), {{"x", sample({2}, DType::f32)}}, meta);
  SafetensorsFile f = read_safetensors(dir.file("meta.safetensors"));
  CHECK(f.metadata == meta);
  write_safetensors(dir.file("none.safetensors"), {}, meta);
  SafetensorsFile g = read_safetensors(dir.file("none.safetensors"));
  CHECK(g.tensors.empty());
  CHECK(g.metadata == meta);
  write_safetensors(dir.file("bare.safetensors"), {});
  CHECK(read_bytes(dir.file("bare.safetensors")) == u64_le(8) + "{}      ");
  CHECK(read_safetensors(dir.file("bare.safetensors")).metadata.empty());
}

TEST_CASE("safetensors: tensors are ordered as the reference writer orders them") {
  TempDir dir;
  write_safetensors(dir.file("o.safetensors"), {{"b", sample({3}, DType::b8)},
                                                {"z", sample({3}, DType::f16)},
                                                {"a", sample({3}, DType::f32)},
                                                {"c", sample({3}, DType::f32)},
                                                {"i", sample({1}, DType::i64)}});
  SafetensorsFile f = read_safetensors(dir.file("o.safetensors"));
  std::vector<std::string> names;
  for (const auto& [n, t] : f.tensors) names.push_back(n);
  CHECK(names == std::vector<std::string>{"i", "a", "c", "z", "b"});
}

TEST_CASE("safetensors: the writer's bytes match the reference implementation's test vectors") {
  TempDir dir;
  Tensor attn = Tensor::from_vector<float>({0, 1, 2, 3, 4, 5}, {1, 2, 3});
  write_safetensors(dir.file("a.safetensors"), {{"attn.0", attn}});
  std::string header = R"({"attn.0":{"dtype":"F32","shape":[1,2,3],"data_offsets":[0,24]}})";
  std::string data(reinterpret_cast<const char*>(attn.data<float>()), 24);
  CHECK(read_bytes(dir.file("a.safetensors")) == u64_le(64) + header + data);
  write_safetensors(dir.file("m.safetensors"), {}, {{"framework", "pt"}});
  CHECK(read_bytes(dir.file("m.safetensors")) == u64_le(40) + R"({"__metadata__":{"framework":"pt"}})" + "     ");
}

TEST_CASE("safetensors: writer refuses bad tensor lists and leaves the old file alone") {
  TempDir dir;
  std::string path = dir.file("w.safetensors");
  write_bytes(path, "old contents");
  Tensor x = sample({2}, DType::f32);
  auto err = [&](const std::vector<std::pair<std::string, Tensor>>& ts) {
    return error_of([&] { write_safetensors(path, ts); });
  };
  CHECK(err({{"a", x}, {"a", x}}).find("two tensors are called 'a'") != std::string::npos);
  CHECK(err({{"__metadata__", x}}).find("__metadata__") != std::string::npos);
  CHECK(err({{"u", Tensor()}}).find("tensor 'u' is undefined") != std::string::npos);
  CHECK(err({{"bad\xff", x}}).find("not valid UTF-8") != std::string::npos);
  CHECK(err({{"a", x}}).find("(no error)") != std::string::npos);  // and a good one goes through
  CHECK(read_safetensors(path).tensors.size() == 1);
  write_bytes(path, "old contents");
  CHECK(err({{"a", x}, {"a", x}}).find(path) != std::string::npos);
  CHECK(read_bytes(path) == "old contents");
  CHECK(dir.entries() == std::vector<std::string>{"w.safetensors"});
}

// ---------------------------------------------------------------- files written by PyTorch

TEST_CASE("safetensors: a file written by PyTorch reads with every value exact") {
  std::string path = std::string(LATHE_GOLDEN_DIR) + "/safetensors_torch_dtypes.safetensors";
  SafetensorsFile f = read_safetensors(path);
  nlohmann::json expected = nlohmann::json::parse(std::ifstream(std::string(LATHE_GOLDEN_DIR) +
                                                                "/safetensors_torch_dtypes.json"));
  CHECK(f.metadata == Metadata{{"source", "torch"}});
  REQUIRE(f.tensors.size() == expected.size());
  for (const auto& [name, want] : expected.items()) {
    CAPTURE(name);
    const Tensor& t = f.at(name);
    CHECK(t.shape() == want["shape"].get<Shape>());
    if (is_floating(t.dtype())) {
      CHECK(t.to_vector<double>() == want["values"].get<std::vector<double>>());
    } else {
      CHECK(t.to_vector<int64_t>() == want["values"].get<std::vector<int64_t>>());
    }
  }
  CHECK(f.at("bf16").dtype() == DType::bf16);
  CHECK(f.at("mask").dtype() == DType::b8);
  // Writing the same tensors and metadata gives the same bytes: same order, JSON and padding.
  TempDir dir;
  write_safetensors(dir.file("again.safetensors"), f.tensors, f.metadata);
  CHECK(read_bytes(dir.file("again.safetensors")) == read_bytes(path));
}

TEST_CASE("safetensors weights: a nanoGPT state_dict saved by PyTorch loads") {
  std::string path = std::string(LATHE_GOLDEN_DIR) + "/safetensors_nanogpt.safetensors";
  nlohmann::json expected = nlohmann::json::parse(std::ifstream(std::string(LATHE_GOLDEN_DIR) +
                                                                "/safetensors_nanogpt.json"));
  NamedTensors w = load_weights(path);
  REQUIRE(w.size() == expected.size());
  CHECK(expected.contains("transformer.h.0.attn.c_attn.weight"));
  for (const auto& [name, t] : w) {
    CAPTURE(name);
    REQUIRE(expected.contains(name));
    const auto& e = expected[name];
    CHECK(e["dtype"] == safetensors_dtype_name(t.dtype()));
    CHECK(t.shape() == e["shape"].get<Shape>());
    std::vector<double> v = t.to_vector<double>();
    double sum = 0;
    for (double x : v) sum += x;
    CHECK(sum == doctest::Approx(e["sum"].get<double>()).epsilon(1e-9));
    std::vector<double> first(v.begin(), v.begin() + std::min<size_t>(4, v.size()));
    CHECK(first == e["first"].get<std::vector<double>>());
  }
  // nn.Linear's (out, in) layout is kept as PyTorch stores it.
  for (const auto& [name, t] : w)
    if (name == "transformer.h.0.attn.c_attn.weight") CHECK(t.shape() == Shape{48, 16});
}

// ---------------------------------------------------------------- weights and checksums

TEST_CASE("safetensors weights: save and load round trip with checksums") {
  TempDir dir;
  NamedTensors w = {{"transformer.wte.weight", sample({8, 4}, DType::f32)},
                    {"transformer.ln_f.bias", sample({4}, DType::bf16, Device::sim(0))},
                    {"lm_head.weight", sample({8, 4}, DType::f32)}};
  std::string path = dir.file("w.safetensors");
  save_weights(path, w, {{"note", "hello"}});
  Metadata meta;
  NamedTensors back = load_weights(path, Device::sim(0), &meta);
  CHECK(meta.at("note") == "hello");
  CHECK(meta.at("format") == "pt");
  auto sums = recorded_checksums(meta, path);
  CHECK(sums.size() == 3);
  CHECK(sums.at("transformer.ln_f.bias") == tensor_checksum(w[1].second));
  REQUIRE(back.size() == 3);
  for (const auto& [name, t] : back) {
    CHECK(t.device() == Device::sim(0));
    for (const auto& [n2, orig] : w)
      if (n2 == name) check_same(t, orig);
  }
  CHECK(error_of([&] { save_weights(path, w, {{"lathe", "{}"}}); }).find("reserved") != std::string::npos);

  // Damage one bit of the last tensor in the file (the bf16 one: f32 tensors come first).
  std::string bytes = read_bytes(path);
  bytes[bytes.size() - 1] ^= 0x01;
  write_bytes(path, bytes);
  std::string err = error_of([&] { load_weights(path); });
  CHECK(err.find(path) != std::string::npos);
  CHECK(err.find("tensor 'transformer.ln_f.bias' is damaged") != std::string::npos);
}

TEST_CASE("safetensors checksum: depends on bytes only, not on strides or device") {
  Tensor x = sample({3, 4}, DType::f32);
  std::string c = tensor_checksum(x.t().contiguous());
  CHECK(c.size() == 16);
  CHECK(tensor_checksum(x.t()) == c);
  CHECK(tensor_checksum(x.t().to(Device::sim(0))) == c);
  CHECK(tensor_checksum(x) != c);
  // XXH3-64 of no bytes is a published constant: the stored hex must never change meaning.
  CHECK(tensor_checksum(Tensor::zeros({0})) == "2d06800538d394c2");
}

// ---------------------------------------------------------------- atomic writes

TEST_CASE("safetensors atomic: a failure midway leaves the previous file byte-identical") {
  TempDir dir;
  std::string path = dir.file("ckpt.safetensors");
  write_safetensors(path, {{"old", sample({3}, DType::f32)}});
  std::string before = read_bytes(path);

  // The write itself fails after some bytes: a file-size limit stands in for a full disk.
  struct rlimit saved {};
  REQUIRE(getrlimit(RLIMIT_FSIZE, &saved) == 0);
  auto old_handler = signal(SIGXFSZ, SIG_IGN);
  struct rlimit small = saved;
  small.rlim_cur = 4096;
  REQUIRE(setrlimit(RLIMIT_FSIZE, &small) == 0);
  std::string err = error_of([&] { write_safetensors(path, {{"big", sample({64, 1024}, DType::f32)}}); });
  setrlimit(RLIMIT_FSIZE, &saved);
  signal(SIGXFSZ, old_handler);
  CHECK(err.find(path) != std::string::npos);
  CHECK(err.find("write failed") != std::string::npos);
  CHECK(read_bytes(path) == before);
  CHECK(dir.entries() == std::vector<std::string>{"ckpt.safetensors"});

  // The producer of the data throws after the header and part of the data went out.
  CHECK_THROWS_WITH_AS(write_file_atomically(path,
                                             [](AtomicFile& f) {
                                               f.write("partial", 7);
                                               throw Error("host copy of tensor 'x' failed");
                                             }),
                       doctest::Contains("host copy"), Error);
  CHECK(read_bytes(path) == before);
  CHECK(dir.entries() == std::vector<std::string>{"ckpt.safetensors"});
}

TEST_CASE("safetensors atomic: replaces the file, keeps its permissions, refuses bad targets") {
  TempDir dir;
  std::string path = dir.file("f.bin");
  write_bytes(path, "old");
  REQUIRE(chmod(path.c_str(), 0640) == 0);
  write_file_atomically(path, [](AtomicFile& f) { f.write("new contents", 12); });
  CHECK(read_bytes(path) == "new contents");
  struct stat st {};
  REQUIRE(stat(path.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0640);
  CHECK(dir.entries() == std::vector<std::string>{"f.bin"});

  std::string missing_dir = dir.file("no/such/dir/f.bin");
  std::string err = error_of([&] { write_safetensors(missing_dir, {}); });
  CHECK(err.find(missing_dir) != std::string::npos);
  CHECK(err.find("cannot create a temporary file") != std::string::npos);
  fs::create_directory(dir.path / "sub");
  err = error_of([&] { write_safetensors(dir.file("sub"), {}); });
  CHECK(err.find("is a directory") != std::string::npos);
  {
    AtomicFile abandoned(dir.file("never.bin"));
    abandoned.write("x", 1);
    CHECK(fs::exists(abandoned.temp_path()));
  }  // destroyed without commit: the temporary goes, the target never appears
  CHECK(dir.entries() == std::vector<std::string>{"f.bin", "sub"});
}

// ---------------------------------------------------------------- damaged files

TEST_CASE("safetensors damaged: empty and too-short files") {
  check_damaged("", "file is 0 bytes, too short for the 8-byte header length");
  check_damaged(std::string("\x08\x00\x00", 3), "file is 3 bytes, too short");
}

TEST_CASE("safetensors damaged: header length past the end or huge") {
  check_damaged(u64_le(1000) + "{}", "header length 1000 runs past the end of the file (10 bytes)");
  check_damaged(u64_le(uint64_t(1) << 40) + "{}", "header length 1099511627776 exceeds the limit of 100000000 bytes");
  check_damaged(u64_le(UINT64_MAX) + "{}", "exceeds the limit");
  // the header cut in the middle
  std::string good = raw_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", "abcd");
  check_damaged(good.substr(0, 30), "runs past the end of the file");
}

TEST_CASE("safetensors damaged: data buffer cut short") {
  std::string good = raw_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", "abcdefgh");
  check_damaged(good.substr(0, good.size() - 3), "tensor 'a': data_offsets [0, 8] run past the end of the data buffer (5 bytes)");
}

TEST_CASE("safetensors damaged: header not JSON, or JSON not an object") {
  check_damaged(raw_file("{not json", ""), "header is not valid JSON");
  check_damaged(raw_file("{\"a\xff\":1}", ""), "header is not valid JSON");  // not UTF-8
  check_damaged(raw_file("{} trailing", ""), "header is not valid JSON");
  check_damaged(raw_file("[1, 2]", ""), "header must be a JSON object, got array");
  check_damaged(raw_file("\"text\"", ""), "header must be a JSON object, got string");
  // Nesting is bounded where the header may hold values lathe does not read (a field of an entry).
  const std::string deep = std::string(5000, '[') + std::string(5000, ']');
  check_damaged(raw_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"x":)" + deep + "}}", "abcd"),
                "deeper than a safetensors header");
}

TEST_CASE("safetensors damaged: entries with missing or mistyped fields") {
  check_damaged(raw_file(R"({"a":[1]})", ""), "tensor 'a': entry must be an object");
  check_damaged(raw_file(R"({"a":{"dtype":"F32","data_offsets":[0,0]}})", ""), "tensor 'a': entry has no \"shape\"");
  check_damaged(raw_file(R"({"a":{"shape":[],"data_offsets":[0,4]}})", "abcd"), "entry has no \"dtype\"");
  check_damaged(raw_file(R"({"a":{"dtype":"F32","shape":[1]}})", "abcd"), "entry has no \"data_offsets\"");
  check_damaged(raw_file(R"({"a":{"dtype":3,"shape":[1],"data_offsets":[0,4]}})", "abcd"), "dtype must be a string");
  check_damaged(raw_file(R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", "abcd"),
                "tensor 'a': shape[0] must be a non-negative integer, got -1");
  check_damaged(raw_file(R"({"a":{"dtype":"F32","shape":[1.5],"data_offsets":[0,4]}})", "abcd"),
                "shape[0] must be a non-negative integer");
  check_damaged(raw_file(R"({"a":{"dtype":"F32","shape":2,"data_offsets":[0,4]}})", "abcd"), "shape must be an array");
  check_damaged(raw_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4,8]}})", "abcd"),
                "data_offsets must be [begin, end]");
  check_damaged(raw_file(R"({"a":{"dtype":"F32","shape":[0],"data_offsets":[4,0]}})", "abcd"), "end before they begin");
  check_damaged(raw_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,-4]}})", "abcd"),
                "data_offsets[1] must be a non-negative integer");
  check_damaged(raw_file(R"({"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,4]}})", "abcd"),
                "has more elements than fit in 64 bits");
  check_damaged(raw_file(R"({"a":{"dtype":"F64","shape":[4611686018427387904],"data_offsets":[0,4]}})", "abcd"),
                "has more bytes than fit in 64 bits");
  check_damaged(raw_file(R"({"a":{"dtype":"F32","shape":[18446744073709551615],"data_offsets":[0,4]}})", "abcd"),
                "more elements than fit");
}

TEST_CASE("safetensors damaged: dtype and shape disagree with the byte length") {
  check_damaged(raw_file(R"({"w":{"dtype":"F32","shape":[2,2],"data_offsets":[0,12]}})", std::string(12, 'x')),
                "tensor 'w': F32 [2,2] needs 16 bytes but data_offsets [0, 12] hold 12");
  check_damaged(raw_file(R"({"w":{"dtype":"BF16","shape":[3],"data_offsets":[0,12]}})", std::string(12, 'x')),
                "BF16 [3] needs 6 bytes");
}

TEST_CASE("safetensors damaged: unknown dtype, and dtypes lathe does not have") {
  check_damaged(raw_file(R"({"w":{"dtype":"F33","shape":[1],"data_offsets":[0,4]}})", "abcd"),
                "tensor 'w': unknown dtype \"F33\"");
  check_damaged(raw_file(R"({"w":{"dtype":"I8","shape":[4],"data_offsets":[0,4]}})", "abcd"),
                "dtype I8 is valid safetensors but lathe has no such dtype");
}

TEST_CASE("safetensors damaged: offsets past the end, overlaps, holes, trailing bytes") {
  check_damaged(raw_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", "abcd"),
                "tensor 'a': data_offsets [4, 8] run past the end of the data buffer (4 bytes)");
  check_damaged(raw_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                         R"("b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                         std::string(8, 'x')),
                "tensor 'b' (bytes 4..8) overlaps tensor 'a' (bytes 0..8)");
  check_damaged(raw_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                         R"("b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
                         std::string(12, 'x')),
                "hole of 4 bytes before tensor 'b' (bytes 4..8 belong to no tensor)");
  check_damaged(raw_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", std::string(8, 'x')),
                "hole of 4 bytes before tensor 'a'");
  check_damaged(raw_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", std::string(6, 'x')),
                "the last 2 bytes of the data buffer belong to no tensor");
  // Two tensors claiming the same bytes.
  check_damaged(raw_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                         R"("b":{"dtype":"I32","shape":[1],"data_offsets":[0,4]}})",
                         "abcd"),
                "overlaps tensor 'a'");
}

TEST_CASE("safetensors damaged: duplicate names") {
  check_damaged(raw_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                         R"("a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                         std::string(8, 'x')),
                "header names 'a' twice (duplicate tensor name)");
  check_damaged(raw_file(R"({"__metadata__":{"k":"1","k":"2"}})", ""), "header names 'k' twice");
  check_damaged(raw_file(R"({"__metadata__":{},"__metadata__":{}})", ""), "names '__metadata__' twice");
}

TEST_CASE("safetensors damaged: metadata that is not string to string") {
  check_damaged(raw_file(R"({"__metadata__":{"step":3}})", ""),
                "__metadata__ value of 'step' must be a string, got number");
  check_damaged(raw_file(R"({"__metadata__":{"cfg":{"a":"b"}}})", ""), "value of 'cfg' must be a string, got object");
  check_damaged(raw_file(R"({"__metadata__":["a"]})", ""), "__metadata__ must be an object of strings, got array");
  // null means "no metadata", as in the reference implementation
  std::string ok = raw_file(R"({"__metadata__":null})", "");
  CHECK(parse_safetensors(reinterpret_cast<const uint8_t*>(ok.data()), ok.size(), "m").metadata.empty());
}

TEST_CASE("safetensors damaged: BOOL bytes that are not 0 or 1, U8 read as a mask") {
  check_damaged(raw_file(R"({"m":{"dtype":"BOOL","shape":[3],"data_offsets":[0,3]}})", std::string("\x01\x02\x00", 3)),
                "tensor 'm': BOOL element 1 is the byte 2, not 0 or 1");
  check_damaged(raw_file(R"({"m":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}})", std::string("\x00\x07", 2)),
                "tensor 'm': U8 element 1 is 7; lathe has no u8 dtype");
  std::string ok = raw_file(R"({"m":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}})", std::string("\x00\x01\x01\x00", 4));
  SafetensorsFile f = parse_safetensors(reinterpret_cast<const uint8_t*>(ok.data()), ok.size(), "u8");
  CHECK(f.at("m").dtype() == DType::b8);
  CHECK(f.at("m").to_vector<int64_t>() == std::vector<int64_t>{0, 1, 1, 0});
}

TEST_CASE("safetensors damaged: a missing tensor asked for by name, and unreadable paths") {
  TempDir dir;
  std::string path = dir.file("few.safetensors");
  write_safetensors(path, {{"a", sample({1}, DType::f32)}, {"b", sample({1}, DType::f32)}});
  SafetensorsFile f = read_safetensors(path);
  CHECK(f.find("zz") == nullptr);
  std::string err = error_of([&] { f.at("zz"); });
  CHECK(err.find(path) != std::string::npos);
  CHECK(err.find("no tensor named 'zz' (the file holds 2 tensors: a, b)") != std::string::npos);

  err = error_of([&] { read_safetensors(dir.file("absent.safetensors")); });
  CHECK(err.find("absent.safetensors: cannot open: No such file or directory") != std::string::npos);
  err = error_of([&] { read_safetensors(dir.path.string()); });
  CHECK(err.find("not a regular file") != std::string::npos);
}

TEST_CASE("safetensors damaged: every truncation of a good file is refused cleanly") {
  TempDir dir;
  std::string path = dir.file("good.safetensors");
  write_safetensors(path, {{"a", sample({3, 2}, DType::f32)}, {"m", sample({5}, DType::b8)}}, {{"k", "v"}});
  std::string bytes = read_bytes(path);
  for (size_t cut = 0; cut < bytes.size(); ++cut) {
    CAPTURE(cut);
    std::string part = bytes.substr(0, cut);
    std::string err = error_of([&] {
      parse_safetensors(reinterpret_cast<const uint8_t*>(part.data()), part.size(), "cut.safetensors");
    });
    CHECK(err.rfind("cut.safetensors: ", 0) == 0);
  }
}

// ---------------------------------------------------------------- lathe inspect

#ifdef LATHE_CLI_PATH
namespace {
struct InspectRun {
  int code;
  std::string output;  // stdout and stderr together
};

std::string shell_quoted(const std::string& s) {
  std::string q(1, '\'');
  q.append(s);
  q.push_back('\'');
  return q;
}

InspectRun run_inspect(const TempDir& dir, const std::string& args) {
  std::string out = dir.file("inspect_output.txt");
  std::string cmd = std::string("'") + LATHE_CLI_PATH + "' inspect " + args + " > '" + out + "' 2>&1";
  int status = std::system(cmd.c_str());
  std::string text = read_bytes(out);
  fs::remove(out);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, text};
}
}  // namespace

TEST_CASE("safetensors inspect: shows the lathe document, the tensors, and verifies checksums") {
  TempDir dir;
  std::string path = dir.file("ckpt.safetensors");
  Tensor w = sample({4, 3}, DType::f32), step = Tensor::scalar(7, DType::f32);
  nlohmann::json doc = {{"format_version", 1}, {"kind", "checkpoint"}, {"step", 7},
                        {"model", {{"n_layer", 2}, {"n_embd", 8}}},
                        {"optimizer", {{"kind", "adamw"}, {"groups", {{{"lr", 0.001}, {"weight_decay", 0.1}}}}}},
                        {"tensors", {{"w", {{"checksum", tensor_checksum(w)}, {"policy", "with_param"}}},
                                     {"step", {{"checksum", tensor_checksum(step)}, {"policy", "host"}}}}}};
  write_safetensors(path, {{"w", w}, {"step", step}}, {{"lathe", doc.dump()}, {"note", "hi"}});
  InspectRun r = run_inspect(dir, shell_quoted(path));
  CHECK(r.code == 0);
  for (const char* want : {"2 tensors", "format version 1, kind checkpoint", "step: 7", "model: n_embd=8 n_layer=2",
                           "optimizer: adamw, 1 group", "group 0: lr=0.001 weight_decay=0.1", "note: hi",
                           "policy with_param", "policy host", "value 7", "checksums: 2 of 2 verified"}) {
    CAPTURE(want);
    CHECK_MESSAGE(r.output.find(want) != std::string::npos, r.output);
  }

  // One flipped bit in w's data: the table still prints, then exit 1 naming the tensor.
  std::string bytes = read_bytes(path);
  bytes[bytes.size() - 1] ^= 0x40;
  write_bytes(path, bytes);
  r = run_inspect(dir, shell_quoted(path));
  CHECK(r.code == 1);
  CHECK_MESSAGE(r.output.find("MISMATCH") != std::string::npos, r.output);
  CHECK_MESSAGE(r.output.find("checksum mismatch in 1 tensor: 'w'") != std::string::npos, r.output);

  // A damaged file is a runtime error; a missing argument or file is a usage error.
  write_bytes(path, "not a safetensors file");
  r = run_inspect(dir, shell_quoted(path));
  CHECK(r.code == 1);
  CHECK_MESSAGE(r.output.find("exceeds the limit") != std::string::npos, r.output);
  CHECK(run_inspect(dir, "").code == 2);
  CHECK(run_inspect(dir, shell_quoted(dir.file("absent.safetensors"))).code == 2);
}
#endif
