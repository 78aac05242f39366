// llm.c's GPT-2 model file (train_gpt2.c and train_gpt2.cu read it; its train_gpt2.py writes
// gpt2_124M.bin and gpt2_124M_bf16.bin):
//
//   bytes 0..1023   256 little-endian int32: magic 20240326, version (3: f32 weights, 5: bf16),
//                   maxT, V, L, NH, C, Vp (V padded, to a multiple of 128 by llm.c), then zeros
//   then            the weights, back to back, in this order and nn.Linear's [out, in] layout:
//                   wte [Vp, C], wpe [maxT, C], ln1w [L, C], ln1b [L, C], qkvw [L, 3C, C],
//                   qkvb [L, 3C], attprojw [L, C, C], attprojb [L, C], ln2w [L, C], ln2b [L, C],
//                   fcw [L, 4C, C], fcb [L, 4C], fcprojw [L, C, 4C], fcprojb [L, C], lnfw [C], lnfb [C]
//
// In lathe's terms: block_size = maxT, vocab_size = V, n_layer = L, n_head = NH, n_embd = C, bias
// true, dropout 0; the rows of wte past V are dropped on reading and written as zeros. The layer
// tensors [L, ...] are the blocks' tensors stacked.
#pragma once

#include <cstdint>
#include <string>

#include "serialize/atomic_file.h"
#include "serialize/gpt2_layout.h"

namespace lathe::serialize {

inline constexpr int32_t kLlmcModelMagic = 20240326;
inline constexpr int32_t kLlmcVersionF32 = 3;
inline constexpr int32_t kLlmcVersionBF16 = 5;
inline constexpr int64_t kLlmcHeaderBytes = 256 * 4;

// V rounded up to a multiple of 128, as llm.c pads it.
int64_t llmc_padded_vocab(int64_t vocab_size);

// Reads and checks a whole file. Errors name the file, and the header field with its byte offset
// (a wrong magic, an unknown version, sizes that are not positive or V past Vp) or the tensor whose
// bytes run past the end (a truncated file) or the bytes past the last tensor.
GPT2Weights read_llmc(const std::string& path);

// Writes `state` (a model's state_dict, any device) as version 3 (`dtype` f32) or 5 (bf16,
// rounded to nearest even), atomically. Everything is checked before the first byte: the config
// must be the GPT-2 block and its sizes fit llm.c's int32 header.
void write_llmc(const std::string& path, const nn::GPTConfig& config, const NamedTensors& state, DType dtype,
                Existing existing = Existing::replace);

}  // namespace lathe::serialize
