// GGUF, as lathe writes it for llama.cpp (serialize/gguf.h, train/gguf_export.h): the file read back
// by a reader written here from the format's description (a transcription; real llama.cpp reads
// them in tools/gguf_check.py, ctest gguf.llama_cpp.*), Q8_0 and F16 rounded as ggml rounds, the
// architecture chosen or refused by the switch, the tokenizer and the q/k rows as llama.cpp wants them.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <variant>

#include "core/autograd.h"
#include "data/bpe_tokenizer.h"
#include "data/chat.h"
#include "serialize/gguf.h"
#include "tests/temp_dir.h"
#include "tests/test_helpers.h"
#include "train/gguf_export.h"

using namespace lathe;
using lathe::testing::error_of;
using lathe::testing::TempDir;

namespace {

// The parts of a GGUF file the tests look at.
struct ReadGguf {
  std::map<std::string, std::variant<uint64_t, double, bool, std::string, std::vector<std::string>, std::vector<int64_t>>> kv;
  struct Info {
    std::vector<uint64_t> ne;
    uint32_t type;
    uint64_t offset;
  };
  std::vector<std::pair<std::string, Info>> tensors;
  std::string data;  // from the data section's start
  const Info& info(const std::string& name) const {
    for (const auto& [n, i] : tensors)
      if (n == name) return i;
    FAIL("no tensor ", name);
    static Info none;
    return none;
  }
  std::vector<float> f32(const std::string& name) const {
    const Info& i = info(name);
    uint64_t n = 1;
    for (uint64_t d : i.ne) n *= d;
    std::vector<float> out(n);
    std::memcpy(out.data(), data.data() + i.offset, n * 4);
    return out;
  }
};

ReadGguf read_gguf(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  const std::string b((std::istreambuf_iterator<char>(in)), {});
  size_t p = 0;
  auto get = [&](auto& v) {
    std::memcpy(&v, b.data() + p, sizeof v);
    p += sizeof v;
  };
  auto str = [&] {
    uint64_t n;
    get(n);
    std::string s = b.substr(p, n);
    p += n;
    return s;
  };
  REQUIRE(b.substr(0, 4) == "GGUF");
  p = 4;
  uint32_t version;
  uint64_t n_tensors, n_kv;
  get(version);
  get(n_tensors);
  get(n_kv);
  CHECK(version == 3);
  ReadGguf out;
  for (uint64_t i = 0; i < n_kv; ++i) {
    const std::string key = str();
    uint32_t type;
    get(type);
    auto scalar = [&](uint32_t t) -> std::variant<uint64_t, double, bool, std::string> {
      if (t == 4) { uint32_t v; get(v); return uint64_t(v); }
      if (t == 5) { int32_t v; get(v); return uint64_t(v); }
      if (t == 6) { float v; get(v); return double(v); }
      if (t == 7) { uint8_t v; get(v); return v != 0; }
      if (t == 8) return str();
      FAIL("unexpected GGUF value type ", t);
      return uint64_t(0);
    };
    if (type == 9) {
      uint32_t et;
      uint64_t n;
      get(et);
      get(n);
      if (et == 8) {
        std::vector<std::string> v;
        for (uint64_t k = 0; k < n; ++k) v.push_back(str());
        out.kv[key] = v;
      } else {
        REQUIRE(et == 5);
        std::vector<int64_t> v;
        for (uint64_t k = 0; k < n; ++k) { int32_t x; get(x); v.push_back(x); }
        out.kv[key] = v;
      }
    } else {
      std::visit([&](auto&& v) { out.kv[key] = v; }, scalar(type));
    }
  }
  for (uint64_t i = 0; i < n_tensors; ++i) {
    const std::string name = str();
    uint32_t dims;
    get(dims);
    ReadGguf::Info info;
    for (uint32_t d = 0; d < dims; ++d) { uint64_t v; get(v); info.ne.push_back(v); }
    get(info.type);
    get(info.offset);
    CHECK(info.offset % 32 == 0);
    out.tensors.emplace_back(name, info);
  }
  const size_t start = (p + 31) / 32 * 32;
  CHECK(b.substr(p, start - p) == std::string(start - p, '\0'));
  out.data = b.substr(start);
  return out;
}

template <class T>
const T& kv(const ReadGguf& g, const std::string& key) {
  REQUIRE_MESSAGE(g.kv.count(key), key);
  return std::get<T>(g.kv.at(key));
}

nn::GPTConfig modern(bool swiglu, bool qk_norm) {
  nn::GPTConfig c{256, 16, 1, 2, 32, /*bias=*/false};
  c.rope = true;
  c.norm = nn::NormKind::rms_norm;
  c.activation = swiglu ? nn::Activation::swiglu : nn::Activation::squared_relu;
  c.qk_norm = qk_norm;
  return c;
}

}  // namespace

