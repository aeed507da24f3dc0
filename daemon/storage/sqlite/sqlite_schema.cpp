// The SQLite store's schema: its versions, creating and upgrading it, and
// the fence epoch that guards the fences of a lossy run and of a restored copy
// (guard_fences()).
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "base/notify.hpp"
#include "storage/job_rules.hpp"
#include "storage/migrations.hpp"
#include "storage/sqlite/run_state.hpp"
#include "storage/sqlite/sqlite_store.hpp"

namespace fenceq::daemon {
namespace {

// Schema version 1 (job_rules.hpp): the contract's columns, types,
// constraints and defaults exactly (C1.1). Columns added later need defaults
// so that `INSERT INTO jobs(id)` keeps working.
constexpr const char* kSchemaV1 = R"sql(
CREATE TABLE IF NOT EXISTS jobs(
  id     TEXT PRIMARY KEY,
  owner  TEXT,
  until  REAL NOT NULL DEFAULT 0,
  fence  INTEGER NOT NULL DEFAULT 0,
  result TEXT,
  done   INTEGER NOT NULL DEFAULT 0
);
)sql";

// Schema version 2, the work queue: columns added with defaults (C1.1), the
// index claim_next walks, the fences of purged ids (C1.2), and the server
// clock's mark (C2.3).
constexpr const char* kSchemaV2 = R"sql(
ALTER TABLE jobs ADD COLUMN queue        TEXT    NOT NULL DEFAULT 'default';
ALTER TABLE jobs ADD COLUMN payload      BLOB;
ALTER TABLE jobs ADD COLUMN priority     INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN not_before   REAL    NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN attempts     INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN max_attempts INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN dead         INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN error        TEXT;
ALTER TABLE jobs ADD COLUMN seq          INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN created      REAL    NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN finished     REAL    NOT NULL DEFAULT 0;
-- claim_next: the open jobs of a queue, most urgent first. Leased and delayed
-- jobs stay in it and are stepped over; done and dead ones leave it.
CREATE INDEX jobs_next ON jobs(queue, priority DESC, seq) WHERE done = 0 AND dead = 0;
-- Jobs on their last allowed attempt, by lease end, for reap_exhausted().
CREATE INDEX jobs_last_attempt ON jobs(until)
  WHERE done = 0 AND dead = 0 AND max_attempts > 0 AND attempts >= max_attempts;
-- Finished jobs by finishing time, for purge.
CREATE INDEX jobs_finished ON jobs(finished) WHERE done = 1 OR dead = 1;
CREATE TABLE purged_fences(
  id    TEXT PRIMARY KEY,
  fence INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS fenceq_meta(
  key   TEXT PRIMARY KEY,
  value
);
)sql";

// Schema version 3, queue control: cancelled jobs (also dead = 1),
// and the progress a lease's renew reported.
constexpr const char* kSchemaV3 = R"sql(
ALTER TABLE jobs ADD COLUMN cancelled INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN progress  TEXT;
)sql";

// Schema version 4: queue settings, the claims of rate-limited
// queues within their window, periodic jobs, and the leased jobs of queues
// with settings by lease end (jobs_held: max_leased counts them without
// walking the backlog; rules::leased_in says which jobs are in it).
constexpr const char* kSchemaV4 = R"sql(
CREATE TABLE queue_config(
  queue      TEXT PRIMARY KEY,
  paused     INTEGER NOT NULL DEFAULT 0,
  max_leased INTEGER NOT NULL DEFAULT 0,
  rate       INTEGER NOT NULL DEFAULT 0,
  per        REAL    NOT NULL DEFAULT 1
);
CREATE TABLE queue_claims(
  queue TEXT NOT NULL,
  at    REAL NOT NULL
);
CREATE INDEX queue_claims_at ON queue_claims(queue, at);
CREATE TABLE schedules(
  name         TEXT PRIMARY KEY,
  cron         TEXT NOT NULL,
  tz           TEXT NOT NULL,
  queue        TEXT NOT NULL,
  payload      BLOB,
  priority     INTEGER NOT NULL DEFAULT 0,
  max_attempts INTEGER NOT NULL DEFAULT 0,
  created      REAL NOT NULL,
  last         REAL
);
ALTER TABLE jobs ADD COLUMN held INTEGER NOT NULL DEFAULT 0;
CREATE INDEX jobs_held ON jobs(queue, until) WHERE held = 1 AND done = 0 AND dead = 0;
)sql";

