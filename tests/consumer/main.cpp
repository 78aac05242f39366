// Trains the `tiny` preset for a few steps on a text file through an installed lathe's public
// headers, and prints each step's loss: what a project built on lathe does first.
//   lathe_consumer TEXT OUT
#include <cmath>
#include <cstdio>
#include <exception>

#include "core/backend.h"
#include "train/train_options.h"
#include "train/trainer.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: lathe_consumer TEXT OUT\n");
    return 2;
  }
  try {
    lathe::train::TrainOptions options;
    options.config = "tiny";
    options.data = argv[1];
    options.out = argv[2];
    options.steps = 3;
    options.eval_iters = 1;
    options.sample_tokens = 0;
    options.quiet = true;
    lathe::train::validate(options);
    lathe::train::Trainer trainer(options);
    // Registered at static initialisation by the CUDA backend's objects, when they were linked.
    std::printf("lathe %s, CUDA backend %s\n", LATHE_VERSION,
                lathe::backend_available(lathe::DeviceType::cuda) ? "registered" : "absent");
    for (int step = 1; step <= options.steps; ++step) {
      const lathe::train::StepResult r = trainer.train_step();
      std::printf("step %d loss %.4f\n", step, r.loss);
      if (!std::isfinite(r.loss)) return 1;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "lathe_consumer: %s\n", e.what());
    return 1;
  }
  return 0;
}
