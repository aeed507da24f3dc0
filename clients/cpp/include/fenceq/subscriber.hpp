// The events stream of a fenceqd started with --events ENDPOINT (issue 33;
// protocol/PROTOCOL.md, "Events"): every committed change of a job, in
// commit order, each with the daemon's seq.
//
//   fenceq::Subscriber events("ipc://var/fenceqd-events.sock", "emails");
//   while (auto e = events.next(std::chrono::seconds(1))) std::cout << e->event << " " << e->id;
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "fenceq/client.hpp"

namespace fenceq {

class Subscriber {
 public:
  // Connects to `endpoint` (a daemon's --events endpoint) for the events of
  // `queue` (exactly that queue) or, with nullopt, of every queue. A SUB
  // socket gets events from a moment after it connects: there is no replay.
  explicit Subscriber(const std::string& endpoint, std::optional<std::string> queue = std::nullopt,
                      std::optional<CurveKeys> curve = std::nullopt);
  Subscriber(Subscriber&&) noexcept;
  Subscriber& operator=(Subscriber&&) noexcept;
  ~Subscriber();

  // The next event, or nullopt when none came within `timeout`. Throws
  // Error("bad_reply") for a message that is not an event.
  std::optional<Event> next(std::chrono::milliseconds timeout);
  // The seq of the last event, and how many events the gaps in seq skipped:
  // for a subscriber of every queue, the events dropped for a slow subscriber
  // (PROTOCOL.md); seq numbers every queue's events, so with a queue the other
  // queues' events count too. A seq lower than the last one is a restarted
  // daemon: no gap.
  std::uint64_t last_seq() const;
  std::uint64_t missed() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace fenceq