// Schema version 5 (C3.10): a job's unique key, the index a keyed
// enqueue looks it up by, and at most one unfinished job per queue and key
// (the rule the store keeps; the index is its backstop).
constexpr const char* kSchemaV5 = R"sql(
ALTER TABLE jobs ADD COLUMN ukey TEXT;
CREATE INDEX jobs_ukey ON jobs(queue, ukey, created) WHERE ukey IS NOT NULL;
CREATE UNIQUE INDEX jobs_ukey_open ON jobs(queue, ukey)
  WHERE ukey IS NOT NULL AND done = 0 AND dead = 0;
)sql";

// Schema version 6 (C3.11): a job's group. jobs_next keeps only the jobs
// of no group, so a queue without groups reads and writes one index, as
// before; a group's open jobs are in jobs_group (its head), jobs_group_top
// (the top priority of a queue's grouped jobs) and jobs_group_leased (its
// held jobs, for group_max_leased; without `until`, so a claim or renew
// outside a queue with settings leaves it alone); group_claims the claims of
// group_rate's window. The turns are the daemon's, in memory
// (sqlite_groups.cpp).
constexpr const char* kSchemaV6 = R"sql(
ALTER TABLE jobs ADD COLUMN grp TEXT;
DROP INDEX jobs_next;
CREATE INDEX jobs_next ON jobs(queue, priority DESC, seq) WHERE done = 0 AND dead = 0 AND grp IS NULL;
CREATE INDEX jobs_group ON jobs(queue, grp, priority DESC, seq)
  WHERE done = 0 AND dead = 0 AND grp IS NOT NULL;
CREATE INDEX jobs_group_top ON jobs(queue, priority DESC)
  WHERE done = 0 AND dead = 0 AND grp IS NOT NULL;
CREATE INDEX jobs_group_leased ON jobs(queue, grp)
  WHERE held = 1 AND done = 0 AND dead = 0 AND grp IS NOT NULL;
CREATE TABLE group_claims(
  queue TEXT NOT NULL,
  grp   TEXT NOT NULL,
  at    REAL NOT NULL
);
CREATE INDEX group_claims_at ON group_claims(queue, grp, at);
ALTER TABLE queue_config ADD COLUMN group_max_leased INTEGER NOT NULL DEFAULT 0;
ALTER TABLE queue_config ADD COLUMN group_rate       INTEGER NOT NULL DEFAULT 0;
ALTER TABLE queue_config ADD COLUMN group_per        REAL    NOT NULL DEFAULT 1;
)sql";

// Schema version 7 (bench/README.md, "Keys and groups"; bench/index_cost.py):
// a key needs one index, and one that no complete touches. Every index of jobs
// costs every insert its cursor (about 1,000 instructions a job, a job of
// no key included), and every complete the same again when its WHERE names
// done or dead, as jobs_ukey_open's did. jobs.kseq orders a key's jobs by
// when each last became unfinished: the job's seq when enqueued, and the
// next seq when revived (retry). At most one job of a key is
// unfinished, and a job only becomes unfinished when no other is, so the
// key's unfinished job, if any, is its entry of the largest kseq. A
// group's leases are counted in jobs_held, now by (queue, grp, until), in
// place of jobs_group_leased: max_leased's count of a queue's leases reads
// the queue's held jobs, as many as its limits let it hold.
constexpr const char* kSchemaV7 = R"sql(
ALTER TABLE jobs ADD COLUMN kseq INTEGER;
UPDATE jobs SET kseq = seq WHERE ukey IS NOT NULL;
UPDATE jobs SET kseq = (SELECT MAX(o.seq) FROM jobs o WHERE o.queue = jobs.queue
                        AND o.ukey = jobs.ukey) + 1
  WHERE ukey IS NOT NULL AND done = 0 AND dead = 0;
DROP INDEX jobs_ukey_open;
DROP INDEX jobs_ukey;
CREATE INDEX jobs_ukey ON jobs(queue, ukey, kseq) WHERE ukey IS NOT NULL;
DROP INDEX jobs_group_leased;
DROP INDEX jobs_held;
CREATE INDEX jobs_held ON jobs(queue, grp, until) WHERE held = 1 AND done = 0 AND dead = 0;
)sql";

