// A directory written as one unit: a Hugging Face model, a shard directory, a run directory that
// --overwrite replaces. Readers (and a kill at any instant) see the old directory whole or the new
// one whole, never a mix.
//
// The new content goes into a stage beside the target, DIR/../.NAME.stage-<pid>-<n>/, which the
// writer fills completely (each file atomically, serialize/atomic_file.h). commit() then puts it in
// place in one rename: over nothing (renameat2's RENAME_NOREPLACE, so that a target another process
// made meanwhile is refused, not replaced), or in exchange for the existing target
// (RENAME_EXCHANGE: both names stay valid at every instant), after which the old directory, now
// under the stage's name, is deleted. Entries of the old directory that the writer does not own
// (a tokenizer beside a model's weights, a user's notes in a run directory) are carried into the
// stage first as hard links (copies where the file system has none), so they survive the swap.
//
// A writer holds a lock (flock) on its stage while it lives; a stage that nobody holds is a killed
// writer's, and the next StagedDirectory of the same target deletes it. On a file system without
// renameat2 (e.g. NFS) the swap is two renames, the old directory first moved to
// .NAME.old-<pid>-<n>; a kill between them leaves that and no target, which the next writer puts back.
#pragma once

#include <functional>
#include <string>

namespace lathe::serialize {

class StagedDirectory {
 public:
  // Clears stale stages of `target`, then makes a fresh, empty stage and locks it. `replace`: the
  // caller has decided that an existing target may be replaced (its --overwrite, or the target is
  // empty); otherwise commit() refuses a target that exists by then. `what` names the target in
  // errors ("--out runs/x").
  StagedDirectory(std::string target, bool replace, std::string what);
  ~StagedDirectory();  // uncommitted: the stage and everything in it are removed
  StagedDirectory(const StagedDirectory&) = delete;
  StagedDirectory& operator=(const StagedDirectory&) = delete;

  // Where to write the new content.
  const std::string& path() const { return stage_; }

  // Puts the stage in place of the target (see above), durably. `keep(name)` is asked for each
  // entry of an existing target: true carries it into the new directory (unless the stage already
  // holds that name). Call once, after the last write into the stage.
  void commit(const std::function<bool(const std::string& name)>& keep = {});

 private:
  std::string target_, what_, stage_;
  bool replace_;
  int lock_fd_ = -1;
  bool committed_ = false;
};

// Deletes what killed writers of `target` left beside it: stages nobody holds, and a target that a
// kill between the two renames of the fallback swap left moved aside is put back. Called by
// StagedDirectory; exposed for tests.
void clear_stale_stages(const std::string& target);

}  // namespace lathe::serialize
