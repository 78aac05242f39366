#include "train/chat_session.h"

#include "serialize/json_document.h"

namespace lathe::train {

namespace {

// The chat tokens the weights at `path` record, checked against `base` and the model's vocabulary.
data::ChatTokens recorded_chat_tokens(const serialize::LoadedModel& loaded, const data::BpeTokenizer& base, const std::string& path) {
  const auto recorded = loaded.metadata.find("chat_template");
  LATHE_CHECK(recorded != loaded.metadata.end(), path, ": the model was not fine-tuned for chat (its weights record ",
              "no chat template); fine-tune it with lathe train --init-from ", path, " --sft FILE");
  const data::ChatTokens tokens = data::ChatTokens::from_json(
      serialize::parse_json_document(recorded->second, path + ": metadata \"chat_template\""), base, path);
  LATHE_CHECK(loaded.model->config().vocab_size >= tokens.vocab_size(), path, ": vocab_size ",
              loaded.model->config().vocab_size, " does not hold the chat tokens (ids up to ", tokens.end, ")");
  return tokens;
}

}  // namespace

ChatSession::ChatSession(serialize::LoadedModel& loaded, data::BpeTokenizer base, const std::string& path,
                         nn::SamplingOptions sampling, std::string system)
    : loaded_(loaded), base_(std::move(base)), tokenizer_(base_), sampling_(sampling) {
  LATHE_CHECK(recorded_chat_tokens(loaded, base_, path).end == tokenizer_.tokens().end, path,
              ": the chat tokens it records are not those of its tokenizer");
  sampling_.vocab_limit = tokenizer_.vocab_size();
  sampling_.validate();
  if (!system.empty()) history_.push_back({data::ChatRole::system, std::move(system)});
  kept_ = history_.size();
}

std::string ChatSession::reply(const std::string& user, int64_t max_tokens, uint64_t seed, const TextCallback& on_text) {
  LATHE_CHECK(max_tokens >= 1, "a reply of at least one token, got max_tokens ", max_tokens);
  const data::ChatTokens& t = tokenizer_.tokens();
  history_.push_back({data::ChatRole::user, user});
  // The conversation so far, then the assistant's role token: the model answers from there.
  std::vector<int64_t> ids = data::render_chat(history_, tokenizer_.base(), t).ids;
  ids.push_back(t.assistant);
  const Tensor idx = Tensor::from_vector(ids, {1, int64_t(ids.size())}, loaded_.model->device());
  std::vector<int64_t> answer;
  loaded_.model->generate(idx, max_tokens, sampling_, seed + turn_++, /*use_cache=*/true,
                          [&](const std::vector<int64_t>& next) {
                            if (next[0] == t.end) return false;
                            answer.push_back(next[0]);
                            if (on_text) on_text(tokenizer_.decode({next[0]}));
                            return true;
                          });
  std::string text = tokenizer_.decode(answer);
  history_.push_back({data::ChatRole::assistant, text});
  return text;
}

void ChatSession::reset() {
  history_.resize(kept_);
}

}  // namespace lathe::train
