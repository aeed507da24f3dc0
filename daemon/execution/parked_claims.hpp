// Long-poll: a claim_next with `wait` > 0 that finds nothing is parked here
// instead of answered, with the claims parked on the same queue, first come
// first served. A queue's claims are retried only when a job of that queue
// may have become claimable: a write freed one (Store::take_queue_changes, or
// another sidecar's notification), or the time the store gave for its next
// lease or delay to end has come. So idle parked claims cost nothing,
// however many queues they wait on. Each is answered with a job, or with nil
// when its wait ends.
//
// Queue limits live here too (too small a part for a class of their own):
// the claims of a queue whose settings hold claims back (paused, max_leased,
// rate) look again every kLimitPoll, when a write may have ended one of its
// leases (mark_limited_dirty), and at once on queue_config (mark_dirty).
#pragma once

#include <chrono>
#include <list>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "execution/clock.hpp"
#include "execution/delivery.hpp"
#include "fenceq_protocol/codec.hpp"
#include "storage/store.hpp"

namespace fenceq::daemon {

class ParkedClaims {
 public:
  using SteadyClock = std::chrono::steady_clock;
  // A claim_next waiting for a job until `deadline`.
  struct Parked {
    Token token;
    protocol::Request request;
    SteadyClock::time_point deadline;
  };
  // A parked claim served by a retry; answered once the transaction commits.
  struct Woken {
    Parked parked;
    std::vector<ClaimedJob> jobs;
  };

  ParkedClaims(Store& store, const RequestClock& time) : store_(store), time_(time) {}

  // How many claims are parked.
  std::size_t size() const { return by_token_.size(); }
  bool empty() const { return by_token_.empty(); }
  // Parks claim_next `r` (it found nothing) as `token` until its wait ends,
  // and learns when its queue looks again; false when kMaxParked are parked
  // already (the caller answers it now).
  bool park(Token token, const protocol::Request& r);
  // Puts back, first in its queue, a claim served by a transaction that was
  // rolled back; its queue looks again at the next serve().
  void put_back(Parked p);
  // Takes a parked claim out; nullopt when `token` is not parked.
  std::optional<Parked> unpark(Token token);
  // The claims of `queue` are tried at the next serve() (a write may have
  // freed one of its jobs); nothing when none is parked on it.
  void mark_dirty(const std::string& queue);
  // Every queue's claims are tried at the next serve().
  void mark_all_dirty();
  // The claims of the queues whose limits held them back are tried at the
  // next serve() (a write may have ended a lease of one).
  void mark_limited_dirty();
  // Whether a queue is marked to be tried.
  bool dirty() const { return !dirty_.empty(); }
  // Whether any parked claim may find a job now (serve() would try one).
  bool due() const;
  // Inside a transaction: marks the queues the store freed a job in, then
  // tries the claims of every marked queue and of every queue whose wake
  // time has come, in order; appends the answered ones to `woken`.
  void serve(std::vector<Woken>& woken);
  // Answers nil the claims whose wait ended by `now`.
  void expire(SteadyClock::time_point now, std::vector<Delivery>& out);
  // Answers every parked claim with `error` (at stop).
  void drain(const protocol::Error& error, std::vector<Delivery>& out);
  // When a wait ends or, with the server clock, a queue's wake time comes;
  // now when a queue is marked; nullopt when nothing is parked.
  std::optional<SteadyClock::time_point> next_tick() const;
  // The reply to a served claim, with the leases it hands out.
  static Delivery deliver(Woken& w);
  // A parked claim's answer when its wait ends with no job.
  static protocol::Result nothing_for(const protocol::Request& r);

 private:
  // The claims parked on one queue.
  struct Waiters {
    std::list<Parked> claims;  // first come, first served
    bool dirty = false;        // a write may have freed a job of the queue
    double wake_at = kNever;   // store time at which one becomes claimable by time alone
  };
  void insert(Parked p, bool at_front);
  void set_wake(Waiters& w, const std::string& queue, std::optional<double> at);
  // When a parked claim of `q`, which found nothing at `now`, looks again by
  // time alone: when a lease or delay ends, or (a limit) soon.
  std::optional<double> parked_wake(const std::string& q, double now);

  Store& store_;
  const RequestClock& time_;
  std::unordered_map<std::string, Waiters> waiting_;  // by queue
  std::unordered_map<Token, std::list<Parked>::iterator> by_token_;
  std::set<std::pair<SteadyClock::time_point, Token>> deadlines_;
  std::set<std::pair<double, std::string>> wakes_;  // (wake_at, queue), finite ones
  std::vector<std::string> dirty_;                   // queues marked since the last serve
  // Parked claims of queues whose settings hold claims back.
  std::set<std::string> limited_waiting_;
};

}  // namespace fenceq::daemon
