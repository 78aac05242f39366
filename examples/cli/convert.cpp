// lathe convert IN OUT [--to lathe|hf|llmc] [--bf16] [--tokenizer TOK]: a GPT's weights from one
// format to another (train/convert_weights.h does the work).
#include <cstdio>

#include "examples/cli/commands.h"
#include "train/convert_weights.h"

namespace lathe::cli {

namespace {

struct ConvertArgs {
  std::string in, out;
  std::string to = "lathe";
  bool bf16 = false;
  bool overwrite = false;
  std::string tokenizer;
  std::string dtype;  // gguf: f32, f16 or q8_0
};

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

void run_convert(const ConvertArgs& a, bool to_given) {
  train::ConvertOptions o;
  if (a.to == "lathe") o.to = serialize::WeightsFormat::lathe;
  else if (a.to == "hf") o.to = serialize::WeightsFormat::hf;
  else if (a.to == "llmc") o.to = serialize::WeightsFormat::llmc;
  else if (a.to == "gguf") o.to = serialize::WeightsFormat::gguf;
  else throw UsageError("--to must be lathe, hf, llmc or gguf, got \"" + a.to + "\"");
  if (a.bf16 && o.to != serialize::WeightsFormat::llmc) throw UsageError("--bf16 writes llm.c's version 5; it needs --to llmc");
  if (!a.tokenizer.empty() && o.to != serialize::WeightsFormat::lathe && o.to != serialize::WeightsFormat::gguf)
    throw UsageError("--tokenizer is recorded in lathe's weights file and embedded in GGUF only; it needs --to lathe or gguf");
  if (!a.dtype.empty() && o.to != serialize::WeightsFormat::gguf)
    throw UsageError("--dtype chooses GGUF's tensor type; it needs --to gguf (llm.c's bf16 is --bf16)");
  if (a.dtype == "f32" || a.dtype.empty()) o.gguf_type = serialize::GgufType::f32;
  else if (a.dtype == "f16") o.gguf_type = serialize::GgufType::f16;
  else if (a.dtype == "q8_0") o.gguf_type = serialize::GgufType::q8_0;
  else throw UsageError("--dtype must be f32, f16 or q8_0, got \"" + a.dtype + "\"");
  if (a.out.empty()) throw UsageError("OUT must name a file or directory, got an empty string");
  if (!to_given && ends_with(a.out, ".gguf"))
    throw UsageError("OUT " + a.out + " ends in .gguf, llama.cpp's model file: give --to gguf");
  // A lathe weights file named like llm.c's would be read back as llm.c's.
  if (!to_given && ends_with(a.out, ".bin"))
    throw UsageError("OUT " + a.out + " ends in .bin, the name of llm.c's model files: give --to llmc, or name lathe's "
                     "weights file otherwise (e.g. .safetensors)");
  o.bf16 = a.bf16;
  o.overwrite = a.overwrite;
  o.tokenizer = a.tokenizer;
  const train::ConvertSummary s = train::convert_weights(a.in, a.out, o);
  const nn::GPTConfig& c = s.config;
  std::printf("%s (%s) -> %s (%s%s%s): vocab_size %lld, block_size %lld, n_layer %lld, n_head %lld, n_embd %lld, "
              "%lld parameters\n",
              a.in.c_str(), serialize::weights_format_name(s.from), a.out.c_str(), a.to.c_str(),
              a.bf16 ? ", bf16" : "", a.dtype.empty() ? "" : (", " + a.dtype).c_str(), (long long)c.vocab_size, (long long)c.block_size, (long long)c.n_layer,
              (long long)c.n_head, (long long)c.n_embd, (long long)s.params);
}

}  // namespace

void add_convert_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("convert", "Convert a GPT's weights between lathe's, Hugging Face's and llm.c's formats");
  cmd->footer(
      "IN: a weights file or checkpoint of lathe train, a Hugging Face GPT-2 directory (config.json and\n"
      "model.safetensors) or an llm.c model file (.bin). OUT is written atomically, and must not exist\n"
      "(a Hugging Face directory may be empty) unless --overwrite is given. Examples:\n"
      "  lathe convert gpt2/ gpt2.safetensors --tokenizer gpt2   (then lathe sample --checkpoint gpt2.safetensors)\n"
      "  lathe convert runs/tiny/model.safetensors tiny-hf --to hf\n"
      "  lathe convert gpt2_124M.bin gpt2_124M_bf16.bin --to llmc --bf16\n"
      "  lathe convert runs/fortunes/model.safetensors fortunes.gguf --to gguf --dtype q8_0   (for llama.cpp)");
  auto a = std::make_shared<ConvertArgs>();
  cmd->add_option("IN", a->in, "the weights to read")->required()->check(reachable_path());
  cmd->add_option("OUT", a->out, "the file (lathe, llmc) or directory (hf) to write")->required();
  auto* to = cmd->add_option("--to", a->to, "lathe (lathe train's weights file), hf (a Hugging Face GPT-2 directory), "
                                            "llmc (llm.c's model file) or gguf (llama.cpp's, with the tokenizer)")
                 ->capture_default_str();
  cmd->add_flag("--bf16", a->bf16, "llmc: bf16 weights (llm.c's version 5) instead of f32 (version 3)");
  cmd->add_option("--dtype", a->dtype, "gguf: the matrices' type, f32 (default), f16 or q8_0");
  cmd->add_flag("--overwrite", a->overwrite,
                "replace an existing OUT (hf: its config and weights, in one swap; other files are kept)");
  cmd->add_option("--tokenizer", a->tokenizer,
                  "lathe: record this tokenizer (bytes, gpt2, a vocab.bpe or a `lathe tokenizer train` file) for "
                  "lathe sample; gguf: embed it; by default what IN records");
  cmd->callback([a, to] { run_convert(*a, to->count() > 0); });
}

}  // namespace lathe::cli
