// Time for leases (C2). In server mode the daemon's wall clock, made
// non-decreasing across calls and, through the high-water mark the executor
// persists in the store, across restarts (C2.3). In client mode the clock is
// not consulted: each request's `now` is used verbatim (C2.2).
#pragma once

#include <algorithm>

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

}  // namespace fenceq::daemon
