// The application's outbox (docs/contract.md C3.21): `--outbox
// URI` names the application's own database, PostgreSQL or SQLite, whose
// table fenceq_outbox the application fills in its own transactions; fenceqd
// (on its SQLite store) makes each committed row exactly one job.
//
// How a row crosses from one database to the other without two-phase commit:
//   1. the drain thread (Outbox, here) reads a page of rows, in seq order;
//   2. the serving thread, in one transaction of its store, records each
//      row's seq in outbox_drained and enqueues the rows whose seq was not
//      recorded yet (idempotent by id, as any enqueue), then commits;
//   3. the drain thread deletes those rows from the outbox (a commit of the
//      application's database, synced);
//   4. the next transaction of step 2 forgets the seqs of step 3.
// A crash anywhere repeats a step and no more: a row read again after step
// 2 is found recorded and skipped, so even a job completed and removed in
// the meantime is not made twice; a seq is forgotten only once its row is
// gone for good (seqs are never reused: AUTOINCREMENT, bigserial). A
// high-water mark alone would not do: on PostgreSQL a transaction that took
// seq 7 can commit after the one that took seq 8 was drained.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "fenceq/types.hpp"

namespace fenceq::daemon {

// One row of fenceq_outbox, as read (docs/operating.md, "An outbox").
struct OutboxRow {
  std::int64_t seq = 0;
  std::string id, queue;
  std::optional<Payload> payload;
  std::int64_t priority = 0;
  double delay = 0;
  std::int64_t max_attempts = 0;
  std::optional<std::string> group;
  double max_runtime = 0;
  double created = 0;  // Unix seconds, the application database's clock
  // The columns that held a BLOB where a job takes text (id, queue, grp),
  // named; SQLite types a value, not a column (PostgreSQL's text is text).
  std::string blobs;
};

// Why a row cannot become a job (the protocol's rules and limits, as
// enqueue's: text where it takes text, and that text UTF-8), or nullopt when it can. Such a row is consumed all the same (logged, counted
// as rejected): it could never be enqueued, and must not hold back the rest.
std::optional<std::string> outbox_row_error(const OutboxRow& row);

// The application's database, on the drain thread alone. Every function may
// throw std::exception (the database failed): the thread logs it, closes the
// source and opens it again after a pause.
class OutboxSource {
 public:
  virtual ~OutboxSource() = default;
  // Connects and creates fenceq_outbox when it is missing.
  virtual void open() = 0;
  virtual void close() noexcept = 0;
  // At most `max` rows, lowest seq first, ending after the row that takes
  // their payloads past `max_bytes`.
  virtual std::vector<OutboxRow> read(std::size_t max, std::size_t max_bytes) = 0;
  // Deletes the rows of `seqs` in one committed (and synced) transaction.
  virtual void remove(const std::vector<std::int64_t>& seqs) = 0;
  // Which of `seqs` are still in the table.
  virtual std::vector<std::int64_t> present(const std::vector<std::int64_t>& seqs) = 0;
  // Rows in the table, and the age in seconds of the oldest (0 when none).
  virtual std::pair<std::int64_t, double> backlog() = 0;
  // Waits up to `timeout` for a sign that rows were added (a NOTIFY, a
  // change of PRAGMA data_version), or for `stop_fd` to be readable; true
  // when there may be rows.
  virtual bool wait(std::chrono::milliseconds timeout, int stop_fd) = 0;
  // For logs: the database, without any password.
  virtual std::string describe() const = 0;
};

// `uri`: a postgresql:// (postgres://) URI or a SQLite file's path. Throws
// std::invalid_argument for a bad one (not opened yet).
std::unique_ptr<OutboxSource> make_outbox_source(const std::string& uri);
// fenceq_outbox's schema for the application's migrations: "postgresql" or
// "sqlite"; nullopt for another name.
std::optional<std::string> outbox_schema(const std::string& kind);

// The outbox's figures for stats and /metrics, written by the drain thread
// (pending, lag) and the serving thread (drained, rejected).
struct OutboxCounts {
  std::atomic<std::int64_t> pending{0};     // rows in the outbox at the last look
  std::atomic<double> lag{0};               // age of the oldest of them, seconds
  std::atomic<std::uint64_t> drained{0};    // rows made jobs (or found made) since the start
  std::atomic<std::uint64_t> rejected{0};   // rows consumed that could not be jobs
  std::atomic<std::int64_t> high_water{0};  // the highest seq drained
};

class Outbox {
 public:
  // What the serving thread is handed: rows to record and enqueue, and seqs
  // whose rows are gone for good (to forget).
  struct Handoff {
    std::vector<OutboxRow> rows;
    std::vector<std::int64_t> forget;
  };
  // Rows of a hand-off at most, and the payload bytes after which a page
  // ends early: a page holds at most about kPageBytes plus one payload
  // (256 KiB), whatever the rows hold.
  static constexpr std::size_t kPage = 64;
  static constexpr std::size_t kPageBytes = 4 << 20;

  // `drained`: the seqs the store has recorded (at start, every one); those
  // no longer in the outbox are forgotten in the first hand-off. `poll`:
  // how long the thread waits for a sign before it looks anyway.
  Outbox(std::unique_ptr<OutboxSource> source, std::chrono::milliseconds poll,
         std::vector<std::int64_t> drained);
  ~Outbox();  // stops the thread
  Outbox(const Outbox&) = delete;
  Outbox& operator=(const Outbox&) = delete;

  void start();
  // Readable when a hand-off waits for take().
  int fd() const { return ready_fd_; }
  // The serving thread: the waiting hand-off, if any (the descriptor read).
  std::optional<Handoff> take();
  // The serving thread, after take(): whether its transaction committed.
  void done(bool committed);
  OutboxCounts& counts() { return counts_; }
  std::string describe() const { return source_->describe(); }

 private:
  void run();
  // One round: read, hand off, wait for the commit, delete. False when
  // nothing was there to do.
  bool round();
  // Hands `h` to the serving thread and waits for done(); nullopt at stop.
  std::optional<bool> hand_off(Handoff h);
  void reconcile();
  void refresh_backlog();

  std::unique_ptr<OutboxSource> source_;
  std::chrono::milliseconds poll_;
  std::vector<std::int64_t> forget_;  // gone for good, not yet forgotten by the store
  bool reconciled_ = false;
  OutboxCounts counts_;
  int ready_fd_ = -1, stop_fd_ = -1;  // eventfds
  std::mutex mu_;
  std::condition_variable cv_;
  std::optional<Handoff> waiting_;  // handed off, not taken yet
  bool taken_ = false;
  std::optional<bool> result_;  // done()'s answer
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace fenceq::daemon
