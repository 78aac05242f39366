// The training loop of `lathe train`: nanoGPT's train.py for a GPT on bytes or on token shards.
//
// Everything a run is made of lives in one TrainState: the model (with its dropout generator), the
// optimizer (which holds its param groups and state), the LR schedule (a pure function of the
// step), the generator that draws training batches, and the step counter. A checkpoint
// (serialize/checkpoint.h) holds exactly that plus the options, so a run resumed at step k is
// bitwise identical to the run that never stopped: same losses, same final weights.
//
// One step: draw a batch, then train_step (train/train_step.h): forward, backward, clip the global
// gradient norm, set the scheduled LR, optimizer step, zero the gradients. --precision bf16|fp16
// runs the model's products in 16 bits (nn/precision.h) with f32 master weights; fp16 adds the
// dynamic loss scaler, whose skipped steps and scale go to metrics.jsonl and the progress line.
// Every eval_interval steps (and at the end) the mean validation loss over eval_iters batches is
// measured without gradients in eval mode; its batches come from a generator re-seeded for every
// evaluation, so evaluations compare the same windows and the training batches do not depend on how
// often one evaluates.
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/random.h"
#include "data/bpe_tokenizer.h"
#include "data/dataset.h"
#include "data/multiple_choice.h"
#include "nn/gpt.h"
#include "optim/grad_scaler.h"
#include "optim/optimizer.h"
#include "optim/schedule.h"
#include "serialize/checkpoint.h"
#include "train/distributed/communicator.h"
#include "train/distributed/data_parallel.h"
#include "train/init_weights.h"
#include "train/model_config.h"
#include "train/program_state.h"
#include "train/run_report.h"
#include "core/thread_governor.h"
#include "train/train_options.h"

namespace lathe::train {

struct TrainState {
  ModelChoice model_choice;
  std::unique_ptr<nn::GPT> model;
  std::unique_ptr<optim::Optimizer> optimizer;
  std::unique_ptr<optim::LrSchedule> schedule;  // --lr's: the lr a step reports
  // One per param group, each from the group's own peak (its lr as built): the lrs a step sets.
  std::vector<std::unique_ptr<optim::LrSchedule>> group_schedules;
  std::unique_ptr<optim::GradScaler> scaler;  // fp16 runs only (bf16 and f32 need none)
  Generator data_gen;  // training batches drawn so far: (seed, offset)
  int64_t step = 0;    // optimizer steps completed
};

// Derives independent random streams (weights, batches, evaluation, sampling) from one seed, so
// that no two share Philox counters.
uint64_t derive_seed(uint64_t seed, uint64_t stream);

// A resume whose command line contradicts the checkpoint's settings: the user's mistake, not a
// bad file (`lathe train` exits with 2 for it).
struct ResumeSettingsError : Error {
  using Error::Error;
};

class Trainer {
 public:
  // Opens the corpus, builds the model on the device and the optimizer with nanoGPT's param
  // groups (train/nanogpt_groups.h). With options.init_from the model and its first weights come
  // from that file (train/init_weights.h). Throws lathe::Error naming what is wrong
  // (InitSettingsError for a --config that contradicts the --init-from file).
  //
  // `comm`: the processes of a data parallel run (train/distributed/); null: this process alone.
  // Each rank builds the same model and optimizer; --batch stays the global batch, whose windows
  // are drawn as in one process and of which rank r trains slice r. Only rank 0 writes files and
  // prints. The communicator must outlive the trainer.
  explicit Trainer(TrainOptions options, dist::Communicator* comm = nullptr);

  // The one way to continue a run (`lathe train --resume`; see train/resume.cpp): opens
  // `dir_or_file` (a checkpoint file, or the newest checkpoint of a run directory), takes the
  // checkpoint's options with the run-management flags of `given` that the user set (`given_keys`:
  // JSON keys of TrainOptions) applied on top -- steps, eval_interval, eval_iters, ckpt_interval,
  // keep_last, threads, device, out (default: the checkpoint's directory), sample_tokens, data,
  // zero, grad_slices, dist_timeout -- and restores the whole state onto the device. Any other key
  // given with a value other than the checkpoint's is a ResumeSettingsError naming it (a resumed
  // run is the same run); a damaged or unfitting checkpoint is a lathe::Error naming the file.
  // Every rank of a data parallel run reads the one checkpoint, whatever the world size that wrote
  // it.
  static Trainer resume(const std::string& dir_or_file, const TrainOptions& given,
                        const std::vector<std::string>& given_keys, dist::Communicator* comm = nullptr);

  TrainState& state() { return state_; }
  const TrainOptions& options() const { return options_; }
  // The options as this run applies them, as JSON: the defaults that stand for a value resolved
  // (batch 0 for the preset's, min_lr -1 for lr / 10, grad_slices 0 for one per process). The
  // ranks of a data parallel run compare these, so they differ only where the runs would, and a
  // difference shows the values each rank trains with.
  nlohmann::json applied_options() const;
  // The run's data, a byte corpus or token shards, seen only through data/dataset.h's interface.
  const data::Dataset& data() const { return *data_; }
  // A validation loss in nats per token as bits per byte of the validation text.
  double bits_per_byte(double val_loss) const;
  int64_t batch_size() const { return batch_; }  // the global batch
  Device device() const { return device_; }
  dist::Communicator& communicator() const { return *comm_; }
  // The data parallel driver; null in a single process without --zero.
  dist::DataParallel* data_parallel() const { return dp_.get(); }
  // The parameters --freeze froze, by name.
  const std::vector<std::string>& frozen() const { return frozen_; }

