// The advisory lock a lathe program holds on the directory it writes (`lathe train` on its run
// directory, `lathe tokenize` on its shard directory), so that two programs never write one
// directory at once: two runs would prune each other's checkpoints, two tokenizers interleave
// their shards.
//
// The lock is flock(2) on DIR/.lock, held while the object lives and released by the kernel when
// the process ends, however it ends (a killed holder leaves no stale lock). The file holds the
// holder's process id and program, for the message that refuses a second one; its content is only
// ever a message, never the lock.
#pragma once

#include <string>

namespace lathe::serialize {

class DirectoryLock {
 public:
  // Locks `dir` (which must exist) for `program` ("lathe train"), which writes it as a `what`
  // ("run directory"). A directory another process (or another lock of this one) holds is refused
  // at once with a lathe::Error "--out DIR: another lathe train (process 4242) is using this run
  // directory (DIR/.lock); wait for it to end or choose another --out".
  DirectoryLock(const std::string& dir, const std::string& program, const std::string& what);
  ~DirectoryLock();
  DirectoryLock(const DirectoryLock&) = delete;
  DirectoryLock& operator=(const DirectoryLock&) = delete;
  DirectoryLock(DirectoryLock&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }

  static std::string lock_path(const std::string& dir);  // DIR/.lock

 private:
  int fd_ = -1;
};

}  // namespace lathe::serialize