// Schema version 8 (bench/README.md, "Keys and groups"): jobs_ukey by (khash,
// kseq), khash a 64-bit hash of the queue and the key (key_hash). A keyed
// enqueue searches jobs_ukey twice, to look its key up and to insert it: with
// the queue's and the key's strings each step of each search compared two
// strings, and the searches were 37% of a keyed job's instructions
// (fenceq-bench --keyed, callgrind). Two keys of one hash share entries;
// every statement that reads the index also checks queue and ukey.
constexpr const char* kSchemaV8 = R"sql(
ALTER TABLE jobs ADD COLUMN khash INTEGER;
UPDATE jobs SET khash = fenceq_khash(queue, ukey) WHERE ukey IS NOT NULL;
DROP INDEX jobs_ukey;
CREATE INDEX jobs_ukey ON jobs(khash, kseq) WHERE khash IS NOT NULL;
)sql";

// Schema version 9 (C3.13): jobs that wait for others. A child's edge
// to each parent is a row of job_after (met once the parent is done, or
// dead with after_failure "run"); job_waits holds what a child needs
// besides (how many edges are not met yet, whether after_failure is
// "run", its delay, counted from its unblocking), and a blocked job's
// not_before is rules::kBlockedUntil. jobs.kids marks a job some other
// waits for, so that the complete of every other job does no lookup. One
// column on jobs, not five: every column of jobs costs each write of every
// job (five cost `batch` 4.5% of its instructions, callgrind).
constexpr const char* kSchemaV9 = R"sql(
ALTER TABLE jobs ADD COLUMN kids INTEGER NOT NULL DEFAULT 0;
CREATE TABLE job_waits(
  child     TEXT PRIMARY KEY,
  blocked   INTEGER NOT NULL,
  after_run INTEGER NOT NULL,
  wait      REAL NOT NULL
) WITHOUT ROWID;
CREATE TABLE job_after(
  parent TEXT NOT NULL,
  child  TEXT NOT NULL,
  met    INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY(parent, child)
) WITHOUT ROWID;
CREATE INDEX job_after_child ON job_after(child, parent);
)sql";

// Schema version 10 (C3.13): jobs.kids's second bit marks a job that
// waits for others (rules::kKidsChild), so that claims of every other job
// look up no parents for their reply's `after`.
constexpr const char* kSchemaV10 = R"sql(
UPDATE jobs SET kids = kids | 2 WHERE id IN (SELECT child FROM job_waits);
)sql";

// Schema version 11 (C3.15): the max_runtime of the jobs that have one,
// and the deadline of each one's current attempt (its claim + max_runtime;
// 0 when none runs), by which the reap finds the overrun attempts
// (sqlite_lifecycle.cpp). A table of their own, not columns of jobs: every
// column of jobs costs every write of every job.
constexpr const char* kSchemaV11 = R"sql(
CREATE TABLE job_runtimes(
  id          TEXT PRIMARY KEY,
  max_runtime REAL NOT NULL,
  deadline    REAL NOT NULL DEFAULT 0
) WITHOUT ROWID;
CREATE INDEX job_runtimes_deadline ON job_runtimes(deadline) WHERE deadline > 0;
)sql";

// Schema version 12 (C3.18, C3.17): the headers of the jobs that have some (in
// a table of their own, as job_runtimes, with jobs.kids's bit
// kKidsHeaders), and each queue's retention (queue_config's keep_*), apart
// from queue_config, whose rows make claims of their queue take the limited
// path: a retention holds no claim back.
constexpr const char* kSchemaV12 = R"sql(
CREATE TABLE job_headers(
  id      TEXT PRIMARY KEY,
  headers TEXT NOT NULL
) WITHOUT ROWID;
-- A job removed (purge, retention) takes its rows of job_headers and
-- job_runtimes along (the kids bits say it has them), and those of jobs
-- removed before version 12 go now.
CREATE TRIGGER jobs_extras_gone AFTER DELETE ON jobs WHEN (OLD.kids & 12) <> 0 BEGIN
  DELETE FROM job_headers WHERE id = OLD.id;
  DELETE FROM job_runtimes WHERE id = OLD.id;
END;
DELETE FROM job_runtimes WHERE id NOT IN (SELECT id FROM jobs);
CREATE TABLE queue_retention(
  queue          TEXT PRIMARY KEY,
  keep_done      REAL,
  keep_dead      REAL,
  keep_cancelled REAL
);
)sql";

