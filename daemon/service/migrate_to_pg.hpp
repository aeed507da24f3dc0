// fenceqd --db FILE --migrate-to URI (`fenceq migrate`): a stopped SQLite
// store moved into a PostgreSQL database, for when one host is no longer
// enough (docs/operating.md, "Backup, restore and moving to PostgreSQL").
#pragma once

#include <string>

namespace fenceq::daemon {

// Copies every job (state, fence, attempts, payload, headers, result,
// error, key, group, max_runtime), the edges between jobs and the settling
// left to do, the purged ids' fences, schedules with their last tick, queue
// and group settings, the rate windows and retention from the SQLite file
// `db` (no fenceqd may hold it; an older schema is upgraded first, as a start
// would) into the fenceq schema of `uri` (created when missing; it must hold
// no job, schedule or setting yet).
//
// Fences move to a new epoch (C1.5): every job's fence and every purged
// id's kept fence become the floor of an epoch past every fence of the
// file, every lease ends, and a job inserted later starts at that floor.
// All of it is one PostgreSQL transaction, so a run killed at any point
// leaves nothing behind and the next run starts over; a run after one that
// committed copies nothing and compares again. Before it commits, the two
// stores' counts (each table's rows; the jobs by state, key, group,
// attempts) are compared: any difference rolls everything back.
//
// Prints one JSON line on stdout (the counts moved, the epoch, "agree"),
// progress on stderr. Returns the exit status: 0 moved (or moved before
// and still agreeing), 1 refused or failed, with one line saying why.
int migrate_to_pg(const std::string& db, const std::string& uri);

}  // namespace fenceq::daemon
