// Time for leases (C2). In server mode the daemon's wall clock, made
// non-decreasing across calls and, through the high-water mark the executor
// persists in the store, across restarts (C2.3). In client mode the clock is
// not consulted: each request's `now` is used verbatim (C2.2).
#pragma once

#include "fenceq_protocol/codec.hpp"

namespace fenceq::daemon {

class Clock {
 public:
  // `high_water`: the highest time used before (from the store), 0 if none.
  Clock(protocol::ClockMode mode, double high_water) : mode_(mode), high_water_(high_water) {}

  protocol::ClockMode mode() const { return mode_; }

  // Server mode: max(wall clock, every value returned before). Never decreases.
  double now();

  // The highest time now() has returned (or was seeded with).
  double high_water() const { return high_water_; }

 private:
  protocol::ClockMode mode_;
  double high_water_;
};

}  // namespace fenceq::daemon
