// The SQLite store's lifecycle ops of issue 33 (docs/contract.md C3.14):
// snooze, beside the job ops of sqlite_store.cpp.
#include "job_rules.hpp"
#include "sqlite_rows.hpp"
#include "sqlite_store.hpp"

namespace fenceq::daemon {

using sqlite::Use;

void SqliteStore::prepare_lifecycle_statements() {
  // The current lease only (C3.5's guard): a snooze after the lease ended,
  // or with an old fence, changes nothing.
  snooze_.reset(prepare("UPDATE OR FAIL jobs SET " + rules::snooze_set(rules::kSqlite, ":now + :delay") +
                        " WHERE " + rules::current_lease(":id", ":owner", ":fence", ":now") +
                        " RETURNING queue"));
}

void SqliteStore::apply(const SnoozeParams& p, CallResult& r) {
  Use u(snooze_.get());
  u.text(u.at(":id"), p.id).text(u.at(":owner"), p.owner).integer(u.at(":fence"), p.fence)
      .real(u.at(":now"), p.now).real(u.at(":delay"), p.delay);
  r.ok = step_freeing(snooze_.get(), "snooze");
}

}  // namespace fenceq::daemon
