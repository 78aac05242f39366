// JSON benchmark: lathe's documents are read and written in time linear in their size.
//
//   bench_json [--entries N] [--reps R]
//
// (1) a safetensors file of N tensors (1,000,000 by default; one f32 element each, names such as
//     "h.123.attn.w"): the header's text written, the header parsed and checked, and the whole
//     file written and read back (read_safetensors: every tensor created). Target: the header of a
//     million entries parsed in under a second.
// (2) the documents of the third hardening round (issue 39), each of which took seconds to minutes
//     when the parse was nlohmann's callback parser: a config of 200,000 empty objects, and a
//     document of N / 10 keys at the top level, N / 10 entries in an array.
// (3) linearity: each parse at a tenth of the size as well; the time per byte of the full size may
//     be at most 3x that of the tenth (a quadratic parse would be 10x).
// Each figure is the minimum over R repetitions. Exits 1 when a target is missed.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>
#include <unistd.h>
#include <vector>

#include "core/tensor.h"
#include "serialize/json_document.h"
#include "serialize/safetensors.h"
#include "serialize/safetensors_header.h"

using namespace lathe;

namespace {

double min_seconds(int reps, const std::function<void()>& fn) {
  double best = 1e300;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

std::string tensor_name(size_t i) { return "h." + std::to_string(i / 12) + ".attn.w" + std::to_string(i % 12); }

std::vector<std::pair<std::string, Tensor>> tensors_of(size_t n) {
  std::vector<std::pair<std::string, Tensor>> t;
  t.reserve(n);
  const Tensor one = Tensor::from_vector(std::vector<float>{1.0f}, {1});
  for (size_t i = 0; i < n; ++i) t.emplace_back(tensor_name(i), one);
  return t;
}

std::string header_of(size_t n) {
  std::vector<std::string> names(n);
  const Shape shape{1};
  std::vector<serialize::HeaderTensor> h;
  h.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    names[i] = tensor_name(i);
    h.push_back({&names[i], DType::f32, &shape, 4 * i, 4 * i + 4});
  }
  return serialize::safetensors_header_text(h, {{"format", "pt"}}, "bench");
}

std::string empty_objects(size_t n) {  // {"a": [{}, {}, ...]}
  std::string s = "{\"a\": [";
  for (size_t i = 0; i < n; ++i) s += i ? ", {}" : "{}";
  return s + "]}";
}

std::string many_keys(size_t n) {  // {"k0": 0, "k1": 1, ...}
  std::string s = "{";
  for (size_t i = 0; i < n; ++i) s += (i ? ", \"k" : "\"k") + std::to_string(i) + "\": " + std::to_string(i);
  return s + "}";
}

struct Figure {
  std::string what;
  double seconds_full, seconds_tenth;
  size_t bytes_full, bytes_tenth;
  double ratio() const { return (seconds_full / double(bytes_full)) / (seconds_tenth / double(bytes_tenth)); }
};

}  // namespace

int main(int argc, char** argv) {
  size_t entries = 1000000;
  int reps = 3;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--entries") entries = std::strtoull(argv[i + 1], nullptr, 10);
    else if (flag == "--reps") reps = std::atoi(argv[i + 1]);
  }
  bool ok = true;

  // (1) the safetensors header
  std::string text;
  const double write_header = min_seconds(reps, [&] { text = header_of(entries); });
  serialize::Header parsed;
  const double parse = min_seconds(reps, [&] {
    parsed = serialize::parse_safetensors_header(text.data(), text.size(), 4 * entries, "bench");
  });
  const std::string tenth_text = header_of(entries / 10);
  const double parse_tenth = min_seconds(reps, [&] {
    serialize::parse_safetensors_header(tenth_text.data(), tenth_text.size(), 4 * (entries / 10), "bench");
  });
  std::printf("safetensors header of %zu entries (%.1f MB): text written in %.3f s, parsed and checked in %.3f s "
              "(target < 1 s)\n", parsed.entries.size(), double(text.size()) / 1e6, write_header, parse);
  if (!(parse < 1.0)) ok = false;

  const std::string path = std::filesystem::temp_directory_path() / ("bench_json_" + std::to_string(::getpid()) +
                                                                   ".safetensors");
  const auto tensors = tensors_of(entries);
  const double write_file = min_seconds(1, [&] { serialize::write_safetensors(path, tensors); });
  size_t read_count = 0;
  const double read_file = min_seconds(1, [&] { read_count = serialize::read_safetensors(path).tensors.size(); });
  std::filesystem::remove(path);
  std::printf("safetensors file of %zu tensors: written in %.3f s, read (every tensor created) in %.3f s\n",
              read_count, write_file, read_file);

  // (2), (3) documents
  std::vector<Figure> figures;
  auto document = [&](const std::string& what, const std::function<std::string(size_t)>& make, size_t n) {
    const std::string full = make(n), tenth = make(n / 10);
    const double a = min_seconds(reps, [&] { serialize::parse_json_document(full, what); });
    const double b = min_seconds(reps, [&] { serialize::parse_json_document(tenth, what); });
    figures.push_back({what, a, b, full.size(), tenth.size()});
  };
  document("200,000 empty objects in an array", empty_objects, 200000);
  document(std::to_string(entries / 10) + " keys in one object", many_keys, entries / 10);
  figures.push_back({"safetensors header", parse, parse_tenth, text.size(), tenth_text.size()});
  std::printf("\n| document | bytes | parse (s) | at a tenth (s) | time per byte, full / tenth (target <= 3) |\n"
              "| --- | --- | --- | --- | --- |\n");
  for (const Figure& f : figures) {
    std::printf("| %s | %zu | %.4f | %.4f | %.2f |\n", f.what.c_str(), f.bytes_full, f.seconds_full, f.seconds_tenth,
                f.ratio());
    if (!(f.ratio() <= 3.0)) ok = false;
  }
  std::printf("\n%s\n", ok ? "all targets met" : "TARGET MISSED");
  return ok ? 0 : 1;
}