// Schema version 13: a queue's dead and cancelled jobs by id, for the pages
// of retry_many and cancel_many (ListFilter::reaped). Dead jobs are few
// beside the others, and no claim, complete or enqueue writes this index.
constexpr const char* kSchemaV13 = R"sql(
CREATE INDEX jobs_dead ON jobs(queue, cancelled, id) WHERE dead = 1;
)sql";

// Schema version 14 (bench/README.md, "Keys and groups"): no index by key.
// The store keeps its keys in memory (key_map.hpp, sqlite_keys.cpp);
// jobs.khash is no longer written.
constexpr const char* kSchemaV14 = R"sql(
DROP INDEX IF EXISTS jobs_ukey;
)sql";

// Schema version 15 (C3.13, "When"): the parents whose edges a transaction left
// to the daemon's steps (sqlite_after.cpp), taken in order of n: how each
// ended (SqliteStore::Settled), and the child, in id order, up to which its
// edges are settled ('' before the first).
constexpr const char* kSchemaV15 = R"sql(
CREATE TABLE IF NOT EXISTS settle_pending(
  n          INTEGER PRIMARY KEY,
  parent     TEXT NOT NULL UNIQUE,
  how        INTEGER NOT NULL,
  settled_to TEXT NOT NULL
);
)sql";

// Schema version 16: how a purged job ended (1 done, 2
// dead, 3 cancelled; rules::kEndedAs), so that a parent purged after it
// failed still counts as failed (C3.13). Ids purged before could only read
// as done; one that an edge still waits for had failed (a done parent's
// edges are met, and a purged job is finished), so it reads as dead, and
// the steps settle its children, which were left blocked for good. Such a
// child was retried while the parent was dead or cancelled, and its error
// (kept by retry) still names which (settle_pending.how is
// SqliteStore::Settled: ended - 1).
constexpr const char* kSchemaV16 = R"sql(
ALTER TABLE purged_fences ADD COLUMN ended INTEGER NOT NULL DEFAULT 1;
UPDATE purged_fences SET ended = CASE WHEN EXISTS(SELECT 1 FROM job_after a, jobs c
    WHERE a.parent = purged_fences.id AND a.met = 0 AND c.id = a.child
      AND c.error = 'parent ' || purged_fences.id || ' cancelled') THEN 3 ELSE 2 END
  WHERE EXISTS(SELECT 1 FROM job_after a WHERE a.parent = purged_fences.id AND a.met = 0)
    AND id NOT IN (SELECT parent FROM settle_pending);
INSERT OR IGNORE INTO settle_pending(parent, how, settled_to)
  SELECT id, ended - 1, '' FROM purged_fences WHERE ended >= 2;
)sql";

// Schema version 17 (docs/architecture.md, "Bounded work on the serving
// thread"): jobs_next by (queue, blocked, priority DESC, seq)
// (rules::kBlockedKey): the claims seek past a queue's blocked jobs, which
// sort last, rather than step over each; the same jobs as before, so every
// other reader of the index is unchanged.
constexpr const char* kSchemaV17 = R"sql(
DROP INDEX jobs_next;
CREATE INDEX jobs_next ON jobs(queue, not_before >= 1e15, priority DESC, seq)
  WHERE done = 0 AND dead = 0 AND grp IS NULL;
)sql";

// Schema version 18 (docs/architecture.md, "Bounded work on the serving
// thread"): payloads and results longer than rules::kSpillBytes in tables of
// their own (kKidsPayload, kKidsResult), so that no read of a job's other
// columns walks a long value's pages; a job removed takes its rows along, and
// those of jobs already there move now. jobs_finished by (queue, finished),
// so that a queue's retention and purge walk that queue's finished jobs only,
// and a purge of every queue goes one queue at a time (sqlite_control.cpp). A
// second index beside it cost every complete 8% of the serving thread's
// instructions (bench/ab_instructions.py).
constexpr const char* kSchemaV18 = R"sql(
CREATE TABLE IF NOT EXISTS job_payloads(
  id      TEXT PRIMARY KEY,
  payload
);
CREATE TABLE IF NOT EXISTS job_results(
  id     TEXT PRIMARY KEY,
  result TEXT
);
DROP TRIGGER IF EXISTS jobs_extras_gone;
CREATE TRIGGER jobs_extras_gone AFTER DELETE ON jobs WHEN (OLD.kids & 60) <> 0 BEGIN
  DELETE FROM job_headers WHERE id = OLD.id;
  DELETE FROM job_runtimes WHERE id = OLD.id;
  DELETE FROM job_payloads WHERE id = OLD.id;
  DELETE FROM job_results WHERE id = OLD.id;
