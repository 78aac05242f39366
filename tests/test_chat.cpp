// Supervised fine-tuning and the chat (data/chat.h, lathe train --sft, lathe chat): the template's
// ids against a written expectation, the mask (a token outside the assistant's turns changes no
// gradient), the vocabulary grown by the chat tokens, bitwise resume, and the command.
#include <doctest/doctest.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "core/autograd.h"
#include "data/chat.h"
#include "nn/gpt.h"
#include "serialize/model_file.h"
#include "tests/core_test_util.h"
#include "tests/temp_dir.h"
#include "tests/test_helpers.h"

using namespace lathe;
using lathe::testing::error_of;
using lathe::testing::run_lathe;
using lathe::testing::TempDir;

namespace {

// The gradient of the loss of one batch of `ds` (rows drawn with seed 1) with respect to every parameter.
std::vector<std::vector<float>> gradients(const data::ConversationDataset& ds) {
  nn::GPT model(nn::GPTConfig{261, 32, 1, 2, 16}, 5);
  Generator gen(1);
  const data::Batch b = ds.sample(data::Split::train, 2, gen);
  model.loss(b.x, b.y).backward();
  std::vector<std::vector<float>> out;
  for (const auto& [name, p] : model.named_parameters()) out.push_back(p.grad().to_vector<float>());
  return out;
}

}  // namespace

TEST_CASE("chat: the template renders a conversation to the written ids, the assistant's content and end the targets") {
  const data::BpeTokenizer bytes = data::load_tokenizer("bytes");  // 256 bytes, end-of-text 256
  const data::ChatTokens t = data::ChatTokens::after(bytes);
  CHECK(t.system == 257);
  CHECK(t.user == 258);
  CHECK(t.assistant == 259);
  CHECK(t.end == 260);
  const data::RenderedChat r = data::render_chat(
      {{data::ChatRole::system, "Hi"}, {data::ChatRole::user, "ab"}, {data::ChatRole::assistant, "c"}}, bytes, t);
  CHECK(r.ids == std::vector<int64_t>{257, 'H', 'i', 260, 258, 'a', 'b', 260, 259, 'c', 260});
  CHECK(r.target == std::vector<bool>{false, false, false, false, false, false, false, false, false, true, true});
  // Special-token text in a content is text.
  const data::RenderedChat s = data::render_chat({{data::ChatRole::assistant, "<|end|>"}}, bytes, t);
  CHECK(s.ids.size() == 1 + 7 + 1);
  const data::ChatTokenizer tok(bytes);
  CHECK(tok.decode(r.ids) == "<|system|>Hi<|end|><|user|>ab<|end|><|assistant|>c<|end|>");
  CHECK(tok.vocab_size() == 261);
  // Conversations the template cannot render are named.
  auto refused = [](const std::string& j) { return error_of([&] { data::parse_chat(nlohmann::json::parse(j)); }); };
  CHECK(refused(R"({"messages": [{"role": "user", "content": "hi"}]})").find("no assistant message") != std::string::npos);
  CHECK(refused(R"({"messages": [{"role": "user", "content": "a"}, {"role": "system", "content": "b"}, {"role": "assistant", "content": "c"}]})")
            .find("a system message may only come first") != std::string::npos);
  CHECK(refused(R"({"messages": [{"role": "bot", "content": "a"}]})").find("role must be") != std::string::npos);
  CHECK(refused(R"({"messages": [{"role": "user", "content": 3}]})").find("content must be a string") != std::string::npos);
}

TEST_CASE("chat: a token outside the assistant's turns changes no gradient, one inside does") {
  TempDir d("chat_mask");
  const data::BpeTokenizer bytes = data::load_tokenizer("bytes");
  // The user's turn after the assistant's: the model is causal, so it is no context of anything
  // trained, and only the mask keeps it from being trained on itself.
  auto grads_of = [&](const std::string& assistant, const std::string& user) {
    const std::string path = d.write("c.jsonl", R"({"messages": [{"role": "assistant", "content": ")" + assistant +
                                                    R"("}, {"role": "user", "content": ")" + user + R"("}]})" "\n");
    return gradients(data::ConversationDataset(path, bytes, 32));
  };
  const auto base = grads_of("yes", "what?");
  CHECK(grads_of("yes", "why not?") == base);  // bitwise
  CHECK(grads_of("yes!", "what?") != base);
}

