// The SQLite store's queue settings (queue_config), retention and the
// purge of a page (C3.17, C3.16), and periodic jobs (schedule_set,
// schedule_delete, schedules, a tick taken): their writes and reads, beside
// the job ops of sqlite_store.cpp.
#include <algorithm>

#include "fenceq_protocol/limits.hpp"
#include "storage/job_rules.hpp"
#include "storage/sqlite/sqlite_rows.hpp"
#include "storage/sqlite/sqlite_store.hpp"
#include "storage/store_rows.hpp"

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
    // The leases taken while the queue had no limits count from now on:
    // marked held here for up to 2 ms (a store of some 10^4 jobs: all of
    // them), the rest in steps, its limited claims held back meanwhile.
    if (c.limited() && !limits_of(queue)) {
      start_marking(queue);
      mark_step(std::chrono::steady_clock::now() + std::chrono::milliseconds(2));
    }
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

// C3.25: a group's own settings, merged into its row (a setting not named
// keeps its value), the row gone once it holds none; the queue's
// group_overrides counts the rows, and a queue with any has settings.
namespace {
std::string group_config_exists_sql() {
  return "SELECT 1 FROM group_config WHERE queue = ?1 AND grp = ?2";
}
std::string group_config_set_sql() {
  return "INSERT INTO group_config(queue, grp, max_leased, rate, per) VALUES(?1, ?2, "
         "CASE WHEN ?3 THEN ?4 END, CASE WHEN ?5 THEN ?6 END, CASE WHEN ?7 THEN ?8 END) "
         "ON CONFLICT(queue, grp) DO UPDATE SET max_leased = CASE WHEN ?3 THEN ?4 ELSE max_leased "
         "END, rate = CASE WHEN ?5 THEN ?6 ELSE rate END, per = CASE WHEN ?7 THEN ?8 ELSE per END";
}
std::string group_config_drop_sql() {
  return "DELETE FROM group_config WHERE queue = ?1 AND grp = ?2 AND max_leased IS NULL AND "
         "rate IS NULL AND per IS NULL";
}
std::string group_overrides_sql() {
  return "INSERT INTO queue_config(queue, group_overrides) VALUES(?1, ?2) ON CONFLICT(queue) "
         "DO UPDATE SET group_overrides = group_overrides + excluded.group_overrides";
}
}  // namespace

void SqliteStore::apply(const GroupConfigParams& p, CallResult&) {
  auto exists = [&] {
    auto* s = cached("group_config_exists", group_config_exists_sql);
    Use u(s);
    u.text(1, p.queue).text(2, p.group);
    const bool found = step_row(s, "group_config");
    if (found) end_row(s, "group_config");
    return found;
  };
  const bool had = exists();
  {
    auto* s = cached("group_config_set", group_config_set_sql);
    Use u(s);
    u.text(1, p.queue).text(2, p.group);
    u.integer(3, p.set_max_leased ? 1 : 0).integer(5, p.set_rate ? 1 : 0).integer(7, p.set_per ? 1 : 0);
    if (p.value.max_leased) u.integer(4, *p.value.max_leased);
    if (p.value.rate) u.integer(6, *p.value.rate);
    if (p.value.per) u.real(8, *p.value.per);
    step_done(s, "group_config");
  }
  {
    auto* s = cached("group_config_drop", group_config_drop_sql);
    Use u(s);
    u.text(1, p.queue).text(2, p.group);
    step_done(s, "group_config");
  }
  const int delta = (exists() ? 1 : 0) - (had ? 1 : 0);
  // Groups held back under the old settings are looked at again (wake_due).
  ++overrides_gen_;
  if (delta == 0) return;
  {
    auto* s = cached("group_overrides", group_overrides_sql);
    Use u(s);
    u.text(1, p.queue).integer(2, delta);
    step_done(s, "group_config");
  }
  QueueConfig c = configs_.count(std::string(p.queue)) ? configs_.at(std::string(p.queue)) : QueueConfig{};
  c.group_overrides += delta;
  if (c == QueueConfig{}) {  // nothing held back any more: no settings
    Use u(delete_config_.get());
    u.text(1, p.queue);
    step_done(delete_config_.get(), "group_config");
  } else if (c.limited() && !limits_of(p.queue)) {
    start_marking(p.queue);  // as queue_config's first limit (above)
    mark_step(std::chrono::steady_clock::now() + std::chrono::milliseconds(2));
  }
  configs_dirty_ = true;
  if (c == QueueConfig{}) {
    configs_.erase(std::string(p.queue));
  } else {
    configs_[std::string(p.queue)] = c;
  }
}

