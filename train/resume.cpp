// Trainer::resume: the whole of `lathe train --resume` in one place -- which checkpoint, which
// options, and the restored state.
#include <algorithm>
#include <filesystem>

#include "train/program_state.h"
#include "train/run_checkpoints.h"
#include "train/trainer.h"

namespace lathe::train {

namespace {

// The checkpoint's options with the run-management flags the user gave on top. What may change:
// how long and where the run goes on, not what it computes. (A new device or thread count
// restores the same state, by policy, but need not give the same bits; nor do --tf32, which says
// how a GPU rounds the inputs of f32 products, and --attention-backward, which says in what order it
// sums attention's dQ, as a change of device does.) The world size is not
// an option and --zero may change: a checkpoint holds the whole state in one file, whoever wrote it.
TrainOptions merged_options(const TrainOptions& stored_options, const TrainOptions& given,
                            const std::vector<std::string>& given_keys) {
  static const std::vector<std::string> free_keys = {"steps",   "eval_interval", "eval_iters",    "ckpt_interval",
                                                     "keep_last", "threads",     "device",        "out",
                                                     "sample_tokens", "data", "zero", "grad_slices", "tf32",
                                                     "dist_timeout", "eval_mc", "sft", "attention_backward"};
  nlohmann::json stored = to_json(stored_options), wanted = to_json(given);
  for (const std::string& key : given_keys) {
    if (!wanted.contains(key)) continue;
    if (std::find(free_keys.begin(), free_keys.end(), key) != free_keys.end()) {
      stored[key] = wanted[key];
    } else {
      LATHE_CHECK(stored[key] == wanted[key], "--resume: the checkpoint's run has ", key, " = ", stored[key].dump(),
                  ", the command line asks for ", wanted[key].dump(), "; a resumed run keeps its settings");
    }
  }
  // A fine-tuning run resumes on conversations, a pretraining run on text: the other flag would be
  // ignored, or would turn the run into another one.
  const bool given_data = std::find(given_keys.begin(), given_keys.end(), "data") != given_keys.end();
  const bool given_sft = std::find(given_keys.begin(), given_keys.end(), "sft") != given_keys.end();
  const bool fine_tuning = !stored_options.sft.empty();
  LATHE_CHECK(!(fine_tuning && given_data), "--resume: the checkpoint's run fine-tunes on conversations (--sft ",
              stored_options.sft, "); give --sft FILE, not --data, to say where they are now");
  LATHE_CHECK(!(!fine_tuning && given_sft), "--resume: the checkpoint's run pretrains on --data; to fine-tune it for ",
              "chat, start a run with --init-from CHECKPOINT --sft FILE");
  TrainOptions out = train_options_from_json(stored);
  out.quiet = given.quiet;
  out.progress_seconds = given.progress_seconds;
  out.resume = given.resume;
  return out;
}

}  // namespace

Trainer Trainer::resume(const std::string& dir_or_file, const TrainOptions& given,
                        const std::vector<std::string>& given_keys, dist::Communicator* comm) {
  // Read straight onto the device the run continues on: the one given, else the run's own.
  const bool device_given = std::find(given_keys.begin(), given_keys.end(), "device") != given_keys.end();
  auto target_of = [&](const serialize::CheckpointDocument& doc) {
    if (device_given) return Device::parse(given.device);
    const auto stored = doc.program.find("options");
    const bool has_device = stored != doc.program.end() && stored->is_object() && stored->contains("device") &&
                            (*stored)["device"].is_string();
    return has_device ? Device::parse((*stored)["device"].get<std::string>()) : Device::cpu();
  };
  const serialize::TrainingCheckpoint ckpt = open_resume_checkpoint(dir_or_file, target_of);
  const ProgramState program = read_program_state(ckpt);
  TrainOptions o;
  try {
    o = merged_options(program.options, given, given_keys);
    // The run directory defaults to the checkpoint's directory.
    if (std::find(given_keys.begin(), given_keys.end(), "out") == given_keys.end())
      o.out = std::filesystem::path(ckpt.path()).parent_path().string();
    validate(o);
  } catch (const Error& e) {
    throw ResumeSettingsError(e.what());
  }
  return Trainer(std::move(o), &ckpt, &program, comm);
}

}  // namespace lathe::train
