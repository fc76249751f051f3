#include "runtime/checkpoint_lock.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

namespace kiln::runtime {

CheckpointDirLock &CheckpointDirLock::operator=(CheckpointDirLock &&other) noexcept {
  if (this != &other) {
    if (fd_ >= 0)
      ::close(fd_);
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

CheckpointDirLock::~CheckpointDirLock() {
  if (fd_ >= 0)
    ::close(fd_);
}

Expected<CheckpointDirLock> CheckpointDirLock::acquire(const std::string &dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec)
    return Error("checkpoint folder '" + dir + "': " + ec.message());
  const std::string path = (std::filesystem::path(dir) / kCheckpointLockName).string();
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0644);
  if (fd < 0)
    return Error(path + ": cannot open the checkpoint folder's lock file: " + std::strerror(errno));
  CheckpointDirLock lock(fd);
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
    return Error(path + ": the checkpoint folder's lock file is not a regular file; remove it");
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    if (errno != EWOULDBLOCK)
      return Error(path + ": cannot lock the checkpoint folder: " + std::strerror(errno));
    char buf[32] = {};
    const ssize_t n = ::pread(fd, buf, sizeof(buf) - 1, 0);
    std::string holder(buf, n > 0 ? static_cast<size_t>(n) : 0);
    holder = holder.substr(0, holder.find_first_not_of("0123456789"));
    return Error("checkpoint folder '" + dir + "' is in use by another kiln train (pid " +
                 (holder.empty() ? "unknown" : holder) + ", holding " + path +
                 "): two runs in one folder would interleave their checkpoints; wait for it to "
                 "end or give this run another --checkpoint-dir");
  }
  const std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, pid.data(), pid.size(), 0) < 0)
    return Error(path + ": cannot write the lock holder's pid: " + std::strerror(errno));
  return lock;
}

} // namespace kiln::runtime
