// The SQLite store's job events (C3.19; store.hpp's JobEvent): SQLite's
// pre-update hook sees every row of `jobs` each statement inserts or
// changes, before and after, in the order the statements make them, on this
// connection alone. job_event() says what each change is. The hook is the
// writer's always (hook_jobs(): groups use it too, sqlite_groups.cpp); its
// events' part runs once note() turned it on.
#include <cstring>

#include "storage/sqlite/sqlite_store.hpp"

namespace fenceq::daemon {
namespace {

std::string text_of(sqlite3_value* v) {
  const auto* t = reinterpret_cast<const char*>(sqlite3_value_text(v));
  return t ? std::string(t, static_cast<std::size_t>(sqlite3_value_bytes(v))) : std::string();
}

}  // namespace

void SqliteStore::hook_jobs() {
  if (hooked_) return;
  // The columns by name: a file upgraded in place has them in the same order
  // as a new one (migrate() adds them in order), but the names are the contract.
  static constexpr const char* kNames[kJobColumns] = {
      "id",   "owner",     "fence", "done",  "queue",        "not_before", "attempts",
      "dead", "cancelled", "grp",   "until", "max_attempts", "held"};
  Statement info(prepare("SELECT name FROM pragma_table_info('jobs')"));
  event_cols_.fill(-1);
  for (int i = 0; sqlite3_step(info.get()) == SQLITE_ROW; ++i) {
    const auto* name = reinterpret_cast<const char*>(sqlite3_column_text(info.get(), 0));
    for (int c = 0; c < kJobColumns; ++c) {
      if (name && std::strcmp(name, kNames[c]) == 0) event_cols_[c] = i;
    }
  }
  for (int c = 0; c < kJobColumns; ++c) {
    if (event_cols_[c] < 0) throw StoreError(std::string("jobs has no column ") + kNames[c]);
  }
  sqlite3_preupdate_hook(db_.get(), &SqliteStore::preupdate, this);
  hooked_ = true;
}

void SqliteStore::note() {
  hook_jobs();
  events_on_ = true;
}

std::vector<JobEvent> SqliteStore::take() { return std::exchange(events_, {}); }

void SqliteStore::apply_call(const Call& c, CallResult& r) {
  std::visit(
      [&](const auto& p) {
        using P = std::decay_t<decltype(p)>;
        if (events_on_) event_call_ = kEventCallOf<P>;  // store.hpp: fail, retry, declared
        if constexpr (kDeclaredCall<P>) {
          apply_declared(c.params, r);  // sqlite_writes.cpp
        } else {
          apply(p, r);
        }
      },
      c.params);
  event_call_ = JobEventCall::other;
}

void SqliteStore::preupdate(void* self, sqlite3* db, int op, const char* schema, const char* table,
                            sqlite3_int64, sqlite3_int64) {
  if (op == SQLITE_DELETE || std::strcmp(table, "jobs") != 0 || std::strcmp(schema, "main") != 0) {
    return;
  }
  auto* s = static_cast<SqliteStore*>(self);
  s->group_preupdate(db, op);
  if (s->events_on_) s->event_preupdate(db, op);
}

void SqliteStore::event_preupdate(sqlite3* db, int op) {
  auto* s = this;
  const auto& col = s->event_cols_;
  auto value = [&](bool old, int c) {
    sqlite3_value* v = nullptr;
    (old ? sqlite3_preupdate_old : sqlite3_preupdate_new)(db, col[c], &v);
    return v;
  };
  auto row = [&](bool old) {
    JobEventRow r;
    r.owned = sqlite3_value_type(value(old, kColOwner)) != SQLITE_NULL;
    r.fence = sqlite3_value_int64(value(old, kColFence));
    r.done = sqlite3_value_int64(value(old, kColDone)) != 0;
    r.not_before = sqlite3_value_double(value(old, kColNotBefore));
    r.attempts = sqlite3_value_int64(value(old, kColAttempts));
    r.dead = sqlite3_value_int64(value(old, kColDead)) != 0;
    r.cancelled = sqlite3_value_int64(value(old, kColCancelled)) != 0;
    return r;
  };
  const JobEventRow after = row(false);
  std::optional<JobEventKind> kind;
  if (op == SQLITE_INSERT) {
    kind = job_event(nullptr, after, s->event_call_);
  } else {
    const JobEventRow before = row(true);
    kind = job_event(&before, after, s->event_call_);
  }
  if (!kind) return;
  JobEvent e;
  e.kind = *kind;
  e.id = text_of(value(false, kColId));
  e.queue = text_of(value(false, kColQueue));
  e.fence = after.fence;
  if (*kind == JobEventKind::claimed) e.owner = text_of(value(false, kColOwner));
  if (auto* g = value(false, kColGroup); sqlite3_value_type(g) != SQLITE_NULL) e.group = text_of(g);
  s->events_.push_back(std::move(e));
}

}  // namespace fenceq::daemon
