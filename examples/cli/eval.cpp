// lathe eval --checkpoint MODEL [--mc FILE] [--text FILE] [--out ITEMS.jsonl] [--json]: a model
// measured on a multiple-choice benchmark (HellaSwag's format, or {"context", "choices", "answer"})
// and in bits per byte on a text (train/evaluation.h does the work).
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "core/format.h"
#include "data/corpus_file.h"
#include "data/model_tokenizer.h"
#include "examples/cli/commands.h"
#include "nn/precision.h"
#include "serialize/atomic_file.h"
#include "serialize/model_file.h"
#include "train/evaluation.h"

namespace lathe::cli {

namespace {

struct EvalOptions {
  std::string checkpoint, mc, text, out, tokenizer;
  bool json = false, overwrite = false;
  int64_t batch = 32;
  std::string device = "cpu";
  std::string precision = "f32";
};

// A progress line on stderr at most every two seconds, with an ETA; overwritten in place on a
// terminal, one line each otherwise.
class ProgressLine {
 public:
  explicit ProgressLine(std::string what) : what_(std::move(what)), start_(Clock::now()), last_(start_) {}
  void operator()(int64_t done, int64_t total) {
    const auto now = Clock::now();
    if (done < total && std::chrono::duration<double>(now - last_).count() < 2.0) return;
    last_ = now;
    const double seconds = std::chrono::duration<double>(now - start_).count();
    const double eta = done > 0 ? seconds * double(total - done) / double(done) : 0;
    std::fprintf(stderr, "%s%s: %lld/%lld, %s elapsed, ETA %s%s", tty_ ? "\r" : "", what_.c_str(), (long long)done,
                 (long long)total, format_duration(seconds).c_str(), format_duration(eta).c_str(),
                 tty_ && done < total ? "" : "\n");
    std::fflush(stderr);
  }

