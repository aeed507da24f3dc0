// fenceq-history --restores: a backup taken while the daemons serve, put
// back later with the daemons killed -9 (docs/operating.md, "Backup, restore
// and moving to PostgreSQL"; C1.5).
//
// SQLite: `fenceq backup` of the daemon's file; the restore replaces the
// file with the copy (its -wal and -shm removed) and starts the daemon on it,
// which must see the copy by its mark. Every second restore also removes
// `<db>.fenceq-state` (a copy put back without the state file: the mark
// alone tells), the others keep it (put back in place: the state file is
// ahead of the copy too).
//
// PostgreSQL: `pg_dump -Fc` of the sidecars' schema; the restore is a
// `pg_restore` into a fresh database, the first sidecar started on it with
// `--restored`, then the others (as an operator must). Each database it made
// is dropped when it is destroyed.
//
// Either way the daemon (the first sidecar) started on the copy must log that
// it raised every fence; a start that did not is recorded in failures().
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "daemon.hpp"

namespace fenceq::history {

class Restorer {
 public:
  // `schema`: the sidecars' schema with --pg, else null (one SQLite daemon).
  // `flag_restored` false: PostgreSQL sidecars start on the copy without
  // --restored (to show that the checker sees what then goes wrong).
  Restorer(std::vector<std::unique_ptr<test::Daemon>>& daemons, test::PgSchema* schema,
           bool flag_restored = true);
  ~Restorer();
  Restorer(const Restorer&) = delete;
  Restorer& operator=(const Restorer&) = delete;

  // Takes the backup while the daemons serve. Throws when the tool fails.
  void backup();
  // Kills every daemon (-9), calls `down` (the daemons are down: the history
  // records the restore's position there), puts the last backup back and
  // starts the daemons on it. Throws when a step fails.
  void restore(const std::function<void()>& down);

  int restores() const { return restores_; }
  const std::vector<std::string>& failures() const { return failures_; }

 private:
  void put_back_sqlite();
  std::string put_back_pg();  // the new database's URI, for the sidecars
  std::vector<std::unique_ptr<test::Daemon>>& daemons_;
  test::PgSchema* schema_;
  bool flag_restored_;
  test::TempDir dir_;                   // the copies
  std::string pg_base_;                 // --pg: the database the sidecars use now (no search_path)
  std::vector<std::string> databases_;  // --pg: the ones made here, dropped at the end
  bool have_backup_ = false;
  int restores_ = 0;
  std::vector<std::string> failures_;
};

}  // namespace fenceq::history
