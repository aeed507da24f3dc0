// C1.3: exactly one fenceqd writes a database. The daemon holds an exclusive
// flock(2) on `<db>.lock` for its whole life, taken before any socket is bound,
// so a second daemon on the same file exits without disturbing the first one's
// endpoints. The kernel drops the lock when the process dies, even by kill -9.
#pragma once

#include <string>

namespace fenceq::daemon {

class DbLock {
 public:
  // Throws std::runtime_error with a one-line reason (naming the holder's pid
  // when it can) if another process holds the lock or the file can't be made.
  explicit DbLock(const std::string& db_path, const std::string& what = "database");
  DbLock(const DbLock&) = delete;
  DbLock& operator=(const DbLock&) = delete;
  ~DbLock();

  const std::string& path() const { return path_; }
  // Removes the lock file if this lock made it (a start that failed leaves
  // nothing beside the database), still holding the lock; the lock is
  // released when the object goes.
  void discard();

 private:
  std::string path_;
  int fd_ = -1;
  bool created_ = false;
};

}  // namespace fenceq::daemon
