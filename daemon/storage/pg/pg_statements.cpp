#include "storage/pg/pg_statements.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdlib>
#include <utility>

#include "fenceq_protocol/limits.hpp"
#include "storage/job_rules.hpp"
#include "storage/store_rows.hpp"

namespace fenceq::daemon::pg {
namespace {

using Kind = StoreError::Kind;
using rules::kPostgres;

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

// Version 3, queue control: cancelled jobs (also dead = 1), and
// the progress a lease's renew reported.
constexpr const char* kSchemaV3 = R"sql(
ALTER TABLE jobs ADD COLUMN IF NOT EXISTS cancelled integer NOT NULL DEFAULT 0,
  ADD COLUMN IF NOT EXISTS progress text;
)sql";

// Version 4: queue settings, the claims of rate-limited queues
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

// Version 5 (C3.10): a job's unique key, its lookup index, and at most
// one unfinished job per queue and key: across sidecars, the index is what
// makes a second keyed INSERT of a key wait for the first's commit and then
// do nothing (pg_writes.cpp, kEnqueueKeyed).
constexpr const char* kSchemaV5 = R"sql(
ALTER TABLE jobs ADD COLUMN IF NOT EXISTS ukey text COLLATE "C";
CREATE INDEX IF NOT EXISTS jobs_ukey ON jobs(queue, ukey, created) WHERE ukey IS NOT NULL;
CREATE UNIQUE INDEX IF NOT EXISTS jobs_ukey_open ON jobs(queue, ukey)
  WHERE ukey IS NOT NULL AND done = 0 AND dead = 0;
)sql";

// Version 6 (C3.11): a job's group (rules::kSchemaVersion says what each
// index and table holds). jobs_next is made again with `grp IS NULL`.
// The turns are numbered by a sequence, across sidecars.
constexpr const char* kSchemaV6 = R"sql(
ALTER TABLE jobs ADD COLUMN IF NOT EXISTS grp text COLLATE "C";
DROP INDEX IF EXISTS jobs_next;
CREATE INDEX jobs_next ON jobs(queue, priority DESC, seq)
  WHERE done = 0 AND dead = 0 AND queue IS NOT NULL AND grp IS NULL;
CREATE INDEX IF NOT EXISTS jobs_group ON jobs(queue, grp, priority DESC, seq)
  WHERE done = 0 AND dead = 0 AND grp IS NOT NULL;
CREATE INDEX IF NOT EXISTS jobs_group_top ON jobs(queue, priority DESC)
  WHERE done = 0 AND dead = 0 AND grp IS NOT NULL;
CREATE INDEX IF NOT EXISTS jobs_group_leased ON jobs(queue, grp)
  WHERE held = 1 AND done = 0 AND dead = 0 AND grp IS NOT NULL;
CREATE TABLE IF NOT EXISTS queue_groups(
  queue text COLLATE "C" NOT NULL,
  grp   text COLLATE "C" NOT NULL,
  turn  bigint NOT NULL DEFAULT 0,
  PRIMARY KEY(queue, grp)
);
CREATE INDEX IF NOT EXISTS queue_groups_turn ON queue_groups(queue, turn, grp);
CREATE SEQUENCE IF NOT EXISTS queue_groups_turn_seq;
CREATE TABLE IF NOT EXISTS group_claims(
  queue text COLLATE "C" NOT NULL,
  grp   text COLLATE "C" NOT NULL,
  at    double precision NOT NULL
);
CREATE INDEX IF NOT EXISTS group_claims_at ON group_claims(queue, grp, at);
ALTER TABLE queue_config
  ADD COLUMN IF NOT EXISTS group_max_leased bigint NOT NULL DEFAULT 0,
  ADD COLUMN IF NOT EXISTS group_rate       bigint NOT NULL DEFAULT 0,
  ADD COLUMN IF NOT EXISTS group_per        double precision NOT NULL DEFAULT 1;
)sql";

// Version 11 (C3.15): a job's max_runtime and its current attempt's
// deadline (claim time + max_runtime; 0 without one), by which the reap
// finds the attempts that ran past it (rules::overrun).
constexpr const char* kSchemaV11 = R"sql(
ALTER TABLE jobs ADD COLUMN IF NOT EXISTS max_runtime double precision NOT NULL DEFAULT 0,
  ADD COLUMN IF NOT EXISTS deadline double precision NOT NULL DEFAULT 0;
CREATE INDEX IF NOT EXISTS jobs_deadline ON jobs(deadline) WHERE deadline > 0;
)sql";

