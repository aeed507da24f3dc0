// The SQLite store's side of --outbox (outbox/outbox.hpp; docs/contract.md
// C3.21): the seqs of the application's outbox rows it has drained, in a
// table of its own, written in the transaction that enqueues their jobs;
// and the highest of them in fenceq_meta. The table is created when an
// outbox is first used (recorded(), at start): a store without one
// has no such table.
#include "storage/sqlite/sqlite_rows.hpp"
#include "storage/sqlite/sqlite_store.hpp"

namespace fenceq::daemon {

std::vector<std::int64_t> SqliteStore::recorded() {
  exec("CREATE TABLE IF NOT EXISTS outbox_drained(seq INTEGER PRIMARY KEY)");
  outbox_record_.reset(prepare("INSERT OR IGNORE INTO outbox_drained(seq) VALUES(?1)"));
  outbox_forget_.reset(prepare("DELETE FROM outbox_drained WHERE seq = ?1"));
  outbox_mark_.reset(prepare(
      "INSERT INTO fenceq_meta(key, value) VALUES('outbox_high_water', ?1) ON CONFLICT(key) "
      "DO UPDATE SET value = MAX(CAST(value AS INTEGER), CAST(excluded.value AS INTEGER))"));
  Statement all(prepare("SELECT seq FROM outbox_drained ORDER BY seq"));
  std::vector<std::int64_t> out;
  int rc;
  while ((rc = sqlite3_step(all.get())) == SQLITE_ROW) out.push_back(sqlite3_column_int64(all.get(), 0));
  if (rc != SQLITE_DONE) fail_with("read outbox_drained", rc);
  return out;
}

bool SqliteStore::record(std::int64_t seq) {
  bool fresh = false;
  {
    sqlite::Use u(outbox_record_.get());
    sqlite3_bind_int64(outbox_record_.get(), 1, seq);
    fresh = step_done(outbox_record_.get(), "record an outbox row") == 1;
  }
  sqlite::Use u(outbox_mark_.get());
  sqlite3_bind_int64(outbox_mark_.get(), 1, seq);
  step_done(outbox_mark_.get(), "record the outbox's high-water mark");
  return fresh;
}

void SqliteStore::forget(const std::vector<std::int64_t>& seqs) {
  for (const auto seq : seqs) {
    sqlite::Use u(outbox_forget_.get());
    sqlite3_bind_int64(outbox_forget_.get(), 1, seq);
    step_done(outbox_forget_.get(), "forget an outbox row");
  }
}

}  // namespace fenceq::daemon
