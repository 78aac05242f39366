// Conversations for supervised fine-tuning and for `lathe chat`: lathe's chat template, the
// tokenizer it extends, and the dataset that trains on the assistant's turns only.
//
// The template (version 1). Four special tokens follow the base tokenizer's ids (its end-of-text
// included): <|system|>, <|user|>, <|assistant|> and <|end|>, in that order. A conversation
// {"messages": [{"role", "content"}, ...]} is rendered message by message as
//
//     <|role|> content <|end|>        (no spaces: the role token, the content's tokens, <|end|>)
//
// the content encoded by the base tokenizer (special-token text in a content is ordinary text).
// `lathe chat` renders the conversation so far the same way and appends <|assistant|>; the model
// answers until it emits <|end|>. Roles: "system" (only first), "user", "assistant"; a conversation
// has at least one assistant message.
//
// The loss mask: a token is a target exactly when it is an assistant message's content or the
// <|end|> that closes it -- what the model must say, and when to stop. The role tokens, the system
// and user turns are read, never predicted (the target is -1 there, as padding).
//
// The dataset: each conversation one row, padded at the end (with <|end|>, target -1) to the
// longest row of its batch; rows drawn uniformly from the split with the run's generator, so a
// checkpoint's (seed, offset) replays the batches. The last 10% of the conversations (at least one)
// are the validation split. A conversation longer than block_size + 1 tokens, or a line that is not
// one, is reported by its line and skipped; the file is refused when none is left.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "data/bpe_tokenizer.h"
#include "data/dataset.h"
#include "data/json_lines.h"

namespace lathe::data {

enum class ChatRole { system, user, assistant };
const char* chat_role_name(ChatRole r);  // "system", "user", "assistant"

struct ChatMessage {
  ChatRole role;
  std::string content;
};

inline constexpr int kChatTemplateVersion = 1;
// The special tokens' names, in id order (ChatTokens::after).
inline constexpr const char* kChatTokenNames[4] = {"<|system|>", "<|user|>", "<|assistant|>", "<|end|>"};

// The template as a Jinja chat template (what GGUF's tokenizer.chat_template and transformers'
// tokenizer_config.json hold, over messages [{role, content}] and add_generation_prompt).
std::string chat_template_jinja();

// The four special tokens' ids for a base tokenizer: base.vocab_size() + 0..3.
struct ChatTokens {
  int64_t system = 0, user = 0, assistant = 0, end = 0;
  static ChatTokens after(const BpeTokenizer& base);
  int64_t role(ChatRole r) const { return r == ChatRole::system ? system : r == ChatRole::user ? user : assistant; }
  int64_t vocab_size() const { return end + 1; }  // every id of the chat tokenizer
  // {"format": "lathe-chat", "version": 1, "tokens": {"<|system|>": id, ...}}: what weights record.
  nlohmann::json to_json() const;
  // Checks a record read from weights against `base` (the same ids); `what` names the file.
  static ChatTokens from_json(const nlohmann::json& j, const BpeTokenizer& base, const std::string& what);
};

// A conversation rendered: its ids, and for each id whether it is a target (see the top).
struct RenderedChat {
  std::vector<int64_t> ids;
  std::vector<bool> target;
};
RenderedChat render_chat(const std::vector<ChatMessage>& messages, const BpeTokenizer& base, const ChatTokens& tokens);

// The messages of one JSON value {"messages": [...]}; throws lathe::Error saying what is wrong.
std::vector<ChatMessage> parse_chat(const nlohmann::json& j);

// The base tokenizer with the four special tokens: ids past the base's decode to their names.
class ChatTokenizer final : public Tokenizer {
 public:
  explicit ChatTokenizer(const BpeTokenizer& base);
  int64_t vocab_size() const override { return tokens_.vocab_size(); }
  std::vector<int64_t> encode(std::string_view text) const override;
  std::string decode(const std::vector<int64_t>& ids) const override;
  // The base's identity (the template is lathe's, recorded with the weights); null for bytes, which
  // a run records as nothing.
  const TokenizerIdentity* identity() const override;
  const ChatTokens& tokens() const { return tokens_; }
  const BpeTokenizer& base() const { return *base_; }

 private:
  const BpeTokenizer* base_;
  ChatTokens tokens_;
};

class ConversationDataset final : public Dataset {
 public:
  // Reads `path` (JSONL, at most 256 MiB) and renders every conversation with `base`, which must
  // outlive the dataset. Throws lathe::Error naming the file when no conversation fits.
  ConversationDataset(const std::string& path, const BpeTokenizer& base, int64_t block_size);

  int64_t block_size() const override { return block_size_; }
  size_t split_size(Split s) const override;  // target tokens of the split
  Batch sample(Split s, int64_t batch, Generator& gen, Device device = Device::cpu()) const override;
  size_t stream_size() const override { return stream_size_; }
  double val_bytes_per_token() const override { return val_bytes_per_token_; }
  std::string describe() const override;
  const Tokenizer& tokenizer() const override { return tokenizer_; }
  const char* kind() const override { return "conversations"; }
  const char* unit() const override { return "tokens"; }
  std::string fingerprint() const override;

  const std::vector<SkippedItem>& skipped() const { return skipped_; }
  size_t conversations(Split s) const { return s == Split::train ? train_ : rows_.size() - train_; }

 private:
  std::string path_;
  ChatTokenizer tokenizer_;
  int64_t block_size_;
  std::vector<RenderedChat> rows_;  // in file order; the last ones are the validation split
  size_t train_ = 0;
  size_t stream_size_ = 0;  // tokens of all rows: a resume checks it
  double val_bytes_per_token_ = 1;
  std::vector<SkippedItem> skipped_;
  uint64_t checksum_ = 0;
};

}  // namespace lathe::data
