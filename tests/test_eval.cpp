// lathe eval: multiple-choice items read in both forms (bad lines skipped by line), scored as llm.c
// scores HellaSwag, batched with padding exactly as each ending alone scores; bits per byte; the
// command. (Against the PyTorch reference model: tools/torch_eval_reference.py, ctest
// eval.torch_scores, skipped without PyTorch.)
#include <doctest/doctest.h>

#include <cmath>
#include <string>

#include "core/autograd.h"
#include "core/ops.h"
#include "data/bpe_tokenizer.h"
#include "data/multiple_choice.h"
#include "tests/temp_dir.h"
#include "tests/test_helpers.h"
#include "train/evaluation.h"

using namespace lathe;
using lathe::testing::error_of;
using lathe::testing::TempDir;

namespace {

nn::GPTConfig eval_config() { return nn::GPTConfig{256, 32, 2, 2, 16}; }

// log p(ending | context) summed over the ending's tokens, from the model's forward of the one
// sequence alone and lathe's log_softmax: the definition, without batching or padding.
double direct_sum(nn::GPT& model, const data::Tokenizer& tok, const std::string& context, const std::string& ending) {
  NoGradGuard no_grad;
  std::vector<int64_t> ids = tok.encode(context);
  const size_t first = ids.size();
  for (int64_t id : tok.encode(" " + ending)) ids.push_back(id);
  const Tensor x = Tensor::from_vector(ids, {1, int64_t(ids.size())});
  const std::vector<double> lp = log_softmax(model.forward(x).logits, -1).to_vector<double>();
  double sum = 0;
  for (size_t t = first; t < ids.size(); ++t) sum += lp[(t - 1) * 256 + size_t(ids[t])];
  return sum;
}

}  // namespace

TEST_CASE("eval: multiple-choice items in HellaSwag's form and the generic one, a bad line skipped by its number") {
  TempDir d("eval_items");
  const std::string path = d.write("mc.jsonl",
                                   R"({"ctx": "A man sits", "endings": ["down.", "up.", "away.", "out."], "label": "2", "split": "val"})" "\n"
                                   "\n"
                                   R"({"context": "The cat", "choices": ["sat.", "flew."], "answer": 0})" "\n"
                                   R"({"context": "The cat", "choices": ["sat.", "flew."], "answer": 2})" "\n"
                                   R"({"context": "The cat", "choices": ["sat.", ""], "answer": 0})" "\n"
                                   R"({"context": "The cat", "choices": ["sat."], "answer": 0})" "\n"
                                   "not json\n"
                                   R"({"ctx": "", "endings": ["a", "b"], "label": 0})" "\n"
                                   R"({"prompt": "x"})" "\n");
  const data::MultipleChoiceSet set = data::read_multiple_choice(path);
  REQUIRE(set.items.size() == 2);
  CHECK(set.items[0].line == 1);
  CHECK(set.items[0].label == 2);  // "2", as HellaSwag's files write it
  CHECK(set.items[0].endings.size() == 4);
  CHECK(set.items[1].line == 3);
  CHECK(set.items[1].context == "The cat");
  REQUIRE(set.skipped.size() == 6);
  CHECK(set.skipped[0].line == 4);
  CHECK(set.skipped[0].reason == "\"answer\" (2 endings) must be an integer from 0 to 1, got 2");
  CHECK(set.skipped[1].reason == "ending 1 must be a non-empty string, got \"\"");
  CHECK(set.skipped[2].reason.find("must list at least two endings") != std::string::npos);
  CHECK(set.skipped[3].reason.find("not valid JSON") != std::string::npos);
  CHECK(set.skipped[4].reason == "\"ctx\" is empty");
  CHECK(set.skipped[5].reason.find("no \"context\"") != std::string::npos);
  const std::string bad = d.write("bad.jsonl", "[]\n");
  CHECK(error_of([&] { data::read_multiple_choice(bad); }).find("bad.jsonl: no valid item; line 1: not a JSON object") !=
        std::string::npos);
}

TEST_CASE("eval: batched scores are each ending alone, sum and mean pick the answers, too long is skipped") {
  nn::GPT model(eval_config(), 3);
  const data::BpeTokenizer bytes = data::load_tokenizer("bytes");
  const data::BpeTokenizerView tok(bytes);
  data::MultipleChoiceSet set;
  const std::vector<std::pair<std::string, std::vector<std::string>>> items = {
      {"The early bird", {"catches the worm.", "sings.", "x"}},
      {"Once", {"upon a time", "more"}},
      {"A", {"b", "cd", "efg", "hijk", "lmnop"}},
      {std::string(30, 'z'), {"too long for a context of 32"}}};
  int64_t line = 1;
  for (const auto& [context, endings] : items) set.items.push_back({line++, context, endings, 1});
  for (int64_t batch : {1, 3, 64}) {
    INFO("batch ", batch);
    const train::MultipleChoiceResult r = train::evaluate_multiple_choice(model, tok, set, batch);
    REQUIRE(r.items.size() == 3);
    REQUIRE(r.skipped.size() == 1);
    CHECK(r.skipped[0].line == 4);
    CHECK(r.skipped[0].reason.find("more than the model's block_size 32") != std::string::npos);
    int64_t correct = 0, correct_norm = 0;
    for (size_t i = 0; i < 3; ++i) {
      const auto& [context, endings] = items[i];
      std::vector<double> sums, means;
      for (size_t e = 0; e < endings.size(); ++e) {
        const double want = direct_sum(model, tok, context, endings[e]);
        const train::EndingScore& got = r.items[i].endings[e];
        CHECK(got.tokens == int64_t(endings[e].size()) + 1);  // " " + ending, a byte each
        CHECK(std::abs(got.sum_logprob - want) <= 1e-5 * std::abs(want));
        CHECK(std::abs(got.mean_logprob - got.sum_logprob / double(got.tokens)) <= 1e-12);
        sums.push_back(got.sum_logprob);
        means.push_back(got.mean_logprob);
      }
      const int64_t pred = int64_t(std::max_element(sums.begin(), sums.end()) - sums.begin());
      const int64_t pred_norm = int64_t(std::max_element(means.begin(), means.end()) - means.begin());
      CHECK(r.items[i].pred == pred);
      CHECK(r.items[i].pred_norm == pred_norm);
      correct += pred == 1;
      correct_norm += pred_norm == 1;
    }
    CHECK(r.accuracy == double(correct) / 3);
    CHECK(r.accuracy_norm == double(correct_norm) / 3);
  }
  data::MultipleChoiceSet none;
  none.items.push_back({1, std::string(40, 'q'), {"a", "b"}, 0});
  CHECK(error_of([&] { train::evaluate_multiple_choice(model, tok, none, 8); }).find("no item fits the model") !=
        std::string::npos);
}

