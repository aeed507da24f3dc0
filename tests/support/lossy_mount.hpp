// Test support: fenceq-lossyfs (tests/lossyfs/lossyfs.cpp) mounted on a fresh
// directory for the life of an object, with its power cut (SIGUSR1) on demand,
// and SQLite's integrity check of a database file.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "spawn.hpp"

namespace fenceq::test {

// fenceq-lossyfs BACKING MOUNT on /tmp/fql-XXXXXX/{backing,mnt} (the prefix
// tests/lossyfs/test_lossyfs.cpp reaps too). The constructor returns once
// the mount is ready; the destructor stops it (SIGTERM, then SIGKILL),
// unmounts whatever is left and removes the directory. Stop every process
// that uses the mount first: a busy mount is detached, not removed.
// The process gets SIGTERM when the thread that constructed this object
// exits (PR_SET_PDEATHSIG), so construct it on the main thread.
class LossyMount {
 public:
  // `setup` runs on BACKING before mounting (the durable state to start from).
  explicit LossyMount(const std::string& binary, std::vector<std::string> flags = {},
                      const std::function<void(const std::string&)>& setup = nullptr);
  ~LossyMount();
  LossyMount(const LossyMount&) = delete;
  LossyMount& operator=(const LossyMount&) = delete;

  const std::string& mnt() const { return mnt_; }
  const std::string& backing() const { return backing_; }
  std::string at(const std::string& name) const { return mnt_ + "/" + name; }
  std::string in_backing(const std::string& name) const { return backing_ + "/" + name; }
  pid_t pid() const { return proc_ ? proc_->pid() : -1; }
  // Power cuts since the last start.
  int cuts() const { return cuts_; }
  // What fenceq-lossyfs printed since the last start.
  const std::string& output() const;

  // Cuts the power (SIGUSR1) and waits for its `power cut N:` line, which
  // fenceq-lossyfs prints once the cut is complete; returns that line.
  // Throws when it does not come within `timeout`.
  std::string cut(std::chrono::milliseconds timeout = std::chrono::seconds(10));

  // Sends `sig` (SIGTERM, SIGINT: a clean unmount) and waits, 10 s at most,
  // then SIGKILL; its exit status.
  int stop(int sig);
  // Mounts again after stop(), over the same directories; throws when it
  // does not mount.
  void start();

 private:
  void teardown();
  bool wait_for(const std::string& needle, std::chrono::milliseconds timeout);

  std::string binary_, dir_, backing_, mnt_;
  std::vector<std::string> flags_;
  std::optional<Child> proc_;
  int cuts_ = 0;
};

// Whether `path` is a mount point (/proc/mounts lists it).
bool mounted(const std::string& path);

// Unmounts the mounts of dead fenceq-lossyfs instances under /tmp/fql-*
// (ENOTCONN: their process is gone) and removes their directories. A live
// instance is never touched.
void reap_dead_lossy_mounts();

// PRAGMA integrity_check on the SQLite database at `path`, opened read-only:
// "ok", or what SQLite reported (the errors, or why it could not open).
std::string sqlite_integrity(const std::string& path);

// The same on a copy of `path` and its `-wal` and `-journal` (when there are)
// in a fresh directory, opened read-write so that SQLite recovers them there
// as the daemon's next start would: the files on the mount stay untouched.
std::string sqlite_integrity_of_copy(const std::string& path);

}  // namespace fenceq::test