TEST_CASE("chat: --sft grows the vocabulary by the chat tokens from the mean row, resumes bitwise, and the chat answers") {
  TempDir d("chat_sft");
  std::string text;
  for (int i = 0; i < 60; ++i) text += "the quick brown fox " + std::to_string(i) + " jumps over the lazy dog. ";
  d.write("corpus.txt", text);
  const std::string quick = " --batch 4 --eval-iters 1 --eval-interval 0 --sample-tokens 0 --quiet --threads 1";
  REQUIRE(run_lathe("train --data " + d.file("corpus.txt") + " --config tiny --steps 3 --out " + d.file("base") + quick).code == 0);
  std::string chats;
  for (int i = 0; i < 12; ++i)
    chats += R"({"messages": [{"role": "user", "content": "Say )" + std::to_string(i) +
             R"(."}, {"role": "assistant", "content": "Here is )" + std::to_string(i) + R"(."}]})" "\n";
  chats += "not a conversation\n";
  d.write("chats.jsonl", chats);
  const std::string sft = " --init-from " + d.file("base/model.safetensors") + " --sft " + d.file("chats.jsonl") + quick;
  lathe::testing::Run r = run_lathe("train" + sft + " --steps 4 --ckpt-interval 2 --out " + d.file("whole"));
  REQUIRE_MESSAGE(r.code == 0, r.output);
  CHECK(r.output.find("line 13 skipped") != std::string::npos);
  // The vocabulary: 256 bytes, end-of-text 256 (new), the four chat tokens; the new rows and the chat
  // tokens' begin as the mean of the bytes' rows, the bytes' as they were.
  const serialize::LoadedModel base = serialize::load_model(d.file("base/model.safetensors"));
  REQUIRE(run_lathe("train" + sft + " --steps 1 --lr 1e-12 --weight-decay 0 --out " + d.file("first")).code == 0);
  const serialize::LoadedModel first = serialize::load_model(d.file("first/model.safetensors"));
  CHECK(first.model->config().vocab_size == 261);
  CHECK(first.metadata.count("chat_template") == 1);
  NoGradGuard no_grad;
  const Tensor wte0 = base.model->transformer.wte.weight, wte1 = first.model->transformer.wte.weight;
  const Tensor mean = lathe::mean(wte0, {0}, true);
  for (int64_t id = 256; id < 261; ++id)
    CHECK(core_test::compare(wte1.narrow(0, id, 1), mean, 1e-6, 1e-9).empty());
  CHECK(core_test::compare(wte1.narrow(0, 0, 256), wte0, 1e-6, 1e-9).empty());
  // Resumed from its checkpoint at step 2: the same run, bit for bit.
  r = run_lathe("train --resume " + d.file("whole/ckpt-00000002.safetensors") + " --out " + d.file("halves") +
                " --quiet --sample-tokens 0");
  REQUIRE_MESSAGE(r.code == 0, r.output);
  const serialize::LoadedModel whole = serialize::load_model(d.file("whole/ckpt-00000004.safetensors"));
  const serialize::LoadedModel halves = serialize::load_model(d.file("halves/ckpt-00000004.safetensors"));
  const nn::NamedTensors a = whole.model->state_dict(), b = halves.model->state_dict();
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) CHECK_MESSAGE(core_test::same_bits(a[i].second, b[i].second), a[i].first);
  // The chat: one line per turn from piped input, /reset, and a model never fine-tuned refused.
  r = run_lathe("chat --checkpoint " + d.file("whole/model.safetensors") + " --temperature 0 --max-tokens 12 < " +
                d.write("in.txt", "Say 3.\n/reset\nSay 4.\n/quit\nSay 5.\n"));
  CHECK(r.code == 0);
  CHECK(std::count(r.output.begin(), r.output.end(), '\n') == 2);
  r = run_lathe("chat --checkpoint " + d.file("base/model.safetensors") + " < " + d.file("in.txt"));
  CHECK(r.code == 1);
  CHECK(r.output.find("was not fine-tuned for chat") != std::string::npos);
  // A copy by lathe convert is a chat model too.
  REQUIRE(run_lathe("convert " + d.file("whole/model.safetensors") + " " + d.file("copy.safetensors")).code == 0);
  CHECK(serialize::load_model(d.file("copy.safetensors")).metadata.count("chat_template") == 1);
  CHECK(run_lathe("train --sft " + d.file("chats.jsonl") + " --data " + d.file("corpus.txt") + quick).code == 2);
  CHECK(run_lathe("train --sft " + d.file("chats.jsonl") + quick + " --out " + d.file("noinit")).output.find(
            "--sft fine-tunes a trained model") != std::string::npos);
}
