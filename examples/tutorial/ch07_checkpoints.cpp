// Chapter 7 of the tutorial (docs/tutorial/07-checkpoints.md): save a run, damage a copy, restore
// onto another device (sim) and resume bit for bit.
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "data/text_dataset.h"
#include "nn/gpt.h"
#include "optim/adam.h"
#include "serialize/checkpoint.h"
#include "train/nanogpt_groups.h"
#include "core/system_info.h"
#include "tutorial.h"

using namespace lathe;
namespace fs = std::filesystem;

// [tutorial:run]
// Everything a run is: the model, its optimizer, the batch generator and the step.
struct Run {
  std::unique_ptr<nn::GPT> model;
  std::unique_ptr<optim::AdamW> opt;
  Generator data_gen{/*seed=*/1};
  int64_t step = 0;
};

nn::GPTConfig config() {
  nn::GPTConfig c;
  c.vocab_size = 256, c.block_size = 32, c.n_layer = 2, c.n_head = 2, c.n_embd = 32;
  return c;
}

// A model and optimizer on `device`, as at the start of a run (a restore overwrites them).
Run make_run(Device device) {
  Run r;
  r.model = std::make_unique<nn::GPT>(config(), /*seed=*/1337, device);
  r.model->to(DType::f64);
  r.opt = std::make_unique<optim::AdamW>();
  train::add_nanogpt_param_groups(*r.opt, *r.model, {{"lr", 1e-2}, {"weight_decay", 0.1}});
  return r;
}

// n training steps; returns each step's loss.
std::vector<double> train_steps(Run& r, const data::TextDataset& data, int n) {
  std::vector<double> losses;
  for (int i = 0; i < n; ++i, ++r.step) {
    data::Batch b = data.sample(data::Split::train, 8, r.data_gen, r.model->device());
    Tensor loss = r.model->forward(b.x, b.y).loss;
    loss.backward();
    r.opt->step();
    r.opt->zero_grad();
    losses.push_back(loss.item());
  }
  return losses;
}
// [/tutorial:run]

int main() {
  std::cout << std::boolalpha;
  set_cpu_threads(1);  // one thread: small work, and bitwise reproducible
  const fs::path dir = fs::temp_directory_path() / ("lathe-tutorial-ch07-" + std::to_string(getpid()));
  fs::create_directories(dir);
  auto hide_dir = [&](std::string s) {  // temporary paths differ from run to run
    for (size_t at; (at = s.find(dir.string())) != std::string::npos;) s.replace(at, dir.string().size(), "DIR");
    return s;
  };
  data::TextDataset data(data::TextCorpus::open(LATHE_TUTORIAL_DIR "/data/workshop.txt"), 32);

  tutorial::part("save");
  // [tutorial:save]
  Run a = make_run(Device::cpu());
  train_steps(a, data, 5);
  const std::string path = (dir / "ckpt-5.safetensors").string();
  serialize::TrainingStateRef ref;
  ref.model = a.model.get();
  ref.optimizer = a.opt.get();
  ref.step = a.step;
  ref.model_description = config();
  ref.program = {{"data_gen", {a.data_gen.seed(), a.data_gen.offset()}}};
  serialize::save_training_state(path, ref);
  std::vector<double> uninterrupted = train_steps(a, data, 5);  // steps 6 to 10 of the run that never stopped
  // [/tutorial:save]
  // [tutorial:contents]
  // A checkpoint is a plain safetensors file: any reader opens it.
  serialize::SafetensorsFile file = serialize::read_safetensors(path);
  std::cout << file.tensors.size() << " tensors, for example:\n";
  for (const char* name : {"transformer.wte.weight", "optim.param.0.exp_avg", "optim.param.0.step",
                           "optim.global.step"})
    std::cout << "  " << name << " " << file.at(name).desc() << "\n";
  // [/tutorial:contents]

  tutorial::part("damage");
  // [tutorial:damage]
  const std::string copy = (dir / "damaged.safetensors").string();
  fs::copy_file(path, copy);
  {
    std::fstream f(copy, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(-100, std::ios::end);  // a byte inside the last tensor's data
    char byte;
    f.read(&byte, 1);
    byte ^= 0x01;                  // one bit flipped
    f.seekp(-100, std::ios::end);
    f.write(&byte, 1);
  }
  try {
    serialize::TrainingCheckpoint::read(copy);
  } catch (const Error& e) {
    std::cout << "refused: " << hide_dir(e.what()) << "\n";
  }
  // [/tutorial:damage]

  tutorial::part("resume");
  // [tutorial:resume]
  // Build the run on sim, as at the start, then restore: weights into the parameters in place,
  // each optimizer state tensor created where its policy puts it for sim.
  serialize::TrainingCheckpoint ckpt = serialize::TrainingCheckpoint::read(path, Device::sim());
  Run b = make_run(Device::sim());
  ckpt.restore(*b.model, *b.opt);
  b.step = ckpt.step();
  const nlohmann::json& gen = ckpt.program().at("data_gen");
  b.data_gen.set_state(gen[0].get<uint64_t>(), gen[1].get<uint64_t>());
  std::cout << "resumed at step " << b.step << " on " << b.model->device() << "; exp_avg of parameter 0 on "
            << b.opt->state(0, "exp_avg").device() << ", its step counter on "
            << b.opt->state(0, "step").device() << "\n";
  std::vector<double> resumed = train_steps(b, data, 5);
  for (size_t i = 0; i < resumed.size(); ++i)
    std::printf("step %zu  uninterrupted %.6f  resumed %.6f  %s\n", i + 6, uninterrupted[i], resumed[i],
                std::memcmp(&uninterrupted[i], &resumed[i], sizeof(double)) == 0 ? "bitwise equal" : "DIFFERENT");
  // [/tutorial:resume]
  tutorial::part("weights");
  // [tutorial:weights]
  bool same = true;
  std::vector<Tensor> pa = a.model->parameters(), pb = b.model->parameters();
  for (size_t i = 0; i < pa.size(); ++i) {
    std::vector<double> va = pa[i].to_vector<double>(), vb = pb[i].to_vector<double>();
    same = same && std::memcmp(va.data(), vb.data(), va.size() * sizeof(double)) == 0;
  }
  std::cout << "final weights: " << (same ? "bitwise equal" : "DIFFERENT") << "\n";
  // [/tutorial:weights]
  fs::remove_all(dir);
  return 0;
}