TEST_CASE("eval: bits per byte sums each token's cross-entropy once, over windows of block_size") {
  nn::GPT model(eval_config(), 5);
  const data::BpeTokenizer bytes = data::load_tokenizer("bytes");
  const data::BpeTokenizerView tok(bytes);
  std::string text;
  for (int i = 0; i < 9; ++i) text += "the quick brown fox " + std::to_string(i) + ". ";  // 3 windows and a bit
  // The definition: windows of 33 bytes overlapping by one, each predicting its last 32.
  double nats = 0;
  {
    NoGradGuard no_grad;
    for (size_t start = 0; start + 1 < text.size(); start += 32) {
      const size_t n = std::min<size_t>(32, text.size() - 1 - start);
      std::vector<int64_t> x, y;
      for (size_t t = 0; t < n; ++t) {
        x.push_back((unsigned char)text[start + t]);
        y.push_back((unsigned char)text[start + t + 1]);
      }
      nats += model.loss(Tensor::from_vector(x, {1, int64_t(n)}), Tensor::from_vector(y, {1, int64_t(n)})).item() *
              double(n);
    }
  }
  for (int64_t batch : {1, 2, 16}) {
    const train::BitsPerByte b = train::evaluate_bits_per_byte(model, tok, text, batch);
    CHECK(b.tokens == int64_t(text.size()) - 1);
    CHECK(b.bytes == int64_t(text.size()) - 1);
    CHECK(std::abs(b.bits_per_byte - nats / std::log(2.0) / double(text.size() - 1)) <= 1e-6 * b.bits_per_byte);
  }
  CHECK(error_of([&] { train::evaluate_bits_per_byte(model, tok, "a", 4); }).find("at least two are needed") !=
        std::string::npos);
}

TEST_CASE("eval: the command prints one JSON line, writes each item, and names what it refuses") {
  TempDir d("eval_cli");
  std::string text;
  for (int i = 0; i < 40; ++i) text += "the quick brown fox jumps over the lazy dog. ";
  d.write("corpus.txt", text);
  REQUIRE(lathe::testing::run_lathe("train --data " + d.file("corpus.txt") + " --config tiny --steps 2 --batch 2 "
                                    "--eval-iters 1 --sample-tokens 0 --quiet --out " + d.file("run")).code == 0);
  d.write("mc.jsonl", R"({"context": "the quick brown", "choices": ["fox", "xof"], "answer": 0})" "\n"
                      R"({"context": "the lazy", "choices": ["god", "dog"], "answer": 1})" "\n"
                      R"({"context": "the", "choices": ["x"], "answer": 0})" "\n");
  const std::string model = d.file("run/model.safetensors");
  lathe::testing::Run r = lathe::testing::run_lathe("eval --checkpoint " + model + " --mc " + d.file("mc.jsonl") +
                                                    " --text " + d.file("corpus.txt") + " --json --out " +
                                                    d.file("items.jsonl"));
  REQUIRE(r.code == 0);
  // The one line on stdout (the progress and notes go to stderr, which run_lathe mixes in).
  const size_t brace = r.output.find("{\"");
  REQUIRE(brace != std::string::npos);
  const nlohmann::json j = nlohmann::json::parse(r.output.substr(brace, r.output.find('\n', brace) - brace));
  CHECK(j["items"] == 2);
  CHECK(j["skipped"] == 1);
  CHECK(j.contains("accuracy"));
  CHECK(j.contains("accuracy_norm"));
  CHECK(j["bits_per_byte"].get<double>() > 0);
  const auto lines = lathe::testing::read_jsonl(d.file("items.jsonl"));
  REQUIRE(lines.size() == 2);
  CHECK(lines[1]["line"] == 2);
  CHECK(lines[1]["sum_logprob"].size() == 2);
  // A line skipped is said on stderr, by its number.
  r = lathe::testing::run_lathe("eval --checkpoint " + model + " --mc " + d.file("mc.jsonl") + " --out " +
                                d.file("items.jsonl") + " --overwrite");
  CHECK(r.code == 0);
  CHECK(r.output.find("mc.jsonl line 3 skipped: \"choices\" must list at least two endings") != std::string::npos);
  CHECK(lathe::testing::run_lathe("eval --checkpoint " + model + " --mc " + d.file("mc.jsonl") + " --out " +
                                  d.file("items.jsonl")).output.find("exists; give --overwrite") != std::string::npos);
  CHECK(lathe::testing::run_lathe("eval --checkpoint " + model).code == 2);
}
