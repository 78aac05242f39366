// GPT::generate: autoregressive sampling, with or without a KV cache.
#include <algorithm>
#include <span>

#include "core/autograd.h"
#include "nn/gpt.h"
#include "nn/sampling.h"

namespace lathe::nn {

namespace {

// Restores a module's training flag at scope exit.
class EvalScope {
 public:
  explicit EvalScope(Module& m) : m_(m), was_training_(m.is_training()) { m.eval(); }
  ~EvalScope() { m_.train(was_training_); }
  EvalScope(const EvalScope&) = delete;
  EvalScope& operator=(const EvalScope&) = delete;

 private:
  Module& m_;
  bool was_training_;
};

}  // namespace

Tensor GPT::generate(const Tensor& idx, int64_t max_new_tokens, double temperature, int64_t top_k, uint64_t seed,
                     bool use_cache, int64_t vocab_limit) {
  LATHE_CHECK(temperature >= 0.0, "GPT::generate: temperature must be >= 0, got ", temperature);
  LATHE_CHECK(top_k >= 0, "GPT::generate: top_k must be >= 0 (0 keeps every token), got ", top_k);
  SamplingOptions sampling;
  sampling.temperature = temperature;
  sampling.top_k = top_k;
  sampling.vocab_limit = vocab_limit;
  return generate(idx, max_new_tokens, sampling, seed, use_cache);
}

Tensor GPT::generate(const Tensor& idx, int64_t max_new_tokens, const SamplingOptions& sampling, uint64_t seed,
                     bool use_cache, const TokenCallback& on_token) {
  LATHE_CHECK(idx.dim() == 2 && idx.size(1) >= 1, "GPT::generate: idx must be [B, T] with T >= 1, got ", idx.desc());
  LATHE_CHECK(is_integral(idx.dtype()), "GPT::generate: idx must hold i64 or i32 token ids, got ", idx.desc());
  LATHE_CHECK(max_new_tokens >= 0, "GPT::generate: max_new_tokens must be >= 0, got ", max_new_tokens);
  sampling.validate();

  NoGradGuard no_grad;
  EvalScope eval(*this);
  const Device dev = device();
  const int64_t B = idx.size(0), block = config_.block_size;
  const int64_t total = idx.size(1) + max_new_tokens;

  // Every row's tokens so far, on the host: [B, total], the first `len` columns filled.
  std::vector<int64_t> tokens(size_t(B * total));
  {
    std::vector<int64_t> prompt = idx.to_vector<int64_t>();
    for (int64_t b = 0; b < B; ++b)
      std::copy_n(prompt.begin() + b * idx.size(1), idx.size(1), tokens.begin() + b * total);
  }
  int64_t len = idx.size(1);
  // The last min(len, block_size) tokens of each row: what a step conditions on.
  auto window = [&](int64_t n) {
    std::vector<int64_t> w(size_t(B * n));
    for (int64_t b = 0; b < B; ++b)
      std::copy_n(tokens.begin() + b * total + (len - n), n, w.begin() + b * n);
    Tensor t = Tensor::from_vector(w, {B, n}, dev);
    check_token_ids("idx", t);
    return t;
  };

  Generator gen(seed);
  std::vector<KVCache> caches(size_t(config_.n_layer));
  // Room for every position this call conditions on, and no more: a model of a long context
  // (block_size 10^8) sampling a few tokens holds caches of a few positions.
  for (auto& c : caches) c.capacity = std::min(block, total);
  auto recompute_window = [&]() {
    const int64_t n = std::min(len, block);
    for (auto& c : caches) c.length = 0;
    return last_logits(hidden_states(window(n), 0, use_cache ? &caches : nullptr));
  };

  Tensor logits;
  for (int64_t step = 0; step < max_new_tokens; ++step) {
    if (!use_cache || step == 0 || caches.front().length == block) {
      logits = recompute_window();
    } else {
      // Only the newest token goes through the model; it sits right after the cached positions.
      logits = last_logits(hidden_states(window(1), caches.front().length, &caches));
    }
    std::vector<std::span<const int64_t>> previous;
    if (sampling.repetition_penalty != 1.0)
      for (int64_t b = 0; b < B; ++b) previous.emplace_back(tokens.data() + b * total, size_t(len));
    const std::vector<int64_t> next = sample_tokens(logits, sampling, gen, previous);
    for (int64_t b = 0; b < B; ++b) tokens[size_t(b * total + len)] = next[size_t(b)];
    ++len;
    if (on_token && !on_token(next)) break;
  }
  // The rows as far as they were drawn (all of them, unless on_token stopped early).
  std::vector<int64_t> drawn(size_t(B * len));
  for (int64_t b = 0; b < B; ++b) std::copy_n(tokens.begin() + b * total, len, drawn.begin() + b * len);
  return Tensor::from_vector(drawn, {B, len}, dev);
}

}  // namespace lathe::nn
