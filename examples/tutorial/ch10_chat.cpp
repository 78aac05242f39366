// Chapter 10 of the tutorial (docs/tutorial/10-chat.md): from a pretrained model to a chat --
// the chat template, supervised fine-tuning on conversations with the loss on the assistant's
// turns only, and a conversation with the result.
//
// Run it with the main job's model (`bash tools/main.sh` leaves runs/fortunes/model.safetensors):
//   ch10_chat runs/fortunes/model.safetensors
// Without an argument (as the chapter's check runs it) it first pretrains a small stand-in on the
// same corpus, in seconds. What depends on the machine's arithmetic -- the losses, the words of a
// reply after its taught opening -- goes to standard error, which the check does not compare.
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <string>
#include <unistd.h>

#include "data/chat.h"
#include "data/model_tokenizer.h"
#include "serialize/model_file.h"
#include "train/chat_session.h"
#include "train/trainer.h"
#include "tutorial.h"

using namespace lathe;
namespace fs = std::filesystem;

// [tutorial:steps]
// Runs `steps` optimizer steps of `trainer`; the loss now and then to standard error.
void train_for(train::Trainer& trainer, int64_t steps) {
  for (int64_t i = 1; i <= steps; ++i) {
    const train::StepResult r = trainer.train_step();
    if (i % 100 == 0 || i == steps) std::fprintf(stderr, "  step %4lld  loss %.3f\n", (long long)i, r.loss);
  }
}
// [/tutorial:steps]

// A stand-in for the main job's model: 2 layers, pretrained for 400 steps on the fortunes corpus.
std::string pretrain_stand_in(const fs::path& dir) {
  tutorial::part("pretrain");
  // [tutorial:pretrain]
  const std::string config = (dir / "stand_in.json").string();
  std::FILE* f = std::fopen(config.c_str(), "w");
  std::fputs(R"({"vocab_size": 256, "block_size": 128, "n_layer": 2, "n_head": 2, "n_embd": 64})", f);
  std::fclose(f);
  train::TrainOptions o;  // the corpus of the main job: data = /usr/share/games/fortunes
  o.config = config, o.steps = 400, o.batch = 16, o.lr = 3e-3, o.warmup = 40;
  train::Trainer trainer(o);
  std::printf("a stand-in: %lld parameters, block_size %lld, %lld steps on %s\n",
              (long long)trainer.state().model->config().parameter_count(),
              (long long)trainer.state().model->config().block_size,
              (long long)o.steps, o.data.c_str());
  train_for(trainer, o.steps);
  const std::string weights = (dir / "stand_in.safetensors").string();
  trainer.save_weights(weights);
  // [/tutorial:pretrain]
  return weights;
}

int main(int argc, char** argv) {
  const fs::path dir = fs::temp_directory_path() / ("lathe_ch10_" + std::to_string(::getpid()));
  fs::create_directories(dir);

  tutorial::part("template");
  // [tutorial:template]
  const data::BpeTokenizer bytes = data::load_tokenizer("bytes");  // the main job's tokenizer
  const data::ChatTokens chat = data::ChatTokens::after(bytes);
  std::printf("<|system|> %lld  <|user|> %lld  <|assistant|> %lld  <|end|> %lld\n", (long long)chat.system,
              (long long)chat.user, (long long)chat.assistant, (long long)chat.end);
  const data::RenderedChat r =
      data::render_chat({{data::ChatRole::user, "Hi."}, {data::ChatRole::assistant, "Hello!"}}, bytes, chat);
  const data::ChatTokenizer tok(bytes);
  std::cout << tok.decode(r.ids) << "\n";
  // What a training row holds: x the ids, y the next id where it is a target and -1 elsewhere.
  std::printf("%-14s", "x");
  for (size_t i = 0; i + 1 < r.ids.size(); ++i) std::printf("%4lld", (long long)r.ids[i]);
  std::printf("\n%-14s", "y");
  for (size_t i = 1; i < r.ids.size(); ++i) std::printf("%4lld", r.target[i] ? (long long)r.ids[i] : -1LL);
  std::printf("\n");
  // [/tutorial:template]

  const std::string base = argc > 1 ? argv[1] : pretrain_stand_in(dir);

  tutorial::part("sft");
  // [tutorial:sft]
  train::TrainOptions o;
  o.init_from = base;  // the model, its weights and its tokenizer
  o.sft = LATHE_TUTORIAL_DIR "/../data/chat_sft.jsonl";
  o.config = "";       // the model is the file's
  o.steps = 300, o.batch = 16, o.lr = 3e-3, o.warmup = 40;
  train::Trainer trainer(o);
  const auto& conversations = static_cast<const data::ConversationDataset&>(trainer.data());
  std::printf("conversations: %zu to train on, %zu to validate, %zu skipped\n",
              conversations.conversations(data::Split::train), conversations.conversations(data::Split::val),
              conversations.skipped().size());
  std::printf("vocab_size %lld: the chat tokens added\n", (long long)trainer.state().model->config().vocab_size);
  std::fprintf(stderr, "validation loss before: %.3f\n", trainer.evaluate(data::Split::val));
  train_for(trainer, o.steps);
  std::fprintf(stderr, "validation loss after: %.3f\n", trainer.evaluate(data::Split::val));
  const std::string tuned = (dir / "chat.safetensors").string();
  trainer.save_weights(tuned);  // records the chat template with the weights
  // [/tutorial:sft]

  tutorial::part("chat");
  // [tutorial:chat]
  serialize::LoadedModel model = serialize::load_model(tuned);
  nn::SamplingOptions greedy;
  greedy.temperature = 0;  // the most likely token, every time
  train::ChatSession session(model, data::model_tokenizer(model, tuned, ""), tuned, greedy);
  // Each reply's taught opening on standard output, the words after it (the model's own) on
  // standard error.
  auto ask = [&](const std::string& question) {
    const std::string reply = session.reply(question, /*max_tokens=*/100, /*seed=*/0);
    const size_t colon = reply.find(':');
    std::printf("> %s\n%s\n", question.c_str(), reply.substr(0, colon == std::string::npos ? reply.size() : colon + 1).c_str());
    std::fprintf(stderr, "> %s\n%s\n", question.c_str(), reply.c_str());
  };
  ask("Hi there.");
  ask("Say something wise.");  // the second turn: the model reads the first one too
  session.reset();
  std::printf("(reset)\n");
  ask("Give me a proverb.");
  // [/tutorial:chat]
  fs::remove_all(dir);
}