// Version 12 (C3.17): each queue's retention (queue_config's keep_*),
// apart from queue_config, whose rows make claims lock them: a retention
// holds no claim back.
constexpr const char* kSchemaV12 = R"sql(
ALTER TABLE jobs ADD COLUMN IF NOT EXISTS headers text;
CREATE TABLE IF NOT EXISTS queue_retention(
  queue          text COLLATE "C" PRIMARY KEY,
  keep_done      double precision,
  keep_dead      double precision,
  keep_cancelled double precision
);
)sql";

// Version 13: a queue's dead and cancelled jobs by id, for the pages of
// retry_many and cancel_many (ListFilter::reaped; no claim, complete or
// enqueue writes it).
constexpr const char* kSchemaV13 = R"sql(
CREATE INDEX IF NOT EXISTS jobs_dead ON jobs(queue, cancelled, id) WHERE dead = 1;
)sql";

// Version 20 (docs/architecture.md, "Bounded work on the serving thread"):
// a claim_next walked jobs_next over every leased, delayed and blocked job
// of its queue that came before a claimable one (10^5 leased and 10^5
// delayed: 46 ms a claim_next). jobs_next is keyed by
// kNextKeyPg, as SQLite's by kNextKey (17, 19): blocked, or parked
// (kKidsParked, set by every claim and by an enqueue with a delay, never
// taken off here); jobs_wake finds the parked jobs whose lease or delay is
// over, and claim_next takes the most urgent of both (pg_writes.cpp). The
// jobs leased or delayed so far are parked first: a claim would otherwise
// step over them until they finish.
constexpr const char* kSchemaV20 = R"sql(
UPDATE jobs SET kids = kids | 64
  WHERE done = 0 AND dead = 0 AND (kids & 64) = 0 AND (until > 0 OR not_before > 0);
DROP INDEX IF EXISTS jobs_next;
CREATE INDEX jobs_next ON jobs(queue, ((not_before >= 1e15)::int + (kids & 64)), priority DESC, seq)
  WHERE done = 0 AND dead = 0 AND queue IS NOT NULL AND grp IS NULL AND kids >= 0;
CREATE INDEX IF NOT EXISTS jobs_wake ON jobs(queue, GREATEST(until, not_before))
  WHERE (kids & 64) <> 0 AND done = 0 AND dead = 0 AND grp IS NULL;
)sql";
static_assert(rules::kKidsParked == 64, "kSchemaV20 and rules::kNextKeyPg spell it");
// (`kids >= 0`: rules::kJobsNextPg.)

// Version 21 (C3.22): each saved step of a job, gone with its job;
// kKidsSteps (128) on the jobs that have some. fenceq_claim_fair answers
// their steps too: a function's columns cannot change in place.
constexpr const char* kSchemaV21 = R"sql(
CREATE TABLE IF NOT EXISTS job_steps(
  id     text COLLATE "C" NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
  step   text COLLATE "C" NOT NULL,
  value  bytea,
  is_bin boolean NOT NULL,
  PRIMARY KEY(id, step)
);
DROP FUNCTION IF EXISTS fenceq_claim_fair(text, text, double precision, double precision, bigint);
)sql";
static_assert(rules::kKidsSteps == 128, "rows::steps_sql spells it");

// Version 22: suspend and signal (C3.23): a suspended job's token, when its
// wait ends and what then, gone with its job; kKidsSuspend (256) on the jobs
// suspended. Deadlines (C3.24): jobs.expires (NULL: none) and jobs_expires,
// which holds only the jobs that have one.
constexpr const char* kSchemaV22 = R"sql(
CREATE TABLE IF NOT EXISTS job_suspends(
  id      text COLLATE "C" PRIMARY KEY REFERENCES jobs(id) ON DELETE CASCADE,
  token   text COLLATE "C" NOT NULL UNIQUE,
  timeout double precision NOT NULL,
  fail    boolean NOT NULL
);
CREATE INDEX IF NOT EXISTS job_suspends_timeout ON job_suspends(timeout);
ALTER TABLE jobs ADD COLUMN IF NOT EXISTS expires double precision;
DROP FUNCTION IF EXISTS fenceq_enqueue_after(text, text, bytea, boolean, bigint, double precision,
  bigint, double precision, text, text[], boolean, double precision, double precision, text);
CREATE INDEX IF NOT EXISTS jobs_expires ON jobs(expires) WHERE expires IS NOT NULL;
)sql";
static_assert(rules::kKidsSuspend == 256, "kSchemaV22's comment says it");