  // One step, its loss and gradient norm read (queue_step, then read_step).
  StepResult train_step();
  // One step queued, nothing read from the device: on a GPU the host goes on to queue the next
  // while this one runs. read_step reads its loss and norm (waiting for the step), checks that the
  // loss is finite and, in a data parallel run, averages it over the ranks (a collective).
  StepResult queue_step();
  void read_step(StepResult& r);
  // Mean loss over eval_iters batches of the split (no gradients, eval mode).
  double evaluate(data::Split split);
  // model.safetensors with the config, step and last validation loss in its metadata.
  void save_weights(const std::string& path) const;
  // --init-from's weights into the model grown by the chat tokens (--sft).
  void load_for_chat(const nn::NamedTensors& weights);
  // What to change when training diverged: the weight decay where lr x wd >= 1, else the lr.
  std::string divergence_advice() const;
  // The whole training state (serialize/checkpoint.h), atomically. In a data parallel run every
  // rank calls it (ZeRO-1 gathers the sharded state to rank 0) and only rank 0 writes.
  void save_checkpoint(const std::string& path) const;
  // Both saves first check that every parameter (and, for a checkpoint, every optimizer state
  // tensor) is finite: an update can turn the weights into NaN while the loss that preceded it was
  // finite, and saving them would replace the last good files. The error names the first
  // non-finite tensor and the step, and nothing is written.
  void check_finite_state(bool with_optimizer) const;
  // A continuation of `prompt`, `tokens` long, drawn at temperature 0.8, through the data's
  // tokenizer (bytes for a byte corpus). Only ids the tokenizer can decode are drawn: a model whose
  // vocab_size exceeds the tokenizer's (the gpt2 preset trained on bytes) never learns to emit the
  // others, but they keep a little probability mass.
  std::string sample(const std::string& prompt, int64_t tokens) const;

  // The whole run: steps until options.steps, progress lines on `log` (unless quiet),
  // DIR/metrics.jsonl, DIR/loss.svg, DIR/ckpt-<step>.safetensors (every ckpt_interval steps and at
  // the end, the last keep_last kept), DIR/model.safetensors, and a sample at the end. The run
  // holds DIR/.lock throughout (train/run_checkpoints.h). A resumed run first moves aside the
  // checkpoints it does not continue, cuts metrics.jsonl back to the checkpoint's step, then
  // appends; resumed at its last step, it only rewrites model.safetensors from the checkpoint and
  // says the run is complete.
  //
  // `on_step`, when given, receives each step's result once the run has reported it (metrics,
  // progress, evaluation, checkpoint): `lathe.train`'s callback (python/). An exception it throws
  // ends the run there, as a kill would: every checkpoint written so far is whole (each is written
  // atomically), and the run continues from the newest with a resume.
  using StepHook = std::function<void(const StepResult&)>;
  TrainSummary run(std::FILE* log = stdout, const StepHook& on_step = {});

 private:
  // The constructor of both: a fresh run when `resume` is null, else the checkpoint's run.
  Trainer(TrainOptions options, const serialize::TrainingCheckpoint* resume, const ProgramState* program,
          dist::Communicator* comm);
  // The constructor's stages, in order. The model's config: the checkpoint's, --init-from's (whose
  // weights come back, until build_model copies them) or --config's.
  std::optional<InitialWeights> choose_model(const serialize::TrainingCheckpoint* resume, const ProgramState* program);
  void set_up_machine();  // threads, device, TF32, the attention backward
  // The data (a corpus, shards or --sft's conversations) and --eval-mc's items; the vocabulary
  // grown to the tokenizer's ids where a fresh run needs it.
  void open_data(const serialize::TrainingCheckpoint* resume, const ProgramState* program,
                 const std::optional<InitialWeights>& init);
  // The config against memory and the data's ids, before anything is allocated.
  void check_model_size(const serialize::TrainingCheckpoint* resume, const std::optional<InitialWeights>& init);
  void split_batch();  // the global batch over the processes and --grad-slices; a GPU per process
  // The model (GPT-2's random draw only for a run that loads no weights: --init-from's are copied
  // here, a checkpoint's by restore), its precision, loss scaler, --freeze.
  void build_model(std::optional<InitialWeights>& init, bool resuming);
  void build_optimizer();  // with its weight copies, data parallel driver and lr schedules
  void restore(const serialize::TrainingCheckpoint& ckpt, const ProgramState& program);
  // This rank's rows of a global batch.
  data::Batch local_slice(const data::Batch& b) const;

  TrainOptions options_;
  std::unique_ptr<dist::Communicator> own_comm_;  // a single process's, when none was given
  dist::Communicator* comm_ = nullptr;
  std::unique_ptr<dist::DataParallel> dp_;
  // The model's 16-bit weight copies, which the fused AdamW writes as it updates the weights.
  std::unique_ptr<optim::ParamCopies> weight_copies_;
  int64_t slices_per_rank_ = 1;  // train_step's slices (--grad-slices / world size)
  uint64_t dropout_draws_per_slice_ = 0;  // data parallel with dropout: measured at the first step
  std::vector<std::string> frozen_;
  std::unique_ptr<ThreadGovernor> threads_;  // the CPU threads, between steps
  Device device_;
  int64_t batch_ = 0;
  std::unique_ptr<data::BpeTokenizer> sft_base_;  // --sft: the tokenizer the chat tokens extend
  std::unique_ptr<data::Dataset> data_;
  std::optional<data::MultipleChoiceSet> eval_mc_;  // --eval-mc's items, scored at each evaluation
  TrainState state_;
  double last_val_loss_ = -1;
  bool resumed_ = false;
  std::string resumed_from_;  // the checkpoint file a resumed run continues

  // The run's opening lines: the data, the model, how it is trained.
  void describe_run(const RunReport& report) const;
  // The end of a run resumed at its final step: nothing to train.
  TrainSummary finish_complete_run(const std::string& dir, const RunReport& report);
};

}  // namespace lathe::train
