// Periodic jobs: the schedules as stored, each with its cron expression and
// next tick (schedules/cron.hpp). A due tick is taken with a conditional
// update of the schedule's last tick, so it is enqueued once however many
// sidecars race for it and whatever restarts; the executor runs
// enqueue_due() in a transaction of its own.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "execution/clock.hpp"
#include "schedules/cron.hpp"
#include "fenceq_protocol/codec.hpp"
#include "storage/store.hpp"

namespace fenceq::daemon {

class ScheduleRunner {
 public:
  using SteadyClock = std::chrono::steady_clock;

  ScheduleRunner(Store& store, const RequestClock& time) : store_(store), time_(time) {}

  // Whether ready() has something to do: the schedules are to be read
  // again, or a tick has come.
  bool due() const;
  // Reads the schedules again when they are stale (never read, changed here,
  // or on a shared database every kScheduleReread: another sidecar may have
  // changed them); true when a tick has come, for enqueue_due().
  bool ready();
  // Inside a transaction: enqueues the job of each schedule whose tick has
  // come (the latest tick only).
  void enqueue_due();
  // The transaction of enqueue_due() failed: the schedules are read again
  // (their last ticks as committed) after a pause.
  void retry_later();
  // When due() next becomes true; nullopt when it waits for nothing.
  std::optional<SteadyClock::time_point> next_tick() const;
  // schedule_set: stores `r`'s schedule; the refusal, or nullopt. The
  // schedules are read again after the batch.
  std::optional<protocol::Error> set(const protocol::req::ScheduleSet& r, double now);
  // schedule_delete: whether schedule `name` was there; read again after the batch.
  bool remove(const std::string& name);
  // schedule_list: every stored schedule, with its next tick after `now`.
  protocol::ScheduleList list(double now) const;

 private:
  struct Scheduled {
    Store::StoredSchedule stored;
    cron::Expr expr;
    double next = 0;  // the next tick after the last one looked at; kNever: none
  };
  // Re-reads the schedules (after schedule_set/delete here, and on a shared
  // database now and then: another sidecar may have changed them).
  void load(double now);
  double next_schedule() const;

  Store& store_;
  const RequestClock& time_;
  std::vector<Scheduled> schedules_;
  bool loaded_ = false;
  SteadyClock::time_point read_{};
};

}  // namespace fenceq::daemon
