// `fenceq backup FILE`: a consistent copy of fenceqd's SQLite file, taken on
// the daemon's host while it serves (docs/operating.md, "Backup, restore and
// moving to PostgreSQL").
#pragma once

#include <string>

namespace fenceq::tool {

struct BackupOptions {
  std::string db = "var/fenceq.db";  // the daemon's --db
  std::string file;                  // the copy
  bool force = false;                // overwrite an existing FILE
  int pages = 1000;                  // pages copied a step
  int pause_ms = 5;                  // pause between steps
};

// Copies options.db to options.file with SQLite's online backup API, in one
// read transaction (a snapshot of one commit: the daemon's writes go on
// beside it, and do not restart it), marks the copy (fenceq_meta's
// backup_taken: fenceqd treats the file as restored, C1.5) and fsyncs it
// and its folder; then prints one JSON line. Returns the exit status.
int run_backup(const BackupOptions& options);

struct MigrateOptions {
  std::string db = "var/fenceq.db";  // the stopped daemon's --db
  std::string to;                    // a postgresql:// URI
  std::string fenceqd;               // "": beside this tool, else on PATH
};

// `fenceq migrate --to URI`: runs `fenceqd --db DB --migrate-to URI`, which
// knows both stores' schemas (daemon/service/migrate_to_pg.hpp), in place of
// this process. Returns only when it cannot be started (exit status 1).
int run_migrate(const MigrateOptions& options);

}  // namespace fenceq::tool