TEST_CASE("gguf: the writer's layout, read back as the format describes it (transcription)") {
  TempDir d("gguf_layout");
  serialize::GgufWriter w;
  w.add("general.architecture", "gpt2");
  w.add("a.count", uint32_t(7));
  w.add("a.eps", 1e-5f);
  w.add("a.flag", false);
  w.add("a.words", std::vector<std::string>{"x", "yz"});
  w.add("a.types", std::vector<int32_t>{1, 3, 5});
  const Tensor m = Tensor::from_vector(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3});  // [out 2, in 3]
  w.add_tensor("m", m, serialize::GgufType::f32);
  w.add_tensor("v", Tensor::from_vector(std::vector<float>{7}, {1}), serialize::GgufType::f32);
  w.write(d.file("f.gguf"));
  const ReadGguf g = read_gguf(d.file("f.gguf"));
  CHECK(kv<std::string>(g, "general.architecture") == "gpt2");
  CHECK(kv<uint64_t>(g, "a.count") == 7);
  CHECK(kv<double>(g, "a.eps") == double(1e-5f));
  CHECK(kv<bool>(g, "a.flag") == false);
  CHECK(kv<std::vector<std::string>>(g, "a.words") == std::vector<std::string>{"x", "yz"});
  CHECK(kv<std::vector<int64_t>>(g, "a.types") == std::vector<int64_t>{1, 3, 5});
  REQUIRE(g.tensors.size() == 2);
  CHECK(g.info("m").ne == std::vector<uint64_t>{3, 2});  // fastest first
  CHECK(g.info("m").offset == 0);
  CHECK(g.info("v").offset == 32);  // 24 bytes, padded to 32
  CHECK(g.f32("m") == std::vector<float>{1, 2, 3, 4, 5, 6});
  CHECK(g.f32("v") == std::vector<float>{7});
  CHECK(error_of([&] { w.add("a.count", uint32_t(1)); }).find("added twice") != std::string::npos);
  CHECK(error_of([&] { w.add_tensor(std::string(64, 'n'), m, serialize::GgufType::f32); }).find("1 to 63 bytes") !=
        std::string::npos);
  CHECK(error_of([&] { w.add_tensor("q", m, serialize::GgufType::q8_0); }).find("not a multiple of 32") !=
        std::string::npos);
}

TEST_CASE("gguf: Q8_0 rounds half away from zero with an f16 scale, F16 to nearest even, as ggml") {
  // amax 127: d = 1, q = round(x): 2.5 -> 3 and -2.5 -> -3 (half to even would give 2, truncation 2).
  std::vector<float> x(32, 0.0f);
  x[0] = 127.0f;
  x[1] = 2.5f;
  x[2] = -2.5f;
  x[3] = 0.49f;
  x[4] = -126.6f;
  const std::string blocks = serialize::quantize_q8_0(x.data(), 32);
  REQUIRE(blocks.size() == 34);
  uint16_t d;
  std::memcpy(&d, blocks.data(), 2);
  CHECK(d == 0x3C00);  // 1.0 in f16
  CHECK(int8_t(blocks[2 + 0]) == 127);
  CHECK(int8_t(blocks[2 + 1]) == 3);
  CHECK(int8_t(blocks[2 + 2]) == -3);
  CHECK(int8_t(blocks[2 + 3]) == 0);
  CHECK(int8_t(blocks[2 + 4]) == -127);
  const std::vector<float> back = serialize::dequantize_q8_0(blocks);
  CHECK(back[1] == 3.0f);
  // A scale that f16 rounds: amax 0.3 -> d = 0.3 / 127 = 0.0023622, f16 0.0023613.
  std::vector<float> y(32, 0.1f);
  y[5] = 0.3f;
  const std::vector<float> yb = serialize::dequantize_q8_0(serialize::quantize_q8_0(y.data(), 32));
  CHECK(std::abs(yb[5] - 0.3f) < 1e-3f);
  CHECK(yb[5] != 0.3f);

  TempDir dir("gguf_f16");
  serialize::GgufWriter w;
  // 1 + 3 * 2^-11 lies halfway between two f16 values: nearest even is 1 + 2^-9, truncation 1 + 2^-10.
  w.add_tensor("h", Tensor::from_vector(std::vector<float>{1.0f + 3.0f / 2048.0f}, {1}), serialize::GgufType::f16);
  w.write(dir.file("h.gguf"));
  const ReadGguf g = read_gguf(dir.file("h.gguf"));
  CHECK(g.info("h").type == 1);
  uint16_t h;
  std::memcpy(&h, g.data.data(), 2);
  CHECK(h == 0x3C02);
}