// Version 23 (C3.25): the groups' own settings, as on SQLite.
constexpr const char* kSchemaV23 = R"sql(
CREATE TABLE IF NOT EXISTS group_config(
  queue      text COLLATE "C" NOT NULL,
  grp        text COLLATE "C" NOT NULL,
  max_leased bigint,
  rate       bigint,
  per        double precision,
  PRIMARY KEY(queue, grp)
);
ALTER TABLE queue_config ADD COLUMN IF NOT EXISTS group_overrides bigint NOT NULL DEFAULT 0;
)sql";

}  // namespace

std::string notify_sql(const std::string& queue, bool by_trigger) {
  return "pg_notify('fenceq_' || substr(md5(COALESCE(current_schema()::text, '')), 1, 16)" +
         std::string(by_trigger ? " || '_u'" : "") + ", " + queue + ")";
}

std::string notify_grouped_sql(const std::string& queue) {
  return "pg_notify('fenceq_' || substr(md5(COALESCE(current_schema()::text, '')), 1, 16) || "
         "'_g', " + queue + ")";
}

namespace {

// A job's row and payload, and the statements of the batch's bookkeeping
// (pg_batch.cpp).
void add_job_statements(std::vector<PgStatement>& d) {
  d[kState] = {std::string("SELECT ") + rows::kJobState + " FROM jobs WHERE id = $1",
               {kText}};
  d[kPayload] = {"SELECT payload, payload_binary FROM jobs WHERE id = $1", {kText}};
  // Each result while those before it, in the order asked, total less than
  // kMaxResultsBytes: octet_length reads no TOASTed value. The
  // last column: whether there is one (a result left out comes back omitted).
  d[kResults] = {"SELECT id, " + rules::status("$2") +
                     ", CASE WHEN coalesce(sum(octet_length(result)) OVER w, 0) - "
                     "coalesce(octet_length(result), 0) < " +
                     std::to_string(protocol::kMaxResultsBytes) +
                     " THEN result END, (CASE WHEN result IS NULL THEN 0 ELSE 1 END)::int8 "
                     "FROM jobs WHERE id = ANY($1) "
                     "WINDOW w AS (ORDER BY array_position($1, id) ROWS BETWEEN UNBOUNDED "
                     "PRECEDING AND CURRENT ROW)",
                 {kTextArray, kFloat8}};
  d[kLinks] = {rows::links_sql(true, "$1"), {kText}};
  // Which of the ids exist: a job, or one purged (it was done); once
  // known, an id stays known, as a purge keeps it in purged_fences.
  d[kKnownIds] = {"SELECT id FROM jobs WHERE id = ANY($1) UNION ALL "
                  "SELECT id FROM purged_fences WHERE id = ANY($1)",
                  {kTextArray}};
  // Consecutive completes of distinct jobs (complete_many's items) in one
  // statement: complete's condition (pg_writes.cpp), row by row, each item's
  // lease its own. Returns the ids completed, with their queues.
  d[kCompleteMany] = {"UPDATE jobs SET " + rules::complete_set("i.c_result", "i.c_now") +
                          " FROM unnest($1, $2, $3, $4, $5) AS i(c_id, c_owner, c_fence, c_now, "
                          "c_result) WHERE " +
                          rules::current_lease("i.c_id", "i.c_owner", "i.c_fence", "i.c_now",
                                               "jobs.") +
                          " RETURNING jobs.id, jobs.queue",
                      {kTextArray, kTextArray, kInt8Array, kFloat8Array, kTextArray}};
  // The queues of the jobs whose fenced writes were refused (rare: one
  // statement for all of a batch's).
  d[kQueuesOf] = {"SELECT id, queue FROM jobs WHERE id = ANY($1)", {kTextArray}};
  d[kConfigs] = {std::string("SELECT ") + rows::kQueueConfig + " FROM queue_config WHERE "
                 "$1::text IS NULL OR queue = $1 ORDER BY queue",
                 {kText}};
  d[kGroupedQueues] = {"SELECT DISTINCT queue FROM queue_groups", {}};
  // Every transaction of the sidecars that writes takes this lock first,
  // before any row lock (PgStore::run_batch): so they take their row locks
  // one transaction at a time and no two can wait for each other (C1.4;
  // without it 3 sidecars under 16 clients deadlocked about once a second).
  // Per schema: the sidecars of another schema are not held up.
  d[kWriteLock] = {"SELECT pg_advisory_xact_lock(hashtext('fenceq writes'), "
                   "hashtext(current_schema()))", {}};
  // The groups a batch's enqueues join, locked first and in one order,
  // (queue, grp) ascending, so that two sidecars' batches cannot each hold a
  // group the other waits for (C1.4; without it enqueue_many of several
  // groups deadlocked about once a second under 3 sidecars). Each enqueue's
  // own upsert then finds its row locked by its own transaction.
  // A new group's row waits for its first job's time (pg_groups.cpp: the
  // job's trigger brings wake from 'Infinity' to it).
  d[kLockGroups] = {"INSERT INTO queue_groups(queue, grp, wake) SELECT q, g, 'Infinity' FROM "
                    "unnest($1::text[], $2::text[]) AS t(q, g) ORDER BY q COLLATE \"C\", g "
                    "COLLATE \"C\" "
                    "ON CONFLICT (queue, grp) DO UPDATE SET turn = queue_groups.turn",
                    {kTextArray, kTextArray}};
  d[kGroupConfigs] = {rows::kGroupConfigs, {}};
  d[kRetentions] = {"SELECT queue, keep_done, keep_dead, keep_cancelled FROM queue_retention "
                    "ORDER BY queue",
                    {}};
  d[kSchedules] = {std::string("SELECT ") + rows::kSchedule +
                       ", payload_binary FROM schedules ORDER BY name",
                   {}};
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
      // Every one takes the eleven parameters (typed: one it does not use is fine).
      const std::vector<Oid> types{kText, kFloat8, kText, kText, kInt8, kText,
                                   kText, kText, kFloat8, kText, kText};
      if (order == ListOrder::id) {
        // One queue's dead ($4 'dead') or cancelled jobs, through jobs_dead.
        d[kDeadList + (bounded ? 1 : 0)] = {
            "SELECT " + rows::job_info_columns(rules::status("$2")) + " FROM jobs WHERE dead = 1 "
                "AND queue = $3 AND cancelled = CASE WHEN $4 = 'cancelled' THEN 1 ELSE 0 END AND " +
                where + " AND done = 0 AND ($11::text IS NULL OR grp = $11) ORDER BY id LIMIT $5",
            types};
      }
      d[list_statement(order, bounded)] = {
          "SELECT " + rows::job_info_columns("st") + " FROM (SELECT id, queue, " +
              rules::status("$2") +
              " AS st, priority, attempts, max_attempts, fence, owner, until, not_before, "
              "error, progress, created, ukey, grp FROM jobs WHERE " + where +
              " AND ($3::text IS NULL OR queue = $3) AND ($6::text IS NULL OR id = $6) "
              "AND ($10::text IS NULL OR ukey = $10) AND ($11::text IS NULL OR grp = $11)) j "
              "WHERE ($4::text IS NULL OR st = $4) ORDER BY " + rules::list_order(order) +
              " LIMIT $5",
          types};
    }
  }
  d[kStats] = {"SELECT queue, st, count(*), min(ready_since), count(DISTINCT grp) FROM (SELECT "
                   "queue, " + rules::status("$1") + " AS st, " + rules::ready_since(kPostgres) +
                   " AS ready_since, grp FROM jobs) j GROUP BY queue, st ORDER BY queue",
               {kFloat8}};
  d[kGetMeta] = {"SELECT value FROM fenceq_meta WHERE key = $1", {kText}};
  d[kNextClaimable] = {rules::next_claimable_sql(kPostgres, "$1", "$2"), {kText, kFloat8}};
}

}  // namespace

