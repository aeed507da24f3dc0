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
// The executor runs the batches and the side transactions (retries of parked
// claims, schedule ticks, undone claims; each side channel a Source the
// serving loop runs, sources()), reaps, and persists the clock; its
// parts hold the rest: ParkedClaims (long-polling claim_next, by queue, and
// the queue limits that hold them back), Awaits (await, by job),
// ScheduleRunner (periodic jobs) and Counters (stats' figures, the requests
// deferred to the stats reader).
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <variant>
#include <vector>

#include "execution/awaits.hpp"
#include "execution/clock.hpp"
#include "execution/counters.hpp"
#include "execution/delivery.hpp"
#include "fenceq_protocol/codec.hpp"
#include "outbox/outbox.hpp"
#include "execution/parked_claims.hpp"
#include "execution/retention_runner.hpp"
#include "execution/schedule_runner.hpp"
#include "execution/source.hpp"
#include "execution/stats_reader.hpp"
#include "storage/store.hpp"

namespace fenceq::daemon {

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

  // The side channels the serving loop runs between batches (source.hpp),
  // in the order it runs them: a shared database's wake-ups (parked claims
  // retried), the stats reader's counts, the outbox's rows, and by time
  // alone: awaits' ends and sweeps, schedules, retention passes, settle
  // steps, purge steps, parked claims' ends and retries. Fixed for the
  // executor's life; what one writes, it writes in a transaction of its own.
  const std::vector<Source*>& sources() const { return sources_; }
  // A parked claim's reply could not be delivered (its client is gone): give
  // the jobs back (the fence stays where it is, C1.2; the attempt is not
  // counted), and let the other parked claims have them.
  std::vector<Delivery> undo_claims(const std::vector<Lease>& claimed);
  // At stop: every parked request answered with `error`.
  std::vector<Delivery> drain_parked(const protocol::Error& error);

  // --outbox (outbox.hpp): from now on the rows `outbox` hands off (it must
  // outlive the executor's use of it) are drained by the outbox's source
  // once its descriptor is readable, each in a transaction of its own;
  // stats and /metrics show its counts.
  void drain_from(Outbox* outbox) {
    outbox_ = outbox;
    counters_.keep_outbox(&outbox->counts());
  }

  // The counts: stats and /metrics, the stats reader (count_with: `stats`
  // and `metrics` then answered from counts it makes on its own thread, and
  // `list` from the pages it reads, their replies from counted(), which
  // the reader's source runs once stats_fd() is readable), --events
  // (keep_events, take_events), the status line (request_count,
  // last_counts) and the dashboard's chart (throughput): main.cpp, the
  // server and the HTTP bridge use them directly.
  Counters& counters() { return counters_; }
  const Counters& counters() const { return counters_; }
  // Set once a commit failed fatally (StoreError::Kind::fatal): the daemon
  // must stop; every later transaction is refused `unavailable`.
  const std::string& fatal() const { return fatal_; }

 private:
  using Woken = ParkedClaims::Woken;
  // A result, or the refusal of a request that decoded but cannot be applied.
  using Outcome = std::variant<protocol::Result, protocol::Error>;

  // A request whose writes are queued in calls_ (plan), and answered from
  // their results once they ran (finish).
  struct Planned {
    std::size_t index;        // in the batch
    std::size_t first, count;  // its calls
  };
  // Queues the store calls of a planned op (its handler plan_OP); false for
  // the others, which apply() answers at once (their handler answer_OP).
  bool plan(const protocol::Request& r, double now, std::size_t index);
  Outcome finish(const protocol::Request& r, const Planned& p) const;
  Outcome apply(const protocol::Request& r, double now);
  // Each op's handler (op_table.cpp): one per op, generated from ops.json.
  struct Planner;
  struct OpHandler;
  static const OpHandler& handler(protocol::Op op);
#include "fenceq_protocol/op_handler_decls.inc"
  // retry_many, cancel_many, purge with a filter: one page (bulk.cpp).
  Outcome bulk(const protocol::Request& r, double now);
  // purge with a filter: one page of windows by id (bulk.cpp).
  Outcome purge_page(const protocol::Request& r, double now);
  // A page of retry_many or cancel_many as it goes (bulk.cpp): one window
  // of it read and acted on; false once the page is over.
  struct BulkPage;
  bool bulk_window(const protocol::Request& r, double now, BulkPage& page);
  // A bulk filter's key in bulk_resume_, for one state of it.
  static std::string resume_key(const protocol::Request& r, JobStatus status);
  // Notes where a filter's page stopped (empty: its walk ended).
  void remember_resume(const std::string& key, std::string after);
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
  // Takes the claims and awaits of `tokens` out (and, when `deferred`, their
  // requests deferred to the reader): their batch ran again or failed.
  void unpark_batch(const std::vector<Token>& tokens, bool deferred);
  // One side transaction (outside a batch): begin(), then `work`, which
  // appends the parked claims it serves to its argument and returns false to
  // roll back (nothing changed); then COMMIT and those claims' replies into
  // `out`. On an exception: abort_transaction(what), those claims answered
  // with its error, and false.
  bool side_transaction(const std::string& what, std::vector<Delivery>& out,
                        const std::function<bool(std::vector<Woken>&)>& work);
  // Tries the parked claims that may find a job, in a transaction of their own.
  void retry_parked(std::vector<Delivery>& out);
  // A side transaction that reaps, for waits that timed out and deadlines
  // that passed while no request came (C3.23, C3.24; the WaitEnds source).
  void end_waits(std::vector<Delivery>& out);
  std::optional<SteadyClock::time_point> waits_due() const;
  SteadyClock::time_point last_waits_{};
  // A shared database's wake-ups: the queues other writers freed a job in
  // are marked, and parked claims retried.
  void wake(std::vector<Delivery>& out);
  // The outbox's rows handed off, enqueued in a transaction of their own.
  void drain_outbox(std::vector<Delivery>& out);
  // Enqueues the job of each schedule whose tick has come, in a transaction
  // of its own; parked claims may take them.
  void run_schedules(std::vector<Delivery>& out);
  // Removes a chunk of the finished jobs past their queue's retention, in a
  // transaction of its own.
  void run_retention(std::vector<Delivery>& out);
  // A step of the settling that transactions left of their parents'
  // children (C3.13, "When"), in a transaction of its own; settle_tick():
  // when the next is due, nullopt when none may be left.
  void run_settle(std::vector<Delivery>& out);
  std::optional<SteadyClock::time_point> settle_tick() const;
  // Whether jobs become claimable by time alone between requests (the
  // server clock): then parked claims' source retries queues as their wake
  // time comes.
  bool retries_by_time() const { return time_.server(); }
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