TEST_CASE("gguf: the architecture is llama.cpp's that computes the block, or the switch it cannot is named") {
  CHECK(train::gguf_architecture(nn::GPTConfig::preset("small"), "m") == "gpt2");
  nn::GPTConfig untied = nn::GPTConfig::preset("tiny");
  untied.tie_embeddings = false;
  untied.bias = false;
  CHECK(train::gguf_architecture(untied, "m") == "gpt2");
  CHECK(train::gguf_architecture(modern(true, false), "m") == "llama");
  CHECK(train::gguf_architecture(modern(false, false), "m") == "arcee");
  CHECK(train::gguf_architecture(modern(true, true), "m") == "qwen3");
  auto refused = [](const nn::GPTConfig& c) { return error_of([&] { train::gguf_architecture(c, "m.safetensors"); }); };
  CHECK(refused(nn::GPTConfig::preset("speedrun-small")).find("m.safetensors: logit_softcap = 30") != std::string::npos);
  CHECK(refused(modern(false, true)).find("qk_norm with activation = \"squared_relu\"") != std::string::npos);
  nn::GPTConfig c = modern(true, false);
  c.norm = nn::NormKind::layer_norm;
  CHECK(refused(c).find("rope with norm = \"layer_norm\"") != std::string::npos);
  c = modern(true, false);
  c.bias = true;
  CHECK(refused(c).find("bias = true with rope") != std::string::npos);
  c = nn::GPTConfig::preset("tiny");
  c.norm = nn::NormKind::rms_norm;
  CHECK(refused(c).find("norm = \"rms_norm\" without rope") != std::string::npos);
  c = nn::GPTConfig::preset("tiny");
  c.activation = nn::Activation::swiglu;
  CHECK(refused(c).find("activation = \"swiglu\" without rope") != std::string::npos);
}

TEST_CASE("gguf: a chat model's special tokens go in by name as CONTROL tokens, <|end|> as EOS, with the template") {
  TempDir d("gguf_chat");
  const data::BpeTokenizer bytes = data::load_tokenizer("bytes");
  const data::ChatTokens chat = data::ChatTokens::after(bytes);
  nn::GPTConfig c = modern(true, false);
  c.vocab_size = 264;  // 256 bytes, end-of-text, the four chat tokens, three unused
  nn::GPT model(c, 3);
  train::write_gguf(d.file("chat.gguf"), model, bytes, serialize::GgufType::f32, "chat", serialize::Existing::replace, &chat);
  const ReadGguf g = read_gguf(d.file("chat.gguf"));
  const auto& tokens = kv<std::vector<std::string>>(g, "tokenizer.ggml.tokens");
  const auto& types = kv<std::vector<int64_t>>(g, "tokenizer.ggml.token_type");
  REQUIRE(tokens.size() == 264);
  CHECK(tokens[256] == "<|endoftext|>");
  CHECK(std::vector<std::string>(tokens.begin() + 257, tokens.begin() + 261) ==
        std::vector<std::string>{"<|system|>", "<|user|>", "<|assistant|>", "<|end|>"});
  for (int id = 256; id <= 260; ++id) CHECK(types[size_t(id)] == 3);  // CONTROL
  CHECK(tokens[261] == "[PAD261]");
  CHECK(kv<uint64_t>(g, "tokenizer.ggml.eos_token_id") == 260);  // a reply ends at <|end|>
  CHECK(kv<uint64_t>(g, "tokenizer.ggml.bos_token_id") == 256);
  CHECK(kv<std::string>(g, "tokenizer.chat_template") == data::chat_template_jinja());
  // A model without chat tokens has no template, and ends at end-of-text.
  train::write_gguf(d.file("plain.gguf"), model, bytes, serialize::GgufType::f32, "plain");
  const ReadGguf plain = read_gguf(d.file("plain.gguf"));
  CHECK(kv<uint64_t>(plain, "tokenizer.ggml.eos_token_id") == 256);
  CHECK(plain.kv.count("tokenizer.chat_template") == 0);
  c.vocab_size = 259;  // too few rows for the chat tokens
  CHECK(error_of([&] { train::write_gguf(d.file("x.gguf"), nn::GPT(c, 3), bytes, serialize::GgufType::f32, "x",
                                         serialize::Existing::replace, &chat); }).find("do not fit the model's vocab_size 259") != std::string::npos);
}

