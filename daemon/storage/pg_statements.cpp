#include "pg_statements.hpp"

#include <cstdlib>
#include <utility>

#include "job_rules.hpp"
#include "store_rows.hpp"

namespace fenceq::daemon::pg {
namespace {

using Kind = StoreError::Kind;
using rules::kPostgres;

// Wakes the other sidecars' claims parked on `queue` (their LISTEN): sent
// with the statement that freed a job, delivered (and deduplicated) at COMMIT.
// The channel is the one PgConnection LISTENs on, of this database and schema.
std::string notify_sql(const std::string& queue) {
  return "pg_notify('fenceq_' || substr(md5(COALESCE(current_schema()::text, '')), 1, 16), " +
         queue + ")";
}

// The schema's versions (job_rules.hpp), in PostgreSQL's types for the
// contract's columns (C1.1: TEXT -> text, REAL -> double precision, INTEGER ->
// bigint for fences and counters, integer for the 0/1 flags); later columns
// have defaults so that a plain INSERT INTO jobs(id) works. id and queue
// compare bytewise (COLLATE "C"), as SQLite does: list pages and stats sort
// the same on every database. Each version's script is idempotent (IF NOT
// EXISTS), so a jobs table of the contract's six columns is upgraded in
// place, and a database a former fenceqd marked version 1 while creating
// everything gets its mark corrected. The payload keeps whether it was sent
// as msgpack bin (payload_binary) or str, as SQLite keeps BLOB or TEXT. seq
// comes from a sequence: enqueue order across every sidecar, for FIFO among
// equal priorities.
constexpr const char* kSchemaV1 = R"sql(
CREATE TABLE IF NOT EXISTS jobs(
  id     text COLLATE "C" PRIMARY KEY,
  owner  text,
  until  double precision NOT NULL DEFAULT 0,
  fence  bigint NOT NULL DEFAULT 0,
  result text,
  done   integer NOT NULL DEFAULT 0
);
)sql";

constexpr const char* kSchemaV2 = R"sql(
CREATE SEQUENCE IF NOT EXISTS jobs_seq;
ALTER TABLE jobs
  ADD COLUMN IF NOT EXISTS queue          text COLLATE "C" NOT NULL DEFAULT 'default',
  ADD COLUMN IF NOT EXISTS payload        bytea,
  ADD COLUMN IF NOT EXISTS payload_binary boolean NOT NULL DEFAULT true,
  ADD COLUMN IF NOT EXISTS priority       bigint NOT NULL DEFAULT 0,
  ADD COLUMN IF NOT EXISTS not_before     double precision NOT NULL DEFAULT 0,
  ADD COLUMN IF NOT EXISTS attempts       bigint NOT NULL DEFAULT 0,
  ADD COLUMN IF NOT EXISTS max_attempts   bigint NOT NULL DEFAULT 0,
  ADD COLUMN IF NOT EXISTS dead           integer NOT NULL DEFAULT 0,
  ADD COLUMN IF NOT EXISTS error          text,
  ADD COLUMN IF NOT EXISTS seq            bigint NOT NULL DEFAULT nextval('jobs_seq'),
  ADD COLUMN IF NOT EXISTS created        double precision NOT NULL DEFAULT 0,
  ADD COLUMN IF NOT EXISTS finished       double precision NOT NULL DEFAULT 0;
ALTER SEQUENCE jobs_seq OWNED BY jobs.seq;
-- claim_next: the open jobs of a queue, most urgent first. Leased and delayed
-- jobs stay in it and are stepped over; done and dead ones leave it.
-- `queue IS NOT NULL` (always true) is in the predicate so that only a query
-- naming the queue can use this index: the statements on one id (complete,
-- renew, ...) say `done = 0 AND dead = 0` too, and a generic plan chose to
-- walk this whole index for them rather than look the id up (3-6 ms a
-- complete with 20,000 jobs, before the table had statistics).
CREATE INDEX IF NOT EXISTS jobs_next ON jobs(queue, priority DESC, seq)
  WHERE done = 0 AND dead = 0 AND queue IS NOT NULL;
-- Jobs on their last allowed attempt, by lease end, for reap_exhausted().
CREATE INDEX IF NOT EXISTS jobs_last_attempt ON jobs(until)
  WHERE done = 0 AND dead = 0 AND max_attempts > 0 AND attempts >= max_attempts;
-- Finished jobs by finishing time, for purge.
CREATE INDEX IF NOT EXISTS jobs_finished ON jobs(finished) WHERE done = 1 OR dead = 1;
-- The fences of purged ids (C1.2): an id enqueued again continues from here.
CREATE TABLE IF NOT EXISTS purged_fences(
  id    text COLLATE "C" PRIMARY KEY,
  fence bigint NOT NULL
);
-- The server clock's high-water mark (C2.3), and later keys.
CREATE TABLE IF NOT EXISTS fenceq_meta(
  key   text PRIMARY KEY,
  value double precision
);
)sql";