 private:
  using Clock = std::chrono::steady_clock;
  std::string what_;
  Clock::time_point start_, last_;
  bool tty_ = ::isatty(2) != 0;
};

std::string read_text(const std::string& path) {
  data::CorpusFile info;
  data::FileHandle fd = data::open_regular_file(path, "--text", info);
  std::string text(info.size, '\0');
  data::read_exact(fd.get(), info, 0, info.size, reinterpret_cast<uint8_t*>(text.data()));
  return text;
}

nlohmann::json item_json(const train::ItemScore& s) {
  nlohmann::json sums = nlohmann::json::array(), means = nlohmann::json::array(), tokens = nlohmann::json::array();
  for (const train::EndingScore& e : s.endings) {
    sums.push_back(e.sum_logprob);
    means.push_back(e.mean_logprob);
    tokens.push_back(e.tokens);
  }
  return {{"line", s.line},          {"label", s.label},         {"pred", s.pred},
          {"pred_norm", s.pred_norm}, {"correct", s.pred == s.label}, {"correct_norm", s.pred_norm == s.label},
          {"sum_logprob", sums},     {"mean_logprob", means},    {"tokens", tokens}};
}

void run_eval(const EvalOptions& o) {
  if (o.mc.empty() && o.text.empty()) throw UsageError("give --mc FILE (a multiple-choice set), --text FILE, or both");
  if (!o.out.empty() && o.mc.empty()) throw UsageError("--out writes the multiple-choice items' results; it needs --mc");
  if (o.batch < 1 || o.batch > 65536) throw UsageError("--batch must be in [1, 65536], got " + std::to_string(o.batch));
  Device device;
  nn::Precision precision = nn::Precision::f32;
  try {
    device = Device::parse(o.device);
    precision = nn::parse_precision(o.precision, "--precision");
  } catch (const Error& e) {
    throw UsageError(e.what());
  }
  // Where the results go is checked before the model is read: a refusal costs nothing.
  struct stat st {};
  LATHE_CHECK(o.out.empty() || o.overwrite || ::lstat(o.out.c_str(), &st) != 0, "--out ", o.out,
              " exists; give --overwrite to replace it");
  LATHE_CHECK(::stat(o.checkpoint.c_str(), &st) == 0, o.checkpoint, ": ", std::strerror(errno));
  serialize::LoadedModel loaded = serialize::load_model(o.checkpoint, device);
  loaded.model->set_precision(precision);
  const data::BpeTokenizer tok = data::model_tokenizer(loaded, o.checkpoint, o.tokenizer);
  const data::BpeTokenizerView view(tok);
  // encode() never emits end-of-text (the tokenizer's last id): the ordinary tokens must be the model's.
  LATHE_CHECK(loaded.model->config().vocab_size >= view.vocab_size() - 1, o.checkpoint, ": vocab_size ",
              loaded.model->config().vocab_size, " is smaller than the ", view.vocab_size() - 1,
              " ordinary ids of the tokenizer (", tok.identity().describe(), ")");
  nlohmann::json summary = nlohmann::json::object();
  if (!o.mc.empty()) {
    const data::MultipleChoiceSet set = data::read_multiple_choice(o.mc);
    ProgressLine line("lathe eval: " + o.mc);
    const train::MultipleChoiceResult r =
        train::evaluate_multiple_choice(*loaded.model, view, set, o.batch, std::ref(line));
    for (size_t i = 0; i < r.skipped.size() && i < 10; ++i)
      std::fprintf(stderr, "lathe: note: %s line %lld skipped: %s\n", printable(o.mc).c_str(),
                   (long long)r.skipped[i].line, printable(r.skipped[i].reason).c_str());
    if (r.skipped.size() > 10) std::fprintf(stderr, "lathe: note: ... and %zu more skipped\n", r.skipped.size() - 10);
    if (!o.out.empty()) {
      std::string lines;
      for (const train::ItemScore& s : r.items) lines += item_json(s).dump() + "\n";
      serialize::write_file_atomically(o.out, [&](serialize::AtomicFile& f) { f.write(lines.data(), lines.size()); },
                                       o.overwrite ? serialize::Existing::replace : serialize::Existing::refuse);
    }
    summary["items"] = r.items.size();
    summary["skipped"] = r.skipped.size();
    summary["accuracy"] = r.accuracy;
    summary["accuracy_norm"] = r.accuracy_norm;
    if (!o.json)
      std::printf("%s: %zu items (%zu skipped): accuracy %.4f (by the sum of log-probabilities), accuracy_norm %.4f "
                  "(by their mean)\n",
                  printable(o.mc).c_str(), r.items.size(), r.skipped.size(), r.accuracy, r.accuracy_norm);
  }
  if (!o.text.empty()) {
    ProgressLine line("lathe eval: " + o.text);
    const train::BitsPerByte b = train::evaluate_bits_per_byte(*loaded.model, view, read_text(o.text), o.batch,
                                                               std::ref(line));
    summary["bits_per_byte"] = b.bits_per_byte;
    summary["nats_per_token"] = b.nats_per_token;
    summary["tokens"] = b.tokens;
    summary["bytes"] = b.bytes;
    if (!o.json)
      std::printf("%s: %.4f bits per byte (%.4f nats per token over %lld tokens, %lld bytes)\n",
                  printable(o.text).c_str(), b.bits_per_byte, b.nats_per_token, (long long)b.tokens, (long long)b.bytes);
  }
  if (o.json) std::printf("%s\n", summary.dump().c_str());
}

}  // namespace

void add_eval_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("eval", "Measure a model: a multiple-choice benchmark, bits per byte on a text");
  cmd->footer(
      "--mc FILE: JSONL items, HellaSwag's {\"ctx\", \"endings\", \"label\"} or {\"context\", \"choices\", \"answer\"};\n"
      "each ending is scored as \" \" + ending after the context, by the sum (accuracy) and the mean\n"
      "(accuracy_norm) of its tokens' log-probabilities, as llm.c scores HellaSwag. A bad item is reported by\n"
      "its line and skipped. --text FILE: bits per byte. Examples:\n"
      "  lathe eval --checkpoint runs/fortunes/model.safetensors --mc examples/data/english_mc.jsonl\n"
      "  lathe eval --checkpoint gpt2/ --tokenizer gpt2 --mc hellaswag_val.jsonl --out items.jsonl --json");
  auto o = std::make_shared<EvalOptions>();
  cmd->add_option("--checkpoint", o->checkpoint,
                  "the model: a weights file or checkpoint of lathe train, a Hugging Face directory, an llm.c file")
      ->required();
  cmd->add_option("--mc", o->mc, "a multiple-choice set (JSONL)");
  cmd->add_option("--text", o->text, "a text file to measure bits per byte on");
  cmd->add_option("--out", o->out, "write each item's scores as JSONL (with --mc)");
  cmd->add_flag("--overwrite", o->overwrite, "replace an existing --out");
  cmd->add_flag("--json", o->json, "print one JSON line: items, skipped, accuracy, accuracy_norm, bits_per_byte, ...");
  cmd->add_option("--batch", o->batch, "rows per forward pass (an item's endings, or windows of the text)")
      ->capture_default_str();
  cmd->add_option("--tokenizer", o->tokenizer, "the tokenizer, in place of the one the weights record");
  cmd->add_option("--device", o->device, "cpu, sim or cuda[:N]")->capture_default_str();
  cmd->add_option("--precision", o->precision, "f32, bf16 or fp16: the forward's products in 16 bits")
      ->capture_default_str();
  cmd->callback([o] { run_eval(*o); });
}

}  // namespace lathe::cli
