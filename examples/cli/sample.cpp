// lathe sample --checkpoint FILE: text from a trained model. The model is rebuilt from the config
// stored in the file's metadata (lathe train writes it), or from a Hugging Face GPT-2 directory or
// an llm.c model file; the prompt is encoded with the tokenizer --tokenizer names, else the one
// the metadata names (bytes unless the run trained on token shards; a file that names none needs
// --tokenizer), and the continuation is decoded with it and printed raw.
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "core/ops.h"
#include "data/model_tokenizer.h"
#include "examples/cli/commands.h"
#include <optional>

#include "data/bpe_tokenizer.h"
#include "data/byte_tokenizer.h"
#include "nn/precision.h"
#include "serialize/json_document.h"
#include "serialize/model_file.h"

namespace lathe::cli {

namespace {

struct SampleOptions {
  std::string checkpoint;
  std::string prompt = "\n";
  int64_t tokens = 200;
  double temperature = 0.8;
  int64_t top_k = 0;
  double top_p = 1.0;
  double min_p = 0.0;
  double repetition_penalty = 1.0;
  int64_t repetition_window = 0;
  uint64_t seed = 0;
  std::string device = "cpu";
  int64_t samples = 1;
  std::string precision = "f32";  // the forward's mixed-precision policy (nn/precision.h)
  std::string tokenizer;          // a TOK (data/bpe_tokenizer.h) in place of the recorded one
  bool ids = false;               // print the drawn ids as a JSON array instead of their text
};

// Past these a request is a typing mistake that would generate for days, not a sample.
constexpr int64_t kMaxTokens = 1000000;
constexpr int64_t kMaxSamples = 100000;

void run_sample(const SampleOptions& o) {
  if (o.tokens < 0 || o.tokens > kMaxTokens)
    throw UsageError("--tokens must be in [0, " + std::to_string(kMaxTokens) + "], got " + std::to_string(o.tokens));
  if (!(std::isfinite(o.temperature) && o.temperature >= 0))
    throw UsageError("--temperature must be >= 0 (0: greedy), got " + std::to_string(o.temperature));
  if (o.top_k < 0) throw UsageError("--top-k must be >= 0 (0: no limit), got " + std::to_string(o.top_k));
  nn::SamplingOptions sampling = sampling_from_flags(o);
  if (o.samples < 1 || o.samples > kMaxSamples)
    throw UsageError("--samples must be in [1, " + std::to_string(kMaxSamples) + "], got " + std::to_string(o.samples));
  Device device;
  try {
    device = Device::parse(o.device);
  } catch (const Error& e) {
    throw UsageError(std::string("--device: ") + e.what());
  }
  nn::Precision precision = nn::Precision::f32;
  try {
    precision = nn::parse_precision(o.precision, "--precision");
  } catch (const Error& e) {
    throw UsageError(e.what());
  }
  // A runtime error (exit 1) naming the reason: a loop of symbolic links is not a missing file.
  struct stat st {};
  LATHE_CHECK(::stat(o.checkpoint.c_str(), &st) == 0, o.checkpoint, ": ", std::strerror(errno));
  serialize::LoadedModel loaded = serialize::load_model(o.checkpoint, device);
  loaded.model->set_precision(precision);
  std::optional<data::BpeTokenizer> tok;
  tok.emplace(data::model_tokenizer(loaded, o.checkpoint, o.tokenizer));
  // The ids drawn: those the model was trained to emit. A byte corpus has no end-of-text; token
  // shards have it (it marks where a document ends).
  const int64_t ids = tok->identity().kind == "bytes" ? data::ByteTokenizer::kVocabSize : int64_t(tok->vocab_size());
  // An empty prompt starts from a newline, as nanoGPT's sample.py does.
  std::vector<int64_t> prompt;
  for (uint32_t id : tok->encode(o.prompt.empty() ? std::string("\n") : o.prompt)) prompt.push_back(id);
  LATHE_CHECK(loaded.model->config().vocab_size >= ids, o.checkpoint, ": vocab_size ", loaded.model->config().vocab_size,
              " is smaller than the tokenizer's ", ids, " ids (", tok->identity().describe(), ")");
  for (int64_t s = 0; s < o.samples; ++s) {
    Tensor idx = Tensor::from_vector(prompt, {1, int64_t(prompt.size())}, device);
    // Only ids the tokenizer can decode (a vocabulary padded past it, as gpt2's on bytes, draws bytes).
    sampling.vocab_limit = ids;
    Tensor out = loaded.model->generate(idx, o.tokens, sampling, o.seed + uint64_t(s));
    const std::vector<int64_t> drawn = out.to(Device::cpu()).flatten().to_vector<int64_t>();
    const std::string text =
        o.ids ? nlohmann::json(std::vector<int64_t>(drawn.begin() + int64_t(prompt.size()), drawn.end())).dump()
              : tok->decode(std::vector<uint32_t>(drawn.begin(), drawn.end()));
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fputs(o.samples > 1 ? "\n---------------\n" : "\n", stdout);
    // Each sample goes out as soon as it exists; when it cannot, the next ones are not worth the time.
    LATHE_CHECK(std::fflush(stdout) == 0 && !std::ferror(stdout), "cannot write to standard output: ",
                std::strerror(errno));
  }
}

}  // namespace

void add_sample_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("sample", "Generate text from weights written by `lathe train`");
  auto o = std::make_shared<SampleOptions>();
  cmd->add_option("--checkpoint", o->checkpoint,
                  "model.safetensors or a training checkpoint (ckpt-<step>.safetensors) from lathe train, a Hugging Face "
                  "GPT-2 directory or an llm.c model file (.bin)")
      ->required();
  cmd->add_option("--tokenizer", o->tokenizer,
                  "bytes, gpt2, a GPT-2 vocab.bpe or a file from `lathe tokenizer train`, in place of the tokenizer the "
                  "weights record (needed for weights that record none: a Hugging Face directory, an llm.c file)");
  cmd->add_option("--prompt", o->prompt, "text to continue (default: a newline)");
  cmd->add_option("--tokens", o->tokens, "tokens to generate (bytes, for a byte-level model; at most 1000000)")->capture_default_str();
  cmd->add_option("--temperature", o->temperature, "softmax temperature; 0 takes the most likely byte")
      ->capture_default_str();
  cmd->add_option("--top-k", o->top_k, "sample among the k most likely tokens; 0: all")->capture_default_str();
  add_sampling_flags(*cmd, o->top_p, o->min_p, o->repetition_penalty, o->repetition_window);
  cmd->add_option("--seed", o->seed, "random seed of the sampler")->capture_default_str();
  cmd->add_flag("--ids", o->ids, "print the ids drawn (after the prompt's) as a JSON array, not their text");
  cmd->add_option("--samples", o->samples, "number of independent samples (at most 100000)")->capture_default_str();
  cmd->add_option("--device", o->device, "cpu, sim or cuda[:N]")->capture_default_str();
  cmd->add_option("--precision", o->precision, "f32, bf16 or fp16: the forward's products in 16 bits")
      ->capture_default_str();
  cmd->callback([o] { run_sample(*o); });
}

}  // namespace lathe::cli
