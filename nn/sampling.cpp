#include "nn/sampling.h"

#include <algorithm>
#include <cmath>

#include "core/autograd.h"

namespace lathe::nn {

namespace {

int64_t argmax_of(const double* x, int64_t V) {
  int64_t best = 0;
  for (int64_t i = 1; i < V; ++i)
    if (x[i] > x[best]) best = i;
  return best;
}

}  // namespace

std::vector<int64_t> sample_tokens(const Tensor& all_logits, const SamplingOptions& opt, Generator& gen) {
  LATHE_CHECK(all_logits.dim() == 2 && all_logits.size(1) > 0, "sample: logits must be [B, V], got ",
              all_logits.desc());
  LATHE_CHECK(opt.vocab_limit >= 0, "sample: vocab_limit must be >= 0 (0: every id), got ", opt.vocab_limit);
  // Ids past the limit are dropped before anything else, which is masking them with -inf.
  const bool limited = opt.vocab_limit > 0 && opt.vocab_limit < all_logits.size(1);
  const Tensor logits = limited ? all_logits.narrow(1, 0, opt.vocab_limit).contiguous() : all_logits;
  LATHE_CHECK(is_floating(logits.dtype()), "sample: logits must be floating, got ", logits.desc());
  LATHE_CHECK(opt.temperature >= 0.0 && std::isfinite(opt.temperature), "sample: temperature must be >= 0, got ",
              opt.temperature);
  LATHE_CHECK(opt.top_k >= 0, "sample: top_k must be >= 0 (0 keeps every token), got ", opt.top_k);
  const int64_t B = logits.size(0), V = logits.size(1);
  // The rows go to the host once; V numbers per row are cheap next to the forward pass.
  const std::vector<double> all = logits.detach().to_vector<double>();

  std::vector<int64_t> out(static_cast<size_t>(B));
  std::vector<double> p(static_cast<size_t>(V)), sorted;
  for (int64_t b = 0; b < B; ++b) {
    const double* row = all.data() + b * V;
    for (int64_t i = 0; i < V; ++i)
      LATHE_CHECK(!std::isnan(row[i]), "sample: logits of row ", b, " hold NaN at token ", i);
    if (opt.temperature == 0.0) {
      out[size_t(b)] = argmax_of(row, V);
      continue;
    }
    double threshold = -INFINITY;
    if (opt.top_k > 0 && opt.top_k < V) {
      sorted.assign(row, row + V);
      std::nth_element(sorted.begin(), sorted.begin() + (opt.top_k - 1), sorted.end(), std::greater<double>());
      threshold = sorted[size_t(opt.top_k - 1)];
    }
    const double m = row[argmax_of(row, V)];
    LATHE_CHECK(std::isfinite(m), "sample: the largest logit of row ", b, " is ", m);
    double total = 0.0;
    for (int64_t i = 0; i < V; ++i) {
      p[size_t(i)] = row[i] >= threshold ? std::exp((row[i] - m) / opt.temperature) : 0.0;
      total += p[size_t(i)];
    }
    // Inverse CDF: the first token whose cumulative mass exceeds u * total.
    const double target = double(gen.next_uniform()) * total;
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