void SqliteStore::prepare_control_statements() {
  set_retention_.reset(prepare(
      "INSERT INTO queue_retention(queue, keep_done, keep_dead, keep_cancelled) "
      "VALUES(?1, ?2, ?3, ?4) ON CONFLICT(queue) DO UPDATE SET keep_done = excluded.keep_done, "
      "keep_dead = excluded.keep_dead, keep_cancelled = excluded.keep_cancelled"));
  delete_retention_.reset(prepare("DELETE FROM queue_retention WHERE queue = ?1"));
  // Marking a queue's earlier leases held (mark_step).
  mark_page_.reset(prepare("UPDATE " + kNoUndo + "jobs SET held = 1 WHERE rowid > ?2 AND rowid <= ?3 "
                           "AND queue = ?1 AND done = 0 AND dead = 0 AND until > 0 AND held = 0"));
  mark_note_.reset(prepare("INSERT INTO fenceq_meta(key, value) VALUES(?1, ?2) "
                           "ON CONFLICT(key) DO UPDATE SET value = excluded.value"));
  mark_drop_.reset(prepare("DELETE FROM fenceq_meta WHERE key = ?1"));
  max_rowid_.reset(prepare("SELECT COALESCE(MAX(rowid), 0) FROM jobs"));
  retentions_stmt_.reset(prepare(
      "SELECT queue, keep_done, keep_dead, keep_cancelled FROM queue_retention ORDER BY queue"));
  // A page of finished jobs (purge's filter, retention): the finished
  // states as kFinished* bits (done; dead, not cancelled; cancelled), the
  // ids from :lo below :hi (a prefix; NULL: no upper end), of :grp when
  // not NULL. Of one queue: through jobs_finished, by (queue, finished)
  // since schema 18, a range of that queue's finished jobs (every queue:
  // purge_every_queue). By finished time alone, a retention's chunk walked
  // past every other queue's jobs that finished first (40,000 cancelled: a
  // chunk of 2 jobs took 3-6 ms, ping p99 20-74 ms, in the scale sweep).
  const std::string rest =
      "AND (:states & CASE WHEN done = 1 THEN 1 WHEN cancelled = 1 THEN 4 ELSE 2 END) <> 0 "
      "AND id >= :lo AND (:hi IS NULL OR id < :hi) AND (:grp IS NULL OR grp = :grp)";
  const std::string filters = " AND (:queue IS NULL OR queue = :queue) " + rest;
  const std::string page = rules::finished() + " AND queue = :queue AND finished <= :cutoff " + rest;
  // A window (PurgeParams::upto): the ids from :lo (the later of the
  // prefix and the window's start) but :after, up to :upto, by the primary
  // key alone (+finished: not through jobs_finished, which would walk every
  // finished job to find none).
  const std::string window = rules::finished() + " AND +finished <= :cutoff" + filters +
                             " AND id <> :after AND id <= :upto";
  // The rows deleted are the rows returned, whose fences are kept (C1.2),
  // with how each ended (schema 16) and whether others wait for it.
  purge_page_.reset(prepare("DELETE FROM jobs WHERE id IN (SELECT id FROM jobs WHERE " + page +
                            " LIMIT :limit) RETURNING id, fence, " + rules::kEndedAs + ", " +
                            rules::kHasChildren));
  purge_left_.reset(prepare("SELECT 1 FROM jobs WHERE " + page + " LIMIT 1"));
  // purge_page by bytes: the page's ids, then each deleted by its id.
  purge_pick_.reset(prepare("SELECT id FROM jobs WHERE " + page + " LIMIT :limit"));
  // purge_every_queue: the next queue with finished jobs (from :from, or after it).
  for (bool from : {false, true}) {
    next_finished_queue_[from].reset(prepare(std::string("SELECT MIN(queue) FROM jobs WHERE ") +
                                             rules::finished() + " AND queue " +
                                             (from ? ">=" : ">") + " ?1"));
  }
  purge_window_.reset(prepare("DELETE FROM jobs WHERE id IN (SELECT id FROM jobs WHERE " +
                              window + " LIMIT :limit) RETURNING id, fence, " +
                              rules::kEndedAs + ", " + rules::kHasChildren));
  purge_window_left_.reset(prepare("SELECT 1 FROM jobs WHERE " + window + " LIMIT 1"));
  purge_one_.reset(prepare("DELETE FROM jobs WHERE id = ?1 RETURNING id, fence, " +
                           std::string(rules::kEndedAs) + ", " + rules::kHasChildren));
  // The free list's length, in the transaction (no auto_vacuum: a delete's
  // freed pages stay there): what a chunk bounded by bytes has freed.
  freelist_count_.reset(prepare("PRAGMA freelist_count"));
  {
    Statement size(prepare("PRAGMA page_size"));
    page_size_ = sqlite3_step(size.get()) == SQLITE_ROW ? sqlite3_column_int64(size.get(), 0) : 4096;
  }
  keep_fence_.reset(prepare("INSERT INTO purged_fences(id, fence, ended) VALUES(?1, ?2, ?3) "
                            "ON CONFLICT(id) DO UPDATE SET fence = MAX(fence, excluded.fence), "
                            "ended = excluded.ended"));
}

