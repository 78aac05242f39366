#include "data/byte_tokenizer.h"

#include "core/error.h"

namespace lathe::data {

std::vector<int64_t> ByteTokenizer::encode(std::string_view text) const {
  std::vector<int64_t> ids;
  ids.reserve(text.size());
  for (char c : text) ids.push_back(int64_t(static_cast<unsigned char>(c)));
  return ids;
}

std::string ByteTokenizer::decode(const std::vector<int64_t>& ids) const {
  std::string text;
  text.reserve(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    LATHE_CHECK(ids[i] >= 0 && ids[i] < kVocabSize, "ByteTokenizer::decode: token ", ids[i],
                " at position ", i, " is outside the byte vocabulary [0, ", kVocabSize, ")");
    text.push_back(static_cast<char>(static_cast<unsigned char>(ids[i])));
  }
  return text;
}

}  // namespace lathe::data
