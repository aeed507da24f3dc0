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
// instead of answered. Parked claims are retried, first come first served, in
// the transaction of every later batch that could have made a job claimable
// and on tick(); each is answered with a job, or with nil when its wait ends.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "clock.hpp"
#include "fenceq_protocol/codec.hpp"
#include "store.hpp"

namespace fenceq::daemon {

struct BatchStats {
  std::uint64_t requests = 0;
  std::uint64_t batches = 0;
  std::uint64_t commits = 0;
  std::uint64_t failed_commits = 0;
};

// The parked claim_next requests are identified by the caller's tokens.
using Token = std::uint64_t;

// The reply to a parked request. `claimed` is the lease it carries, so that
// the claim can be undone when the reply cannot reach its client (gone).
struct Delivery {
  Token token;
  std::string reply;
  std::optional<protocol::Request> claimed;  // op claim_next's id, owner, fence
};

struct BatchReplies {
  // One per request of the batch; nullopt for a claim_next that was parked.
  std::vector<std::optional<std::string>> replies;
  // Parked requests (of this or an earlier batch) answered now.
  std::vector<Delivery> woken;
};

class Executor {
 public:
  using SteadyClock = std::chrono::steady_clock;

  Executor(Store& store, Clock& clock);

  // `tokens[i]` names batch[i] should it be parked. Never throws.
  BatchReplies run(const std::vector<protocol::Decoded>& batch,
                   const std::vector<Token>& tokens);
  // Convenience for callers that never park (tests, the fuzzer): parked
  // requests are answered at once with nil, as if their wait had ended.
  std::vector<std::string> run(const std::vector<protocol::Decoded>& batch);

  // Answers parked requests whose wait ended (nil) and, with the server clock,
  // retries the others: leases expire and delays end with time alone.
  std::vector<Delivery> tick();
  // The store's wake-up descriptor (another writer of a shared database may
  // have made jobs claimable), -1 when there is none; wake() when it is
  // readable: parked claims are retried.
  int wakeup_fd() { return store_.wakeup_fd(); }
  std::vector<Delivery> wake();
  // When tick() next has something to do; nullopt when nothing is parked.
  std::optional<SteadyClock::time_point> next_tick() const;
  // A parked claim's reply could not be delivered (its client is gone): give
  // the job back (the fence stays where it is, C1.2; the attempt is not
  // counted), and let the other parked claims have it.
  std::vector<Delivery> undo_claim(const protocol::Request& claimed);
  // At stop: every parked request answered with `error`.
  std::vector<Delivery> drain_parked(const protocol::Error& error);

  std::size_t parked() const { return parked_.size(); }
  // Set once a commit failed fatally (StoreError::Kind::fatal): the daemon
  // must stop; every later transaction is refused `unavailable`.
  const std::string& fatal() const { return fatal_; }
  const BatchStats& stats() const { return stats_; }

 private:
  struct Parked {
    Token token;
    protocol::Request request;
    SteadyClock::time_point deadline;
  };
  // A parked claim served by a retry; answered once the transaction commits.
  struct Woken {
    Parked parked;
    protocol::NextJob job;
  };
  // A result, or the refusal of a request that decoded but cannot be applied.
  using Outcome = std::variant<protocol::Result, protocol::Error>;

  Outcome apply(const protocol::Request& r, double now);
  // Opens the batch's transaction and takes the time from the store's clock
  // when it has one (a database shared by several hosts).
  void begin();
  // Marks exhausted jobs dead (Store::reap_exhausted), inside a transaction.
  void reap();
  // One attempt at a batch in one transaction; throws on a store failure.
  void apply_batch(const std::vector<protocol::Decoded>& batch, const std::vector<Token>& tokens,
                   bool touches_store, bool writes, BatchReplies& out, std::vector<Woken>& woken);
  // Rolls back after `e` and answers the whole batch with the error.
  void fail_batch(const std::vector<protocol::Decoded>& batch, const std::vector<Token>& tokens,
                  const std::exception& e, BatchReplies& out, const std::vector<Woken>& woken);
  // Tries the parked claims in a transaction of their own.
  void retry_parked(std::vector<Delivery>& out);
  bool retries_by_time() const;
  double now_for(const protocol::Request& r);
  // Tries the parked claims in order; appends the answered ones to `woken`.
  void serve_parked(std::vector<Woken>& woken);
  Delivery deliver_job(Woken& w);
  // Inside a write transaction: stores the server clock's high-water mark
  // when the clock has passed the stored one (C2.3).
  void persist_clock();
  // Rolls back a failed transaction and counts it.
  void roll_back();
  // Rolls back the open transaction after `e`, counts and logs it; the error
  // every request of it is answered with (C1.4).
  protocol::Error abort_transaction(const std::string& what, const std::exception& e);
  protocol::Stats stats_snapshot(double now);
  // A `list` page with each error cut to its share of the reply's budget.
  static protocol::JobList bounded(protocol::JobList jobs);

  Store& store_;
  Clock& clock_;
  BatchStats stats_;
  std::string fatal_;  // why the store can no longer be trusted
  std::deque<Parked> parked_;
  double client_now_ = 0;  // client clock: the highest `now` any request carried
  double persisted_clock_ = 0;  // the mark last stored; a fresh daemon stores one at once
  SteadyClock::time_point started_ = SteadyClock::now();
  SteadyClock::time_point last_retry_{};
  SteadyClock::time_point last_reap_{};
  std::uint64_t epoch_ = 0;  // the store's connection_epoch() last seen
};

}  // namespace fenceq::daemon
