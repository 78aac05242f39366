// lathe train: train a GPT on a text corpus (bytes as tokens) or on token shards (lathe tokenize)
// and write DIR/metrics.jsonl, DIR/loss.svg and DIR/model.safetensors; see train/trainer.h for the
// loop.
#include "examples/cli/commands.h"
#include <algorithm>
#include <charconv>
#include <functional>
#include <memory>
#include <optional>
#include <system_error>

#include "optim/registry.h"
#include "train/distributed/agreement.h"
#include "train/distributed/communicator.h"
#include "train/trainer.h"

namespace lathe::cli {

namespace {

// Exit status 2 for the user's mistakes in the command line, 1 for everything else.
int exit_code_of(const std::exception& e) {
  return dynamic_cast<const UsageError*>(&e) || dynamic_cast<const train::ResumeSettingsError*>(&e) ||
                 dynamic_cast<const train::InitSettingsError*>(&e)
             ? 2
             : 1;
}

// Under `mpirun -np N` every process runs this with its own communicator (train/distributed/).
// Starting is agreed: when any rank cannot build its trainer, or the ranks were given different
// options or data, every rank stops with one error that rank 0 prints. During the run an error that
// every rank meets alike (a diverged loss) is printed once too; an error of one rank alone (a write
// that failed) names the rank and ends the whole run, so that no rank waits forever for it.
void train_on_every_rank(const std::function<train::Trainer(dist::Communicator*)>& make) {
  const std::unique_ptr<dist::Communicator> comm = dist::make_communicator();
  std::optional<train::Trainer> trainer;
  dist::on_every_rank(*comm, [&] { trainer.emplace(make(comm.get())); }, exit_code_of);
  dist::check_same_run(*comm, trainer->applied_options(), trainer->data().fingerprint());
  try {
    trainer->run(stdout);
  } catch (const dist::CollectiveError&) {
    throw;
  } catch (const std::exception& e) {
    if (comm->size() == 1) throw;
    std::fprintf(stderr, "lathe: rank %d of %d: %s\n", comm->rank(), comm->size(), e.what());
    std::fflush(stderr);
    comm->abort(exit_code_of(e));
  }
}

// Option values out of range are usage errors (exit 2); everything after, such as a missing
// corpus, is a runtime error (exit 1).
void run_train(train::TrainOptions o) {
  train_on_every_rank([&](dist::Communicator* comm) {
    try {
      train::validate(o);
      // With --init-from alone the model is the file's, checked when the trainer reads it (a
      // damaged file is a runtime error, not a usage error).
      if (!o.config.empty()) {
        const train::ModelChoice model = train::resolve_model_config(o.config);
        // A model that cannot fit is the user's choice of sizes, refused before the corpus is read.
        if (Device::parse(o.device).type != DeviceType::cuda) {
          train::check_model_fits_memory(model.config, "--config " + o.config);
          const int64_t batch = o.batch > 0 ? o.batch : model.default_batch;
          train::check_batch_fits_memory(model.config, batch, "--batch " + std::to_string(batch));
        }
      }
    } catch (const Error& e) {
      throw UsageError(e.what());
    }
    return train::Trainer(std::move(o), comm);
  });
}

// The TrainOptions JSON keys of the flags given on the command line.
std::vector<std::string> given_keys(const CLI::App& cmd) {
  std::vector<std::string> given;
  for (const CLI::Option* opt : cmd.get_options()) {
    if (opt->count() == 0 || opt->get_name().rfind("--", 0) != 0) continue;
    std::string key = opt->get_name().substr(2);
    std::replace(key.begin(), key.end(), '-', '_');
    given.push_back(key);
  }
  return given;
}

// --resume: the checkpoint's run, with the run-management flags the user gave on top
// (train::Trainer::resume), at any world size. Flags that contradict the checkpoint are usage
// errors.
void run_resume(const train::TrainOptions& given, const std::vector<std::string>& given_keys) {
  train_on_every_rank([&](dist::Communicator* comm) {
    try {
      return train::Trainer::resume(given.resume, given, given_keys, comm);
    } catch (const train::ResumeSettingsError& e) {
      throw UsageError(e.what());
    }
  });
}

// CLI11 turns an integer beyond its type's range into the type's limit: --steps
// 99999999999999999999 would silently train for 2^63 - 1 steps. Out of range is refused; other
// malformed values are left to CLI11's own conversion, which refuses them.
template <class T>
CLI::Validator integer_in_range() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        T value{};
        const char* end = text.data() + text.size();
        const auto [ptr, ec] = std::from_chars(text.data(), end, value);
        if (ec == std::errc::result_out_of_range) return "value " + text + " is out of range";
        return "";
      },
      "");
}

