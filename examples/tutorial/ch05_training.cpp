// Chapter 5 of the tutorial (docs/tutorial/05-training.md): the training loop -- data, loss,
// optimizer step, learning-rate schedule -- on a small corpus, written out by hand.
#include <cstdio>
#include <iostream>
#include <string>

#include "core/autograd.h"
#include "data/byte_tokenizer.h"
#include "data/text_dataset.h"
#include "nn/gpt.h"
#include "optim/adam.h"
#include "optim/clip.h"
#include "optim/schedule.h"
#include "train/nanogpt_groups.h"
#include "core/system_info.h"
#include "tutorial.h"

using namespace lathe;

int main() {
  std::cout << std::boolalpha;
  tutorial::part("data");
  // [tutorial:data]
  const int64_t block_size = 32, batch = 8;
  data::TextDataset data(data::TextCorpus::open(LATHE_TUTORIAL_DIR "/data/workshop.txt"), block_size);
  std::printf("corpus %zu bytes: %zu for training, %zu for validation\n", data.corpus().size(),
              data.split_size(data::Split::train), data.split_size(data::Split::val));
  Generator data_gen(/*seed=*/1);  // where the batches come from: (seed, offset)
  data::Batch b = data.sample(data::Split::train, batch, data_gen);
  data::ByteTokenizer tok;
  std::cout << "x " << b.x.desc() << ", y " << b.y.desc() << "\n";
  std::cout << "x[0] \"" << tok.decode(b.x.select(0, 0).to_vector<int64_t>()) << "\"\n";
  std::cout << "y[0] \"" << tok.decode(b.y.select(0, 0).to_vector<int64_t>()) << "\"\n";
  // [/tutorial:data]

  tutorial::part("setup");
  // [tutorial:setup]
  set_cpu_threads(1);  // a model this small gains nothing from threads
  nn::GPTConfig cfg;
  cfg.vocab_size = 256, cfg.block_size = block_size, cfg.n_layer = 2, cfg.n_head = 2, cfg.n_embd = 32;
  nn::GPT model(cfg, /*seed=*/1337);
  model.to(DType::f64);  // see the chapter: the printed losses are then the same on every CPU
  optim::AdamW opt;      // no parameters yet: nanoGPT's two groups follow
  train::add_nanogpt_param_groups(opt, model, {{"lr", 5e-3}, {"weight_decay", 0.1}, {"betas", {0.9, 0.99}}});
  for (size_t g = 0; g < opt.param_groups().size(); ++g)
    std::cout << "group " << g << ": " << opt.param_groups()[g].params.size() << " tensors, weight_decay "
              << opt.param_groups()[g].number("weight_decay") << "\n";
  const int64_t steps = 150;
  optim::WarmupCosineLr schedule(/*lr=*/5e-3, /*warmup_iters=*/15, /*lr_decay_iters=*/steps, /*min_lr=*/5e-4);
  // [/tutorial:setup]

  // [tutorial:evaluate]
  // Mean validation loss over a fixed set of batches: eval mode, no graph.
  auto evaluate = [&] {
    NoGradGuard no_grad;
    model.eval();
    Generator val_gen(/*seed=*/2);  // the same windows at every evaluation
    double total = 0;
    for (int i = 0; i < 4; ++i) {
      data::Batch v = data.sample(data::Split::val, batch, val_gen);
      total += model.forward(v.x, v.y).loss.item();
    }
    model.train();
    return total / 4;
  };
  // [/tutorial:evaluate]

  tutorial::part("loop");
  // [tutorial:loop]
  std::printf("step   0  val loss %.4f\n", evaluate());
  for (int64_t step = 0; step < steps; ++step) {
    data::Batch xy = data.sample(data::Split::train, batch, data_gen);
    Tensor loss = model.forward(xy.x, xy.y).loss;   // forward: mean cross-entropy
    loss.backward();                                // gradients into every parameter's .grad
    double norm = optim::clip_grad_norm(model.parameters(), 1.0).item();
    opt.set_lr_all(schedule.lr(step));              // the schedule sets this step's LR
    opt.step();                                     // the update
    opt.zero_grad();                                // clear .grad for the next step
    if ((step + 1) % 30 == 0)
      std::printf("step %3lld  loss %.4f  lr %.5f  grad norm %.3f\n", (long long)(step + 1), loss.item(),
                  schedule.lr(step), norm);
  }
  std::printf("step %3lld  val loss %.4f\n", (long long)steps, evaluate());
  // [/tutorial:loop]

  tutorial::part("sample");
  // [tutorial:sample]
  std::vector<int64_t> prompt = tok.encode("The turner ");
  Tensor idx = Tensor::from_vector(prompt, {1, int64_t(prompt.size())});
  Tensor out = model.generate(idx, /*max_new_tokens=*/60, /*temperature=*/0.8, /*top_k=*/0, /*seed=*/7);
  std::cout << "\"" << tok.decode(out.select(0, 0).to_vector<int64_t>()) << "\"\n";
  // [/tutorial:sample]
  return 0;
}