// Version 3, queue control (issue 18): cancelled jobs (also dead = 1), and
// the progress a lease's renew reported.
constexpr const char* kSchemaV3 = R"sql(
ALTER TABLE jobs ADD COLUMN IF NOT EXISTS cancelled integer NOT NULL DEFAULT 0,
  ADD COLUMN IF NOT EXISTS progress text;
)sql";

// Version 4 (issue 18): queue settings, the claims of rate-limited queues
// within their window, periodic jobs, and the leased jobs by queue and lease
// end (max_leased counts them without walking the backlog; `queue IS NOT
// NULL` for the reason jobs_next has it). Every claim here marks its job
// held (rules::leased_in): a sidecar cannot know whether another one is
// about to give the queue settings.
constexpr const char* kSchemaV4 = R"sql(
CREATE TABLE IF NOT EXISTS queue_config(
  queue      text COLLATE "C" PRIMARY KEY,
  paused     integer NOT NULL DEFAULT 0,
  max_leased bigint NOT NULL DEFAULT 0,
  rate       bigint NOT NULL DEFAULT 0,
  per        double precision NOT NULL DEFAULT 1
);
CREATE TABLE IF NOT EXISTS queue_claims(
  queue text COLLATE "C" NOT NULL,
  at    double precision NOT NULL
);
CREATE INDEX IF NOT EXISTS queue_claims_at ON queue_claims(queue, at);
CREATE TABLE IF NOT EXISTS schedules(
  name           text COLLATE "C" PRIMARY KEY,
  cron           text NOT NULL,
  tz             text NOT NULL,
  queue          text COLLATE "C" NOT NULL,
  payload        bytea,
  payload_binary boolean NOT NULL DEFAULT true,
  priority       bigint NOT NULL DEFAULT 0,
  max_attempts   bigint NOT NULL DEFAULT 0,
  created        double precision NOT NULL,
  last           double precision
);
ALTER TABLE jobs ADD COLUMN IF NOT EXISTS held integer NOT NULL DEFAULT 0;
CREATE INDEX IF NOT EXISTS jobs_held ON jobs(queue, until)
  WHERE held = 1 AND done = 0 AND dead = 0 AND queue IS NOT NULL;
UPDATE jobs SET held = 1 WHERE done = 0 AND dead = 0 AND until > 0 AND held = 0;
)sql";

// A queue's settings (queue_config) hold claims back: every claim first
// locks the queue's settings row, if it has one (kLockQueue, kLockQueueOf,
// a statement of its own), so that the claims of a limited queue take
// turns across sidecars and each counts, with a snapshot taken after the
// lock, the leases and claims of those before it. A queue without settings
// has no row to lock: its claims run side by side as before. The claim
// itself then takes at most rules::allowance, and notes its claims in the
// rate window of a rate-limited queue (dropping those a minute past the
// window: rules::kClaimLogKeep).
//
// That claim and its lock cost more than the claim before queue settings
// existed (PostgreSQL complete_next about 15% slower), so a sidecar sends
// them only for the queues it knows to have settings (PgStore::configured_,
// read again at most every kConfigsReread with the batch that claims). For
// the others it sends the statement of before, guarded to claim nothing
// when the queue has settings after all, so a stale guess never hands out a
// job over a limit: it only answers a claim with nothing until the sidecar
// reads the settings again, and then the queue's parked claims look again.
std::string rate_window_sql(const std::string& claimed, const std::string& queue,
                            const std::string& now) {
  return ", pruned AS (DELETE FROM queue_claims r USING queue_config k WHERE k.queue = " + queue +
         " AND k.rate > 0 AND r.queue = k.queue AND r.at <= " + now +
         " - k.per - " + std::to_string(rules::kClaimLogKeep) + " AND EXISTS (SELECT 1 FROM " + claimed + ")), logged AS (INSERT INTO "
         "queue_claims(queue, at) SELECT " + queue + ", " + now + " FROM " + claimed +
         " WHERE EXISTS (SELECT 1 FROM queue_config k WHERE k.queue = " + queue +
         " AND k.rate > 0)) ";
}

