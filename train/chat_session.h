// A conversation with a model fine-tuned by `lathe train --sft`: what `lathe chat` and the
// tutorial's last chapter talk through. It reads the chat template the weights record (data/chat.h),
// keeps the conversation so far, and answers a user's turn by rendering the conversation, appending
// <|assistant|> and sampling (GPT::generate, its KV cache within the turn) until the model emits
// <|end|> or the reply reaches max_tokens.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "data/chat.h"
#include "nn/sampling.h"
#include "serialize/model_file.h"

namespace lathe::train {

class ChatSession {
 public:
  // `loaded` (from load_model of `path`, which errors name) must outlive the session; `base` is
  // the tokenizer its weights take (data::model_tokenizer), which the session keeps. Throws lathe::Error naming `path` when the
  // weights record no chat template (a model never fine-tuned for chat) or one that does not fit
  // `base` or the model's vocabulary. `sampling` is validated (its vocab_limit is set to the chat
  // tokenizer's: the model's padded rows are never drawn).
  ChatSession(serialize::LoadedModel& loaded, data::BpeTokenizer base, const std::string& path,
              nn::SamplingOptions sampling, std::string system = {});

  // Called with each token's text as it is drawn (a byte-level token may hold part of a character).
  using TextCallback = std::function<void(const std::string& text)>;
  // The assistant's answer to `user`, added with it to the conversation. Turn n (from 0 since the
  // session began) samples with seed + n, so a session replays exactly.
  std::string reply(const std::string& user, int64_t max_tokens, uint64_t seed, const TextCallback& on_text = {});
  // Starts the conversation over (the system message kept).
  void reset();

  const std::vector<data::ChatMessage>& history() const { return history_; }
  const data::ChatTokenizer& tokenizer() const { return tokenizer_; }

 private:
  serialize::LoadedModel& loaded_;
  data::BpeTokenizer base_;
  data::ChatTokenizer tokenizer_;  // extends base_
  nn::SamplingOptions sampling_;
  std::vector<data::ChatMessage> history_;
  size_t kept_ = 0;     // the system message, kept by reset()
  uint64_t turn_ = 0;
};

}  // namespace lathe::train
