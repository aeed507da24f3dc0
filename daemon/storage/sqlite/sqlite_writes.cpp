// The SQLite store's declared writes: the ops declared in
// protocol/ops/ops.json with a `store` section (their parameter structs are
// generated: store_calls.inc, store.hpp), each applied here by an overload
// of Declared::apply, with its statement by its name (cached(): prepared on
// its first use, then kept), beside apply_declared(), their one dispatch.
// Adding such an op to the SQLite store (docs/architecture.md, "Adding an
// op: every file it touches") is adding its section here, and nothing to
// sqlite_store.hpp: an op declared without its apply here is a compile error
// in apply_declared(). The PostgreSQL side is pg_writes.cpp.
#include "storage/job_rules.hpp"
#include "storage/sqlite/sqlite_rows.hpp"
#include "storage/sqlite/sqlite_store.hpp"

namespace fenceq::daemon {

struct SqliteStore::Declared {
  // --- snooze: SnoozeParams (C3.14) -------------------------------------------
  // The current lease only (C3.5's guard): a snooze after the lease ended,
  // or with an old fence, changes nothing.
  static std::string snooze_sql() {
    return "UPDATE OR FAIL jobs SET " + rules::snooze_set(rules::kSqlite, ":now + :delay") +
           ", kids = " + rules::kParkedKids +  // schema 19: parked until wake_parked
           " WHERE " + rules::current_lease(":id", ":owner", ":fence", ":now") +
           " RETURNING queue";
  }
  static void apply(SqliteStore& s, const SnoozeParams& p, CallResult& r) {
    s.maybe_parked_ = true;
    sqlite3_stmt* st = s.cached("snooze", snooze_sql);
    sqlite::Use u(st);
    u.text(u.at(":id"), p.id).text(u.at(":owner"), p.owner).integer(u.at(":fence"), p.fence)
        .real(u.at(":now"), p.now).real(u.at(":delay"), p.delay);
    r.ok = s.step_freeing(st, "snooze");
  }
};

// --- every declared write -----------------------------------------------------

void SqliteStore::apply_declared(const Call::Params& params, CallResult& r) {
  std::visit(
      [&](const auto& p) {
        if constexpr (kDeclaredCall<std::decay_t<decltype(p)>>) Declared::apply(*this, p, r);
      },
      params);
}

sqlite3_stmt* SqliteStore::cached(std::string_view name, std::string (*sql)()) {
  for (auto& [n, st] : cached_) {
    if (n == name) return st.get();
  }
  cached_.emplace_back(name, Statement(prepare(sql())));
  return cached_.back().second.get();
}

}  // namespace fenceq::daemon