void SqliteStore::purge_page(const PurgeParams& p, CallResult& r) {
  const auto upper = rules::id_prefix_end(p.prefix);
  if (!p.queue && !p.upto) return purge_every_queue(p, r);
  auto* del = p.upto ? purge_window_.get() : purge_page_.get();
  auto* left = p.upto ? purge_window_left_.get() : purge_left_.get();
  auto bind = [&](Use& u) {
    u.real(u.at(":cutoff"), p.now - p.older_than).opt_text(u.at(":queue"), p.queue)
        .integer(u.at(":states"), p.states)
        .text(u.at(":lo"), p.upto ? std::max(p.prefix, p.after) : p.prefix)
        .opt_text(u.at(":hi"), upper);
    if (p.group) u.text(u.at(":grp"), *p.group);
    if (p.upto) u.text(u.at(":after"), p.after).text(u.at(":upto"), *p.upto);
  };
  std::int64_t n = 0;
  bool by_bytes = false;  // stopped by max_bytes: jobs may be left
  // A failed parent's children it still holds back (retried while it was
  // dead) are settled as its end did (C3.13, "Purged parents"); each id's
  // fence is kept (C1.2).
  auto removed = [&](sqlite3_stmt* st) {
    const auto id = column_view(st, 0);
    const int ended = sqlite3_column_int(st, 2);
    Use k(keep_fence_.get());
    k.text(1, id).integer(2, sqlite3_column_int64(st, 1)).integer(3, ended);
    step_done(keep_fence_.get(), "purge");
    if (ended >= 2 && sqlite3_column_int64(st, 3) != 0) {
      settled_.emplace_back(std::string(id), static_cast<Settled>(ended - 1));
    }
    ++n;
  };
  if (p.max_bytes > 0 && !p.upto) {
    // Bounded by bytes too (retention, purge without a filter): the page's
    // ids read in one walk, then deleted one by one until the free list grew
    // by max_bytes (SQLite 3.40 has no octet_length, and length() of a TEXT
    // reads it); one walk, as the walk may step over many other jobs.
    std::vector<std::string> ids;
    {
      Use u(purge_pick_.get());
      bind(u);
      u.integer(u.at(":limit"), p.limit);
      int rc;
      while ((rc = sqlite3_step(purge_pick_.get())) == SQLITE_ROW) {
        ids.emplace_back(column_view(purge_pick_.get(), 0));
      }
      if (rc != SQLITE_DONE) fail_with("purge", rc);
    }
    const std::int64_t free0 = freed_bytes();
    for (const auto& id : ids) {
      Use u(purge_one_.get());
      u.text(1, id);
      const int rc = sqlite3_step(purge_one_.get());
      if (rc == SQLITE_ROW) removed(purge_one_.get());
      if (rc != SQLITE_ROW && rc != SQLITE_DONE) fail_with("purge", rc);
      if (&id != &ids.back() && (freed_bytes() - free0 >= p.max_bytes || p.past_deadline())) {
        by_bytes = true;  // jobs may be left
        break;
      }
    }
  } else {
    Use u(del);
    bind(u);
    u.integer(u.at(":limit"), p.limit);
    int rc;
    while ((rc = sqlite3_step(del)) == SQLITE_ROW) removed(del);
    if (rc != SQLITE_DONE) fail_with("purge", rc);
  }
  if (!settled_.empty()) settle_noted(p.now);
  if (n > 0) any_purged_ = true;
  if (p.retention && p.queue && n > 0) tally_.at(*p.queue).removed += static_cast<std::uint64_t>(n);
  r.number = n;
  // Fewer than the limit (not stopped by bytes): every job that passes is
  // gone, none is left.
  if (n < p.limit && !by_bytes) return;
  Use u(left);
  bind(u);
  const int rc = sqlite3_step(left);
  if (rc != SQLITE_ROW && rc != SQLITE_DONE) fail_with("purge", rc);
  r.ok = rc == SQLITE_ROW;
}

