// Applies a batch of decoded requests to the store in one transaction (group
// commit, C1.4) and produces one reply per request, in order.
//
// Requests are applied one at a time in arrival order (C3.7). Requests that
// failed decoding are answered with their error and touch nothing (C3.8). If
// any statement or the COMMIT fails, the transaction is rolled back and every
// request of the batch that reached the store is answered `internal`: none of
// the batch is applied. The caller sends the replies only after run() returns,
// which is after the commit.
//
// Long-poll: a claim_next with `wait` > 0 that finds nothing is parked here
// instead of answered, with the claims parked on the same queue, first come
// first served. A queue's claims are retried only when a job of that queue
// may have become claimable: a write freed one (Store::take_queue_changes, or
// another sidecar's notification), or the time the store gave for its next
// lease or delay to end has come. So idle parked claims cost nothing,
// however many queues they wait on. Each is answered with a job, or with nil
// when its wait ends.
#pragma once

#include <chrono>
#include <functional>
#include <cstdint>
#include <limits>
#include <list>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

#include "clock.hpp"
#include "cron.hpp"
#include "fenceq_protocol/codec.hpp"
#include "stats_reader.hpp"
#include "store.hpp"

namespace fenceq::daemon {

struct BatchStats {
  std::uint64_t requests = 0;
  std::uint64_t batches = 0;
  std::uint64_t commits = 0;
  std::uint64_t failed_commits = 0;
  // Fenced writes committed (stats' "writes"), one per job of a batch op.
  WriteCounts renew, complete, release, fail;
};

// The parked claim_next requests are identified by the caller's tokens.
using Token = std::uint64_t;

// A lease a reply hands out: (job, owner, fence).
struct Lease {
  std::string id, owner;
  std::int64_t fence = 0;
};

// The reply to a parked request. `claimed` are the leases it carries, so that
// the claims can be undone when the reply cannot reach its client (gone).
struct Delivery {
  Token token;
  std::string reply;
  std::vector<Lease> claimed;
};

struct BatchReplies {
  // One per request of the batch; nullopt for a claim_next that was parked.
  std::vector<std::optional<std::string>> replies;
  // Parked requests (of this or an earlier batch) answered now.
  std::vector<Delivery> woken;
};

// Decides, request by request, whether a reply may still be made for its
// client: the server's bound on the replies a client has not read
// (server.cpp). Asked only for requests that change nothing.
class ReplyGate {
 public:
  virtual ~ReplyGate() = default;
  // Before batch[i] is applied: nullopt to go on, or the refusal it gets.
  virtual std::optional<protocol::Error> before(std::size_t i) = 0;
  // batch[i]'s reply is `bytes` long (every request, read or write).
  virtual void after(std::size_t i, std::size_t bytes) = 0;
};

class Executor {
 public:
  using SteadyClock = std::chrono::steady_clock;

  Executor(Store& store, Clock& clock);

  // `tokens[i]` names batch[i] should it be parked. Never throws.
  BatchReplies run(const std::vector<protocol::Decoded>& batch,
                   const std::vector<Token>& tokens, ReplyGate* gate = nullptr);
  // Convenience for callers that never park (tests, the fuzzer): parked
  // requests are answered at once with nil, as if their wait had ended.
  std::vector<std::string> run(const std::vector<protocol::Decoded>& batch);

  // Answers parked requests whose wait ended (nil) and, with the server clock,
  // retries the others: leases expire and delays end with time alone.
  std::vector<Delivery> tick();
  // The store's wake-up descriptor (another writer of a shared database may
  // have made jobs claimable), -1 when there is none; wake() when it is
  // readable: parked claims are retried.
  int wakeup_fd() { return store_.shared() ? store_.shared()->wakeup_fd() : -1; }
  std::vector<Delivery> wake();
  // When tick() next has something to do; nullopt when nothing is parked.
  std::optional<SteadyClock::time_point> next_tick() const;
  // A parked claim's reply could not be delivered (its client is gone): give
  // the jobs back (the fence stays where it is, C1.2; the attempt is not
  // counted), and let the other parked claims have them.
  std::vector<Delivery> undo_claims(const std::vector<Lease>& claimed);
  // At stop: every parked request answered with `error`.
  std::vector<Delivery> drain_parked(const protocol::Error& error);

