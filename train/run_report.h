// What a training run tells as it goes: its progress lines on the log, metrics.jsonl (one record
// per step, train/metrics_log.h) and loss.svg (train/loss_plot.h). The Trainer's step loop hands
// each step's numbers, each evaluation and each score here, and says how the run is set up through
// say(); the report decides when a progress line is due, what a record holds, and what the run's
// summary is. In a data parallel run every rank keeps a report, and rank 0's alone writes: the
// others keep count and stay silent.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "train/evaluation.h"
#include "train/loss_plot.h"
#include "train/metrics_log.h"
#include "train/train_step.h"

namespace lathe::train {

struct StepResult {
  int64_t step = 0;      // the step's number (1 for the first)
  double loss = 0;       // the loss of the batch, before the update
  double lr = 0;         // the LR the update used
  double grad_norm = 0;  // global gradient norm before clipping (0 when clipping is off)
  double seconds = 0;    // wall time of the step
  bool skipped = false;  // fp16: inf or nan in the gradients; the update was skipped
  double scale = 1;      // fp16: the loss scale the step used
  StepOutcome queued;    // the loss and norm on the device, until Trainer::read_step reads them
};

struct TrainSummary {
  int64_t steps = 0;
  double final_train_loss = 0;  // the last step's loss
  double final_val_loss = 0;    // the last evaluation, nats per token
  double final_val_bpb = 0;     // the same in bits per byte of text
  double seconds = 0;           // wall time of run()
  int64_t skipped_steps = 0;    // fp16: steps whose update the loss scaler skipped (whole run)
};

// "42.4k": a rate of tokens per second as the progress line shows it.
std::string format_rate(double tok_per_s);

class RunReport {
 public:
  struct Setup {
    std::FILE* log = nullptr;  // null or quiet: nothing is printed
    bool quiet = false;
    bool writer = true;        // rank 0: prints and writes the files
    std::string dir;           // the run directory
    int64_t steps = 0;         // the run's last step
    int64_t first_step = 0;    // > 0 when resumed
    double tokens_per_step = 0;
    double progress_seconds = 0;  // at most this long between progress lines
    bool grad_clip = false;       // records carry the gradient norm
    bool loss_scaling = false;    // fp16: records carry the scale and skipped steps
  };
  explicit RunReport(Setup setup);

  // A line on the log (printf's format), flushed; nothing on a silent rank or a quiet run.
  template <class... Args>
  void say(const char* fmt, Args... args) const {
    if (setup_.quiet || setup_.log == nullptr || !setup_.writer) return;
    std::fprintf(setup_.log, fmt, args...);
    std::fflush(setup_.log);
  }
  bool writer() const { return setup_.writer; }

  // A resumed run: metrics.jsonl cut back to the checkpoint's step (the lines after it were
  // written by the run that stopped), and the loss curves and skipped-step count rebuilt from the
  // kept lines, so that the files end as the uninterrupted run's.
  void restore_metrics(int64_t step);
  // Opens metrics.jsonl (appending when resumed) and names the loss plot.
  void open(const std::string& title, bool resumed);

  // A step's numbers, once read: its record begins, and a progress line is printed when one is due
  // (the first step, the last, and at most progress_seconds apart).
  void step(const StepResult& r);
  // The step's evaluation and multiple-choice score, printed and added to its record.
  void evaluation(int64_t step, double val_loss, double val_bpb, int64_t batches, double seconds);
  void multiple_choice(int64_t step, const MultipleChoiceResult& mc, double seconds);
  // Ends the step's record (with the time spent in collectives, for a data parallel run) and
  // writes it; the loss plot is rewritten after every evaluation and at the end.
  void end_step(std::optional<double> comm_seconds);
  void write_plot() const;

  double train_seconds() const { return train_seconds_; }  // in training steps only
  // The summary so far; `seconds` is the caller's.
  TrainSummary summary(int64_t steps) const;

 private:
  using Clock = std::chrono::steady_clock;
  Setup setup_;
  std::optional<MetricsLog> metrics_;
  LossCurves curves_;
  nlohmann::json record_;
  TrainSummary summary_;  // the last losses and the skipped steps so far
  double train_seconds_ = 0;
  Clock::time_point last_print_ = Clock::now();
  int64_t steps_since_print_ = 0;
  double seconds_since_print_ = 0;
};

}  // namespace lathe::train
