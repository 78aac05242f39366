#include "train/run_report.h"

#include <string>
#include <utility>

#include "core/format.h"

namespace lathe::train {

std::string format_rate(double tok_per_s) {
  char buf[32];
  if (tok_per_s >= 1e6) std::snprintf(buf, sizeof buf, "%.2fM", tok_per_s / 1e6);
  else if (tok_per_s >= 1e4) std::snprintf(buf, sizeof buf, "%.1fk", tok_per_s / 1e3);
  else std::snprintf(buf, sizeof buf, "%.0f", tok_per_s);
  return buf;
}

RunReport::RunReport(Setup setup) : setup_(std::move(setup)) {}

void RunReport::restore_metrics(int64_t step) {
  const std::string path = setup_.dir + "/metrics.jsonl";
  for (const nlohmann::json& rec : cut_metrics_log(path, step)) {
    if (rec.value("skipped", false) == true) ++summary_.skipped_steps;
    const int64_t s = rec["step"].get<int64_t>();
    const std::string where = path + ": step " + std::to_string(s);
    if (rec.contains("loss")) curves_.train.emplace_back(s, metric_value(rec, "loss", where));
    if (rec.contains("val_loss")) curves_.val.emplace_back(s, metric_value(rec, "val_loss", where));
  }
}

void RunReport::open(const std::string& title, bool resumed) {
  curves_.title = title;
  if (setup_.writer) metrics_.emplace(setup_.dir + "/metrics.jsonl", /*append=*/resumed);
}

void RunReport::step(const StepResult& r) {
  train_seconds_ += r.seconds;
  ++steps_since_print_;
  seconds_since_print_ += r.seconds;
  summary_.final_train_loss = r.loss;

  record_ = {{"step", r.step}, {"loss", r.loss}, {"lr", r.lr}, {"tok_per_s", setup_.tokens_per_step / r.seconds}};
  if (setup_.grad_clip && !r.skipped) record_["grad_norm"] = r.grad_norm;
  if (setup_.loss_scaling) {
    record_["scale"] = r.scale;
    if (r.skipped) {
      record_["skipped"] = true;
      ++summary_.skipped_steps;
    }
  }
  curves_.train.emplace_back(r.step, r.loss);

  const double since_print = std::chrono::duration<double>(Clock::now() - last_print_).count();
  const bool due = since_print >= setup_.progress_seconds || r.step == setup_.first_step + 1 ||
                   r.step == setup_.steps;
  if (!due) return;
  const double rate = setup_.tokens_per_step * double(steps_since_print_) / seconds_since_print_;
  const double eta = double(setup_.steps - r.step) * train_seconds_ / double(r.step - setup_.first_step);
  // fp16: the scale the last step used and the steps skipped so far.
  char scaling[64] = "";
  if (setup_.loss_scaling)
    std::snprintf(scaling, sizeof scaling, " | scale %g | skipped %lld", r.scale, (long long)summary_.skipped_steps);
  say("step %*lld/%lld | loss %.4f | lr %.2e%s | %s tok/s | %.0f ms/step | ETA %s\n",
      int(std::to_string(setup_.steps).size()), (long long)r.step, (long long)setup_.steps, r.loss, r.lr, scaling,
      format_rate(rate).c_str(), 1e3 * seconds_since_print_ / double(steps_since_print_),
      format_duration(eta).c_str());
  last_print_ = Clock::now();
  steps_since_print_ = 0;
  seconds_since_print_ = 0;
}

void RunReport::evaluation(int64_t step, double val_loss, double val_bpb, int64_t batches, double seconds) {
  record_["val_loss"] = val_loss;
  record_["val_bpb"] = val_bpb;
  curves_.val.emplace_back(step, val_loss);
  summary_.final_val_loss = val_loss;
  summary_.final_val_bpb = val_bpb;
  say("step %lld: val loss %.4f nats/token, %.4f bits/byte (%lld batches, %.1f s)\n", (long long)step, val_loss,
      val_bpb, (long long)batches, seconds);
}

void RunReport::multiple_choice(int64_t step, const MultipleChoiceResult& mc, double seconds) {
  record_["mc_accuracy"] = mc.accuracy;
  record_["mc_accuracy_norm"] = mc.accuracy_norm;
  say("step %lld: --eval-mc %zu items: accuracy %.4f, accuracy_norm %.4f (%.1f s)\n", (long long)step,
      mc.items.size(), mc.accuracy, mc.accuracy_norm, seconds);
}

void RunReport::end_step(std::optional<double> comm_seconds) {
  if (comm_seconds) record_["comm_seconds"] = *comm_seconds;
  if (setup_.writer) metrics_->write(record_);
}

void RunReport::write_plot() const {
  if (setup_.writer) write_loss_svg(setup_.dir + "/loss.svg", curves_);
}

TrainSummary RunReport::summary(int64_t steps) const {
  TrainSummary s = summary_;
  s.steps = steps;
  return s;
}

}  // namespace lathe::train
