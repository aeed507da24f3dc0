#include "executor.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <ctime>

#include <poll.h>

#include "metrics.hpp"
#include "executor_internal.hpp"

namespace fenceq::daemon {

using protocol::Answer;
using protocol::ErrorCode;
using protocol::Op;

using executor_detail::finished;
using executor_detail::kAwaitSweep;
using executor_detail::kScheduleReread;

namespace {

// A periodic job's id: its schedule's name and its tick, to the minute in
// UTC (ticks are whole minutes): the same for every sidecar and restart.
std::string tick_id(const std::string& name, double tick) {
  const auto t = static_cast<std::time_t>(std::llround(tick));
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%MZ", &tm);
  return name + "@" + buf;
}

}  // namespace

// --- periodic jobs -------------------------------------------------------------

void Executor::load_schedules(double now) {
  schedules_read_ = SteadyClock::now();
  std::vector<Store::StoredSchedule> rows;
  try {
    rows = store_.schedules();
  } catch (const std::exception& e) {
    // The store is out of reach (a shared database down): not again until
    // kScheduleReread has passed, however often the loop asks.
    schedules_read_ = SteadyClock::now() + kScheduleReread;
    spdlog::warn("reading the schedules failed, trying again in {} s: {}",
                 kScheduleReread.count(), e.what());
    return;
  }
  schedules_.clear();
  for (auto& row : rows) {
    try {
      auto expr = cron::parse(row.schedule.cron, row.schedule.tz);
      const double base = std::max(row.created, row.schedule.last.value_or(0.0));
      double next = kNever;
      if (cron::latest_in(expr, base, now)) {
        next = now;  // due: a tick came since the last one taken
      } else if (auto n = cron::next_after(expr, std::max(base, now))) {
        next = *n;
      }
      schedules_.push_back({std::move(row), std::move(expr), next});
    } catch (const std::exception& e) {
      // Stored by a daemon that could parse it (another host's time zones?).
      spdlog::warn("schedule '{}' is skipped: {}", row.schedule.name, e.what());
    }
  }
  schedules_loaded_ = true;
}

double Executor::next_schedule() const {
  double next = kNever;
  for (const auto& s : schedules_) next = std::min(next, s.next);
  return next;
}

bool Executor::schedules_due() const {
  if (!schedules_loaded_) return SteadyClock::now() >= schedules_read_;
  if (store_.shared() && SteadyClock::now() >= schedules_read_ + kScheduleReread) return true;
  return next_schedule() <= parked_now();
}

void Executor::run_schedules(std::vector<Delivery>& out) {
  const double now0 = parked_now();
  if (!schedules_loaded_ ||
      (store_.shared() && SteadyClock::now() >= schedules_read_ + kScheduleReread)) {
    load_schedules(now0);
    if (!schedules_loaded_) return;
  }
  if (next_schedule() > parked_now()) return;
  const bool done = side_transaction("enqueueing periodic jobs", out, [&](std::vector<Woken>& woken) {
    const double now = parked_now();
    for (auto& s : schedules_) {
      if (s.next > now) continue;
      auto& sc = s.stored.schedule;
      const double base = std::max(s.stored.created, sc.last.value_or(0.0));
      // Only the latest tick missed (documented): a daemon down for a day
      // does not enqueue a day of hourly jobs.
      if (auto tick = cron::latest_in(s.expr, base, now)) {
        if (store_.take_tick(sc.name, *tick)) {
          const auto id = tick_id(sc.name, *tick);
          store_.enqueue(NewJob{id, sc.queue, sc.payload ? &*sc.payload : nullptr, sc.priority, 0,
                                sc.max_attempts},
                         now);
          spdlog::info("schedule '{}': enqueued {} in queue '{}'", sc.name, id, sc.queue);
        }
        sc.last = std::max(sc.last.value_or(0.0), *tick);
      }
      s.next = cron::next_after(s.expr, now).value_or(kNever);
    }
    serve_parked(woken);
    persist_clock();
    return true;
  });
  if (!done) {
    // Read them again (their last ticks as committed) after a pause.
    schedules_loaded_ = false;
    schedules_read_ = SteadyClock::now() + std::chrono::seconds(1);
  }
}

Executor::Outcome Executor::schedule_set(const protocol::Request& r, double now) {
  try {
    cron::parse(r.cron, r.tz);
  } catch (const cron::UnknownZone& e) {
    // cron's own messages name the cron field; a zone's does not say `tz`.
    return protocol::Error{ErrorCode::invalid_argument, std::string("field 'tz': ") + e.what()};
  } catch (const std::invalid_argument& e) {
    return protocol::Error{ErrorCode::invalid_argument, e.what()};
  }
  Schedule sc;
  sc.name = r.name;
  sc.cron = r.cron;
  sc.tz = r.tz;
  sc.queue = r.queue;
  sc.payload = r.payload;
  sc.priority = r.priority;
  sc.max_attempts = r.max_attempts;
  if (!store_.schedule_set(sc, now)) {
    return protocol::Error{ErrorCode::invalid_argument,
                           "at most " + std::to_string(protocol::kMaxSchedules) +
                               " schedules: delete one first"};
  }
  schedules_loaded_ = false;  // read again after this batch
  schedules_read_ = SteadyClock::now();
  return protocol::Result{true};
}

Executor::Outcome Executor::schedule_delete(const protocol::Request& r) {
  const bool gone = store_.schedule_delete(r.name);
  schedules_loaded_ = false;
  schedules_read_ = SteadyClock::now();
  return protocol::Result{gone};
}

Executor::Outcome Executor::schedule_list(double now) {
  protocol::ScheduleList out;
  for (auto& row : store_.schedules()) {
    auto sc = std::move(row.schedule);
    try {
      auto expr = cron::parse(sc.cron, sc.tz);
      const double base = std::max(row.created, sc.last.value_or(0.0));
      sc.next = cron::next_after(expr, std::max(base, now)).value_or(0);
    } catch (const std::exception&) {
      sc.next = 0;
    }
    out.push_back(std::move(sc));
  }
  return protocol::Result{std::move(out)};
}

}  // namespace fenceq::daemon
