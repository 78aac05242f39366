// The tokenizer a model file takes (serialize/model_file.h): the weights record theirs in their
// "tokenizer" metadata, which this layer, the one that knows tokenizers, reads back.
#pragma once

#include <string>

#include "data/bpe_tokenizer.h"
#include "serialize/model_file.h"

namespace lathe::data {

// `given` (a TOK of data/bpe_tokenizer.h) when not empty, else the tokenizer the weights' metadata
// records (bytes when they record none of lathe's: a run on a byte corpus), checked against its
// checksum. Weights that say they do not know theirs (Hugging Face, llm.c) need `given`: an error
// naming `path` says so.
BpeTokenizer model_tokenizer(const serialize::LoadedModel& loaded, const std::string& path, const std::string& given);

}  // namespace lathe::data