END;
INSERT OR REPLACE INTO job_payloads(id, payload)
  SELECT id, payload FROM jobs WHERE length(CAST(payload AS BLOB)) > 1024;
UPDATE jobs SET payload = NULL, kids = kids | 16 WHERE id IN (SELECT id FROM job_payloads);
INSERT OR REPLACE INTO job_results(id, result)
  SELECT id, result FROM jobs WHERE length(CAST(result AS BLOB)) > 1024;
UPDATE jobs SET result = NULL, kids = kids | 32 WHERE id IN (SELECT id FROM job_results);
DROP INDEX IF EXISTS jobs_finished;
CREATE INDEX jobs_finished ON jobs(queue, finished) WHERE done = 1 OR dead = 1;
)sql";
static_assert(rules::kSpillBytes == 1024 && rules::kKidsPayload == 16 && rules::kKidsResult == 32,
              "kSchemaV18 spells these");

// Schema version 19 (docs/architecture.md, "Bounded work on the serving
// thread"): jobs_next by (queue, rules::kNextKey, priority DESC, seq), so
// that the claims do not walk the delayed jobs (parked, kKidsParked);
// jobs_wake finds those whose delay is over. The jobs there now are not
// parked: a claim steps over them as before. Both index conditions and the
// key are evaluated on every insert and removal of a job: the parked bit
// first (the condition stops there for most jobs), and a sum rather than a
// shift and an or (bench/README.md).
constexpr const char* kSchemaV19 = R"sql(
DROP INDEX jobs_next;
CREATE INDEX jobs_next ON jobs(queue, ((not_before >= 1e15) + (kids & 64)), priority DESC, seq)
  WHERE done = 0 AND dead = 0 AND grp IS NULL;
CREATE INDEX IF NOT EXISTS jobs_wake ON jobs(queue, MAX(until, not_before))
  WHERE (kids & 64) <> 0 AND done = 0 AND dead = 0 AND grp IS NULL;
)sql";
static_assert(rules::kKidsParked == 64, "kSchemaV19 and rules::kNextKey spell it");

// Version 20 changed PostgreSQL's store only (its jobs_next, job_rules.hpp):
// nothing here but the number.
constexpr const char* kSchemaV20 = R"sql(
-- PostgreSQL's jobs_next and jobs_wake (pg_statements.cpp); none here.
)sql";

// Schema version 21 (C3.22): each saved step of a job, its value a BLOB
// (is_bin says whether it was sent as bin) or NULL for nil, and
// jobs_extras_gone removes them with their job (kKidsSteps: 128).
constexpr const char* kSchemaV21 = R"sql(
CREATE TABLE IF NOT EXISTS job_steps(
  id     TEXT NOT NULL,
  step   TEXT NOT NULL,
  value  BLOB,
  is_bin INTEGER NOT NULL,
  PRIMARY KEY(id, step)
) WITHOUT ROWID;
DROP TRIGGER IF EXISTS jobs_extras_gone;
CREATE TRIGGER jobs_extras_gone AFTER DELETE ON jobs WHEN (OLD.kids & 188) <> 0 BEGIN
  DELETE FROM job_headers WHERE id = OLD.id;
  DELETE FROM job_runtimes WHERE id = OLD.id;
  DELETE FROM job_payloads WHERE id = OLD.id;
  DELETE FROM job_results WHERE id = OLD.id;
  DELETE FROM job_steps WHERE id = OLD.id;
END;
)sql";
static_assert(rules::kKidsSteps == 128 &&
                  (rules::kKidsRuntime | rules::kKidsHeaders | rules::kKidsPayload |
                   rules::kKidsResult | rules::kKidsSteps) == 188,
              "kSchemaV21 spells these");

