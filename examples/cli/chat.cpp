// lathe chat --checkpoint MODEL: a conversation in the terminal with a model fine-tuned by
// `lathe train --sft` (data/chat.h has the template, train/chat_session.h the conversation). Each
// line read is the user's turn, and the reply is printed token by token as it is drawn, until the
// model emits <|end|> or --max-tokens. /reset starts over, /quit (or the end of the input) ends it.
// On a terminal a "> " prompt asks for each line; with piped input there is no prompt, and each
// reply is one line (a newline in it written as \n), so that a script reads one line per question.
#include <unistd.h>

#include <cstdio>
#include <iostream>

#include "data/model_tokenizer.h"
#include "examples/cli/commands.h"
#include "nn/precision.h"
#include "train/chat_session.h"

namespace lathe::cli {

namespace {

struct ChatOptions {
  std::string checkpoint, tokenizer, system;
  double temperature = 0.8;
  int64_t top_k = 0;
  double top_p = 1.0, min_p = 0.0, repetition_penalty = 1.0;
  int64_t repetition_window = 0;
  int64_t max_tokens = 256;
  uint64_t seed = 0;
  std::string device = "cpu";
  std::string precision = "f32";
};

void run_chat(const ChatOptions& o) {
  const nn::SamplingOptions sampling = sampling_from_flags(o);
  if (o.max_tokens < 1 || o.max_tokens > 100000)
    throw UsageError("--max-tokens must be in [1, 100000], got " + std::to_string(o.max_tokens));
  Device device;
  nn::Precision precision = nn::Precision::f32;
  try {
    device = Device::parse(o.device);
    precision = nn::parse_precision(o.precision, "--precision");
  } catch (const Error& e) {
    throw UsageError(e.what());
  }
  serialize::LoadedModel loaded = serialize::load_model(o.checkpoint, device);
  loaded.model->set_precision(precision);
  train::ChatSession session(loaded, data::model_tokenizer(loaded, o.checkpoint, o.tokenizer), o.checkpoint, sampling,
                             o.system);

  const bool terminal = ::isatty(0) != 0;
  std::string line;
  while (true) {
    if (terminal) {
      std::fputs("> ", stdout);
      std::fflush(stdout);
    }
    if (!std::getline(std::cin, line)) break;
    if (line == "/quit") break;
    if (line == "/reset") {
      session.reset();
      if (terminal) std::puts("(the conversation starts over)");
      continue;
    }
    session.reply(line, o.max_tokens, o.seed, [&](std::string text) {
      if (!terminal)  // one line per reply for a script: a newline in it is written as \n
        for (size_t at = text.find('\n'); at != std::string::npos; at = text.find('\n', at + 2)) text.replace(at, 1, "\\n");
      std::fwrite(text.data(), 1, text.size(), stdout);
      std::fflush(stdout);
    });
    std::fputc('\n', stdout);
    std::fflush(stdout);
  }
}

}  // namespace

void add_chat_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("chat", "Talk with a model fine-tuned by `lathe train --sft` (a line is a turn)");
  cmd->footer(
      "Reads the user's turns from standard input, a line each, and prints each reply as it is drawn.\n"
      "/reset starts the conversation over, /quit ends it. With piped input there is no prompt and each\n"
      "reply is one line. Example:\n"
      "  printf 'Tell me a proverb.\\n' | lathe chat --checkpoint runs/chat/model.safetensors --temperature 0");
  auto o = std::make_shared<ChatOptions>();
  cmd->add_option("--checkpoint", o->checkpoint, "the fine-tuned model (model.safetensors or a checkpoint of lathe train --sft)")
      ->required();
  cmd->add_option("--system", o->system, "a system message to begin the conversation with");
  cmd->add_option("--temperature", o->temperature, "softmax temperature; 0 takes the most likely token")
      ->capture_default_str();
  cmd->add_option("--top-k", o->top_k, "draw among the k most likely tokens; 0: all")->capture_default_str();
  add_sampling_flags(*cmd, o->top_p, o->min_p, o->repetition_penalty, o->repetition_window);
  cmd->add_option("--max-tokens", o->max_tokens, "the longest reply, in tokens")->capture_default_str();
  cmd->add_option("--seed", o->seed, "random seed of the sampler (each turn draws from seed + its number)")
      ->capture_default_str();
  cmd->add_option("--tokenizer", o->tokenizer, "the tokenizer, in place of the one the weights record");
  cmd->add_option("--device", o->device, "cpu, sim or cuda[:N]")->capture_default_str();
  cmd->add_option("--precision", o->precision, "f32, bf16 or fp16")->capture_default_str();
  cmd->callback([o] { run_chat(*o); });
}

}  // namespace lathe::cli
