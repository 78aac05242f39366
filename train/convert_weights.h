// lathe convert: a GPT's weights from one format to another. IN is anything load_model reads (a
// weights file or checkpoint of lathe train, a Hugging Face GPT-2 directory, an llm.c model file);
// OUT is written as
//   lathe   the weights file of serialize/model_file.h (what `lathe sample` and `--init-from` read)
//   hf      a Hugging Face GPT-2 directory (serialize/hf_gpt2.h)
//   llmc    llm.c's model file, version 3 (f32) or, with bf16, 5 (serialize/llmc.h)
//   gguf    llama.cpp's model file, f32, f16 or q8_0, with the tokenizer (train/gguf_export.h)
// The weights go through lathe's GPT, so whatever IN holds is checked as a model before anything
// is written, and OUT is written atomically: an error or a kill leaves it as it was. OUT must not
// exist (a Hugging Face directory may be empty) unless `overwrite` is given; two conversions to
// one new OUT started at once: one writes it, the other is refused.
#pragma once

#include <cstdint>
#include <string>

#include "nn/gpt.h"
#include "serialize/gguf.h"
#include "serialize/model_file.h"

namespace lathe::train {

struct ConvertOptions {
  serialize::WeightsFormat to = serialize::WeightsFormat::lathe;  // lathe, hf or llmc
  bool bf16 = false;                        // llmc: version 5
  bool overwrite = false;                   // replace an existing OUT (hf: its config and weights)
  serialize::GgufType gguf_type = serialize::GgufType::f32;  // gguf: the matrices' type
  // lathe: the tokenizer to record; gguf: the tokenizer to embed (a TOK of data/bpe_tokenizer.h);
  // "" takes what IN records.
  std::string tokenizer;
};

struct ConvertSummary {
  serialize::WeightsFormat from = serialize::WeightsFormat::lathe;
  nn::GPTConfig config;
  int64_t params = 0;  // distinct parameters (the tied head once)
};

// Throws lathe::Error naming the file, field or tensor at fault; options that do not fit the
// output format (bf16 without llmc, a tokenizer without lathe, a checkpoint as the output format)
// are errors too.
ConvertSummary convert_weights(const std::string& in, const std::string& out, const ConvertOptions& options);

}  // namespace lathe::train
