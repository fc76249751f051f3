// One writer per checkpoint folder: the process that writes a run's
// checkpoints holds an exclusive flock on DIR/.kiln-train.lock for the whole
// run, with its pid written in the file. The kernel releases the lock when
// the process ends, however it ends, so a killed run never leaves the folder
// locked; a second run on the folder is refused and told the holder's pid.
#pragma once

#include <string>

#include "support/error.h"

namespace kiln::runtime {

inline constexpr const char *kCheckpointLockName = ".kiln-train.lock";

class CheckpointDirLock {
public:
  // Creates `dir` when missing; an error when another process holds it.
  static Expected<CheckpointDirLock> acquire(const std::string &dir);

  CheckpointDirLock(CheckpointDirLock &&other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  CheckpointDirLock &operator=(CheckpointDirLock &&other) noexcept;
  CheckpointDirLock(const CheckpointDirLock &) = delete;
  CheckpointDirLock &operator=(const CheckpointDirLock &) = delete;
  ~CheckpointDirLock(); // releases the lock (the file stays: removing it would race)

private:
  explicit CheckpointDirLock(int fd) : fd_(fd) {}
  int fd_ = -1;
};

} // namespace kiln::runtime
