// lathe train: train a GPT on a text corpus (bytes as tokens) and write DIR/metrics.jsonl,
// DIR/loss.svg and DIR/model.safetensors; see examples/lib/trainer.h for the loop.
#include "examples/cli/commands.h"
#include "examples/lib/trainer.h"

namespace lathe::cli {

namespace {

// Option values out of range are usage errors (exit 2); everything after, such as a missing
// corpus, is a runtime error (exit 1).
void run_train(app::TrainOptions o) {
  try {
    app::validate(o);
    app::resolve_model_config(o.config);
    Device::parse(o.device);
  } catch (const Error& e) {
    throw UsageError(e.what());
  }
  app::Trainer trainer(std::move(o));
  trainer.run(stdout);
}

}  // namespace

void add_train_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("train", "Train a GPT on a text file or directory (bytes as tokens)");
  cmd->footer(
      "Writes OUT/metrics.jsonl (one JSON object per step), OUT/loss.svg (loss curves) and\n"
      "OUT/model.safetensors (weights + config; see `lathe sample`). Example:\n"
      "  lathe train --config tiny --steps 600 --lr 3e-3 --out runs/tiny");
  auto o = std::make_shared<app::TrainOptions>();
  cmd->add_option("--data", o->data, "text file or directory (read recursively, sorted by path)")
      ->capture_default_str();
  cmd->add_option("--config", o->config, "model preset (tiny, small, char, gpt2) or a JSON file of GPTConfig fields")
      ->capture_default_str();
  cmd->add_option("--device", o->device, "cpu, sim or cuda[:N]")->capture_default_str();
  cmd->add_option("--steps", o->steps, "total optimizer steps")->capture_default_str();
  cmd->add_option("--batch", o->batch, "sequences per step (default: the preset's: tiny 8, small 16, char 8, gpt2 4)");
  auto* lr = cmd->add_option("--lr", o->lr, "peak learning rate (default 1e-3; 1.0 for prodigy, whose lr is a multiplier)");
  cmd->add_option("--min-lr", o->min_lr, "final learning rate of the cosine decay (default: lr / 10)");
  cmd->add_option("--warmup", o->warmup, "linear warm-up steps")->capture_default_str();
  cmd->add_option("--weight-decay", o->weight_decay, "decoupled weight decay of 2-D parameters")->capture_default_str();
  cmd->add_option("--grad-clip", o->grad_clip, "clip the global gradient norm to this; 0 disables")->capture_default_str();
  cmd->add_option("--optimizer", o->optimizer, "adamw, adam, sgd (momentum beta1) or prodigy")->capture_default_str();
  cmd->add_option("--beta1", o->beta1, "first-moment decay (sgd: momentum)")->capture_default_str();
  cmd->add_option("--beta2", o->beta2, "second-moment decay")->capture_default_str();
  cmd->add_option("--seed", o->seed, "seed of the weights, the batches and the final sample")->capture_default_str();
  cmd->add_option("--eval-interval", o->eval_interval, "validate every this many steps (and at the end); 0: at the end")
      ->capture_default_str();
  cmd->add_option("--eval-iters", o->eval_iters, "validation batches per evaluation")->capture_default_str();
  cmd->add_option("--ckpt-interval", o->ckpt_interval, "also save the weights every this many steps; 0: at the end only")
      ->capture_default_str();
  cmd->add_option("--threads", o->threads, "CPU threads (default: OMP_NUM_THREADS or all processors)");
  cmd->add_option("--out", o->out, "run directory (default: runs/CONFIG)");
  cmd->add_option("--sample-tokens", o->sample_tokens, "bytes of the sample printed at the end; 0: none")
      ->capture_default_str();
  cmd->add_flag("--quiet", o->quiet, "no progress lines");
  cmd->callback([o, lr] {
    app::TrainOptions opts = *o;
    if (lr->count() == 0 && opts.optimizer == "prodigy") opts.lr = 1.0;
    run_train(std::move(opts));
  });
}

}  // namespace lathe::cli