// A chunk of every queue's purge (purge_all.cpp): one queue at a time in
// name order, each a chunk of its own (purge_page), from p.after (the queue
// the last chunk stopped in, which may have jobs left) until the limit, the
// deadline or the last queue; r.id says where it stopped.
void SqliteStore::purge_every_queue(const PurgeParams& p, CallResult& r) {
  std::string queue(p.after);
  bool from = true;
  std::int64_t n = 0;
  for (;;) {
    auto* s = next_finished_queue_[from].get();
    {
      Use u(s);
      u.text(1, queue);
      if (!step_row(s, "purge")) break;
      const bool none = sqlite3_column_type(s, 0) == SQLITE_NULL;
      if (!none) queue = column_view(s, 0);
      end_row(s, "purge");
      if (none) break;
    }
    from = false;
    PurgeParams q = p;
    q.queue = queue;
    q.limit = p.limit - n;
    CallResult one;
    purge_page(q, one);
    n += one.number.value_or(0);
    if (one.ok || n >= p.limit || p.past_deadline()) {
      r.ok = true;  // jobs may be left, in this queue or the next ones
      break;
    }
  }
  r.number = n;
  r.id = queue;
}

std::int64_t SqliteStore::freed_bytes() {
  Use u(freelist_count_.get());
  if (sqlite3_step(freelist_count_.get()) != SQLITE_ROW) fail_with("purge", SQLITE_ERROR);
  return sqlite3_column_int64(freelist_count_.get(), 0) * page_size_;
}

void SqliteStore::apply(const RetentionParams& p, CallResult&) {
  const auto& [queue, k] = p;
  if (!k.any()) {
    Use u(delete_retention_.get());
    u.text(1, queue);
    step_done(delete_retention_.get(), "queue_config");
    return;
  }
  Use u(set_retention_.get());
  u.text(1, queue);
  int i = 2;
  for (const auto& keep : {k.keep_done, k.keep_dead, k.keep_cancelled}) {
    if (keep) u.real(i, *keep);  // unbound: NULL, kept forever
    ++i;
  }
  step_done(set_retention_.get(), "queue_config");
}