// Values a flag's type admits but a run does not, when given explicitly: 0 and negative numbers
// also mean "the default" for --batch and --min-lr, and "" for --out, so only the command line can
// tell a mistake from a default.
void check_explicit_values(const CLI::App& cmd, const train::TrainOptions& o) {
  auto given = [&](const char* name) { return cmd.get_option(name)->count() > 0; };
  if (given("--batch") && o.batch <= 0) throw UsageError("--batch must be positive, got " + std::to_string(o.batch));
  if (given("--min-lr") && o.min_lr < 0)
    throw UsageError("--min-lr must be >= 0 (leave it out for lr / 10), got " + cmd.get_option("--min-lr")->as<std::string>());
  if (given("--out") && o.out.empty()) throw UsageError("--out must name a directory, got an empty string");
  // A resume compares it with the run's own (Trainer::resume), whatever --optimizer says here.
  const optim::OptimizerKind* kind = optim::find_optimizer_kind(o.optimizer);  // an unknown one: validate's error
  if (given("--adam-lr") && kind && !kind->adamw_beside && o.resume.empty())
    throw UsageError("--adam-lr is the lr of the AdamW groups beside muon; --optimizer " + o.optimizer +
                     " has one lr for all (--lr)");
  // SGD has no second moment: a --beta2 given to it would be ignored, and the run's options would
  // still record it as if it had been used.
  if (given("--beta2") && kind && !kind->betas && !kind->adamw_beside && o.resume.empty())
    throw UsageError("--beta2 is the second-moment decay of adam, adamw, prodigy and muon's AdamW groups; "
                     "--optimizer sgd has none (its momentum is --beta1)");
  if (given("--init-from") && o.init_from.empty())
    throw UsageError("--init-from must name a weights file, a checkpoint or a model directory, got an empty string");
}

}  // namespace

