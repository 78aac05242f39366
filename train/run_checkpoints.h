// The checkpoints of a run directory: DIR/ckpt-<step, 8 digits>.safetensors, the newest k kept.
//
// A checkpoint is written atomically (serialize/atomic_file.h) and older ones are deleted only
// after the new one is durable, so killing `lathe train` at any moment leaves every checkpoint
// that is listed here whole. Opening a checkpoint to resume never writes, moves or deletes one: a
// damaged newest checkpoint is an error that names it and the newest older one, which --resume
// accepts as a file.
//
// One directory, one lineage. Rotation ranks checkpoints by step, so a checkpoint of a later step
// than the resume point (the damaged newest one, or one of a run that went further) would outrank
// every checkpoint the resumed run writes and have them deleted as soon as they are written. So a
// run resumed from step k first moves every checkpoint of DIR with a step above k into
// DIR/superseded-<k>-<time>/ (one line on stderr says where): nothing is deleted that the user may
// still want, and DIR again holds the checkpoints of one run, up to step k. When the checkpoint
// resumed from lies outside DIR, the checkpoints already in DIR belong to another run, whatever
// their steps, and are moved aside the same way. Rotation then deletes only this lineage's older
// checkpoints, and never the one just written or the one resumed from.
//
// A run holds the directory's lock (serialize/directory_lock.h) from start to end: two runs
// writing one directory would prune each other's checkpoints.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "serialize/checkpoint.h"

namespace lathe::train {

std::string checkpoint_path(const std::string& dir, int64_t step);

// (step, path) of every file named like a checkpoint in `dir`, oldest first.
std::vector<std::pair<int64_t, std::string>> list_checkpoints(const std::string& dir);

// Deletes all but the newest `keep` checkpoints of `dir`, except those in `protect` (paths), and
// temporary files left by killed writers.
void prune_checkpoints(const std::string& dir, int64_t keep, const std::vector<std::string>& protect = {});

// Moves the checkpoints of `dir` that a run resumed at `step` from `resumed_from` does not
// continue (see above) into dir/superseded-<step>-<time>/. Returns that folder, or "" when
// nothing had to move.
std::string move_aside_superseded(const std::string& dir, int64_t step, const std::string& resumed_from);

// The checkpoint to resume from: `dir_or_file` itself when it is a file, else the newest
// checkpoint of the directory. Read and fully validated, each tensor created on the device
// `target_of` picks from its document (the host when it is empty); errors name the file at fault.
serialize::TrainingCheckpoint open_resume_checkpoint(const std::string& dir_or_file,
                                                     const serialize::TrainingCheckpoint::TargetOf& target_of = {});

}  // namespace lathe::train
