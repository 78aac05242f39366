// What `lathe train` is asked to do: every flag, with its default. Kept apart from the trainer so
// the command line, the tests and --resume (which reads them back from a checkpoint) share one
// plain struct.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <vector>

#include "train/distributed/communicator.h"

namespace lathe::train {

// Debian's `fortunes` package: about 2.5 MB of English text, installed with the package.
inline constexpr const char* kDefaultCorpus = "/usr/share/games/fortunes";

struct TrainOptions {
  std::string data = kDefaultCorpus;  // a text file or a directory of them
  std::string config = "tiny";        // a preset name or a JSON file with GPTConfig fields ("": --init-from's)
  std::string device = "cpu";
  int64_t steps = 600;         // total optimizer steps
  int64_t batch = 0;           // sequences per step; 0: the preset's batch
  double lr = 1e-3;            // peak learning rate (a fresh run's default is the optimizer's, optim/registry.h)
  double min_lr = -1;          // floor of the cosine decay; -1: lr / 10 (nanoGPT)
  int64_t warmup = 100;        // linear warm-up steps (nanoGPT shakespeare-char)
  double weight_decay = 0.1;   // decoupled, on 2-D parameters only
  double grad_clip = 1.0;      // max global gradient norm; 0 disables
  std::string optimizer = "adamw";  // a name of optim/registry.h (muon: Muon + AdamW, train/muon_groups.h)
  double adam_lr = 1e-2;       // peak learning rate of the AdamW groups beside muon (embeddings, head, gains, biases)
  double beta1 = 0.9;
  double beta2 = 0.99;         // nanoGPT's choice for small character models (few tokens per step)
  uint64_t seed = 1337;
  std::string precision = "f32";  // f32 | bf16 | fp16 (nn/precision.h); fp16 trains with a loss scaler
  bool fused = false;             // the optimizer's fused path (always taken on cuda where it exists)
  bool tf32 = false;              // f32 products on TF32 tensor cores (cuda; the CPU ignores it); a resume may change it
  // How cuda sums attention's dQ (core/backend.h): split (deterministic) or atomic (FlashAttention-2's
  // one kernel); the CPU ignores it; a resume may change it.
  std::string attention_backward = "split";
  double init_scale = 65536;      // fp16: the loss scaler's first scale
  int64_t scale_growth_interval = 2000;  // fp16: good steps after which the scale doubles
  int64_t eval_interval = 100;  // evaluate every this many steps (and at the end); 0: only at the end
  int64_t eval_iters = 20;      // validation batches per evaluation
  std::string eval_mc;          // a multiple-choice set scored at each evaluation (train/evaluation.h); "": none
  // Supervised fine-tuning: conversations (JSONL, data/chat.h) in place of --data, the loss on the
  // assistant's turns only; needs --init-from (the model and its tokenizer, grown by the chat tokens).
  std::string sft;
  int64_t ckpt_interval = 0;    // checkpoint every this many steps; 0: only at the end
  int64_t keep_last = 3;        // checkpoints kept in the run directory (the newest ones)
  std::string resume;           // a run directory (its newest checkpoint) or a checkpoint file
  // A fresh run's first weights, and its model (train/init_weights.h): a weights file, a training
  // checkpoint, a Hugging Face GPT-2 directory or an llm.c model file. With it, `config` may be
  // "": the model is the file's.
  std::string init_from;
  int threads = 0;              // CPU threads; 0: OpenMP's default
  std::string out;              // run directory (metrics.jsonl, loss.svg, model.safetensors); "": runs/<config>
  // A fresh run in an --out that holds files: replace the run files there (train/run_directory.h).
  // Not saved with the run: an instruction for this start, not a setting a resume keeps.
  bool overwrite = false;
  int64_t sample_tokens = 200;  // sample printed at the end; 0: none
  double progress_seconds = 2;  // a progress line at least this often
  bool quiet = false;           // no progress lines (tests)
  // Data parallelism (docs/design.md, "Data parallelism"). The world size is mpirun's -np, not an
  // option: a run's checkpoints resume at any world size.
  int zero = 0;                 // 1: shard the optimizer state over the processes (ZeRO-1)
  std::string freeze;           // a regular expression (ECMAScript, searched): parameters it matches are frozen
  // The global batch is cut into this many equal slices whose gradients are summed in a fixed
  // order; each process runs slices / N of them. 0: one slice per process. One process with
  // --grad-slices 2 reproduces `mpirun -np 2` bitwise.
  int64_t grad_slices = 0;
  // Seconds a collective waits for the other processes before the job ends, naming the process
  // that did not arrive (train/distributed/communicator.h). A resume may change it.
  double dist_timeout = dist::kDefaultTimeoutSeconds;

  double effective_min_lr() const { return min_lr_for(lr); }
  // The floor of a schedule whose peak is `peak` (a group of its own lr, as muon's AdamW groups):
  // peak / 10 by default, else min_lr scaled as peak is to lr. min_lr_for(lr) is min_lr itself.
  double min_lr_for(double peak) const { return min_lr < 0 ? peak / 10 : min_lr * (peak / lr); }
};

// The options as JSON (a checkpoint stores them) and back; unknown keys are errors.
nlohmann::json to_json(const TrainOptions& o);
TrainOptions train_options_from_json(const nlohmann::json& j);

// Throws cli-agnostic lathe::Error with a message naming the flag when a value is out of range.
void validate(const TrainOptions& o);
// A fresh run's options as the user gave them (`given`: the JSON keys they set), with the defaults
// that follow from other options filled in: the optimizer's own learning rate when none was given
// (optim/registry.h: prodigy's 1, a multiplier of its own step size; muon's 0.02), and no config
// with init_from alone (the model is the file's). `lathe train` and `lathe.train` (python/) both start a run here.
TrainOptions fresh_run_options(TrainOptions o, const std::vector<std::string>& given);

// --freeze's pattern, compiled; an invalid one is an error naming the flag.
std::regex freeze_pattern(const std::string& pattern);

// The most CPU threads a run uses: 4 x the hardware threads, at most 1024. OpenMP aborts the
// process inside its runtime when asked for thousands of threads, so more is capped, not refused.
int max_cpu_threads();
// `requested` capped at max_cpu_threads(); `warning` gets a one-line explanation when it was.
int capped_threads(int requested, std::string* warning);

}  // namespace lathe::train
