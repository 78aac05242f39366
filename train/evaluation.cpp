#include "train/evaluation.h"

#include <algorithm>
#include <cmath>

#include "core/autograd.h"
#include "core/error.h"

namespace lathe::train {

namespace {

// The model in eval mode without gradients for the scope, its training flag restored after.
class Inference {
 public:
  explicit Inference(nn::GPT& m) : m_(m), was_training_(m.is_training()) { m.eval(); }
  ~Inference() { m_.train(was_training_); }
  Inference(const Inference&) = delete;
  Inference& operator=(const Inference&) = delete;

 private:
  nn::GPT& m_;
  bool was_training_;
  NoGradGuard no_grad_;
};

// One row of a batch: the tokens read, and which of them are scored (from `first` on).
struct Row {
  std::vector<int64_t> tokens;
  size_t first = 0;  // index of the first scored token (the ending's first)
};

// Logits [B, T, V] of the rows, padded with token 0 at the end, as f32 on the host.
std::vector<float> logits_of(nn::GPT& model, const std::vector<Row>& rows, int64_t* T_out) {
  int64_t T = 0;
  for (const Row& r : rows) T = std::max<int64_t>(T, int64_t(r.tokens.size()));
  std::vector<int64_t> idx(rows.size() * size_t(T), 0);
  for (size_t b = 0; b < rows.size(); ++b) std::copy(rows[b].tokens.begin(), rows[b].tokens.end(), idx.begin() + b * T);
  const Tensor x = Tensor::from_vector(idx, {int64_t(rows.size()), T}, model.device());
  *T_out = T;
  return model.forward(x).logits.to(DType::f32).to(Device::cpu()).contiguous().to_vector<float>();
}

// log p(token | the row before it) from the logits [V] at the position before it, in f64.
double log_prob(const float* logits, int64_t V, int64_t token) {
  double m = -INFINITY;
  for (int64_t i = 0; i < V; ++i) m = std::max(m, double(logits[i]));
  double sum = 0;
  for (int64_t i = 0; i < V; ++i) sum += std::exp(double(logits[i]) - m);
  return double(logits[token]) - m - std::log(sum);
}

int64_t first_max(const std::vector<double>& v) {
  return int64_t(std::max_element(v.begin(), v.end()) - v.begin());  // the first of equal ones
}

}  // namespace

int64_t items_that_fit(const data::MultipleChoiceSet& set, const data::Tokenizer& tokenizer, int64_t block_size) {
  int64_t n = 0;
  for (const data::MultipleChoiceItem& item : set.items) {
    const size_t context = tokenizer.encode(item.context).size();
    bool fits = context > 0;
    for (const std::string& ending : item.endings)
      fits = fits && int64_t(context + tokenizer.encode(" " + ending).size()) <= block_size;
    n += fits;
  }
  return n;
}

MultipleChoiceResult evaluate_multiple_choice(nn::GPT& model, const data::Tokenizer& tokenizer,
                                              const data::MultipleChoiceSet& set, int64_t batch_rows,
                                              const Progress& progress) {
  LATHE_CHECK(batch_rows >= 1, "multiple choice: the batch must hold at least one row, got ", batch_rows);
  Inference inference(model);
  const int64_t block = model.config().block_size, V = model.config().vocab_size;
  MultipleChoiceResult result;
  result.skipped = set.skipped;

  // Every item's rows, or the reason it is skipped.
  struct Prepared {
    const data::MultipleChoiceItem* item;
    std::vector<Row> rows;
  };
  std::vector<Prepared> prepared;
  for (const data::MultipleChoiceItem& item : set.items) {
    const std::vector<int64_t> context = tokenizer.encode(item.context);
    Prepared p{&item, {}};
    std::string too_long;
    for (const std::string& ending : item.endings) {
      Row r;
      r.tokens = context;
      r.first = context.size();
      for (int64_t id : tokenizer.encode(" " + ending)) r.tokens.push_back(id);
      if (int64_t(r.tokens.size()) > block && too_long.empty())
        too_long = "the context and an ending take " + std::to_string(r.tokens.size()) + " tokens, more than the " +
                   "model's block_size " + std::to_string(block);
      p.rows.push_back(std::move(r));
    }
    if (context.empty()) too_long = "the context encodes to no token";
    if (!too_long.empty()) result.skipped.push_back({item.line, too_long});
    else prepared.push_back(std::move(p));
  }
  std::sort(result.skipped.begin(), result.skipped.end(),
            [](const data::SkippedItem& a, const data::SkippedItem& b) { return a.line < b.line; });
  LATHE_CHECK(!prepared.empty(), "multiple choice: no item fits the model (", result.skipped.size(), " skipped; line ",
              result.skipped.empty() ? 0 : result.skipped.front().line, ": ",
              result.skipped.empty() ? "" : result.skipped.front().reason, ")");

  int64_t correct = 0, correct_norm = 0;
  for (size_t next = 0; next < prepared.size();) {
    // Whole items, as many as the batch holds (at least one).
    size_t end = next;
    std::vector<Row> rows;
    while (end < prepared.size() &&
           (rows.empty() || int64_t(rows.size() + prepared[end].rows.size()) <= batch_rows)) {
      rows.insert(rows.end(), prepared[end].rows.begin(), prepared[end].rows.end());
      ++end;
    }
    int64_t T = 0;
    const std::vector<float> logits = logits_of(model, rows, &T);
    size_t row = 0;
    for (size_t i = next; i < end; ++i) {
      ItemScore score;
      score.line = prepared[i].item->line;
      score.label = prepared[i].item->label;
      std::vector<double> sums, means;
      for (const Row& r : prepared[i].rows) {
        EndingScore e;
        for (size_t t = r.first; t < r.tokens.size(); ++t)
          e.sum_logprob += log_prob(&logits[(row * size_t(T) + t - 1) * size_t(V)], V, r.tokens[t]);
        e.tokens = int64_t(r.tokens.size() - r.first);
        e.mean_logprob = e.sum_logprob / double(e.tokens);
        sums.push_back(e.sum_logprob);
        means.push_back(e.mean_logprob);
        score.endings.push_back(e);
        ++row;
      }
      score.pred = first_max(sums);
      score.pred_norm = first_max(means);
      correct += score.pred == score.label;
      correct_norm += score.pred_norm == score.label;
      result.items.push_back(std::move(score));
    }
    next = end;
    if (progress) progress(int64_t(next), int64_t(prepared.size()));
  }
  result.accuracy = double(correct) / double(result.items.size());
  result.accuracy_norm = double(correct_norm) / double(result.items.size());
  return result;
}

BitsPerByte evaluate_bits_per_byte(nn::GPT& model, const data::Tokenizer& tokenizer, const std::string& text,
                                   int64_t batch_rows, const Progress& progress) {
  LATHE_CHECK(batch_rows >= 1, "bits per byte: the batch must hold at least one window, got ", batch_rows);
  Inference inference(model);
  const std::vector<int64_t> ids = tokenizer.encode(text);
  LATHE_CHECK(ids.size() >= 2, "bits per byte: the text encodes to ", ids.size(),
              " token(s); at least two are needed (one predicts the next)");
  const int64_t block = model.config().block_size;
  const int64_t windows = (int64_t(ids.size()) - 1 + block - 1) / block;
  double nats = 0;
  for (int64_t w0 = 0; w0 < windows; w0 += batch_rows) {
    const int64_t rows = std::min(batch_rows, windows - w0);
    // Inputs and targets [rows, block]; the last window's tail is padded with token 0 and target -1.
    std::vector<int64_t> x(size_t(rows * block), 0), y(size_t(rows * block), -1);
    int64_t counted = 0;
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t start = (w0 + r) * block;
      for (int64_t t = 0; t < block && start + t + 1 < int64_t(ids.size()); ++t) {
        x[size_t(r * block + t)] = ids[size_t(start + t)];
        y[size_t(r * block + t)] = ids[size_t(start + t + 1)];
        ++counted;
      }
    }
    const Device d = model.device();
    const double mean = model.loss(Tensor::from_vector(x, {rows, block}, d), Tensor::from_vector(y, {rows, block}, d)).item();
    nats += mean * double(counted);
    if (progress) progress(w0 + rows, windows);
  }
  BitsPerByte out;
  out.tokens = int64_t(ids.size()) - 1;
  out.bytes = int64_t(text.size()) - int64_t(tokenizer.decode({ids.front()}).size());
  LATHE_CHECK(out.bytes > 0, "bits per byte: the predicted tokens hold no bytes");
  out.nats_per_token = nats / double(out.tokens);
  out.bits_per_byte = nats / std::log(2.0) / double(out.bytes);
  return out;
}

}  // namespace lathe::train
