// Time for leases (C2). In server mode the daemon's wall clock, made
// non-decreasing across calls and, through the high-water mark the executor
// persists in the store, across restarts (C2.3). In client mode the clock is
// not consulted: each request's `now` is used verbatim (C2.2).
#pragma once

#include <algorithm>
#include <limits>

#include "fenceq_protocol/codec.hpp"

namespace fenceq::daemon {

class Clock {
 public:
  // `high_water`: the highest time used before (from the store), 0 if none.
  Clock(protocol::ClockMode mode, double high_water) : mode_(mode), high_water_(high_water) {}

  protocol::ClockMode mode() const { return mode_; }

  // Server mode: max(wall clock + offset, every value returned before). Never
  // decreases.
  double now();

  // A store shared by several hosts (PostgreSQL) keeps time by the database's
  // clock: `offset` is (database clock - this host's wall clock), measured at
  // the start of each transaction.
  void set_offset(double offset) { offset_ = offset; }
  // Never to go back behind `t` (a high-water mark read from the store).
  void raise(double t) { high_water_ = std::max(high_water_, t); }

  // The highest time now() has returned (or was seeded with).
  double high_water() const { return high_water_; }

 private:
  protocol::ClockMode mode_;
  double high_water_;
  double offset_ = 0;
};

// A store time that never comes (no wake-up, no next tick).
inline constexpr double kNever = std::numeric_limits<double>::infinity();

// The time requests are judged at: the server clock, or (client mode) the
// `now` each request carries and, between requests, the highest one seen.
// Shared by the executor's parts (parked claims, awaits, schedules, counters).
class RequestClock {
 public:
  explicit RequestClock(Clock& clock) : clock_(clock) {}

  // Whether time is the server clock: jobs then become claimable by time
  // alone between requests (leases expire, delays end).
  bool server() const { return clock_.mode() == protocol::ClockMode::server; }
  // The time request `r` is applied at; a client clock's `now` is recorded
  // (an optional `now` left out: the client clock's latest).
  double for_request(const protocol::Request& r) {
    if (server()) return clock_.now();
    if (r.now) {
      client_now_ = std::max(client_now_, *r.now);
      return *r.now;
    }
    return client_now_;
  }
  // The time parked requests are judged at: the server clock, or the highest
  // client clock seen.
  double parked_now() const { return server() ? clock_.now() : client_now_; }
  // The time parked claim_next `r` is tried at: parked_now(), or in client
  // mode its own `now` when that is later.
  double claim_time(const protocol::Request& r) const {
    return server() ? clock_.now() : std::max(r.now.value_or(0.0), client_now_);
  }

 private:
  Clock& clock_;
  double client_now_ = 0;  // client clock: the highest `now` any request carried
};

}  // namespace fenceq::daemon
