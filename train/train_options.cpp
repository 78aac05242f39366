#include "train/train_options.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <regex>
#include <thread>
#include <type_traits>

#include "core/error.h"
#include "nn/precision.h"
#include "optim/registry.h"
#include "serialize/json_document.h"

namespace lathe::train {

void validate(const TrainOptions& o) {
  LATHE_CHECK(!o.config.empty() || !o.init_from.empty(), "--config must name a preset or a JSON file, got an empty "
              "string (it may be left out only with --init-from, whose model it then is)");
  LATHE_CHECK(o.steps > 0, "--steps must be positive, got ", o.steps);
  LATHE_CHECK(o.batch >= 0, "--batch must be positive, got ", o.batch);
  LATHE_CHECK(std::isfinite(o.lr) && o.lr > 0, "--lr must be positive, got ", o.lr);
  // -1 is the "lr / 10" default; any other negative floor is a mistake, not a request for it.
  LATHE_CHECK(std::isfinite(o.min_lr) && (o.min_lr >= 0 || o.min_lr == -1), "--min-lr must be >= 0, got ", o.min_lr);
  LATHE_CHECK(o.effective_min_lr() <= o.lr, "--min-lr must be at most --lr (",
              o.lr, "), got ", o.min_lr);
  LATHE_CHECK(o.warmup >= 0, "--warmup must be >= 0, got ", o.warmup);
  LATHE_CHECK(std::isfinite(o.weight_decay) && o.weight_decay >= 0, "--weight-decay must be >= 0, got ",
              o.weight_decay);
  LATHE_CHECK(std::isfinite(o.grad_clip) && o.grad_clip >= 0, "--grad-clip must be >= 0 (0 disables), got ",
              o.grad_clip);
  const optim::OptimizerKind& kind = optim::optimizer_kind(o.optimizer, "--optimizer");
  LATHE_CHECK(std::isfinite(o.adam_lr) && o.adam_lr > 0, "--adam-lr must be positive, got ", o.adam_lr);
  LATHE_CHECK(o.beta1 >= 0 && o.beta1 < 1 && o.beta2 >= 0 && o.beta2 < 1, "--beta1 and --beta2 must be in [0, 1), got ",
              o.beta1, " and ", o.beta2);
  nn::parse_precision(o.precision, "--precision");
  LATHE_CHECK(!o.fused || kind.has_fused || kind.adamw_beside, "--fused: optimizer \"", o.optimizer,
              "\" has no fused path (nor AdamW groups beside it that have one)");
  // The scale is f32 state (optim/grad_scaler.h): past f32's range it would be inf.
  LATHE_CHECK(std::isfinite(o.init_scale) && o.init_scale > 0 && o.init_scale <= double(std::numeric_limits<float>::max()),
              "--init-scale must be a positive number within f32's range (at most 3.4e38), got ", o.init_scale);
  LATHE_CHECK(o.scale_growth_interval >= 1, "--scale-growth-interval must be at least 1, got ",
              o.scale_growth_interval);
  LATHE_CHECK(o.eval_interval >= 0, "--eval-interval must be >= 0, got ", o.eval_interval);
  LATHE_CHECK(o.eval_iters > 0, "--eval-iters must be positive, got ", o.eval_iters);
  LATHE_CHECK(o.ckpt_interval >= 0, "--ckpt-interval must be >= 0, got ", o.ckpt_interval);
  LATHE_CHECK(o.keep_last >= 1, "--keep-last must be at least 1, got ", o.keep_last);
  LATHE_CHECK(o.threads >= 0, "--threads must be >= 0, got ", o.threads);
  LATHE_CHECK(o.sample_tokens >= 0, "--sample-tokens must be >= 0, got ", o.sample_tokens);
  LATHE_CHECK(o.zero == 0 || o.zero == 1, "--zero must be 0 (every process keeps the whole optimizer state) or 1 "
              "(the state is sharded over the processes), got ", o.zero);
  if (o.zero != 0 && !kind.shardable) {
    std::string shardable;
    for (const optim::OptimizerKind& k : optim::optimizer_kinds())
      if (k.shardable) shardable += (shardable.empty() ? "" : ", ") + std::string(k.name);
    LATHE_FAIL("--zero 1: ", o.optimizer, "'s update reads the state of every parameter at once, so its state cannot "
               "be sharded; use one of ", shardable, ", or --zero 0");
  }
  if (!o.freeze.empty()) freeze_pattern(o.freeze);
  LATHE_CHECK(o.grad_slices >= 0, "--grad-slices must be >= 0 (0: one slice per process), got ", o.grad_slices);
  LATHE_CHECK(std::isfinite(o.dist_timeout) && o.dist_timeout > 0,
              "--dist-timeout must be a positive number of seconds, got ", o.dist_timeout);
}

std::regex freeze_pattern(const std::string& pattern) {
  try {
    return std::regex(pattern, std::regex::ECMAScript);
  } catch (const std::regex_error& e) {
    LATHE_FAIL("--freeze \"", pattern, "\" is not a valid regular expression: ", e.what());
  }
}

int max_cpu_threads() {
  const int hardware = std::max(1, int(std::thread::hardware_concurrency()));
  return std::min(1024, 4 * hardware);
}

int capped_threads(int requested, std::string* warning) {
  const int cap = max_cpu_threads();
  if (requested <= cap) return requested;
  if (warning)
    *warning = "--threads " + std::to_string(requested) + " is more than " + std::to_string(cap) +
               " (4 x the hardware threads, at most 1024); using " + std::to_string(cap);
  return cap;
}

// One list of (key, member) drives both directions, so a new option cannot be saved but not read.
template <class F>
void for_each_option(TrainOptions& o, F&& f) {
  f("data", o.data);
  f("config", o.config);
  f("device", o.device);
  f("steps", o.steps);
  f("batch", o.batch);
  f("lr", o.lr);
  f("min_lr", o.min_lr);
  f("warmup", o.warmup);
  f("weight_decay", o.weight_decay);
  f("grad_clip", o.grad_clip);
  f("optimizer", o.optimizer);
  f("adam_lr", o.adam_lr);
  f("beta1", o.beta1);
  f("beta2", o.beta2);
  f("seed", o.seed);
  f("precision", o.precision);
  f("fused", o.fused);
  f("tf32", o.tf32);
  f("attention_backward", o.attention_backward);
  f("init_scale", o.init_scale);
  f("scale_growth_interval", o.scale_growth_interval);
  f("eval_interval", o.eval_interval);
  f("eval_iters", o.eval_iters);
  f("eval_mc", o.eval_mc);
  f("sft", o.sft);
  f("ckpt_interval", o.ckpt_interval);
  f("keep_last", o.keep_last);
  f("threads", o.threads);
  f("out", o.out);
  f("sample_tokens", o.sample_tokens);
  f("zero", o.zero);
  f("freeze", o.freeze);
  f("grad_slices", o.grad_slices);
  f("dist_timeout", o.dist_timeout);
  f("init_from", o.init_from);
}

// Text options are paths (data, out, config, init_from) or patterns, which are bytes on Linux: each
// goes through serialize's path form, a string when it is UTF-8 (so every checkpoint reads as
// before) and its bytes in hex when not (a run on ./data\xff trained, then could not save).
nlohmann::json to_json(const TrainOptions& o) {
  nlohmann::json j = nlohmann::json::object();
  TrainOptions copy = o;
  for_each_option(copy, [&](const char* key, auto& value) {
    if constexpr (std::is_same_v<std::decay_t<decltype(value)>, std::string>) j[key] = serialize::path_to_json(value);
    else j[key] = value;
  });
  return j;
}

TrainOptions fresh_run_options(TrainOptions o, const std::vector<std::string>& given) {
  auto was_given = [&](const char* key) { return std::find(given.begin(), given.end(), key) != given.end(); };
  if (const optim::OptimizerKind* kind = optim::find_optimizer_kind(o.optimizer); kind && !was_given("lr"))
    o.lr = kind->default_lr;
  if (was_given("init_from") && !was_given("config")) o.config.clear();  // the file's model
  return o;
}

TrainOptions train_options_from_json(const nlohmann::json& j) {
  LATHE_CHECK(j.is_object(), "training options: expected a JSON object, got ", j.type_name());
  TrainOptions o;
  size_t known = 0;
  for_each_option(o, [&](const char* key, auto& value) {
    auto it = j.find(key);
    if (it == j.end()) return;
    ++known;
    try {
      if constexpr (std::is_same_v<std::decay_t<decltype(value)>, std::string>)
        value = serialize::path_from_json(*it, std::string("training options: \"") + key + "\"");
      else it->get_to(value);
    } catch (const nlohmann::json::exception&) {
      LATHE_FAIL("training options: \"", key, "\" has the wrong type (", it->type_name(), ")");
    }
  });
  if (known != j.size()) {
    for (const auto& [key, value] : j.items()) {
      bool found = false;
      for_each_option(o, [&](const char* k, auto&) { found = found || key == k; });
      LATHE_CHECK(found, "training options: unknown key \"", key, "\"");
    }
  }
  return o;
}

}  // namespace lathe::train
