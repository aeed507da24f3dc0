// `await` requests parked until their job is finished (done, dead or
// cancelled), by job: answered after the commit of this daemon's write that
// may have finished it, by a sweep every kAwaitSweep (jobs reaped, or
// finished by another sidecar; a slice of the jobs at a time), or with nil
// when their wait ends. Jobs are
// read outside any transaction, once the batch committed.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "execution/clock.hpp"
#include "execution/delivery.hpp"
#include "fenceq_protocol/codec.hpp"
#include "storage/store.hpp"

namespace fenceq::daemon {

// Finished: done, dead or cancelled (what `await` waits for).
inline bool finished(JobStatus s) {
  return s == JobStatus::done || s == JobStatus::dead || s == JobStatus::cancelled;
}

// A job's whole record (`job`, `await`), nullopt when there is none.
std::optional<JobDetail> job_detail(Store& store, std::string_view id, double now);

class Awaits {
 public:
  using SteadyClock = std::chrono::steady_clock;

  Awaits(Store& store, const RequestClock& time) : store_(store), time_(time) {}

  // How many awaits are parked.
  std::size_t size() const { return awaits_.size(); }
  bool empty() const { return awaits_.empty(); }
  // Parks await `r` (its job is not finished) as `token` until its wait
  // ends; false when kMaxParked are parked already (the caller answers it now).
  bool park(Token token, const protocol::Request& r);
  // Takes `token`'s await out; nothing when it is not parked.
  void unpark(Token token);
  // After a batch's writes ran (`results` of `calls`): notes the jobs the
  // applied ones may have finished, when an await is parked.
  void note_writes(const std::vector<Call>& calls, const std::vector<CallResult>& results) {
    if (!awaits_.empty()) note_finishing(calls, results);
  }
  // Forgets the jobs noted (a new batch, or its transaction rolled back).
  void forget_writes() { finishing_.clear(); }
  // After the commit: answers the awaits of the jobs noted that are finished
  // (or gone), and forgets them.
  void serve_noted(std::vector<Delivery>& out) {
    if (!finishing_.empty()) serve(std::exchange(finishing_, {}), out);
  }
  // Ends the awaits whose wait is over (nil) and, every kAwaitSweep, looks
  // at every awaited job (a reap, another sidecar).
  void tick(std::vector<Delivery>& out);
  // When tick() next has something to do; nullopt when nothing is parked.
  std::optional<SteadyClock::time_point> next_tick() const;
  // Answers every parked await with `error` (at stop).
  void drain(const protocol::Error& error, std::vector<Delivery>& out);

 private:
  struct Awaiting {
    protocol::Request request;
    SteadyClock::time_point deadline;
  };
  void note_finishing(const std::vector<Call>& calls, const std::vector<CallResult>& results);
  // Answers the parked awaits of `ids` whose job is finished (or gone);
  // outside a transaction, after the commit.
  void serve(const std::vector<std::string>& ids, std::vector<Delivery>& out);
  // The sweep's next awaited jobs (at most kSweepSlice, from sweep_from_
  // on), and when it looks again.
  std::vector<std::string> next_slice();

  Store& store_;
  const RequestClock& time_;
  std::unordered_map<Token, Awaiting> awaits_;
  std::multimap<std::string, Token> awaits_by_id_;  // by id, in order: the sweep's slices
  std::set<std::pair<SteadyClock::time_point, Token>> await_deadlines_;
  std::vector<std::string> finishing_;  // jobs the batch's writes may have finished
  SteadyClock::time_point next_sweep_{};
  SteadyClock::time_point sweep_began_{};  // of the pass under way
  std::string sweep_from_;                 // where its next slice starts ("": a new pass)
};

}  // namespace fenceq::daemon