TEST_CASE("gguf: the tokenizer goes in whole, and llama's q and k rows turn rotate-half pairs into adjacent ones") {
  TempDir d("gguf_model");
  // A trained tokenizer of two merges: "he", then "the".
  d.write("corpus.txt", "the the the then there the other the");
  REQUIRE(lathe::testing::run_lathe("tokenizer train --data " + d.file("corpus.txt") + " --vocab-size 258 --out " +
                                    d.file("tok.json")).code == 0);
  const data::BpeTokenizer tok = data::load_tokenizer(d.file("tok.json"));
  nn::GPTConfig c = modern(true, false);
  c.vocab_size = 264;  // 258 ordinary, end-of-text 258, five unused
  c.tie_embeddings = false;
  nn::GPT model(c, 3);
  train::write_gguf(d.file("m.gguf"), model, tok, serialize::GgufType::f32, "m");
  const ReadGguf g = read_gguf(d.file("m.gguf"));
  CHECK(kv<std::string>(g, "general.architecture") == "llama");
  CHECK(kv<std::string>(g, "tokenizer.ggml.model") == "gpt2");
  CHECK(kv<std::string>(g, "tokenizer.ggml.pre") == "gpt-2");
  const auto& tokens = kv<std::vector<std::string>>(g, "tokenizer.ggml.tokens");
  const auto& types = kv<std::vector<int64_t>>(g, "tokenizer.ggml.token_type");
  REQUIRE(tokens.size() == 264);
  CHECK(tokens[32] == "\xc4\xa0");  // the space byte in GPT-2's alphabet: U+0120
  CHECK(tokens[116] == "t");
  CHECK(tokens[256] == "he");  // the merges' tokens
  CHECK(tokens[257] == "the");
  CHECK(tokens[258] == "<|endoftext|>");
  CHECK(types[258] == 3);  // CONTROL
  CHECK(tokens[263] == "[PAD263]");
  CHECK(types[263] == 5);  // UNUSED
  CHECK(kv<uint64_t>(g, "tokenizer.ggml.eos_token_id") == 258);
  CHECK(kv<bool>(g, "tokenizer.ggml.add_bos_token") == false);
  CHECK(kv<std::vector<std::string>>(g, "tokenizer.ggml.merges") == std::vector<std::string>{"h e", "t he"});
  CHECK(kv<double>(g, "llama.rope.freq_base") == 10000.0);
  CHECK(kv<uint64_t>(g, "llama.rope.dimension_count") == 16);
  // attn_q: row j * 8 + i of each head of 16 is row 2i + j of the GGUF tensor.
  NoGradGuard no_grad;
  const std::vector<float> w = model.transformer.h[0].attn.c_attn.weight.to_vector<float>();
  const std::vector<float> q = g.f32("blk.0.attn_q.weight");
  const std::vector<float> v = g.f32("blk.0.attn_v.weight");
  const int64_t C = 32;
  for (int64_t head = 0; head < 2; ++head)
    for (int64_t i = 0; i < 8; ++i)
      for (int64_t j = 0; j < 2; ++j)
        for (int64_t col = 0; col < C; ++col)
          CHECK(q[size_t((head * 16 + 2 * i + j) * C + col)] == w[size_t((head * 16 + j * 8 + i) * C + col)]);
  for (int64_t r = 0; r < C; ++r) CHECK(v[size_t(r * C)] == w[size_t((2 * C + r) * C)]);  // v as it is
  CHECK(g.info("output.weight").ne == std::vector<uint64_t>{32, 264});  // untied
  CHECK(error_of([&] { train::write_gguf(d.file("x.gguf"), nn::GPT(nn::GPTConfig::preset("speedrun-small")), tok,
                                         serialize::GgufType::f32, "x"); }).find("logit_softcap") != std::string::npos);
}