// `columns` (a list of store_rows.hpp), each prefixed with `table.`.
std::string qualified(std::string_view columns, std::string_view table) {
  std::string out;
  for (std::size_t at = 0; at < columns.size();) {
    auto end = columns.find(", ", at);
    if (end == std::string_view::npos) end = columns.size();
    if (!out.empty()) out += ", ";
    out.append(table).append(".").append(columns.substr(at, end - at));
    at = end + 2;
  }
  return out;
}

// What both claim_next statements return: rows::claimed_job's columns, then
// payload_binary (PgRow::payload) and whether the claim took over an
// expired lease.
const std::string kClaimedReturning =
    qualified(rows::kClaimed, "jobs") + ", jobs.payload_binary, c.c_expired";

// claim_next ($1 queue, $2 owner, $3 until, $4 now, $5 max): claim as claim
// does the $5 most urgent claimable jobs of the queue, found through
// jobs_next. SKIP LOCKED steps over a job another sidecar's open transaction
// holds, so two sidecars never wait on (or take) the same job. The rows come
// back in no set order: with their priority and seq to sort by; and with
// whether each took over a lease that expired (rules::lease_expired, read
// from the row as locked, before the update).
// claim_next of a queue the sidecar believes has no settings: the statement
// of before, which claims nothing when it has some.
std::string claim_next_fast_sql() {
  return "UPDATE jobs SET " + rules::claim_set("$2", "$3", true) +
         " FROM (SELECT id AS c_id, " + rules::lease_expired() +
         " AS c_expired FROM jobs WHERE queue = $1 AND " + rules::claimable("$4") +
         " AND NOT EXISTS (SELECT 1 FROM queue_config WHERE queue = $1) ORDER BY " +
         rules::urgency() + " LIMIT $5 FOR UPDATE SKIP LOCKED) c "
         "WHERE jobs.id = c.c_id RETURNING " + kClaimedReturning;
}

}  // namespace

std::string claim_next_sql() {
  return "WITH claimed AS (UPDATE jobs SET " + rules::claim_set("$2", "$3", true) +
         " FROM (SELECT id AS c_id, " + rules::lease_expired() +
         " AS c_expired FROM jobs WHERE queue = $1 AND " + rules::claimable("$4") +
         " ORDER BY " + rules::urgency() + " LIMIT " +
         rules::allowance(kPostgres, "$1", "$4", "$5") + " FOR UPDATE SKIP LOCKED) c "
         "WHERE jobs.id = c.c_id RETURNING " + kClaimedReturning + ")" +
         rate_window_sql("claimed", "$1", "$4") + "SELECT * FROM claimed";
}

