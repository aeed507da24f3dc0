#include "storage/sqlite/db_lock.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>

namespace fenceq::daemon {

DbLock::DbLock(const std::string& db_path, const std::string& what)
    : path_(db_path + ".lock") {
  fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0640);
  created_ = fd_ >= 0;
  if (fd_ < 0 && errno == EEXIST) fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0640);
  if (fd_ < 0) {
    throw std::runtime_error("cannot open lock file " + path_ + ": " + std::strerror(errno));
  }
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    int err = errno;
    char buf[32] = {};
    ssize_t n = ::pread(fd_, buf, sizeof buf - 1, 0);
    std::string holder = n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : "";
    while (!holder.empty() && (holder.back() == '\n' || holder.back() == '\0')) holder.pop_back();
    ::close(fd_);
    fd_ = -1;
    if (err == EWOULDBLOCK) {
      throw std::runtime_error(what + " " + db_path + " is already owned by another fenceqd" +
                               (holder.empty() ? "" : " (pid " + holder + ")"));
    }
    throw std::runtime_error("cannot lock " + path_ + ": " + std::strerror(err));
  }
  std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd_, 0) == 0) {
    [[maybe_unused]] ssize_t w = ::pwrite(fd_, pid.data(), pid.size(), 0);
  }
}

void DbLock::discard() {
  if (fd_ >= 0 && created_) {
    ::unlink(path_.c_str());
    created_ = false;
  }
}

DbLock::~DbLock() {
  if (fd_ >= 0) {
    [[maybe_unused]] int rc = ::ftruncate(fd_, 0);
    ::close(fd_);  // releases the flock
  }
}

}  // namespace fenceq::daemon
