// A lathe GPT as a GGUF file llama.cpp runs (`lathe convert MODEL OUT.gguf --to gguf`), in the
// architecture of llama.cpp's that computes exactly the model's block, or refused.
//
//   gpt2   GPT-2's block: LayerNorm, learned positions, tanh GELU, no QK-norm, no soft cap; biases
//          and norm weights written as zeros and ones where the model has none; tied or untied.
//   llama  RoPE + RMSNorm + SwiGLU, no biases, no QK-norm, no soft cap; tied or untied.
//   arcee  the same with ReLU^2 (ungated) in place of SwiGLU.
//   qwen3  RoPE + RMSNorm + SwiGLU + QK-norm (weightless: written as weights of ones; RMSNorm of a
//          head commutes with its rotation, so qwen3's norm-then-RoPE is lathe's RoPE-then-norm).
//
// Anything else -- a logit soft cap (llama.cpp caps logits only in architectures that differ
// otherwise), QK-norm with ReLU^2, RoPE with LayerNorm, biases beside RoPE, RMSNorm or another MLP
// without RoPE -- is refused, naming the switch, before anything is written: never an export that
// computes something else.
//
// RoPE: lathe turns each head's halves (x[i], x[i + D/2]) (rotate-half, llama.cpp's NEOX mode).
// llama and arcee rotate adjacent pairs (x[2i], x[2i+1]) (NORM mode), so their q and k rows are
// permuted within each head, row j*D/2 + i to 2i + j, as llama.cpp's own converter does for
// Hugging Face's Llama; qwen3 is NEOX and takes them as they are.
//
// The tokenizer goes in whole: a byte-level BPE (lathe's bytes, its trained files, GPT-2's) as
// llama.cpp's "gpt2" tokenizer, every token spelt in GPT-2's byte alphabet, the merges in rank
// order, the pre-tokenizer named after lathe's pattern ("gpt-2", or "llama3" for GPT-4's), the
// end-of-text token as a CONTROL token and as BOS and EOS, ids past the tokenizer's (a padded
// vocabulary) as unused "[PAD<id>]" tokens, and no BOS added. A model fine-tuned for chat (`lathe
// train --sft`) has its chat tokens (data/chat.h) as CONTROL tokens by name, <|end|> as EOS (where
// llama.cpp ends a reply) and the template in tokenizer.chat_template.
//
// Types: f32; f16 (matrices in f16, norms and biases f32: llama.cpp's MOSTLY_F16); q8_0 (matrices
// in Q8_0, the others f32: MOSTLY_Q8_0).
#pragma once

#include <string>

#include "data/bpe_tokenizer.h"
#include "data/chat.h"
#include "nn/gpt.h"
#include "serialize/atomic_file.h"
#include "serialize/gguf.h"

namespace lathe::train {

// llama.cpp's architecture for `config` ("gpt2", "llama", "arcee", "qwen3"); throws lathe::Error
// "<what>: ..." naming the switch llama.cpp cannot compute.
std::string gguf_architecture(const nn::GPTConfig& config, const std::string& what);

// Writes `model` with `tokenizer` (whose ids must fit the model's vocabulary) and, for a chat model,
// its `chat` tokens to `path`. `name` is general.name. Errors name the model, the switch or the
// tokenizer at fault, before anything is written.
void write_gguf(const std::string& path, const nn::GPT& model, const data::BpeTokenizer& tokenizer,
                serialize::GgufType type, const std::string& name,
                serialize::Existing existing = serialize::Existing::replace, const data::ChatTokens* chat = nullptr);

}  // namespace lathe::train