std::vector<PgStatement> statements() {
  std::vector<PgStatement> d(kStmtCount);
  add_job_statements(d);
  add_read_statements(d);
  add_write_statements(d);
  return d;
}

// The versions, in order (storage/migrations.hpp). Those with no SQL changed
// SQLite's store only: 7, 8 and 14 its key indexes (several sidecars need
// jobs_ukey_open's unique check, where SQLite's one writer does not); 17 and
// 19 its jobs_next (20 is PostgreSQL's: job_rules.hpp); 18 its long values
// (PostgreSQL keeps them out of the row itself: TOAST), and 24 its steps
// in the job's row (PostgreSQL keeps them in job_steps, marked kKidsSteps). 9 and 10 are one
// here: jobs that wait for jobs (C3.13, pg_after.cpp, as 15 and 16).
const std::vector<Migration>& migrations() {
  static const std::vector<Migration> ladder = [] {
    std::vector<Migration> l{{1, kSchemaV1},  {2, kSchemaV2},  {3, kSchemaV3},  {4, kSchemaV4},
                             {5, kSchemaV5},  {6, kSchemaV6},  {7, ""},         {8, ""},
                             {11, kSchemaV11}, {12, kSchemaV12}, {13, kSchemaV13}, {14, ""},
                             {17, ""},        {18, ""},        {19, ""},
                             {20, kSchemaV20}, {21, kSchemaV21}, {22, kSchemaV22},
                             {23, kSchemaV23}, {24, ""}};
    for (auto& m : after_migrations()) l.push_back(std::move(m));
    std::sort(l.begin(), l.end(), [](const Migration& a, const Migration& b) {
      return a.version < b.version;
    });
    return l;
  }();
  return ladder;
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
    // The tables, version by version, each recorded; then the functions and
    // triggers, made again by every start (they read the tables as they
    // are now, whatever version the database came from).
    std::string applied;
    for (const Migration* m : migrations_due(migrations(), version)) {
      if (!m->sql.empty()) c.exec(m->sql.c_str(), "create the schema");
      applied += (applied.empty() ? "(" : ", (") + std::to_string(m->version) + ")";
    }
    if (!applied.empty()) {
      c.exec(("INSERT INTO fenceq_schema_version(version) VALUES " + applied +
              " ON CONFLICT DO NOTHING").c_str(),
             "create the schema");
    }
    create_after_functions(c);
    migrate_groups(c);
    migrate_app(c);
    c.exec("COMMIT", "create the schema");
  } catch (...) {
    c.rollback();
    throw;
  }
}