void add_train_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("train", "Train a GPT on a text file or directory (bytes as tokens), or on token shards from `lathe tokenize`");
  cmd->footer(
      "Writes OUT/metrics.jsonl (one JSON object per step), OUT/loss.svg (loss curves),\n"
      "OUT/ckpt-<step>.safetensors (the whole training state; see `lathe inspect`) and\n"
      "OUT/model.safetensors (weights + config; see `lathe sample`). Examples:\n"
      "  lathe train --config tiny --steps 600 --lr 3e-3 --out runs/tiny\n"
      "  lathe train --config tiny --precision bf16 --out runs/tiny-bf16\n"
      "  lathe train --resume runs/tiny --steps 1000     (continue the same run)\n"
      "  lathe train --init-from gpt2/ --data shards/ --lr 3e-5 --out runs/ft   (fine-tune GPT-2's weights)\n"
      "  mpirun -np 2 lathe train --config tiny --threads 1 --out runs/tiny-dp   (data parallel; --batch is global)");
  auto o = std::make_shared<train::TrainOptions>();
  cmd->add_option("--data", o->data, "text file or directory (read recursively, sorted by path), or a directory of token shards")
      ->capture_default_str();
  cmd->add_option("--config", o->config,
                  "model preset (tiny, small, char, nanogpt-cpu, speedrun-small, gpt2) or a JSON file of GPTConfig "
                  "fields; with --init-from, the file's model (a --config given must agree with it but for dropout)")
      ->capture_default_str();
  cmd->add_option("--device", o->device, "cpu, sim or cuda[:N]")->capture_default_str();
  const CLI::Validator in_i64 = integer_in_range<int64_t>();
  cmd->add_option("--steps", o->steps, "total optimizer steps")->capture_default_str()->check(in_i64);
  cmd->add_option("--batch", o->batch, "sequences per step (default: the preset's: tiny 8, small 16, char 8, nanogpt-cpu 12, speedrun-small 16, gpt2 4)")
      ->check(in_i64);
  cmd->add_option("--lr", o->lr,
                  "peak learning rate (default 1e-3; 1.0 for prodigy, whose lr is a multiplier; 0.02 for muon, the "
                  "lr of its Muon group)");
  cmd->add_option("--adam-lr", o->adam_lr,
                  "muon: peak learning rate of its AdamW groups (embeddings, head, gains, biases)")
      ->capture_default_str();
  cmd->add_option("--min-lr", o->min_lr, "final learning rate of the cosine decay (default: lr / 10)");
  cmd->add_option("--warmup", o->warmup, "linear warm-up steps")->capture_default_str()->check(in_i64);
  cmd->add_option("--weight-decay", o->weight_decay, "decoupled weight decay of 2-D parameters")->capture_default_str();
  cmd->add_option("--grad-clip", o->grad_clip, "clip the global gradient norm to this; 0 disables")->capture_default_str();
  cmd->add_option("--optimizer", o->optimizer,
                  "adamw, adam, sgd (momentum beta1), prodigy, or muon (Muon for the blocks' matrices, AdamW at "
                  "--adam-lr for the rest)")
      ->capture_default_str();
  cmd->add_option("--beta1", o->beta1, "first-moment decay (sgd: momentum)")->capture_default_str();
  cmd->add_option("--beta2", o->beta2, "second-moment decay")->capture_default_str();
  cmd->add_option("--seed", o->seed, "seed of the weights, the batches and the final sample")
      ->capture_default_str()
      ->check(integer_in_range<uint64_t>());
  cmd->add_option("--precision", o->precision,
                  "f32, bf16 or fp16: products and activations in 16 bits with f32 master weights; fp16 adds "
                  "dynamic loss scaling")
      ->capture_default_str();
  cmd->add_flag("--fused", o->fused, "the optimizer's fused (multi-tensor) step, on any device (always on cuda)");
  cmd->add_flag("--tf32", o->tf32,
                "f32 products on TF32 tensor cores (cuda: f32's range, 10 bits of mantissa in the products' inputs; "
                "ignored on cpu); a resume may turn it on or off");
  cmd->add_option("--attention-backward", o->attention_backward,
                  "split: attention's dQ in a kernel of its own, the same bits every run; atomic: "
                  "FlashAttention-2's one backward kernel, dQ summed by f32 atomics (faster; dQ's last bits vary "
                  "between runs). cuda only; a resume may change it")
      ->capture_default_str()
      ->check(attention_backward_check());
  cmd->add_option("--init-scale", o->init_scale, "fp16: the loss scaler's initial scale")->capture_default_str();
  cmd->add_option("--scale-growth-interval", o->scale_growth_interval,
                  "fp16: good steps after which the loss scale doubles")
      ->capture_default_str()
      ->check(in_i64);
  cmd->add_option("--eval-interval", o->eval_interval, "validate every this many steps (and at the end); 0: at the end")
      ->capture_default_str()
      ->check(in_i64);
  cmd->add_option("--eval-iters", o->eval_iters, "validation batches per evaluation")->capture_default_str()->check(in_i64);
  auto* sft = cmd->add_option("--sft", o->sft,
                              "supervised fine-tuning on conversations (JSONL of {\"messages\": [{\"role\", \"content\"}]}) "
                              "in place of --data: lathe's chat template, the loss on the assistant's turns; needs "
                              "--init-from (docs/chat.md)");
  cmd->add_option("--eval-mc", o->eval_mc,
                  "a multiple-choice set (JSONL, as lathe eval --mc reads) scored at each evaluation: accuracy and "
                  "accuracy_norm in the progress and metrics.jsonl (mc_accuracy, mc_accuracy_norm)");
  cmd->add_option("--ckpt-interval", o->ckpt_interval, "checkpoint every this many steps; 0: at the end only")
      ->capture_default_str()
      ->check(in_i64);
  cmd->add_option("--keep-last", o->keep_last, "checkpoints kept in OUT (the newest)")->capture_default_str()->check(in_i64);
  cmd->add_option("--resume", o->resume,
                  "continue the run in DIR from its newest checkpoint (or from a checkpoint FILE) up to --steps; "
                  "bitwise identical to a run that never stopped");
  cmd->add_option(
      "--init-from", o->init_from,
      "start a fresh run from these weights (fine-tuning): a weights file or checkpoint of lathe train, a Hugging Face "
      "GPT-2 directory or an llm.c model file (.bin); the model is the file's, the optimizer starts fresh");
  cmd->add_option("--threads", o->threads,
                  "CPU threads (default: OMP_NUM_THREADS, else as many as other processes leave cores free, checked as it runs; at most 4 x the hardware threads)")
      ->check(integer_in_range<int>());
  cmd->add_option("--out", o->out, "run directory (default: runs/CONFIG); a fresh run needs it absent or empty");
  cmd->add_flag("--overwrite", o->overwrite,
                "a fresh run in an --out that holds files: replace the run files there (checkpoints, model, metrics) "
                "in one swap, keeping other files; never the run's own --data or --init-from");
  cmd->add_option("--sample-tokens", o->sample_tokens, "bytes of the sample printed at the end; 0: none")
      ->capture_default_str()
      ->check(in_i64);
  cmd->add_flag("--quiet", o->quiet, "no progress lines");
  cmd->add_option("--zero", o->zero,
                  "under mpirun: 1 shards the optimizer state over the processes (ZeRO-1), 0 keeps a whole copy in each")
      ->capture_default_str()
      ->check(integer_in_range<int>());
  cmd->add_option("--grad-slices", o->grad_slices,
                  "cut the global batch into this many slices whose gradients are summed in a fixed order, each "
                  "process running an equal share (default: one per process); one process with --grad-slices 2 "
                  "reproduces mpirun -np 2 bitwise")
      ->check(in_i64);
  cmd->add_option("--dist-timeout", o->dist_timeout,
                  "under mpirun: seconds a process waits for the others in a collective before the job ends, "
                  "naming the process that did not arrive")
      ->capture_default_str();
  cmd->add_option("--freeze", o->freeze,
                  "train with the parameters whose names match this regular expression frozen (no gradient, no "
                  "optimizer state), e.g. 'wte' or '^transformer\\.h\\.0\\.'");
  cmd->callback([o, cmd, sft] {
    if (sft->count() > 0 && cmd->get_option("--data")->count() > 0)
      throw UsageError("--sft trains on its conversations in place of --data; give one of them");
    check_explicit_values(*cmd, *o);
    if (!o->resume.empty() && o->overwrite)
      throw UsageError("--overwrite is for a fresh run; --resume continues the run in its own directory");
    if (!o->resume.empty()) {
      run_resume(*o, given_keys(*cmd));
      return;
    }
    run_train(train::fresh_run_options(*o, given_keys(*cmd)));
  });
}

}  // namespace lathe::cli
