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
  // When it next has something to do by time alone; nullopt for never.
  virtual std::optional<SteadyClock::time_point> due() const { return std::nullopt; }
  // Input is queued where the descriptor cannot show it: run it without waiting.
  virtual bool pending() const { return false; }
  // Does what came or is due, committing any transaction it opens, and
  // appends the replies that may now leave.
  virtual void run(std::vector<Delivery>& out) = 0;
};

// Whether `s`'s time has come. The clock is read after due(): a source with
// something to do at once answers its own now, which must count as come.
inline bool is_due(const Source& s) {
  const auto t = s.due();
  return t && Source::SteadyClock::now() >= *t;
}

}  // namespace fenceq::daemon