// Schema version 22: suspend and signal (C3.23): a suspended job's token,
// when its wait ends and what then (fail: 1, dead; 0, ready again), one row
// a job, by token too and by timeout (the reap's page); jobs_extras_gone
// removes it with its job (kKidsSuspend: 256). Deadlines (C3.24):
// jobs.expires, NULL for none (a column: every claim reads it, as it reads
// not_before), and job_deadlines, the jobs that have one by when, for the
// reap; jobs_deadline_gone removes a job's row with it. Not an index of
// jobs on expires: a partial index costs every enqueue its condition, +4.2%
// of enqueue_many's instructions (bench/ab_instructions.py), where a row
// here costs the jobs with a deadline alone. And jobs_steps_gone: a job's
// steps go with it whether or not it is marked kKidsSteps (a step_save no
// longer marks its job: claims look for steps of any job claimed before,
// rows::steps_sql), for any job ever claimed (fence > 0).
constexpr const char* kSchemaV22 = R"sql(
CREATE TABLE IF NOT EXISTS job_suspends(
  id      TEXT PRIMARY KEY,
  token   TEXT NOT NULL UNIQUE,
  timeout REAL NOT NULL,
  fail    INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS job_suspends_timeout ON job_suspends(timeout);
ALTER TABLE jobs ADD COLUMN expires REAL;
CREATE TABLE IF NOT EXISTS job_deadlines(
  at REAL NOT NULL,
  id TEXT NOT NULL,
  PRIMARY KEY(at, id)
) WITHOUT ROWID;
CREATE TRIGGER jobs_deadline_gone AFTER DELETE ON jobs WHEN OLD.expires IS NOT NULL BEGIN
  DELETE FROM job_deadlines WHERE at = OLD.expires AND id = OLD.id;
END;
CREATE TRIGGER jobs_steps_gone AFTER DELETE ON jobs WHEN OLD.fence > 0 BEGIN
  DELETE FROM job_steps WHERE id = OLD.id;
END;
DROP TRIGGER IF EXISTS jobs_extras_gone;
CREATE TRIGGER jobs_extras_gone AFTER DELETE ON jobs WHEN (OLD.kids & 444) <> 0 BEGIN
  DELETE FROM job_headers WHERE id = OLD.id;
  DELETE FROM job_runtimes WHERE id = OLD.id;
  DELETE FROM job_payloads WHERE id = OLD.id;
  DELETE FROM job_results WHERE id = OLD.id;
  DELETE FROM job_steps WHERE id = OLD.id;
  DELETE FROM job_suspends WHERE id = OLD.id;
END;
)sql";
static_assert(rules::kKidsExtras == 444 && rules::kKidsSuspend == 256, "kSchemaV22 spells these");

// Schema version 23 (C3.25): the groups' own settings (group_config, a row
// a group that has one; NULL: the queue's), and queue_config.group_overrides,
// how many of the queue's groups have a row, so that a queue's claims look
// for a group's row only when there are any.
constexpr const char* kSchemaV23 = R"sql(
CREATE TABLE IF NOT EXISTS group_config(
  queue      TEXT NOT NULL,
  grp        TEXT NOT NULL,
  max_leased INTEGER,
  rate       INTEGER,
  per        REAL,
  PRIMARY KEY(queue, grp)
) WITHOUT ROWID;
ALTER TABLE queue_config ADD COLUMN group_overrides INTEGER NOT NULL DEFAULT 0;
)sql";

// Schema version 24 (C3.22): a job's steps in its own row, jobs.steps (a
// text of rows::StepText: each step's name and value with their lengths), up
// to rules::kInlineStepsBytes; past that they move to job_steps, jobs.steps
// NULL and kKidsSteps set (a signal, C3.23, is always there, with the bit).
// A step_save then rewrites the row its claim wrote, in a page the batch
// most often dirties anyway, where a row of job_steps was one more page a
// batch to write and sync (bench/README.md). The bit marks again every job
// with rows there (schema 22 left it off), so jobs_extras_gone takes them
// and jobs_steps_gone goes.
constexpr const char* kSchemaV24 = R"sql(
ALTER TABLE jobs ADD COLUMN steps TEXT;
UPDATE jobs SET kids = kids | 128 WHERE kids & 128 = 0 AND id IN (SELECT id FROM job_steps);
DROP TRIGGER IF EXISTS jobs_steps_gone;
)sql";
static_assert(rules::kKidsSteps == 128, "kSchemaV24 spells it");

// The versions, in order (storage/migrations.hpp).
const std::vector<Migration> kMigrations{
    {1, kSchemaV1},   {2, kSchemaV2},   {3, kSchemaV3},   {4, kSchemaV4},   {5, kSchemaV5},
    {6, kSchemaV6},   {7, kSchemaV7},   {8, kSchemaV8},   {9, kSchemaV9},   {10, kSchemaV10},
    {11, kSchemaV11}, {12, kSchemaV12}, {13, kSchemaV13}, {14, kSchemaV14}, {15, kSchemaV15},
    {16, kSchemaV16}, {17, kSchemaV17}, {18, kSchemaV18}, {19, kSchemaV19},
    {20, kSchemaV20}, {21, kSchemaV21}, {22, kSchemaV22}, {23, kSchemaV23},
    {24, kSchemaV24},
};

}  // namespace

