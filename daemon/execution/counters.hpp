// The daemon's own figures (stats, metrics): requests, batches, commits, the
// fenced writes committed, and what committed transactions did to each
// queue's jobs; and the stats and list requests deferred to the stats reader
// (execution/stats_reader.hpp), answered from its counts and pages once their
// batch has committed.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "execution/clock.hpp"
#include "execution/delivery.hpp"
#include "fenceq_protocol/codec.hpp"
#include "outbox/outbox.hpp"
#include "execution/parked_claims.hpp"
#include "execution/stats_reader.hpp"
#include "storage/store.hpp"
#include "execution/throughput.hpp"

namespace fenceq::daemon {

struct BatchStats {
  std::uint64_t requests = 0;
  std::uint64_t batches = 0;
  std::uint64_t commits = 0;
  std::uint64_t failed_commits = 0;
  // Fenced writes committed (stats' "writes"), one per job of a batch op.
  WriteCounts renew, complete, release, fail;
};

// The events stream's figures (transport/events.hpp), written by the serving
// thread and read for stats and /metrics.
struct EventCounts {
  std::atomic<std::uint64_t> published{0}, dropped{0};
};

class Counters {
 public:
  using SteadyClock = std::chrono::steady_clock;
  using Totals = std::map<std::string, QueueTotals, std::less<>>;
  // Queues counted at most; the events of later ones count only in the global figures.
  static constexpr std::size_t kMaxCountedQueues = 10000;

  // `claims`: the claims parked, whose number stats shows (waiting_claims).
  Counters(Store& store, const RequestClock& time, const ParkedClaims& claims)
      : store_(store), time_(time), claims_(claims) {}

  // A batch of `requests` requests came in.
  void count_batch(std::size_t requests) {
    stats_.requests += requests;
    ++stats_.batches;
  }
  // An attempt at a batch starts: the fenced writes counted so far are dropped.
  void start_batch() {
    batch_writes_ = {};
    batch_retried_ = {};
  }
  // Counts the fenced writes a reply reports, for the batch being applied.
  void count_writes(const protocol::Request& r, const protocol::Result& result);
  // Once a transaction committed: counts it, and adds what it did to each
  // queue (Store::take_queue_totals) to the totals.
  void committed();
  // Once a batch committed: committed(), its fenced writes counted, and its
  // deferred requests asked of the reader (counts and pages that see it).
  void batch_committed();
  // A transaction was rolled back.
  void failed_commit() { ++stats_.failed_commits; }
  // From now on committed() keeps each committed transaction's job events
  // (EventNotes::take), for take_events(); `counts` go into stats.
  // --outbox: `counts` go into stats and /metrics.
  void keep_outbox(const OutboxCounts* counts) { outbox_counts_ = counts; }
  // --events: from now on each committed transaction's job events are kept
  // for take_events() (the store notes them), and `counts` go into stats
  // and /metrics.
  void keep_events(const EventCounts* counts) {
    EventNotes* notes = store_.event_notes();
    if (!notes) throw StoreError("--events: this store notes no job changes");
    notes->note();
    events_on_ = true;
    event_counts_ = counts;
  }
  std::vector<JobEvent> take_events() { return std::exchange(events_, {}); }
  const BatchStats& stats() const { return stats_; }
  // What committed transactions did to each queue's jobs since the start (stats' "totals").
  const Totals& queue_totals() const { return totals_; }
  // The same summed over every queue (counted ones or not), and the commits:
  // what the dashboard's chart samples from another thread.
  const Throughput& throughput() const { return throughput_; }
  // stats read inline at `now`, with `waiting_claims` claims parked.
  protocol::Stats stats_snapshot(double now);

  // From now on counts and pages come from `reader` (see Executor::count_with).
  void count_with(StatsReader* reader) { reader_ = reader; }
  // The reader's descriptor, readable when counted() has answers; -1 without one.
  int stats_fd() const { return reader_ ? reader_->fd() : -1; }
  // With a reader: stats or metrics request `token` is answered from its
  // count once its batch committed; false without one (read it inline).
  bool defer_count(Token token, const std::optional<protocol::Rid>& rid, protocol::Op op);
  // With a reader: list request `r` (`token`, at `now`) is answered from the
  // page it reads once its batch committed; false without one.
  bool defer_page(Token token, const std::optional<protocol::Rid>& rid, const protocol::Request& r,
                  double now);
  // The deferred requests of `tokens` are dropped (their batch failed or runs again).
  void drop_deferred(const std::vector<Token>& tokens);
  // The deferred requests the reader has answered, with `waiting_claims` parked.
  std::vector<Delivery> counted();
  // Asks the reader for a fresh count; last_counts() is the last one that
  // finished, nullopt before the first.
  void request_count();
  // Requests a count and waits up to `budget` for it.
  void count_now(std::chrono::milliseconds budget);
  const std::optional<std::vector<protocol::QueueStats>>& last_counts() const {
    return last_counts_;
  }
  // Answers every deferred request with `error` (at stop).
  void drain(const protocol::Error& error, std::vector<Delivery>& out);

 private:
  // The daemon's own figures around counts made elsewhere.
  protocol::Stats stats_with(std::vector<protocol::QueueStats> queues,
                             std::size_t waiting_claims) const;

  Store& store_;
  const RequestClock& time_;
  const ParkedClaims& claims_;
  BatchStats stats_;
  BatchStats batch_writes_;  // the fenced writes of the batch being applied, until it commits
  // Jobs claimed again and again (one bad payload, retried at once with no
  // max_attempts, was once claimed 59,856 times in 10 minutes and nothing
  // said so): claims of a job on its kManyAttempts-th attempt or
  // later, logged at most every kManyAttemptsLogEvery with their count.
  static constexpr std::int64_t kManyAttempts = 10;
  static constexpr std::chrono::seconds kManyAttemptsLogEvery{60};
  struct Retried {
    std::uint64_t claims = 0;  // claims on attempt kManyAttempts or later
    std::string example;       // the last one's job, attempt and queue
  };
  Retried batch_retried_;      // of the batch being applied, until it commits
  Retried retried_;            // committed since the last line
  std::optional<SteadyClock::time_point> retried_logged_;  // the last line's time
  void note_retried(const protocol::Request& r, const ClaimedJob& j);
  void log_retried();
  bool events_on_ = false;
  std::vector<JobEvent> events_;  // committed, not yet published
  const EventCounts* event_counts_ = nullptr;
  const OutboxCounts* outbox_counts_ = nullptr;
  Totals totals_;            // by queue, since the start
  Throughput throughput_;    // over every queue, since the start
  bool warned_queues_ = false;  // kMaxCountedQueues reached, said once
  SteadyClock::time_point started_ = SteadyClock::now();
  // stats and metrics requests waiting for the reader's count `number`, and
  // list requests for its page `number` (0: not asked yet, their batch has
  // not committed).
  struct Deferred {
    Token token;
    std::optional<protocol::Rid> rid;
    protocol::Op op;
    std::uint64_t number = 0;
    std::optional<protocol::req::List> list = std::nullopt;  // list: the request
    double now = 0;                                        // list: its time
  };
  StatsReader* reader_ = nullptr;
  std::vector<Deferred> deferred_;
  std::optional<std::vector<protocol::QueueStats>> last_counts_;
  std::uint64_t last_counted_ = 0;
};

}  // namespace fenceq::daemon
