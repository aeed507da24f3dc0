// A side channel of the serving loop: something that answers
// requests outside a batch, in a transaction of its own or from another
// thread's work. The executor owns one per channel (Executor::sources());
// Server::run polls their descriptors beside the sockets, waits no longer
// than their due times, and runs each whose descriptor is readable, whose
// time has come or that says it is pending. A new side channel is a new
// Source in that list, with no branch in the serving loop.
#pragma once

#include <chrono>
#include <optional>
#include <vector>

#include "execution/delivery.hpp"

namespace fenceq::daemon {

class Source {
 public:
  using SteadyClock = std::chrono::steady_clock;
  virtual ~Source() = default;

  // For logs and tests.
  virtual const char* name() const = 0;
  // A descriptor to poll for reading, -1 for none. Asked again every turn
  // (a reconnection changes it).
  virtual int fd() const { return -1; }
  // When it next has something to do by time alone; nullopt for never,
  // kAtOnce for now (the loop then needs no clock to know it).
  static constexpr SteadyClock::time_point kAtOnce = SteadyClock::time_point::min();
  virtual std::optional<SteadyClock::time_point> due() const { return std::nullopt; }
  // Whether it ever has a descriptor (fd() may still be -1 at a turn, as a
  // shared database's while it reconnects): the loop polls a slot for it.
  virtual bool polled() const { return fd() >= 0; }
  // Input is queued where the descriptor cannot show it: run it without waiting.
  virtual bool pending() const { return false; }
  // Does what came or is due, committing any transaction it opens, and
  // appends the replies that may now leave.
  virtual void run(std::vector<Delivery>& out) = 0;
};


}  // namespace fenceq::daemon
