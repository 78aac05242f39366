#include "serialize/llmc.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <climits>
#include <cstring>
#include <map>

#include "core/autograd.h"
#include "core/ops.h"
#include "serialize/atomic_file.h"
#include "serialize/file_reading.h"

static_assert(std::endian::native == std::endian::little, "llm.c's files are little-endian; lathe copies their bytes");

namespace lathe::serialize {

namespace {

// The header's fields after the magic and the version, in order, from byte 8.
enum Field { kMaxT = 2, kV, kL, kNH, kC, kVp };
const char* field_name(int i) {
  static const char* const names[] = {"magic", "version", "maxT (block_size)", "V (vocab_size)", "L (n_layer)",
                                      "NH (n_head)",       "C (n_embd)", "Vp (padded vocab_size)"};
  return names[i];
}

// One tensor of the file: llm.c's name, the block tensor it stacks (or the model's tensor), its
// shape as stored.
struct LlmcTensor {
  const char* name;
  std::string lathe_name;  // "ln_1.weight" of every block for a layer tensor, else the full name
  bool per_layer;
  Shape shape;
};

std::vector<LlmcTensor> llmc_layout(int64_t maxT, int64_t Vp, int64_t L, int64_t C) {
  return {{"wte", "transformer.wte.weight", false, {Vp, C}},
          {"wpe", "transformer.wpe.weight", false, {maxT, C}},
          {"ln1w", "ln_1.weight", true, {L, C}},
          {"ln1b", "ln_1.bias", true, {L, C}},
          {"qkvw", "attn.c_attn.weight", true, {L, 3 * C, C}},
          {"qkvb", "attn.c_attn.bias", true, {L, 3 * C}},
          {"attprojw", "attn.c_proj.weight", true, {L, C, C}},
          {"attprojb", "attn.c_proj.bias", true, {L, C}},
          {"ln2w", "ln_2.weight", true, {L, C}},
          {"ln2b", "ln_2.bias", true, {L, C}},
          {"fcw", "mlp.c_fc.weight", true, {L, 4 * C, C}},
          {"fcb", "mlp.c_fc.bias", true, {L, 4 * C}},
          {"fcprojw", "mlp.c_proj.weight", true, {L, C, 4 * C}},
          {"fcprojb", "mlp.c_proj.bias", true, {L, C}},
          {"lnfw", "transformer.ln_f.weight", false, {C}},
          {"lnfb", "transformer.ln_f.bias", false, {C}}};
}

std::string block_name(int64_t l, const std::string& suffix) {
  return "transformer.h." + std::to_string(l) + "." + suffix;
}

// What a magic number that is not a model's belongs to, for the message.
std::string magic_hint(int32_t magic) {
  switch (magic) {
    case 20240520:
    case 20240801: return " (that is llm.c's token shard magic: a data file, not a model)";
    case 20240328: return " (that is llm.c's tokenizer file magic)";
    case 20240327: return " (that is llm.c's debug state magic)";
    default: return "";
  }
}

}  // namespace

int64_t llmc_padded_vocab(int64_t vocab_size) { return (vocab_size + 127) / 128 * 128; }

GPT2Weights read_llmc(const std::string& path) {
  FileHandle f;
  // O_NONBLOCK: a FIFO is refused below instead of blocking the open.
  f.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  LATHE_CHECK(f.fd >= 0, path, ": cannot open: ", std::strerror(errno));
  struct stat st {};
  LATHE_CHECK(::fstat(f.fd, &st) == 0, path, ": cannot stat: ", std::strerror(errno));
  LATHE_CHECK(S_ISREG(st.st_mode), path, ": is ", file_kind_name(st.st_mode), ", not an llm.c model file");
  const uint64_t size = uint64_t(st.st_size);
  LATHE_CHECK(size >= uint64_t(kLlmcHeaderBytes), path, ": ", size, " bytes, shorter than llm.c's ",
              kLlmcHeaderBytes, "-byte header");
  int32_t h[256];
  read_exactly(f.fd, h, sizeof h, 0, path);
  LATHE_CHECK(h[0] == kLlmcModelMagic, path, ": byte 0, magic: ", h[0], ", expected ", kLlmcModelMagic,
              " (llm.c's GPT-2 model file)", magic_hint(h[0]));
  LATHE_CHECK(h[1] == kLlmcVersionF32 || h[1] == kLlmcVersionBF16, path, ": byte 4, version: ", h[1], ", expected ",
              kLlmcVersionF32, " (f32 weights) or ", kLlmcVersionBF16, " (bf16 weights)");
  for (int i = kMaxT; i <= kVp; ++i)
    LATHE_CHECK(h[i] > 0, path, ": byte ", 4 * i, ", ", field_name(i), ": ", h[i], ", must be positive");
  LATHE_CHECK(h[kVp] >= h[kV], path, ": byte ", 4 * kVp, ", ", field_name(kVp), ": ", h[kVp], " is smaller than ",
              field_name(kV), " ", h[kV], " (byte ", 4 * kV, ")");
  LATHE_CHECK(h[kC] % h[kNH] == 0, path, ": byte ", 4 * kC, ", ", field_name(kC), ": ", h[kC],
              " is not a multiple of ", field_name(kNH), " ", h[kNH], " (byte ", 4 * kNH, ")");

  const DType stored = h[1] == kLlmcVersionF32 ? DType::f32 : DType::bf16;
  const int64_t maxT = h[kMaxT], V = h[kV], L = h[kL], C = h[kC], Vp = h[kVp];
  const std::vector<LlmcTensor> layout = llmc_layout(maxT, Vp, L, C);
  // Where each tensor starts, checked against the file's size before anything is allocated (the
  // sizes are int32, so no product overflows 64 bits).
  std::vector<uint64_t> begin;
  uint64_t offset = uint64_t(kLlmcHeaderBytes);
  for (const LlmcTensor& t : layout) {
    // In 64 bits a product of int32 sizes can still overflow (C x C x 4 L): that, too, is a tensor
    // larger than any file.
    uint64_t nbytes = dtype_size(stored);
    bool overflow = false;
    for (int64_t d : t.shape) overflow = overflow || __builtin_mul_overflow(nbytes, uint64_t(d), &nbytes);
    LATHE_CHECK(!overflow && nbytes <= size - offset, path, ": tensor ", t.name, " (", dtype_name(stored),
                shape_str(t.shape), ", from byte ", offset, ", ", overflow ? "more than 2^64" : std::to_string(nbytes),
                " bytes) runs past the end of the file at byte ", size,
                ": the file is truncated, or the header's sizes are not its own");
    begin.push_back(offset);
    offset += nbytes;
  }
  LATHE_CHECK(offset == size, path, ": ", size - offset, " bytes after the last tensor (lnfb ends at byte ", offset,
              " of ", size, "): the header's sizes do not describe this file");

  GPT2Weights out;
  out.config.vocab_size = V;
  out.config.block_size = maxT;
  out.config.n_layer = L;
  out.config.n_head = h[kNH];
  out.config.n_embd = C;
  out.config.bias = true;
  out.config.validate();
  NoGradGuard no_grad;
  std::map<std::string, Tensor> by_name;
  for (size_t i = 0; i < layout.size(); ++i) {
    const LlmcTensor& t = layout[i];
    Tensor raw = Tensor::empty(t.shape, stored);
    read_exactly(f.fd, raw.data_ptr(), raw.nbytes(), begin[i], path);
    Tensor w = raw.to(DType::f32);  // bf16 widens exactly
    if (!t.per_layer) {
      by_name[t.lathe_name] = t.lathe_name == "transformer.wte.weight" ? w.narrow(0, 0, V).contiguous() : w;
      continue;
    }
    for (int64_t l = 0; l < L; ++l) by_name[block_name(l, t.lathe_name)] = w.select(0, l).contiguous();
  }
  for (const auto& [name, shape] : gpt2_tensors(out.config)) out.weights.emplace_back(name, by_name.at(name));
  return out;
}

void write_llmc(const std::string& path, const nn::GPTConfig& config, const NamedTensors& state, DType dtype,
                Existing existing) {
  LATHE_CHECK(dtype == DType::f32 || dtype == DType::bf16, path, ": llm.c stores f32 (version 3) or bf16 (version 5), not ",
              dtype_name(dtype));
  check_gpt2_block(config, path);
  const int64_t Vp = llmc_padded_vocab(config.vocab_size);
  const std::pair<const char*, int64_t> sizes[] = {{"block_size", config.block_size}, {"vocab_size", Vp},
                                                   {"n_layer", config.n_layer},       {"n_head", config.n_head},
                                                   {"n_embd", config.n_embd}};
  for (const auto& [name, value] : sizes)
    LATHE_CHECK(value <= INT32_MAX, path, ": ", name, " ", value, " does not fit llm.c's int32 header");
  const NamedTensors tensors = gpt2_tensors_of(config, state, path);
  const std::map<std::string, Tensor> by_name(tensors.begin(), tensors.end());

  NoGradGuard no_grad;
  const int64_t L = config.n_layer, C = config.n_embd;
  std::vector<Tensor> file_tensors;
  for (const LlmcTensor& t : llmc_layout(config.block_size, Vp, L, C)) {
    Tensor w;
    if (!t.per_layer) {
      w = by_name.at(t.lathe_name);
      if (t.lathe_name == "transformer.wte.weight" && Vp > config.vocab_size)
        w = cat({w, Tensor::zeros({Vp - config.vocab_size, C})}, 0);  // llm.c's padding rows
    } else {
      std::vector<Tensor> layers;
      for (int64_t l = 0; l < L; ++l) layers.push_back(by_name.at(block_name(l, t.lathe_name)));
      w = stack(layers, 0);
    }
    LATHE_CHECK(w.shape() == t.shape, path, ": tensor ", t.name, " is ", w.desc(), ", expected ", shape_str(t.shape));
    file_tensors.push_back(w.to(dtype).contiguous());  // bf16: rounded to nearest even
  }
  int32_t header[256] = {};
  header[0] = kLlmcModelMagic;
  header[1] = dtype == DType::f32 ? kLlmcVersionF32 : kLlmcVersionBF16;
  header[kMaxT] = int32_t(config.block_size);
  header[kV] = int32_t(config.vocab_size);
  header[kL] = int32_t(L);
  header[kNH] = int32_t(config.n_head);
  header[kC] = int32_t(C);
  header[kVp] = int32_t(Vp);
  write_file_atomically(path, [&](AtomicFile& file) {
    file.write(header, sizeof header);
    for (const Tensor& t : file_tensors) file.write(t.data_ptr(), t.nbytes());
  }, existing);
}

}  // namespace lathe::serialize