  std::size_t parked() const { return by_token_.size() + awaits_.size(); }

  // From now on `stats` and `metrics` are answered from counts `reader` makes
  // on its own thread (it must outlive the executor's use of it), and `list`
  // from the pages it reads: their replies come from counted(), once
  // stats_fd() is readable. Without a reader they are read inline.
  void count_with(StatsReader* reader) { reader_ = reader; }
  int stats_fd() const { return reader_ ? reader_->fd() : -1; }
  std::vector<Delivery> counted();
  // Asks the reader for a fresh count (for a status line); last_counts() is
  // the last one that finished, nullopt before the first.
  void request_count();
  // Requests a count and waits up to `budget` for it (at start, before the
  // daemon serves: READY=1 carries the counts).
  void count_now(std::chrono::milliseconds budget);
  const std::optional<std::vector<protocol::QueueStats>>& last_counts() const {
    return last_counts_;
  }
  // Set once a commit failed fatally (StoreError::Kind::fatal): the daemon
  // must stop; every later transaction is refused `unavailable`.
  const std::string& fatal() const { return fatal_; }
  const BatchStats& stats() const { return stats_; }
  // What committed transactions did to each queue's jobs since the start (stats' "totals").
  const std::map<std::string, QueueTotals, std::less<>>& queue_totals() const { return totals_; }
  // Queues counted at most; the events of later ones count only in the global figures.
  static constexpr std::size_t kMaxCountedQueues = 10000;

 private:
  struct Parked {
    Token token;
    protocol::Request request;
    SteadyClock::time_point deadline;
  };
  static constexpr double kNever = std::numeric_limits<double>::infinity();
  // The claims parked on one queue.
  struct Waiters {
    std::list<Parked> claims;  // first come, first served
    bool dirty = false;        // a write may have freed a job of the queue
    double wake_at = kNever;   // store time at which one becomes claimable by time alone
  };
  // A parked claim served by a retry; answered once the transaction commits.
  struct Woken {
    Parked parked;
    std::vector<ClaimedJob> jobs;
  };
  // A result, or the refusal of a request that decoded but cannot be applied.
  using Outcome = std::variant<protocol::Result, protocol::Error>;