  Store& store_;
  Clock& clock_;
  RequestClock time_;  // before the parts, which judge time by it
  ParkedClaims claims_;
  Awaits awaits_;
  ScheduleRunner schedules_;
  RetentionRunner retention_;
  Counters counters_;
  Outbox* outbox_ = nullptr;
  std::string fatal_;  // why the store can no longer be trusted
  double persisted_clock_ = 0;  // the mark last stored; a fresh daemon stores one at once
  SteadyClock::time_point last_reap_{};
  SteadyClock::time_point settle_at_{};  // the next settle step (run_settle)
  std::chrono::milliseconds settle_backoff_{};  // after failed steps
  // The batch's side steps (the reap, a retention chunk): whether this
  // attempt carries any, and until when none rides after one failed
  // (a side step that fails must not fail the requests beside it).
  bool side_steps_ = false;
  SteadyClock::time_point side_steps_off_until_{};
  std::uint64_t epoch_ = 0;  // the store's connection_epoch() last seen
  std::vector<Call> calls_;  // the batch's writes, queued by plan()
  std::vector<CallResult> results_;
  std::vector<Planned> planned_;
  // purge without a filter (docs/contract.md, "Purge without a filter";
  // purge_all.cpp): chunks for kPurgeFirst in the request's batch; what is
  // left, in steps of kPurgeStep in side transactions (run_purges, one a turn
  // of the serving loop), the request answered with the count once none is
  // left.
  struct PendingPurge {
    Token token;
    std::optional<protocol::Rid> rid;
    std::optional<std::string> queue;  // nullopt: every queue
    double cutoff = 0;                 // the request's now - older_than
    std::int64_t count = 0;            // removed so far
    std::string after_queue;           // every queue: the one the last chunk stopped in
  };
  static constexpr std::chrono::microseconds kPurgeFirst{2000}, kPurgeStep{3000};
  static PurgeParams purge_chunk(const PendingPurge& p);
  // Chunks of `p` until `budget` has passed; false once none is left.
  bool purge_chunks(PendingPurge& p, std::chrono::microseconds budget);
  // The request's part: its answer, or nullopt when its reply waits.
  std::optional<Outcome> purge_first(const protocol::Request& r, double now, Token token,
                                     const std::optional<protocol::Rid>& rid);
  void run_purges(std::vector<Delivery>& out);
  void drop_purges(const std::vector<Token>& tokens);  // their batch ran again or failed
  void drain_purges(const protocol::Error& error, std::vector<Delivery>& out);
  std::deque<PendingPurge> purges_;
  // Where the last page of a bulk filter stopped, by resume_key: only where
  // the next page of that filter starts (bulk.cpp), so losing it (a
  // restart, another sidecar, a rolled-back batch) costs time, not jobs.
  std::unordered_map<std::string, std::string> bulk_resume_;

  // The side channels (sources.cpp), a class each, and the list of them.
  class Wakeups;
  class StatsCounts;
  class OutboxRows;
  class AwaitEnds;
  class ScheduleTicks;
  class RetentionPasses;
  class SettleSteps;
  class PurgeSteps;
  class StoreUpkeep;
  class ParkedRetries;
  class WaitEnds;
  void make_sources();
  std::vector<std::unique_ptr<Source>> owned_sources_;
  std::vector<Source*> sources_;
  // Statements ran on a shared database's connection (a batch, a side
  // transaction) since its wake-ups were last read: its client library may
  // hold some that came meanwhile, where the descriptor cannot show them.
  bool wakeups_unread_ = false;
};

}  // namespace fenceq::daemon
