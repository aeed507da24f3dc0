// A PostgreSQL sidecar's VACUUM of the jobs table, off the serving thread.
//
// Every claim and every completion rewrites its job's row (an UPDATE of
// columns that indexes name is never a HOT update), and the old row
// versions' entries stay in the indexes until a VACUUM removes them. The
// jobs a queue finished last are at the front of its index of claimable
// jobs (jobs_next, by priority and seq), so every claim_next steps over all
// their dead entries before it reaches a live one: measured (bench/README.md,
// "PostgreSQL: the dead entries in front of every claim"), a sidecar's
// complete_next slowed from 4,043 to 2,146 jobs/s over 100,000 jobs, and one
// VACUUM (130 ms) brought it back to 4,204. PostgreSQL's autovacuum comes at
// most once a minute, and by default only once a fifth of the table is dead:
// at thousands of jobs a second that is far too late.
//
// So once this sidecar's transactions have changed kEvery rows, a thread
// with a connection of its own runs VACUUM (INDEX_CLEANUP ON, SKIP_LOCKED)
// on the jobs table: INDEX_CLEANUP ON because PostgreSQL would otherwise
// skip the indexes when few pages hold dead rows, which is always the case
// here; SKIP_LOCKED so that a sidecar whose neighbour is already vacuuming
// the table skips its turn instead of waiting. It takes no lock that a
// claim or a completion waits for. A VACUUM the role may not run (not the
// table's owner) is logged once and not tried again.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

namespace fenceq::daemon {

class PgSweeper {
 public:
  // Rows changed (inserted, updated, deleted) by this sidecar between two
  // sweeps: about 3,300 jobs enqueued, claimed and completed.
  static constexpr std::int64_t kEvery = 10000;
  // After a VACUUM that took d, the next waits at least kRestShare * d.
  static constexpr double kRestShare = 9.0;

  // The thread connects to `uri` on its first sweep.
  explicit PgSweeper(std::string uri);
  PgSweeper(const PgSweeper&) = delete;
  PgSweeper& operator=(const PgSweeper&) = delete;
  // Stops the thread; a VACUUM under way is cancelled.
  ~PgSweeper();

  // After a transaction ended: it changed `rows` rows (committed or not: a
  // rolled-back row is as dead as an updated one).
  void changed(std::int64_t rows);
  // VACUUMs that completed so far.
  std::uint64_t sweeps() const;
  // Whether the role turned out not to be allowed to VACUUM the table.
  bool refused() const;

 private:
  void run();

  const std::string uri_;
  mutable std::mutex mu_;
  std::condition_variable wake_;
  std::int64_t since_ = 0;  // rows changed since the last sweep began
  bool due_ = false;
  bool stop_ = false;
  bool refused_ = false;    // the role may not VACUUM the table: not tried again
  std::uint64_t sweeps_ = 0;
  void* cancel_ = nullptr;  // the sweep's PGcancel while one runs
  std::thread thread_;      // last: started once the members above are
};

}  // namespace fenceq::daemon