  // A request whose writes are queued in calls_ (plan), and answered from
  // their results once they ran (finish).
  struct Planned {
    std::size_t index;        // in the batch
    std::size_t first, count;  // its calls
  };
  // Queues the store calls of a request that writes or checks a lease; false
  // for the others (ping and the reads), which apply() answers at once.
  bool plan(const protocol::Request& r, double now, std::size_t index);
  Outcome finish(const protocol::Request& r, const Planned& p) const;
  Outcome apply(const protocol::Request& r, double now);
  // A job's whole record (`job`, `await`), nullopt when there is none.
  std::optional<JobDetail> detail(std::string_view id, double now);
  // queue_config: the request's settings over the stored ones.
  Outcome configure(const protocol::Request& r);
  // --- await: requests parked until their job is finished ------------------
  struct Awaiting {
    protocol::Request request;
    SteadyClock::time_point deadline;
  };
  void park_await(Token token, const protocol::Request& r);
  // Answers the parked awaits of `ids` (every one when `all`) whose job is
  // finished (or gone); outside a transaction, after the commit.
  void serve_awaits(const std::vector<std::string>& ids, bool all, std::vector<Delivery>& out);
  // Ends the awaits whose wait is over (nil) and, every kAwaitSweep, looks
  // at every awaited job (a reap, another sidecar).
  void tick_awaits(std::vector<Delivery>& out);
  std::unordered_map<Token, Awaiting> awaits_;
  std::unordered_multimap<std::string, Token> awaits_by_id_;
  std::set<std::pair<SteadyClock::time_point, Token>> await_deadlines_;
  std::vector<std::string> finishing_;  // jobs the batch's writes may have finished
  SteadyClock::time_point next_sweep_{};
  void unpark_await(Token token);
  // --- queue settings: parked claims of queues whose settings hold claims back
  std::set<std::string> limited_waiting_;
  // When a parked claim of `q`, which found nothing at `now`, looks again by
  // time alone: when a lease or delay ends, or (a limit) soon.
  std::optional<double> parked_wake(const std::string& q, double now);
  // --- periodic jobs --------------------------------------------------------
  struct Scheduled {
    Store::StoredSchedule stored;
    cron::Expr expr;
    double next = 0;  // the next tick after the last one looked at; kNever: none
  };
  std::vector<Scheduled> schedules_;
  bool schedules_loaded_ = false;
  SteadyClock::time_point schedules_read_{};
  // Re-reads the schedules (after schedule_set/delete here, and on a shared
  // database now and then: another sidecar may have changed them).
  void load_schedules(double now);
  double next_schedule() const;
  // Enqueues the job of each schedule whose tick has come (the latest tick
  // only), in a transaction of its own; parked claims may take them.
  void run_schedules(std::vector<Delivery>& out);
  bool schedules_due() const;
  // schedule_set, schedule_delete and schedule_list; the first two make the
  // schedules be read again after the batch.
  Outcome schedule_set(const protocol::Request& r, double now);
  Outcome schedule_delete(const protocol::Request& r);
  Outcome schedule_list(double now);
  // A parked claim's answer when its wait ends with no job.
  static protocol::Result nothing_for(const protocol::Request& r);
  // The refusal of a lease too long to be represented (now + ttl overflows).
  static std::optional<protocol::Error> too_far(const protocol::Request& r, double now);
  // Opens the batch's transaction and takes the time from the store's clock
  // when it has one (a database shared by several hosts).
  void begin();
  // Marks exhausted jobs dead (Store::reap_exhausted), inside a transaction;
  // reap_due(): whether it is time to, and the time to judge by.
  void reap();
  std::optional<double> reap_due();
  // One attempt at a batch in one transaction; throws on a store failure.
  void apply_batch(const std::vector<protocol::Decoded>& batch, const std::vector<Token>& tokens,
                   ReplyGate* gate, bool touches_store, bool writes, BatchReplies& out,
                   std::vector<Woken>& woken);
  // What the steps of one attempt at a batch share.
  struct BatchRun {
    const std::vector<protocol::Decoded>& batch;
    const std::vector<Token>& tokens;
    ReplyGate* gate;
    BatchReplies& out;
  };
  // Clears what the last batch queued and, when the batch touches the
  // store, opens its transaction and queues a reap when one is due.
  void start_batch(const BatchRun& b, bool touches_store);
  // Applies batch[i] (which decoded): refused, deferred to the reader,
  // queued as writes (plan), or answered at once as a read.
  void apply_request(const BatchRun& b, std::size_t i);
  // Makes batch[i]'s outcome its reply, or parks it (claim_next, await).
  void answer(const BatchRun& b, std::size_t i, Outcome outcome);
  // Runs the queued writes (with the COMMIT when `commit_after`) and answers
  // their requests; true when the store committed.
  bool flush(const BatchRun& b, bool commit_after);
  // Runs what is left, serves the parked claims the writes may have freed,
  // commits, counts, and answers the awaits of jobs the batch finished.
  void commit_batch(const BatchRun& b, bool writes, std::vector<Woken>& woken);
  // Rolls back after `e` and answers the whole batch with the error.
  void fail_batch(const std::vector<protocol::Decoded>& batch, const std::vector<Token>& tokens,
                  const std::exception& e, BatchReplies& out, const std::vector<Woken>& woken);
  // One side transaction (outside a batch): begin(), then `work`, which
  // appends the parked claims it serves to its argument and returns false to
  // roll back (nothing changed); then COMMIT and those claims' replies into
  // `out`. On an exception: abort_transaction(what), those claims answered
  // with its error, and false.
  bool side_transaction(const std::string& what, std::vector<Delivery>& out,
                        const std::function<bool(std::vector<Woken>&)>& work);
  // Tries the parked claims that may find a job, in a transaction of their own.
  void retry_parked(std::vector<Delivery>& out);
  // Whether jobs become claimable by time alone between requests (the
  // server clock): then tick() retries queues as their wake time comes.
  bool retries_by_time() const;
  double now_for(const protocol::Request& r);
  // The time parked claims are judged at: the server clock, or the highest
  // client clock seen.
  double parked_now() const;
  // Inside a transaction: marks the queues the store freed a job in, then
  // tries the claims of every marked queue and of every queue whose wake
  // time has come, in order; appends the answered ones to `woken`.
  void serve_parked(std::vector<Woken>& woken);
  // Whether any parked claim may find a job now (serve_parked would try one).
  bool parked_due() const;
  void park(Parked p, bool at_front = false);
  // Takes a parked claim out; nullopt when `token` is not parked.
  std::optional<Parked> unpark(Token token);
  void mark_dirty(const std::string& queue);
  void mark_all_dirty();
  void set_wake(Waiters& w, const std::string& queue, std::optional<double> at);
  Delivery deliver_job(Woken& w);
  // Inside a write transaction: stores the server clock's high-water mark
  // when the clock has passed the stored one (C2.3); clock_to_persist(): the
  // mark to store now, if any (counted as stored).
  void persist_clock();
  std::optional<double> clock_to_persist();
  // Rolls back a failed transaction and counts it.
  void roll_back();
  // Rolls back the open transaction after `e`, counts and logs it; the error
  // every request of it is answered with (C1.4).
  protocol::Error abort_transaction(const std::string& what, const std::exception& e);
  protocol::Stats stats_snapshot(double now);
  // The daemon's own figures around counts made elsewhere.
  protocol::Stats stats_with(std::vector<protocol::QueueStats> queues) const;

