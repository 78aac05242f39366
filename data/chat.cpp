#include "data/chat.h"

#include <algorithm>

#include "core/error.h"
#include "core/json_value.h"
#include "data/json_lines.h"
#include "serialize/checksum.h"
#include "serialize/json_document.h"

namespace lathe::data {

namespace {

constexpr size_t kMaxConversationsBytes = size_t(256) << 20;

}  // namespace

const char* chat_role_name(ChatRole r) {
  switch (r) {
    case ChatRole::system: return "system";
    case ChatRole::user: return "user";
    case ChatRole::assistant: return "assistant";
  }
  return "?";
}

std::string chat_template_jinja() {
  return "{% for message in messages %}<|{{ message['role'] }}|>{{ message['content'] }}<|end|>{% endfor %}"
         "{% if add_generation_prompt %}<|assistant|>{% endif %}";
}

ChatTokens ChatTokens::after(const BpeTokenizer& base) {
  const int64_t first = int64_t(base.vocab_size());
  return {first, first + 1, first + 2, first + 3};
}

nlohmann::json ChatTokens::to_json() const {
  return {{"format", "lathe-chat"},
          {"version", kChatTemplateVersion},
          {"tokens", {{kChatTokenNames[0], system}, {kChatTokenNames[1], user}, {kChatTokenNames[2], assistant}, {kChatTokenNames[3], end}}}};
}

ChatTokens ChatTokens::from_json(const nlohmann::json& j, const BpeTokenizer& base, const std::string& what) {
  LATHE_CHECK(j.is_object() && j.value("format", "") == "lathe-chat", what, ": metadata \"chat_template\" is not ",
              "lathe's chat template");
  LATHE_CHECK(j.contains("version") && j["version"] == kChatTemplateVersion, what, ": chat template version ",
              quote_json(j.value("version", nlohmann::json())), " (this lathe knows version ", kChatTemplateVersion, ")");
  const ChatTokens want = after(base);
  LATHE_CHECK(j.contains("tokens") && j["tokens"] == want.to_json()["tokens"], what, ": the chat template's tokens ",
              quote_json(j.value("tokens", nlohmann::json())), " are not those of its tokenizer (",
              base.identity().describe(), ": ", quote_json(want.to_json()["tokens"]), ")");
  return want;
}

std::vector<ChatMessage> parse_chat(const nlohmann::json& j) {
  LATHE_CHECK(j.is_object() && j.contains("messages"), "not a conversation (an object with \"messages\")");
  const nlohmann::json& m = j["messages"];
  LATHE_CHECK(m.is_array() && !m.empty(), "\"messages\" must be a non-empty array, got ", quote_json(m));
  std::vector<ChatMessage> out;
  bool answered = false;
  for (size_t i = 0; i < m.size(); ++i) {
    LATHE_CHECK(m[i].is_object() && m[i].contains("role") && m[i].contains("content"), "message ", i,
                " must be {\"role\", \"content\"}, got ", quote_json(m[i]));
    const nlohmann::json& role = m[i]["role"];
    ChatRole r;
    if (role == "system") r = ChatRole::system;
    else if (role == "user") r = ChatRole::user;
    else if (role == "assistant") r = ChatRole::assistant;
    else LATHE_FAIL("message ", i, ": role must be \"system\", \"user\" or \"assistant\", got ", quote_json(role));
    LATHE_CHECK(r != ChatRole::system || i == 0, "message ", i, ": a system message may only come first");
    LATHE_CHECK(m[i]["content"].is_string(), "message ", i, ": content must be a string, got ",
                quote_json(m[i]["content"]));
    answered = answered || r == ChatRole::assistant;
    out.push_back({r, m[i]["content"].get<std::string>()});
  }
  LATHE_CHECK(answered, "no assistant message: nothing to train on");
  return out;
}

RenderedChat render_chat(const std::vector<ChatMessage>& messages, const BpeTokenizer& base, const ChatTokens& tokens) {
  RenderedChat out;
  auto push = [&](int64_t id, bool target) {
    out.ids.push_back(id);
    out.target.push_back(target);
  };
  for (const ChatMessage& m : messages) {
    const bool assistant = m.role == ChatRole::assistant;
    push(tokens.role(m.role), false);
    for (uint32_t id : base.encode(m.content)) push(int64_t(id), assistant);
    push(tokens.end, assistant);
  }
  return out;
}

ChatTokenizer::ChatTokenizer(const BpeTokenizer& base) : base_(&base), tokens_(ChatTokens::after(base)) {}

std::vector<int64_t> ChatTokenizer::encode(std::string_view text) const {
  std::vector<int64_t> out;
  for (uint32_t id : base_->encode(text)) out.push_back(int64_t(id));
  return out;
}

std::string ChatTokenizer::decode(const std::vector<int64_t>& ids) const {
  std::string out;
  std::vector<uint32_t> run;  // ids of the base, decoded together
  auto flush = [&] {
    out += base_->decode(run);
    run.clear();
  };
  for (size_t i = 0; i < ids.size(); ++i) {
    const int64_t id = ids[i];
    if (id >= tokens_.system && id <= tokens_.end) {
      flush();
      out += kChatTokenNames[id - tokens_.system];
    } else {
      LATHE_CHECK(id >= 0 && id < int64_t(base_->vocab_size()), "decode: id ", id, " at position ", i,
                  " is outside the chat tokenizer's ", vocab_size(), " ids");
      run.push_back(uint32_t(id));
    }
  }
  flush();
  return out;
}

const TokenizerIdentity* ChatTokenizer::identity() const {
  return base_->identity().kind == "bytes" ? nullptr : &base_->identity();
}

ConversationDataset::ConversationDataset(const std::string& path, const BpeTokenizer& base, int64_t block_size)
    : path_(path), tokenizer_(base), block_size_(block_size) {
  const std::string text = read_json_lines_file(path, "--sft", kMaxConversationsBytes);
  checksum_ = serialize::checksum_bytes(text.data(), text.size());
  for_each_json_line(
      text,
      [&](int64_t, const nlohmann::json& j) {
        RenderedChat r = render_chat(parse_chat(j), base, tokenizer_.tokens());
        LATHE_CHECK(int64_t(r.ids.size()) <= block_size_ + 1, "the conversation takes ", r.ids.size(),
                    " tokens, more than block_size + 1 = ", block_size_ + 1);
        rows_.push_back(std::move(r));
      },
      skipped_);
  LATHE_CHECK(!rows_.empty(), "--sft ", path, ": no conversation to train on",
              skipped_.empty() ? std::string(" (the file is empty)")
                               : "; line " + std::to_string(skipped_.front().line) + ": " + skipped_.front().reason);
  // The last 10% (at least one) for validation; a file of one conversation validates on it too.
  train_ = rows_.size() == 1 ? 1 : rows_.size() - std::max<size_t>(1, rows_.size() / 10);
  size_t val_targets = 0, val_bytes = 0;
  for (size_t i = 0; i < rows_.size(); ++i) {
    stream_size_ += rows_[i].ids.size();
    if (i < train_ && rows_.size() > 1) continue;
    for (size_t t = 0; t < rows_[i].ids.size(); ++t) {
      if (!rows_[i].target[t]) continue;
      ++val_targets;
      val_bytes += rows_[i].ids[t] < int64_t(base.vocab_size()) ? base.token_length(uint32_t(rows_[i].ids[t])) : 0;
    }
  }
  val_bytes_per_token_ = val_targets > 0 && val_bytes > 0 ? double(val_bytes) / double(val_targets) : 1.0;
}

size_t ConversationDataset::split_size(Split s) const {
  size_t n = 0;
  const size_t begin = s == Split::train || rows_.size() == 1 ? 0 : train_;
  const size_t end = s == Split::train ? train_ : rows_.size();
  for (size_t i = begin; i < end; ++i) n += size_t(std::count(rows_[i].target.begin(), rows_[i].target.end(), true));
  return n;
}

Batch ConversationDataset::sample(Split s, int64_t batch, Generator& gen, Device device) const {
  LATHE_CHECK(batch > 0, "dataset: batch size must be positive, got ", batch);
  const size_t begin = s == Split::train || rows_.size() == 1 ? 0 : train_;
  const size_t n = (s == Split::train ? train_ : rows_.size()) - begin;
  const uint64_t first = gen.advance(uint64_t(batch));
  std::vector<const RenderedChat*> rows;
  int64_t T = 1;
  for (int64_t b = 0; b < batch; ++b) {
    rows.push_back(&rows_[begin + size_t(philox_below(gen.seed(), first + uint64_t(b), n))]);
    T = std::max<int64_t>(T, int64_t(rows.back()->ids.size()) - 1);
  }
  const int64_t pad = tokenizer_.tokens().end;
  std::vector<int64_t> x(size_t(batch * T), pad), y(size_t(batch * T), -1);
  for (int64_t b = 0; b < batch; ++b) {
    const RenderedChat& r = *rows[size_t(b)];
    for (size_t t = 0; t + 1 < r.ids.size(); ++t) {
      x[size_t(b * T) + t] = r.ids[t];
      if (r.target[t + 1]) y[size_t(b * T) + t] = r.ids[t + 1];
    }
  }
  return {Tensor::from_vector(x, {batch, T}, device), Tensor::from_vector(y, {batch, T}, device)};
}

std::string ConversationDataset::describe() const {
  return "conversations " + path_ + ": " + std::to_string(rows_.size()) + " (train " + std::to_string(train_) +
         ", val " + std::to_string(conversations(Split::val)) + "; " + std::to_string(skipped_.size()) +
         " skipped), " + std::to_string(stream_size_) + " tokens, the loss on the assistant's " +
         std::to_string(split_size(Split::train)) + " (lathe's chat template " + std::to_string(kChatTemplateVersion) +
         ")";
}

std::string ConversationDataset::fingerprint() const {
  return "conversations of " + std::to_string(stream_size_) + " tokens, file checksum " +
         serialize::checksum_hex(checksum_);
}

}  // namespace lathe::data