namespace {

// Enqueue, a job's row, and the claims by id (with their queue's lock).
void add_job_statements(std::vector<PgStatement>& d) {
  // C3.1: ON CONFLICT DO NOTHING, so a repeated enqueue never touches a
  // lease. An id purged before continues from its kept fence (C1.2);
  // kUnpurge then takes the kept fence out (see enqueue()).
  d[kEnqueue] = {"INSERT INTO jobs(id, queue, payload, payload_binary, priority, not_before, "
                 "max_attempts, created, fence) VALUES($1, $2, $3, $4, $5, $6, $7, $8, "
                 "COALESCE((SELECT fence FROM purged_fences WHERE id = $1), 0)) "
                 "ON CONFLICT (id) DO NOTHING RETURNING fence, " + notify_sql("queue"),
                 {kText, kText, kBytea, kBool, kInt8, kFloat8, kInt8, kFloat8}};
  d[kUnpurge] = {"WITH p AS (DELETE FROM purged_fences WHERE id = $1 RETURNING fence) "
                 "UPDATE jobs SET fence = p.fence FROM p WHERE jobs.id = $1 AND jobs.fence < p.fence",
                 {kText}};
  d[kState] = {std::string("SELECT ") + rows::kJobState + " FROM jobs WHERE id = $1",
               {kText}};
  d[kPayload] = {"SELECT payload, payload_binary FROM jobs WHERE id = $1", {kText}};
  // One UPDATE: a concurrent claim by another sidecar waits for this row,
  // then finds it leased (READ COMMITTED re-checks the condition on the new row).
  // The row before, as kRenew reads it: whether the claim took over a lease
  // that expired (rules::lease_expired).
  // By id, within its queue's allowance (after kLockQueueOf).
  const std::string queue_of_id = "(SELECT q.queue FROM jobs q WHERE q.id = $1)";
  d[kClaim] = {"WITH claimed AS (UPDATE jobs SET " + rules::claim_set("$2", "$3", true) +
                   " FROM (SELECT " + rules::lease_expired() +
                   " AS c_expired FROM jobs WHERE id = $1) o WHERE id = $1 AND " +
                   rules::claimable("$4") + " AND " +
                   rules::allowance(kPostgres, queue_of_id, "$4", "1") +
                   " > 0 RETURNING fence, queue, o.c_expired)" +
                   rate_window_sql("claimed", queue_of_id, "$4") + "SELECT * FROM claimed",
               {kText, kText, kFloat8, kFloat8}};
  // The claim of a sidecar that believes no queue has settings: as before
  // queue settings existed, nothing when the job's queue has some.
  d[kClaimFast] = {"UPDATE jobs SET " + rules::claim_set("$2", "$3", true) +
                       " FROM (SELECT " + rules::lease_expired() +
                       " AS c_expired FROM jobs WHERE id = $1) o WHERE id = $1 AND " +
                       rules::claimable("$4") +
                       " AND NOT EXISTS (SELECT 1 FROM queue_config k WHERE k.queue = "
                       "jobs.queue) RETURNING fence, queue, o.c_expired",
                   {kText, kText, kFloat8, kFloat8}};
  d[kClaimNextFast] = {claim_next_fast_sql(), {kText, kText, kFloat8, kFloat8, kInt8}};
  // The queue's settings row, locked; none when the queue has no settings.
  d[kLockQueue] = {"SELECT queue FROM queue_config WHERE queue = $1 FOR UPDATE", {kText}};
  d[kLockQueueOf] = {"SELECT queue FROM queue_config WHERE queue = " + queue_of_id +
                         " FOR UPDATE",
                     {kText}};
}

// Queue settings and periodic jobs.
void add_queue_statements(std::vector<PgStatement>& d) {
  // Settings changed: other sidecars' claims parked on the queue look again.
  d[kSetConfig] = {"INSERT INTO queue_config(queue, paused, max_leased, rate, per) "
                   "VALUES($1, $2, $3, $4, $5) ON CONFLICT (queue) DO UPDATE SET paused = "
                   "excluded.paused, max_leased = excluded.max_leased, rate = excluded.rate, "
                   "per = excluded.per RETURNING " + notify_sql("queue"),
                   {kText, kInt8, kInt8, kInt8, kFloat8}};
  d[kDeleteConfig] = {"DELETE FROM queue_config WHERE queue = $1 RETURNING " +
                          notify_sql("queue"),
                      {kText}};
  d[kConfigs] = {std::string("SELECT ") + rows::kQueueConfig + " FROM queue_config WHERE "
                 "$1::text IS NULL OR queue = $1 ORDER BY queue",
                 {kText}};
  d[kScheduleCount] = {"SELECT count(*), bool_or(name = $1) FROM schedules", {kText}};
  d[kScheduleSet] = {"INSERT INTO schedules(name, cron, tz, queue, payload, payload_binary, "
                     "priority, max_attempts, created) VALUES($1, $2, $3, $4, $5, $6, $7, $8, $9) "
                     "ON CONFLICT (name) DO UPDATE SET cron = excluded.cron, tz = excluded.tz, "
                     "queue = excluded.queue, payload = excluded.payload, payload_binary = "
                     "excluded.payload_binary, priority = excluded.priority, max_attempts = "
                     "excluded.max_attempts",
                     {kText, kText, kText, kText, kBytea, kBool, kInt8, kInt8, kFloat8}};
  d[kScheduleDelete] = {"DELETE FROM schedules WHERE name = $1", {kText}};
  d[kSchedules] = {std::string("SELECT ") + rows::kSchedule +
                       ", payload_binary FROM schedules ORDER BY name",
                   {}};
  // One sidecar takes a tick: the others' UPDATE waits for its row, then
  // finds `last` moved (READ COMMITTED re-checks the condition).
  d[kTakeTick] = {"UPDATE schedules SET last = $2 WHERE name = $1 AND created < $2 AND "
                  "(last IS NULL OR last < $2)",
                  {kText, kFloat8}};
}

// claim_next and the fenced writes. Leases are ($1 id, $2 owner, $3 fence, $4 now).
void add_lease_statements(std::vector<PgStatement>& d) {
  const std::string current = rules::current_lease("$1", "$2", "$3", "$4");
  const std::string own = rules::own_lease("$1", "$2", "$3");
  d[kClaimNext] = {claim_next_sql(), {kText, kText, kFloat8, kFloat8, kInt8}};
  // The lease end before, to tell the other sidecars when it came sooner
  // (their parked claims may wait for it).
  d[kRenew] = {"UPDATE jobs j SET until = $5, progress = COALESCE($6, j.progress) FROM (SELECT until AS before FROM jobs WHERE id = $1) o "
               "WHERE " + rules::current_lease("$1", "$2", "$3", "$4", "j.") +
                   " RETURNING j.queue, CASE WHEN o.before > $5 THEN " + notify_sql("j.queue") +
                   " END",
               {kText, kText, kInt8, kFloat8, kFloat8, kText}};
  d[kComplete] = {"UPDATE jobs SET " + rules::complete_set("$5", "$4") + " WHERE " + current +
                      " RETURNING queue",
                  {kText, kText, kInt8, kFloat8, kText}};
  // Consecutive completes of distinct jobs (complete_many's items) in one
  // statement: the same condition, row by row, each item's lease its own.
  // Returns the ids completed, with their queues.
  d[kCompleteMany] = {"UPDATE jobs SET " + rules::complete_set("i.c_result", "i.c_now") +
                          " FROM unnest($1, $2, $3, $4, $5) AS i(c_id, c_owner, c_fence, c_now, "
                          "c_result) WHERE " +
                          rules::current_lease("i.c_id", "i.c_owner", "i.c_fence", "i.c_now",
                                               "jobs.") +
                          " RETURNING jobs.id, jobs.queue",
                      {kTextArray, kTextArray, kInt8Array, kFloat8Array, kTextArray}};
  d[kRelease] = {"UPDATE jobs SET " + rules::release_set() + " WHERE " + own +
                     " RETURNING queue, " + notify_sql("queue"),
                 {kText, kText, kInt8}};
  d[kFail] = {"UPDATE jobs SET " + rules::fail_set(kPostgres, "$5", "$4", "$6") + " WHERE " +
                  current + " RETURNING dead, queue, CASE WHEN dead = 0 THEN " +
                  notify_sql("queue") + " END",
              {kText, kText, kInt8, kFloat8, kText, kFloat8}};
  d[kCheck] = {"SELECT 1 FROM jobs WHERE " + current, {kText, kText, kInt8, kFloat8}};
  d[kUnclaim] = {"UPDATE jobs SET " + rules::unclaim_set(kPostgres) + " WHERE " + own +
                     " RETURNING queue, " + notify_sql("queue"),
                 {kText, kText, kInt8}};
  d[kRetry] = {"UPDATE jobs SET " + rules::revive_set() + " WHERE id = $1 AND " +
                   rules::revivable("$2") + " RETURNING queue, " + notify_sql("queue"),
               {kText, kFloat8}};
  d[kCancel] = {"UPDATE jobs SET " + rules::cancel_set("$2") + " WHERE id = $1 AND " +
                    rules::cancellable() + " RETURNING queue",
                {kText, kFloat8}};
  d[kReap] = {"UPDATE jobs SET " + rules::reap_set("$1") + " WHERE done = 0 AND dead = 0 AND " +
                  rules::exhausted("$1") + " RETURNING queue, " + rules::lease_expired(),
              {kFloat8}};
  // One statement: the rows deleted are exactly the rows whose fences are
  // kept, whatever other sidecars commit meanwhile (C1.2).
  d[kPurge] = {"WITH del AS (DELETE FROM jobs WHERE " + rules::finished() +
                   " AND finished <= $1 AND ($2::text IS NULL OR queue = $2) RETURNING id, fence), "
                   "keep AS (INSERT INTO purged_fences(id, fence) SELECT id, fence FROM del "
                   "ON CONFLICT (id) DO UPDATE SET fence = GREATEST(purged_fences.fence, "
                   "excluded.fence)) SELECT count(*) FROM del",
               {kFloat8, kText}};
}

// list pages, stats and the other reads.
void add_read_statements(std::vector<PgStatement>& d) {
  for (auto order : {ListOrder::id, ListOrder::created, ListOrder::created_desc}) {
    for (bool bounded : {false, true}) {
      // rules::list_where's parameters as PostgreSQL's ($7 is :from in id
      // order, :lo by age).
      std::string where = rules::list_where(order, bounded);
      for (auto [from, to] : {std::pair{":after_created", "$9::float8"}, {":after", "$1::text"},
                              {":from", "$7::text"}, {":lo", "$7::text"}, {":hi", "$8::text"}}) {
        for (auto at = where.find(from); at != std::string::npos; at = where.find(from, at)) {
          where.replace(at, std::strlen(from), to);
        }
      }
      // Every one takes the nine parameters (typed: one it does not use is fine).
      d[list_statement(order, bounded)] = {
          "SELECT " + rows::job_info_columns("st") + " FROM (SELECT id, queue, " +
              rules::status("$2") +
              " AS st, priority, attempts, max_attempts, fence, owner, until, not_before, "
              "error, progress, created FROM jobs WHERE " + where +
              " AND ($3::text IS NULL OR queue = $3) AND ($6::text IS NULL OR id = $6)) j "
              "WHERE ($4::text IS NULL OR st = $4) ORDER BY " + rules::list_order(order) +
              " LIMIT $5",
          {kText, kFloat8, kText, kText, kInt8, kText, kText, kText, kFloat8}};
    }
  }
  d[kStats] = {"SELECT queue, st, count(*), min(ready_since) FROM (SELECT queue, " +
                   rules::status("$1") + " AS st, " + rules::ready_since(kPostgres) +
                   " AS ready_since FROM jobs) j GROUP BY queue, st ORDER BY queue",
               {kFloat8}};
  d[kGetMeta] = {"SELECT value FROM fenceq_meta WHERE key = $1", {kText}};
  // Never lowers a mark: another sidecar may have stored a higher one.
  d[kSetMeta] = {"INSERT INTO fenceq_meta(key, value) VALUES($1, $2) ON CONFLICT (key) "
                 "DO UPDATE SET value = GREATEST(fenceq_meta.value, excluded.value)",
                 {kText, kFloat8}};
  d[kNextClaimable] = {"SELECT min(" + rules::claimable_from(kPostgres) + ") FROM jobs WHERE " +
                           rules::becomes_claimable(kPostgres, "$1", "$2"),
                       {kText, kFloat8}};
  // The queues of the jobs whose fenced writes were refused (rare: one
  // statement for all of a batch's).
  d[kQueuesOf] = {"SELECT id, queue FROM jobs WHERE id = ANY($1)", {kTextArray}};
}

}  // namespace