  Store& store_;
  Clock& clock_;
  BatchStats stats_;
  BatchStats batch_writes_;  // the fenced writes of the batch being applied, until it commits
  // Counts the fenced writes a reply reports (into batch_writes_).
  void count_writes(const protocol::Request& r, const protocol::Result& result);
  // Once a transaction committed: counts it, and adds what it did to each
  // queue (Store::take_queue_totals) to totals_.
  void committed();
  std::map<std::string, QueueTotals, std::less<>> totals_;  // by queue, since the start
  bool warned_queues_ = false;  // kMaxCountedQueues reached, said once
  std::string fatal_;  // why the store can no longer be trusted
  std::unordered_map<std::string, Waiters> waiting_;  // by queue
  std::unordered_map<Token, std::list<Parked>::iterator> by_token_;
  std::set<std::pair<SteadyClock::time_point, Token>> deadlines_;
  std::set<std::pair<double, std::string>> wakes_;  // (wake_at, queue), finite ones
  std::vector<std::string> dirty_;                   // queues marked since the last serve
  double client_now_ = 0;  // client clock: the highest `now` any request carried
  double persisted_clock_ = 0;  // the mark last stored; a fresh daemon stores one at once
  SteadyClock::time_point started_ = SteadyClock::now();
  SteadyClock::time_point last_reap_{};
  std::uint64_t epoch_ = 0;  // the store's connection_epoch() last seen
  // stats and metrics requests waiting for the reader's count `number`, and
  // list requests for its page `number` (0: not asked yet, their batch has
  // not committed).
  struct Deferred {
    Token token;
    std::optional<protocol::Rid> rid;
    protocol::Op op;
    std::uint64_t number = 0;
    std::optional<protocol::Request> list = std::nullopt;  // list: the request
    double now = 0;                                        // list: its time
  };
  std::vector<Call> calls_;  // the batch's writes, queued by plan()
  std::vector<CallResult> results_;
  std::vector<Planned> planned_;
  StatsReader* reader_ = nullptr;
  std::vector<Deferred> deferred_;
  std::optional<std::vector<protocol::QueueStats>> last_counts_;
  std::uint64_t last_counted_ = 0;
};

}  // namespace fenceq::daemon
