// The run directory of a fresh `lathe train`: what it may start in, and what --overwrite does.
//
// A fresh run writes its files (metrics.jsonl, loss.svg, checkpoints, model.safetensors) into
// --out, so --out must be absent or empty: a directory that holds anything else -- a converted
// Hugging Face model, another run's output, the weights this run fine-tunes -- would be overwritten
// file by file (a `model.safetensors` there was replaced without a word). Such a directory is refused,
// naming what it holds, unless --overwrite is given. (What a run killed before its first
// checkpoint leaves, its metrics so far, counts as empty: there is nothing to resume or keep.) Then the run's kind of files there (a run's:
// is_run_entry) are replaced as one unit: a new directory holding only the entries that are not a
// run's (carried over as hard links) takes the old one's place in one swap
// (serialize/staged_directory.h), so a kill leaves the old directory whole or the new one. Even with
// --overwrite, a directory that holds the run's own inputs (--data, --init-from) is refused: the
// swap would delete what the run reads.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "serialize/directory_lock.h"

namespace lathe::train {

// Whether an entry of a run directory is one a run writes: model.safetensors, metrics.jsonl,
// loss.svg, ckpt-<step>.safetensors, superseded-<step>-<time>/, the lock, and the temporary files
// of their atomic writes.
bool is_run_entry(const std::string& name);

// Makes `dir` ready for a fresh run and locks it into `lock` (the lock of the directory the run
// then writes). `inputs` are the paths the run reads (its --data, --init-from), which --overwrite
// may not replace. Errors name --out, what it holds and what to do.
void prepare_fresh_run_directory(const std::string& dir, bool overwrite, const std::vector<std::string>& inputs,
                                 std::optional<serialize::DirectoryLock>& lock);

}  // namespace lathe::train