std::vector<PgStatement> statements() {
  std::vector<PgStatement> d(kStmtCount);
  add_job_statements(d);
  add_queue_statements(d);
  add_lease_statements(d);
  add_read_statements(d);
  return d;
}

// Creates or upgrades the schema. Several sidecars may start at once: the
// schema is created under a lock of this database and schema, one at a time;
// each later one finds it there.
void migrate(PgConnection& c) {
  c.exec("BEGIN ISOLATION LEVEL READ COMMITTED", "create the schema");
  try {
    c.exec("SELECT pg_advisory_xact_lock(hashtext('fenceq schema'), "
           "hashtext(COALESCE(current_schema()::text, '')))",
           "create the schema");
    c.exec("CREATE TABLE IF NOT EXISTS fenceq_schema_version(version integer PRIMARY KEY, "
           "applied timestamptz NOT NULL DEFAULT now())",
           "create the schema");
    auto v = c.exec("SELECT COALESCE(max(version), 0) FROM fenceq_schema_version",
                    "create the schema");
    int version = std::atoi(PQgetvalue(v.get(), 0, 0));
    if (version > rules::kSchemaVersion) {
      throw StoreError("the database's fenceq schema is version " + std::to_string(version) +
                       ", newer than this fenceqd knows (" +
                       std::to_string(rules::kSchemaVersion) + ")");
    }
    if (version < 2) {
      c.exec(kSchemaV1, "create the schema");
      c.exec(kSchemaV2, "create the schema");
      c.exec("INSERT INTO fenceq_schema_version(version) VALUES (1), (2) ON CONFLICT DO NOTHING",
             "create the schema");
    }
    if (version < 3) {
      c.exec(kSchemaV3, "create the schema");
      c.exec("INSERT INTO fenceq_schema_version(version) VALUES (3) ON CONFLICT DO NOTHING",
             "create the schema");
    }
    if (version < 4) {
      c.exec(kSchemaV4, "create the schema");
      c.exec("INSERT INTO fenceq_schema_version(version) VALUES (4) ON CONFLICT DO NOTHING",
             "create the schema");
    }
    c.exec("COMMIT", "create the schema");
  } catch (...) {
    c.rollback();
    throw;
  }
}

}  // namespace fenceq::daemon::pg