std::int64_t SqliteStore::key_hash(std::string_view queue, std::string_view key) {
  // FNV-1a, 64 bits, over the queue, a 0 byte and the key: fixed here for
  // good, as files keep what it gave.
  std::uint64_t h = 0xcbf29ce484222325ULL;
  const auto mix = [&h](std::string_view bytes) {
    for (const unsigned char c : bytes) {
      h ^= c;
      h *= 0x100000001b3ULL;
    }
  };
  mix(queue);
  mix(std::string_view("\0", 1));
  mix(key);
  return static_cast<std::int64_t>(h);
}

void SqliteStore::khash_function(sqlite3_context* ctx, int, sqlite3_value** argv) {
  const auto text = [](sqlite3_value* v) {
    const auto* p = reinterpret_cast<const char*>(sqlite3_value_text(v));
    return std::string_view(p ? p : "", static_cast<std::size_t>(sqlite3_value_bytes(v)));
  };
  sqlite3_result_int64(ctx, key_hash(text(argv[0]), text(argv[1])));
}

void SqliteStore::migrate() {
  exec("BEGIN IMMEDIATE");
  try {
    Statement v(prepare("PRAGMA user_version"));
    int version = sqlite3_step(v.get()) == SQLITE_ROW ? sqlite3_column_int(v.get(), 0) : 0;
    v.reset();
    // A file of the contract's six columns (user_version 0, from before the
    // version was kept) is upgraded in place; CREATE ... IF NOT EXISTS
    // changes nothing that is there (C1.2).
    const auto due = migrations_due(kMigrations, version);
    // An upgrade of a large file (version 18 moves every long value) can
    // outlast systemd's start timeout: the start is extended while SQLite
    // makes progress (base/notify.hpp, StartExtender).
    std::optional<StartExtender> extend;
    Statement jobs(prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'jobs'"));
    const bool has_jobs = sqlite3_step(jobs.get()) == SQLITE_ROW;  // not a new file
    jobs.reset();
    if (!due.empty() && has_jobs) {
      extend.emplace("upgrading " + path_ + " from schema version " + std::to_string(version) +
                     " to " + std::to_string(rules::kSchemaVersion));
      sqlite3_progress_handler(
          db_.get(), 1000000,
          [](void* e) {
            static_cast<StartExtender*>(e)->progress();
            return 0;
          },
          &*extend);
    }
    for (const Migration* m : due) exec(m->sql);
    exec("PRAGMA user_version = " + std::to_string(rules::kSchemaVersion));
    exec("COMMIT");
    sqlite3_progress_handler(db_.get(), 0, nullptr, nullptr);
  } catch (...) {
    sqlite3_progress_handler(db_.get(), 0, nullptr, nullptr);
    sqlite3_exec(db_.get(), "ROLLBACK", nullptr, nullptr, nullptr);
    throw;
  }
  // seq_ is at least every kseq too: load_keys() raises it.
  Statement seq(prepare("SELECT COALESCE(MAX(seq), 0), EXISTS(SELECT 1 FROM purged_fences), "
                        "EXISTS(SELECT 1 FROM settle_pending) FROM jobs"));
  if (sqlite3_step(seq.get()) != SQLITE_ROW) fail_with("read seq", sqlite3_errcode(db_.get()));
  seq_ = sqlite3_column_int64(seq.get(), 0);
  any_purged_ = sqlite3_column_int(seq.get(), 1) != 0;
  settle_left_ = sqlite3_column_int(seq.get(), 2) != 0;  // left by the last run's steps
}

void SqliteStore::guard_fences(SyncMode sync, bool restored) {
  // The state file beside the database (C1.5): nothing for a database in
  // memory. A missing one (a first start, a file system that lost it) or one
  // behind the database (its last write lost) is no sign of a copy.
  const bool on_disk = !path_.empty() && path_ != ":memory:" && !path_.starts_with("file:");
  const std::string state_path = run_state_path(path_);
  // No file reads as run 0: never ahead of a database.
  const RunState kept = on_disk ? read_run_state(state_path).value_or(RunState{}) : RunState{};
  // The marker is durable whatever the mode.
  exec("PRAGMA synchronous=FULL");
  exec("BEGIN IMMEDIATE");
  RunState now;
  try {
    auto meta = [&](const char* key) -> std::string {
      Statement st(prepare(std::string("SELECT value FROM fenceq_meta WHERE key = '") + key + "'"));
      if (sqlite3_step(st.get()) != SQLITE_ROW) return "";
      const auto* p = sqlite3_column_text(st.get(), 0);
      return p ? reinterpret_cast<const char*>(p) : "";
    };
    std::int64_t epoch = std::atoll(meta("fence_epoch").c_str());
    const RunState db{std::atoll(meta("run").c_str()), std::atoll(meta("beat").c_str()), epoch};
    const std::string backup_taken = meta("backup_taken");
    // Why every fence handed out so far must be passed, if it must: the
    // file is a restored copy (C1.5), or the last run was lossy (C1.2).
    std::string why;
    if (restored) {
      why = "started with --restored: the database is treated as a restored copy";
    } else if (!backup_taken.empty()) {
      why = "the database is a copy made by `fenceq backup` (at " + backup_taken +
            "): a restored backup";
    } else if (kept.ahead_of(db)) {
      why = "the database (run " + std::to_string(db.run) + ", beat " + std::to_string(db.beat) +
            ") is older than its state file " + state_path + " (run " +
            std::to_string(kept.run) + ", beat " + std::to_string(kept.beat) +
            "): an older copy was put in its place";
    } else if (meta("last_run") == "normal") {
      // A run that acknowledged commits before they were on disk did not
      // stop cleanly: a power cut may have undone claims it answered, and
      // their fences must never be handed out again (C1.2).
      why = "the last run (--sync normal or off) did not stop cleanly, and a power cut may "
            "have undone claims it acknowledged";
    }
    if (!why.empty()) {
      // Every fence is raised to the new epoch's floor, above anything
      // handed out before (a job would need 2^32 claims in one epoch to pass
      // it), and new jobs start there; the epoch passes the state file's
      // too, which a copy's database may be behind.
      epoch = std::max(epoch, kept.epoch) + 1;
      const std::string floor = std::to_string(epoch << 32);
      // The leases a cut or a copy may have brought back end too (no write
      // can match them any more): their jobs are claimable at once.
      exec(("UPDATE jobs SET fence = " + floor +
            ", owner = CASE WHEN done = 0 THEN NULL ELSE owner END, "
            "until = CASE WHEN done = 0 THEN 0 ELSE until END WHERE fence < " + floor +
            "; UPDATE purged_fences SET fence = " + floor + " WHERE fence < " + floor +
            "; INSERT INTO fenceq_meta(key, value) VALUES('fence_epoch', " +
            std::to_string(epoch) +
            ") ON CONFLICT(key) DO UPDATE SET value = excluded.value; "
            "DELETE FROM fenceq_meta WHERE key = 'backup_taken'"));
      recovered_ = true;
      spdlog::warn("{}: {}: every fence raised to {} (fence epoch {}) and every lease ended, so "
                   "that no fence is handed out twice",
                   path_, why, floor, epoch);
    }
    // This start is a run of its own, past the state file's.
    now = RunState{std::max(db.run, kept.run) + 1, 0,
                   std::max(epoch, kept.epoch)};
    exec("INSERT INTO fenceq_meta(key, value) VALUES('run', " + std::to_string(now.run) +
         ") ON CONFLICT(key) DO UPDATE SET value = excluded.value; "
         "INSERT INTO fenceq_meta(key, value) VALUES('beat', 0) "
         "ON CONFLICT(key) DO UPDATE SET value = excluded.value");
    exec(std::string("INSERT INTO fenceq_meta(key, value) VALUES('last_run', '") +
         (sync == SyncMode::full ? "full" : "normal") +
         "') ON CONFLICT(key) DO UPDATE SET value = excluded.value; COMMIT");
    fence_floor_ = epoch << 32;
  } catch (...) {
    sqlite3_exec(db_.get(), "ROLLBACK", nullptr, nullptr, nullptr);
    throw;
  }
  if (!on_disk) return;
  // Only once the database's run is on disk (FULL): the state file is never
  // ahead of the database it describes, unless the database is replaced.
  try {
    write_run_state(state_path, now);
  } catch (const std::exception& e) {
    throw StoreError(std::string("cannot write the state file: ") + e.what());
  }
  run_state_ = now;
}

}  // namespace fenceq::daemon
