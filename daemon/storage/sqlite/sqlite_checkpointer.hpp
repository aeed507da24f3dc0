// The SQLite store's checkpoints off the serving thread, with --sync normal
// and off. SQLite's own auto-checkpoint runs inside the COMMIT that takes the
// write-ahead log past 1,000 pages: that batch also copies the pages into the
// database file and fsyncs log and file, and its requests wait for all of it.
// With --sync normal that was ~8 ms on one batch in a hundred or so, a worker's
// p99 (0.75 ms before; 8 ms while a retention's deletes made more pages).
//
// Here the writer's commit only notes the log's length (sqlite3_wal_hook, which
// replaces the auto-checkpoint); past kPages a thread with its own connection
// runs a PASSIVE checkpoint, which takes no lock the writer waits for, at
// nice 19 so that it does not take a core from the serving thread (on 2
// cores it made a worker's p99 under a retention 0.6-1.25 ms; at nice 19
// 0.48-0.64 ms). Its
// syncs are the writer's: the log is fsynced before it is copied and the file
// after, as before. SQLite starts the log over at the writer's next transaction
// once a checkpoint has copied all of it, which a thread of its own never
// does while the writer commits on: past kInline pages a commit copies what
// is left itself when no copy of the thread's is under way (it does not wait
// for the thread at nice 19: on a busy machine that held the serving thread
// 100 ms), and past kInlineWait it waits for that copy, so that the log stays
// bounded (~32 MB, ~64 MB at worst). At 2 * kPages those
// copies came often enough to raise a worker's p99 by 0.3 to 0.6 ms.
//
// Not with --sync full: every commit fsyncs there, and a checkpoint's fsyncs
// beside them made the commits slower (a worker's p50 0.65 -> 1.07 ms under a
// retention) than the checkpoint inside one commit in a hundred does.
#pragma once

#include <sqlite3.h>

#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

#include "storage/store.hpp"

namespace fenceq::daemon {

class SqliteCheckpointer {
 public:
  // SQLite's own auto-checkpoint threshold, in pages of the log.
  static constexpr int kPages = 1000;
  // Past this the writer's commit copies the rest itself (on_commit()),
  // unless the thread's copy is under way; past kInlineWait, it waits for
  // that copy and then copies (the log's bound: ~64 MB).
  static constexpr int kInline = 8 * kPages;
  static constexpr int kInlineWait = 2 * kInline;
  // The thread's nice value: the serving thread goes first.
  static constexpr int kNice = 19;

  // Hooks `writer`'s commits; the thread opens `path` on its first checkpoint.
  SqliteCheckpointer(sqlite3* writer, std::string path, SyncMode sync);
  SqliteCheckpointer(const SqliteCheckpointer&) = delete;
  SqliteCheckpointer& operator=(const SqliteCheckpointer&) = delete;
  // Stops the thread (a checkpoint under way finishes) and unhooks the writer.
  ~SqliteCheckpointer();

 private:
  static int on_commit(void* self, sqlite3* db, const char* schema, int pages);
  void run();
  void checkpoint(sqlite3*& db);

  sqlite3* writer_;
  const std::string path_;
  const SyncMode sync_;
  std::mutex mu_;
  std::condition_variable wake_;
  std::mutex copy_mu_;  // held by whoever runs a checkpoint (thread or writer)
  bool due_ = false;
  bool stop_ = false;
  std::thread thread_;  // last: started once the members above are
};

}  // namespace fenceq::daemon
