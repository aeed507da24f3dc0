#include "execution/schedule_runner.hpp"
#include "base/logging.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <ctime>

namespace fenceq::daemon {

using protocol::ErrorCode;

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

// How often a shared database's schedules are read again (another sidecar
// may have set or deleted one), and how long after a failed read.
constexpr std::chrono::seconds kScheduleReread{10};

}  // namespace

// --- periodic jobs -------------------------------------------------------------

void ScheduleRunner::load(double now) {
  read_ = SteadyClock::now();
  std::vector<Store::StoredSchedule> rows;
  try {
    rows = store_.schedules();
  } catch (const std::exception& e) {
    // The store is out of reach (a shared database down): not again until
    // kScheduleReread has passed, however often the loop asks.
    read_ = SteadyClock::now() + kScheduleReread;
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
      spdlog::warn("schedule {} is skipped: {}", client_text(row.schedule.name), e.what());
    }
  }
  loaded_ = true;
}

double ScheduleRunner::next_schedule() const {
  double next = kNever;
  for (const auto& s : schedules_) next = std::min(next, s.next);
  return next;
}

bool ScheduleRunner::due() const {
  if (!loaded_) return SteadyClock::now() >= read_;
  if (store_.shared() && SteadyClock::now() >= read_ + kScheduleReread) return true;
  return next_schedule() <= time_.parked_now();
}

bool ScheduleRunner::ready() {
  const double now0 = time_.parked_now();
  if (!loaded_ || (store_.shared() && SteadyClock::now() >= read_ + kScheduleReread)) {
    load(now0);
    if (!loaded_) return false;
  }
  return next_schedule() <= time_.parked_now();
}

void ScheduleRunner::enqueue_due() {
  const double now = time_.parked_now();
  for (auto& s : schedules_) {
    if (s.next > now) continue;
    auto& sc = s.stored.schedule;
    const double base = std::max(s.stored.created, sc.last.value_or(0.0));
    // Only the latest tick missed (documented): a daemon down for a day
    // does not enqueue a day of hourly jobs.
    if (auto tick = cron::latest_in(s.expr, base, now)) {
      if (store_.take_tick(sc.name, *tick)) {
        const auto id = tick_id(sc.name, *tick);
        const bool made = store_.enqueue(
            NewJob{id, sc.queue, sc.payload ? &*sc.payload : nullptr, sc.priority, 0, sc.max_attempts},
            now);
        if (made) {
          spdlog::info("schedule {}: enqueued {} in queue {}", client_text(sc.name), client_text(id),
                       client_text(sc.queue));
        } else {
          // The tick is taken all the same: no later run enqueues it twice.
          spdlog::warn("schedule {}: tick {} NOT enqueued: a job with that id is already there",
                       client_text(sc.name), client_text(id));
        }
      }
      sc.last = std::max(sc.last.value_or(0.0), *tick);
    }
    s.next = cron::next_after(s.expr, now).value_or(kNever);
  }
}

void ScheduleRunner::retry_later() {
  // Read them again (their last ticks as committed) after a pause.
  loaded_ = false;
  read_ = SteadyClock::now() + std::chrono::seconds(1);
}

std::optional<ScheduleRunner::SteadyClock::time_point> ScheduleRunner::next_tick() const {
  if (!loaded_) return read_;
  if (due()) return SteadyClock::time_point::min();  // at once (Source::kAtOnce)
  std::optional<SteadyClock::time_point> next;
  auto sooner = [&](SteadyClock::time_point t) { next = next ? std::min(*next, t) : t; };
  const double at = next_schedule();
  if (at != kNever && time_.server()) {
    const double in = std::clamp(at - time_.parked_now(), 0.0, 3600.0);
    sooner(SteadyClock::now() + std::chrono::duration_cast<SteadyClock::duration>(
                                    std::chrono::duration<double>(in)));
  }
  if (store_.shared()) sooner(read_ + kScheduleReread);
  return next;
}

std::optional<protocol::Error> ScheduleRunner::set(const protocol::req::ScheduleSet& r, double now) {
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
  loaded_ = false;  // read again after this batch
  read_ = SteadyClock::now();
  return std::nullopt;
}

bool ScheduleRunner::remove(const std::string& name) {
  const bool gone = store_.schedule_delete(name);
  loaded_ = false;
  read_ = SteadyClock::now();
  return gone;
}

protocol::ScheduleList ScheduleRunner::list(double now) const {
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
  return out;
}

}  // namespace fenceq::daemon
