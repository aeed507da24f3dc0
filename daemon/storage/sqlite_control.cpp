// The SQLite store's queue settings (queue_config) and periodic jobs
// (schedule_set, schedule_delete, schedules, a tick taken): their writes and
// reads, beside the job ops of sqlite_store.cpp.
#include "fenceq_protocol/limits.hpp"
#include "sqlite_rows.hpp"
#include "sqlite_store.hpp"
#include "store_rows.hpp"

namespace fenceq::daemon {

using sqlite::SqliteRow;
using sqlite::Use;

void SqliteStore::apply(const QueueConfigParams& p, CallResult&) {
  const auto& [queue, c] = p;
  if (c == QueueConfig{}) {
    Use u(delete_config_.get());
    u.text(1, queue);
    step_done(delete_config_.get(), "queue_config");
  } else {
    Use u(set_config_.get());
    u.text(1, queue).integer(2, c.paused ? 1 : 0).integer(3, c.max_leased).integer(4, c.rate)
        .real(5, c.per).integer(6, c.group_max_leased).integer(7, c.group_rate)
        .real(8, c.group_per);
    step_done(set_config_.get(), "queue_config");
    // The leases taken while the queue had no settings count from now on.
    Use m(mark_held_.get());
    m.text(1, queue);
    step_done(mark_held_.get(), "queue_config");
  }
  // The cache claims read; rebuilt from the table should the transaction
  // roll back (rollback()).
  configs_dirty_ = true;
  if (c == QueueConfig{}) {
    configs_.erase(std::string(queue));
  } else {
    configs_[std::string(queue)] = c;
  }
}

std::optional<QueueConfig> SqliteStore::queue_config(std::string_view queue) {
  auto it = configs_.find(std::string(queue));
  if (it == configs_.end()) return std::nullopt;
  return it->second;
}

std::vector<std::pair<std::string, QueueConfig>> SqliteStore::queue_configs() {
  auto* s = configs_stmt_.get();
  Use u(s);
  std::vector<std::pair<std::string, QueueConfig>> out;
  int rc;
  while ((rc = sqlite3_step(s)) == SQLITE_ROW) out.push_back(rows::queue_config(SqliteRow{s}));
  if (rc != SQLITE_DONE) fail_with("queue_config", rc);
  return out;
}

void SqliteStore::load_configs() {
  configs_.clear();
  for (auto& [queue, c] : queue_configs()) configs_.emplace(std::move(queue), c);
  configs_dirty_ = false;
}

void SqliteStore::apply(const ScheduleSetParams& p, CallResult& r) {
  const Schedule& sc = *p.schedule;
  {
    Statement n(prepare("SELECT count(*), EXISTS(SELECT 1 FROM schedules WHERE name = ?1) "
                        "FROM schedules"));
    sqlite3_bind_text(n.get(), 1, sc.name.data(), static_cast<int>(sc.name.size()),
                      SQLITE_STATIC);
    if (sqlite3_step(n.get()) != SQLITE_ROW) fail_with("schedule_set", sqlite3_errcode(db_.get()));
    if (sqlite3_column_int(n.get(), 1) == 0 &&
        static_cast<std::size_t>(sqlite3_column_int64(n.get(), 0)) >= protocol::kMaxSchedules) {
      return;
    }
  }
  auto* s = schedule_set_.get();
  Use u(s);
  u.text(u.at(":name"), sc.name).text(u.at(":cron"), sc.cron).text(u.at(":tz"), sc.tz)
      .text(u.at(":queue"), sc.queue).integer(u.at(":priority"), sc.priority)
      .integer(u.at(":max_attempts"), sc.max_attempts).real(u.at(":now"), p.now);
  u.payload(u.at(":payload"), sc.payload ? &*sc.payload : nullptr);
  step_done(s, "schedule_set");
  r.ok = true;
}

void SqliteStore::apply(const ScheduleDeleteParams& p, CallResult& r) {
  Use u(schedule_delete_.get());
  u.text(1, p.name);
  r.ok = step_done(schedule_delete_.get(), "schedule_delete") > 0;
}

std::vector<Store::StoredSchedule> SqliteStore::schedules() {
  auto* s = schedules_stmt_.get();
  Use u(s);
  std::vector<StoredSchedule> out;
  int rc;
  while ((rc = sqlite3_step(s)) == SQLITE_ROW) out.push_back(rows::schedule(SqliteRow{s}));
  if (rc != SQLITE_DONE) fail_with("schedule_list", rc);
  return out;
}

void SqliteStore::apply(const TakeTickParams& p, CallResult& r) {
  Use u(take_tick_.get());
  u.text(u.at(":name"), p.name).real(u.at(":tick"), p.tick);
  r.ok = step_done(take_tick_.get(), "schedule tick") == 1;
}

}  // namespace fenceq::daemon
