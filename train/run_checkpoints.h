// The checkpoints of a run directory: DIR/ckpt-<step, 8 digits>.safetensors, the newest k kept.
//
// A checkpoint is written atomically (serialize/atomic_file.h) and older ones are deleted only
// after the new one is durable, so killing `lathe train` at any moment leaves every checkpoint
// that is listed here whole. Resuming never writes, moves or deletes a checkpoint: a damaged
// newest checkpoint is an error that names it and the newest older one, which --resume accepts
// as a file.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "serialize/checkpoint.h"

namespace lathe::app {

std::string checkpoint_path(const std::string& dir, int64_t step);

// (step, path) of every file named like a checkpoint in `dir`, oldest first.
std::vector<std::pair<int64_t, std::string>> list_checkpoints(const std::string& dir);

// Deletes all but the newest `keep` checkpoints of `dir`, and temporary files left by killed writers.
void prune_checkpoints(const std::string& dir, int64_t keep);

// The checkpoint to resume from: `dir_or_file` itself when it is a file, else the newest
// checkpoint of the directory. Read and fully validated; errors name the file at fault.
serialize::TrainingCheckpoint open_resume_checkpoint(const std::string& dir_or_file);

}  // namespace lathe::app
