// Group commit's second half: makes committed transactions durable off the
// serving thread.
//
// With --sync full, SQLite commits in WAL mode without an fsync
// (synchronous=NORMAL, which still orders checkpoints safely), and this
// thread fdatasync()s the WAL file after each commit. Replies wait for the
// fdatasync that covers their commit (C1.4), but the serving thread does not:
// it applies and commits the next requests while the disk works, and the next
// fdatasync covers all of them at once. The disk is kept busy whenever there
// is work, and an idle daemon never waits to fill a batch.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

namespace fenceq::daemon {

class Syncer {
 public:
  // `wal_path`: the database's "-wal" file (opened at the first request).
  explicit Syncer(std::string wal_path);
  ~Syncer();  // finishes the requested syncs, then stops
  Syncer(const Syncer&) = delete;
  Syncer& operator=(const Syncer&) = delete;

  // Asks for every commit up to generation `gen` to be made durable.
  void request(std::uint64_t gen);
  // The highest generation known durable.
  std::uint64_t synced() const { return synced_.load(std::memory_order_acquire); }
  // Readable (an eventfd) whenever synced() advanced or the syncer failed;
  // consume with clear_event().
  int event_fd() const { return event_fd_; }
  void clear_event();
  // Blocks until every requested generation is durable (or the syncer failed).
  void wait_all();
  // Set when an fdatasync failed: durability of later commits is unknown.
  bool failed() const { return failed_.load(std::memory_order_acquire); }
  std::string error() const;

 private:
  void loop();

  std::string wal_path_;
  int wal_fd_ = -1;
  int event_fd_ = -1;
  mutable std::mutex mu_;
  std::condition_variable cv_, done_cv_;
  std::uint64_t requested_ = 0;
  bool stop_ = false;
  std::string error_;
  std::atomic<std::uint64_t> synced_{0};
  std::atomic<bool> failed_{false};
  std::thread thread_;
};

}  // namespace fenceq::daemon
