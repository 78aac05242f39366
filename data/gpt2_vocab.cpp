#include "data/gpt2_vocab.h"

#include <sys/stat.h>

#include <cerrno>
#include <array>
#include <sstream>
#include <unordered_map>

#include "core/error.h"
#include "data/corpus_file.h"
#include "serialize/json_document.h"

namespace lathe::data {

namespace {

// GPT-2's bytes_to_unicode: the UTF-8 text of each byte's character in the alphabet.
std::array<std::string, 256> byte_to_unicode() {
  auto printable = [](int b) { return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF); };
  auto utf8 = [](uint32_t cp) {
    std::string s;
    if (cp < 0x80) {
      s += char(cp);
    } else {  // every code point of the alphabet is below U+0800: two bytes
      s += char(0xC0 | (cp >> 6));
      s += char(0x80 | (cp & 0x3F));
    }
    return s;
  };
  std::array<std::string, 256> out;
  uint32_t next = 256;
  for (int b = 0; b < 256; ++b) out[size_t(b)] = utf8(printable(b) ? uint32_t(b) : next++);
  return out;
}

// The same backwards: the text of each alphabet character to its byte.
std::unordered_map<std::string, uint8_t> unicode_to_byte() {
  std::unordered_map<std::string, uint8_t> map;
  const std::array<std::string, 256> forward = byte_to_unicode();
  for (int b = 0; b < 256; ++b) map[forward[size_t(b)]] = uint8_t(b);
  return map;
}

// The bytes a token string of the alphabet stands for; false when it holds another character.
bool token_to_bytes(const std::string& token, const std::unordered_map<std::string, uint8_t>& alphabet, std::string& out) {
  out.clear();
  for (size_t i = 0; i < token.size();) {
    const size_t len = static_cast<unsigned char>(token[i]) < 0x80 ? 1 : 2;
    const auto it = alphabet.find(token.substr(i, len));
    if (it == alphabet.end()) return false;
    out += char(it->second);
    i += len;
  }
  return !token.empty();
}

}  // namespace

std::string gpt2_alphabet_text(std::string_view bytes) {
  static const std::array<std::string, 256> alphabet = byte_to_unicode();
  std::string out;
  for (unsigned char b : bytes) out += alphabet[b];
  return out;
}

std::string read_gpt2_file(const std::string& path, const char* what) {
  struct stat st {};
  LATHE_CHECK(::stat(path.c_str(), &st) == 0 || errno != ENOENT, what, " ", path,
              ": no such file (run tools/fetch_gpt2_vocab.sh to fetch GPT-2's files)");
  CorpusFile info;
  FileHandle fd = open_regular_file(path, what, info);
  std::string text(info.size, '\0');
  read_exact(fd.get(), info, 0, info.size, reinterpret_cast<uint8_t*>(text.data()));
  return text;
}


Gpt2Vocab read_gpt2_vocab(const std::string& vocab_bpe, const std::string& encoder_json) {
  return parse_gpt2_vocab(read_gpt2_file(vocab_bpe, "vocab.bpe"), vocab_bpe, read_gpt2_file(encoder_json, "encoder.json"),
                          encoder_json);
}

Gpt2Vocab parse_gpt2_vocab(const std::string& vocab_text, const std::string& vocab_bpe, const std::string& encoder_text,
                           const std::string& encoder_json) {
  const auto alphabet = unicode_to_byte();

  // encoder.json: token string -> id, the ids 0..n-1 each once.
  const nlohmann::json enc = serialize::parse_json_document(encoder_text, encoder_json, serialize::kMaxListJsonBytes);
  LATHE_CHECK(enc.is_object() && !enc.empty(), encoder_json, ": not a JSON object of token -> id");
  const std::string eot_name = "<|endoftext|>";
  std::unordered_map<std::string, uint32_t> ids;
  std::vector<std::string> bytes(enc.size());
  std::vector<bool> seen(enc.size(), false);
  uint32_t eot = ~0u;
  for (const auto& [token, value] : enc.items()) {
    LATHE_CHECK(value.is_number_unsigned() && value.get<uint64_t>() < enc.size(), encoder_json, ": token ",
                serialize::quote_json(token), " has id ", serialize::quote_json(value), ", not one of 0..", enc.size() - 1);
    const uint32_t id = value.get<uint32_t>();
    LATHE_CHECK(!seen[id], encoder_json, ": id ", id, " is given to two tokens");
    seen[id] = true;
    ids.emplace(token, id);
    if (token == eot_name) {
      eot = id;
      continue;
    }
    LATHE_CHECK(token_to_bytes(token, alphabet, bytes[id]), encoder_json, ": token ", serialize::quote_json(token),
                " is not written in GPT-2's byte alphabet");
  }
  LATHE_CHECK(eot == enc.size() - 1, encoder_json, ": ", eot_name,
              eot == ~0u ? " is missing" : " is not the last id", " (GPT-2 has it as id ", enc.size() - 1, ")");
  bytes.pop_back();  // the end-of-text token is not an ordinary token

  std::array<uint32_t, 256> byte_ids{};
  std::vector<bool> byte_found(256, false);
  for (uint32_t id = 0; id < bytes.size(); ++id)
    if (bytes[id].size() == 1) {
      byte_ids[static_cast<unsigned char>(bytes[id][0])] = id;
      byte_found[static_cast<unsigned char>(bytes[id][0])] = true;
    }
  for (int b = 0; b < 256; ++b) LATHE_CHECK(byte_found[b], encoder_json, ": byte ", b, " has no token of its own");

  // vocab.bpe: "#version: ..." then one merge per line.
  std::vector<BpeMerge> merges;
  std::istringstream lines(vocab_text);
  std::string line;
  size_t line_no = 0;
  while (std::getline(lines, line)) {
    ++line_no;
    if (line_no == 1) {
      LATHE_CHECK(line.rfind("#version", 0) == 0, vocab_bpe, ": line 1 is not a \"#version\" line; not a GPT-2 vocab.bpe");
      continue;
    }
    if (line.empty() && lines.peek() == EOF) break;  // the final newline
    const size_t space = line.find(' ');
    LATHE_CHECK(space != std::string::npos && space > 0 && space + 1 < line.size() &&
                    line.find(' ', space + 1) == std::string::npos,
                vocab_bpe, ": line ", line_no, " is not a pair \"left right\" (truncated or damaged)");
    const std::string left = line.substr(0, space), right = line.substr(space + 1);
    auto id_of = [&](const std::string& token) {
      const auto it = ids.find(token);
      LATHE_CHECK(it != ids.end() && it->second != eot, vocab_bpe, ": line ", line_no, ": token ",
                  serialize::quote_json(token), " is not in ", encoder_json, " (the files do not belong together)");
      return it->second;
    };
    merges.push_back({id_of(left), id_of(right), id_of(left + right)});
  }
  LATHE_CHECK(merges.size() + 256 == bytes.size(), vocab_bpe, ": ", merges.size(), " merges, but ", encoder_json,
              " has ", bytes.size(), " ordinary tokens, which need ", bytes.size() - 256,
              " (one file is truncated, or they do not belong together)");
  try {
    return {BpeModel(byte_ids, std::move(merges), std::move(bytes)), eot};
  } catch (const Error& e) {
    LATHE_FAIL(vocab_bpe, ": ", e.what(), " (merge i is line i + 2)");
  }
}

}  // namespace lathe::data