std::vector<std::pair<std::string, Retention>> SqliteStore::retentions() {
  auto* s = retentions_stmt_.get();
  Use u(s);
  std::vector<std::pair<std::string, Retention>> out;
  int rc;
  while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
    auto keep = [&](int col) {
      return sqlite3_column_type(s, col) == SQLITE_NULL
                 ? std::nullopt
                 : std::optional<double>(sqlite3_column_double(s, col));
    };
    out.emplace_back(std::string(column_view(s, 0)), Retention{keep(1), keep(2), keep(3)});
  }
  if (rc != SQLITE_DONE) fail_with("queue_config", rc);
  return out;
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

// Marking a queue's leases held (docs/architecture.md, "Bounded work on the
// serving thread"): one statement over every job scanned the whole table
// (49-59 ms of CPU over 10^5 jobs, ping p99 up to 203 ms in the scale sweep).
// Now pages of kMarkPage rowids in the steps of settle_step, each walking the
// table's own b-tree by rowid.
namespace {
constexpr std::int64_t kMarkPage = 2048;
constexpr std::string_view kMarkKey = "mark_held:";
}  // namespace

void SqliteStore::start_marking(std::string_view queue) {
  if (marking_.contains(queue)) return;
  marking_.emplace(std::string(queue), 0);
  const std::string key = std::string(kMarkKey) + std::string(queue);
  Use u(mark_note_.get());
  u.text(1, key).integer(2, 0);
  step_done(mark_note_.get(), "queue_config");
}

void SqliteStore::load_marking() {
  marking_.clear();
  Statement s(prepare("SELECT substr(key, 11), value FROM fenceq_meta WHERE key >= 'mark_held:' "
                      "AND key < 'mark_held;'"));
  int rc;
  while ((rc = sqlite3_step(s.get())) == SQLITE_ROW) {
    marking_.emplace(std::string(column_view(s.get(), 0)), sqlite3_column_int64(s.get(), 1));
  }
  if (rc != SQLITE_DONE) fail_with("read fenceq_meta", rc);
  marking_begin_ = marking_;
}

bool SqliteStore::mark_step(std::chrono::steady_clock::time_point until) {
  bool wrote = false;
  while (!marking_.empty() && std::chrono::steady_clock::now() < until) {
    auto it = marking_.begin();
    std::int64_t last = 0;
    {
      Use m(max_rowid_.get());
      if (step_row(max_rowid_.get(), "queue_config")) last = sqlite3_column_int64(max_rowid_.get(), 0);
      end_row(max_rowid_.get(), "queue_config");
    }
    Use u(mark_page_.get());
    u.text(1, it->first).integer(2, it->second).integer(3, it->second + kMarkPage);
    step_done(mark_page_.get(), "queue_config");
    it->second += kMarkPage;
    wrote = true;
    const std::string key = std::string(kMarkKey) + it->first;
    if (it->second < last) {
      Use n(mark_note_.get());
      n.text(1, key).integer(2, it->second);
      step_done(mark_note_.get(), "queue_config");
      continue;
    }
    // Every lease it took before its limits is held: its claims go on.
    Use d(mark_drop_.get());
    d.text(1, key);
    step_done(mark_drop_.get(), "queue_config");
    freed(it->first);
    marking_.erase(it);
  }
  return wrote;
}

// A queue's limits, as claims read them (the cache of queue_config).
const QueueConfig* SqliteStore::limits_of(std::string_view queue) const {
  if (configs_.empty()) return nullptr;
  auto it = configs_.find(std::string(queue));
  return it != configs_.end() && it->second.limited() ? &it->second : nullptr;
}

bool SqliteStore::marking(std::string_view queue) const {
  return !marking_.empty() && marking_.contains(queue);
}

void SqliteStore::log_claims(std::string_view queue, const QueueConfig& c, double now,
                             std::int64_t n) {
  if (c.rate <= 0 || n <= 0) return;
  {
    Use p(prune_claims_.get());
    p.text(1, queue).real(2, now - c.per - rules::kClaimLogKeep);
    step_done(prune_claims_.get(), "rate window");
  }
  Use u(log_claims_.get());
  u.text(u.at(":queue"), queue).real(u.at(":now"), now).integer(u.at(":n"), n);
  step_done(log_claims_.get(), "rate window");
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
