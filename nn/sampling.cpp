#include "nn/sampling.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/autograd.h"

namespace lathe::nn {

namespace {

int64_t argmax_of(const std::vector<double>& x) {
  int64_t best = 0;
  for (int64_t i = 1; i < int64_t(x.size()); ++i)
    if (x[size_t(i)] > x[size_t(best)]) best = i;
  return best;
}

// p normalised to sum 1 (p holds at least one positive value).
void normalise(std::vector<double>& p) {
  const double total = std::accumulate(p.begin(), p.end(), 0.0);
  for (double& v : p) v /= total;
}

}  // namespace

void SamplingOptions::validate() const {
  LATHE_CHECK(temperature >= 0.0 && std::isfinite(temperature), "sample: temperature must be >= 0, got ", temperature);
  LATHE_CHECK(top_k >= 0, "sample: top_k must be >= 0 (0 keeps every token), got ", top_k);
  LATHE_CHECK(top_p > 0.0 && top_p <= 1.0, "sample: top_p must be in (0, 1] (1 keeps every token), got ", top_p);
  LATHE_CHECK(min_p >= 0.0 && min_p <= 1.0, "sample: min_p must be in [0, 1] (0 keeps every token), got ", min_p);
  LATHE_CHECK(repetition_penalty > 0.0 && std::isfinite(repetition_penalty),
              "sample: repetition_penalty must be a positive number (1 is off), got ", repetition_penalty);
  LATHE_CHECK(repetition_window >= 0, "sample: repetition_window must be >= 0 (0: every previous token), got ",
              repetition_window);
  LATHE_CHECK(vocab_limit >= 0, "sample: vocab_limit must be >= 0 (0: every id), got ", vocab_limit);
}

std::vector<double> sampling_distribution(std::span<const double> logits, const SamplingOptions& opt,
                                          std::span<const int64_t> previous) {
  const int64_t V = int64_t(logits.size());
  std::vector<double> x(logits.begin(), logits.end());
  for (int64_t i = 0; i < V; ++i) LATHE_CHECK(!std::isnan(x[size_t(i)]), "sample: the logits hold NaN at token ", i);
  if (opt.repetition_penalty != 1.0) {
    if (opt.repetition_window > 0 && int64_t(previous.size()) > opt.repetition_window)
      previous = previous.subspan(previous.size() - size_t(opt.repetition_window));
    std::vector<bool> seen(size_t(V), false);
    for (int64_t id : previous) {
      if (id < 0 || id >= V || seen[size_t(id)]) continue;  // each distinct id once
      seen[size_t(id)] = true;
      double& v = x[size_t(id)];
      v = v > 0 ? v / opt.repetition_penalty : v * opt.repetition_penalty;
    }
  }
  std::vector<double> p(size_t(V), 0.0);
  if (opt.temperature == 0.0) {
    p[size_t(argmax_of(x))] = 1.0;
    return p;
  }
  const double m = x[size_t(argmax_of(x))];
  LATHE_CHECK(std::isfinite(m), "sample: the largest logit is ", m);
  double kth = -INFINITY;  // top_k: the k-th largest logit; ties with it are kept
  if (opt.top_k > 0 && opt.top_k < V) {
    std::vector<double> sorted = x;
    std::nth_element(sorted.begin(), sorted.begin() + (opt.top_k - 1), sorted.end(), std::greater<double>());
    kth = sorted[size_t(opt.top_k - 1)];
  }
  for (int64_t i = 0; i < V; ++i)
    p[size_t(i)] = x[size_t(i)] >= kth ? std::exp((x[size_t(i)] - m) / opt.temperature) : 0.0;
  normalise(p);
  if (opt.top_p < 1.0) {
    // The most likely first (ties by id, so the set does not depend on the sort); keep until the
    // kept mass reaches top_p, the token that reaches it included.
    std::vector<int64_t> order(static_cast<size_t>(V));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return p[size_t(a)] > p[size_t(b)]; });
    double kept = 0.0;
    size_t n = 0;
    while (n < order.size() && kept < opt.top_p && p[size_t(order[n])] > 0.0) kept += p[size_t(order[n++])];
    for (size_t k = std::max<size_t>(n, 1); k < order.size(); ++k) p[size_t(order[k])] = 0.0;
    normalise(p);
  }
  if (opt.min_p > 0.0) {
    const double floor = opt.min_p * *std::max_element(p.begin(), p.end());
    for (double& v : p)
      if (v < floor) v = 0.0;
    normalise(p);
  }
  return p;
}

std::vector<int64_t> sample_tokens(const Tensor& all_logits, const SamplingOptions& opt, Generator& gen,
                                   const std::vector<std::span<const int64_t>>& previous) {
  LATHE_CHECK(all_logits.dim() == 2 && all_logits.size(1) > 0, "sample: logits must be [B, V], got ",
              all_logits.desc());
  opt.validate();
  // Ids past the limit are dropped before anything else, which is masking them with -inf.
  const bool limited = opt.vocab_limit > 0 && opt.vocab_limit < all_logits.size(1);
  const Tensor logits = limited ? all_logits.narrow(1, 0, opt.vocab_limit).contiguous() : all_logits;
  LATHE_CHECK(is_floating(logits.dtype()), "sample: logits must be floating, got ", logits.desc());
  LATHE_CHECK(previous.empty() || int64_t(previous.size()) == logits.size(0), "sample: ", previous.size(),
              " rows of previous tokens for ", logits.size(0), " rows of logits");
  const int64_t B = logits.size(0), V = logits.size(1);
  // The rows go to the host once; V numbers per row are cheap next to the forward pass.
  const std::vector<double> all = logits.detach().to_vector<double>();

  std::vector<int64_t> out(static_cast<size_t>(B));
  for (int64_t b = 0; b < B; ++b) {
    const std::span<const double> row(all.data() + b * V, size_t(V));
    std::vector<double> p;
    try {
      p = sampling_distribution(row, opt, previous.empty() ? std::span<const int64_t>() : previous[size_t(b)]);
    } catch (const Error& e) {
      LATHE_FAIL(e.what(), " (row ", b, ")");
    }
    if (opt.temperature == 0.0) {
      out[size_t(b)] = argmax_of(p);
      continue;
    }
    // Inverse CDF: the first token whose cumulative mass exceeds u.
    const double target = double(gen.next_uniform());
    int64_t pick = -1;
    double cum = 0.0;
    for (int64_t i = 0; i < V; ++i) {
      if (p[size_t(i)] == 0.0) continue;
      pick = i;  // the last token with mass catches rounding at the top end
      cum += p[size_t(i)];
      if (cum > target) break;
    }
    out[size_t(b)] = pick;
  }
  return out;
}

}  // namespace lathe::nn
