#include "storage/sqlite/sqlite_checkpointer.hpp"

#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <unistd.h>

namespace fenceq::daemon {

SqliteCheckpointer::SqliteCheckpointer(sqlite3* writer, std::string path, SyncMode sync)
    : writer_(writer), path_(std::move(path)), sync_(sync), thread_([this] { run(); }) {
  sqlite3_wal_hook(writer_, &SqliteCheckpointer::on_commit, this);
}

SqliteCheckpointer::~SqliteCheckpointer() {
  sqlite3_wal_hook(writer_, nullptr, nullptr);
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  wake_.notify_one();
  thread_.join();
}

// On the writer's thread, after each commit: `pages` is the log's length.
int SqliteCheckpointer::on_commit(void* self, sqlite3* db, const char*, int pages) {
  if (pages < kPages) return SQLITE_OK;
  auto* c = static_cast<SqliteCheckpointer*>(self);
  if (pages >= kInline) {
    // Under steady load the thread never catches up with the log's end, and
    // SQLite starts a log over only once all of it is copied: this commit
    // copies what is left (the thread copied the rest), and the log starts
    // over at the next transaction. A PASSIVE checkpoint beside a copy of
    // the thread's under way gets SQLITE_BUSY, so this one needs copy_mu_.
    // But that thread runs at nice 19: on a busy machine it holds copy_mu_
    // for as long as it is not scheduled, and a commit that waited for it
    // held the serving thread 100-110 ms (a worker's round trip under a
    // retention while two builds ran, 2026-12-06). So the commit copies only
    // when no copy is under way, and the next commits try again; past
    // kInlineWait pages it waits, so that the log stays bounded (leaving the
    // copy to later commits without a bound let it grow to 44 MB under ASan).
    std::unique_lock copying(c->copy_mu_, std::defer_lock);
    if (pages >= kInlineWait) {
      copying.lock();
    } else if (!copying.try_lock()) {
      return SQLITE_OK;
    }
    sqlite3_wal_checkpoint_v2(db, nullptr, SQLITE_CHECKPOINT_PASSIVE, nullptr, nullptr);
    return SQLITE_OK;
  }
  {
    std::lock_guard lock(c->mu_);
    if (c->due_) return SQLITE_OK;
    c->due_ = true;
  }
  c->wake_.notify_one();
  return SQLITE_OK;
}

void SqliteCheckpointer::run() {
  // Behind the serving thread: a checkpoint may wait, a batch should not.
  // (Not SCHED_IDLE: on a busy host that would leave every copy to the
  // writer's kInline fallback, 32 MB at once.)
  ::setpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()), kNice);
  sqlite3* db = nullptr;
  std::unique_lock lock(mu_);
  for (;;) {
    wake_.wait(lock, [this] { return due_ || stop_; });
    if (stop_) break;
    lock.unlock();
    checkpoint(db);
    lock.lock();
    due_ = false;  // the commits meanwhile ask again once the log is past kPages
  }
  lock.unlock();
  sqlite3_close_v2(db);
}

void SqliteCheckpointer::checkpoint(sqlite3*& db) {
  if (db == nullptr) {
    if (sqlite3_open_v2(path_.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX,
                        nullptr) != SQLITE_OK) {
      spdlog::warn("checkpoint: cannot open {}: {}", path_, sqlite3_errmsg(db));
      sqlite3_close_v2(db);
      db = nullptr;
      return;
    }
    // As the writer's (SqliteStore): --sync off fsyncs its checkpoints too.
    sqlite3_exec(db, sync_ == SyncMode::full ? "PRAGMA synchronous=FULL" : "PRAGMA synchronous=NORMAL",
                 nullptr, nullptr, nullptr);
  }
  int log = 0, copied = 0;
  std::unique_lock copying(copy_mu_);
  const int rc = sqlite3_wal_checkpoint_v2(db, nullptr, SQLITE_CHECKPOINT_PASSIVE, &log, &copied);
  copying.unlock();
  // SQLITE_BUSY: another checkpoint (the sqlite3 shell's) is under way.
  if (rc != SQLITE_OK && rc != SQLITE_BUSY) {
    spdlog::warn("checkpoint of {} failed ({} of {} pages copied): {}", path_, copied, log,
                 sqlite3_errmsg(db));
  }
}

}  // namespace fenceq::daemon