long long fence_epoch_past_all(PgConnection& c, const char* what) {
  // Past the recorded epoch and past every fence there is (a fence of a
  // later epoch than recorded would otherwise be handed out again).
  auto r = c.exec(
      "SELECT GREATEST(COALESCE((SELECT value FROM fenceq_meta WHERE key = 'fence_epoch'), 0)"
      "::bigint, COALESCE((SELECT max(fence) FROM jobs), 0) >> 32, "
      "COALESCE((SELECT max(fence) FROM purged_fences), 0) >> 32) + 1",
      what);
  return std::atoll(PQgetvalue(r.get(), 0, 0));
}

void keep_fence_floor(PgConnection& c, long long epoch, const char* what) {
  const std::string floor = std::to_string(epoch << 32);
  c.exec(("INSERT INTO fenceq_meta(key, value) VALUES('fence_epoch', " + std::to_string(epoch) +
          ") ON CONFLICT (key) DO UPDATE SET value = excluded.value; "
          "CREATE OR REPLACE FUNCTION fenceq_fence_floor() RETURNS trigger LANGUAGE plpgsql "
          "AS $$ BEGIN NEW.fence := GREATEST(NEW.fence, " +
          floor +
          "); RETURN NEW; END $$; "
          "DROP TRIGGER IF EXISTS fenceq_fence_floor ON jobs; "
          "CREATE TRIGGER fenceq_fence_floor BEFORE INSERT ON jobs FOR EACH ROW "
          "EXECUTE FUNCTION fenceq_fence_floor()")
             .c_str(),
         what);
}

void raise_fence_epoch(PgConnection& c) {
  const char* what = "raise the fence epoch (--restored)";
  c.exec("BEGIN ISOLATION LEVEL READ COMMITTED", what);
  try {
    c.exec(
        "SELECT pg_advisory_xact_lock(hashtext('fenceq schema'), "
        "hashtext(COALESCE(current_schema()::text, '')))",
        what);
    const long long epoch = fence_epoch_past_all(c, what);
    const std::string floor = std::to_string(epoch << 32);
    auto raised = c.exec(("UPDATE jobs SET fence = " + floor +
                          ", owner = CASE WHEN done = 0 THEN NULL ELSE owner END, "
                          "until = CASE WHEN done = 0 THEN 0 ELSE until END WHERE fence < " +
                          floor)
                             .c_str(),
                         what);
    const std::string jobs = PQcmdTuples(raised.get());
    c.exec(("UPDATE purged_fences SET fence = " + floor + " WHERE fence < " + floor).c_str(), what);
    keep_fence_floor(c, epoch, what);
    c.exec("COMMIT", what);
    spdlog::warn(
        "PostgreSQL: started with --restored: the database is treated as a restored "
        "copy: every fence raised to {} (fence epoch {}, {} jobs) and every lease "
        "ended, so that no fence is handed out twice",
        floor, epoch, jobs);
  } catch (...) {
    c.rollback();
    throw;
  }
}

}  // namespace fenceq::daemon::pg
