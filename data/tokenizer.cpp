#include "data/tokenizer.h"

#include "data/bpe_tokenizer.h"

namespace lathe::data {

std::string Tokenizer::describe() const { return identity() ? identity()->describe() : "bytes"; }

std::string Tokenizer::checksum() const { return identity() ? identity()->checksum : ""; }

}  // namespace lathe::data
