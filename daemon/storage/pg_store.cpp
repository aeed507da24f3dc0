#include "pg_store.hpp"

#include "fenceq_protocol/codec.hpp"

#include <endian.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <array>
#include <deque>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "job_rules.hpp"

namespace fenceq::daemon {
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
         "WHERE jobs.id = c.c_id RETURNING jobs.id, jobs.fence, jobs.payload, "
         "jobs.payload_binary, jobs.attempts, jobs.priority, jobs.seq, c.c_expired";
}

std::string claim_next_sql() {
  return "WITH claimed AS (UPDATE jobs SET " + rules::claim_set("$2", "$3", true) +
         " FROM (SELECT id AS c_id, " + rules::lease_expired() +
         " AS c_expired FROM jobs WHERE queue = $1 AND " + rules::claimable("$4") +
         " ORDER BY " + rules::urgency() + " LIMIT " +
         rules::allowance(kPostgres, "$1", "$4", "$5") + " FOR UPDATE SKIP LOCKED) c "
         "WHERE jobs.id = c.c_id RETURNING jobs.id, jobs.fence, jobs.payload, "
         "jobs.payload_binary, jobs.attempts, jobs.priority, jobs.seq, c.c_expired)" +
         rate_window_sql("claimed", "$1", "$4") + "SELECT * FROM claimed";
}

enum Stmt : int {
  kEnqueue, kUnpurge, kState, kClaim, kClaimNext, kRenew, kComplete, kCompleteMany, kRelease,
  kFail, kCheck, kUnclaim, kRetry, kCancel, kReap, kPurge,
  kList, kListLast = kList + 5,  // by ListOrder, and with an upper end of the ids
  kStats, kGetMeta, kSetMeta,
  kNextClaimable, kQueuesOf, kPayload, kLockQueue, kLockQueueOf, kClaimNextFast, kClaimFast,
  kSetConfig, kDeleteConfig,
  kConfigs, kScheduleCount, kScheduleSet, kScheduleDelete, kSchedules, kTakeTick, kStmtCount
};

Stmt list_statement(ListOrder order, bool bounded) {
  return static_cast<Stmt>(kList + 2 * static_cast<int>(order) + (bounded ? 1 : 0));
}

// Array types, for kCompleteMany's parameters.
constexpr Oid kTextArray = 1009, kInt8Array = 1016, kFloat8Array = 1022;

// A one-dimensional array in PostgreSQL's binary format (array_recv): its
// header, then each element as a length (-1: NULL) and its binary form.
class BinaryArray {
 public:
  explicit BinaryArray(Oid element) : element_(element) {}
  void add(std::optional<std::string_view> v) {
    ++count_;
    if (!v) {
      has_null_ = true;
      be32(-1, body_);
      return;
    }
    be32(static_cast<std::int32_t>(v->size()), body_);
    body_.append(v->data(), v->size());
  }
  void add_i8(std::int64_t v) {
    char b[8];
    const std::uint64_t be = htobe64(static_cast<std::uint64_t>(v));
    std::memcpy(b, &be, 8);
    add(std::string_view(b, 8));
  }
  void add_f8(double v) {
    std::uint64_t bits;
    std::memcpy(&bits, &v, 8);
    add_i8(static_cast<std::int64_t>(bits));
  }
  std::string bytes() const {
    std::string out;
    be32(1, out);  // dimensions
    be32(has_null_ ? 1 : 0, out);
    be32(static_cast<std::int32_t>(element_), out);
    be32(count_, out);  // length of the dimension
    be32(1, out);      // its lower bound
    return out + body_;
  }

 private:
  static void be32(std::int32_t v, std::string& to) {
    const std::uint32_t be = htobe32(static_cast<std::uint32_t>(v));
    to.append(reinterpret_cast<const char*>(&be), 4);
  }
  Oid element_;
  std::string body_;
  bool has_null_ = false;
  std::int32_t count_ = 0;
};

// Every statement of the store, in Stmt order. Leases are ($1 id, $2 owner,
// $3 fence, $4 now).
std::vector<PgStatement> statements() {
  const std::string current = rules::current_lease("$1", "$2", "$3", "$4");
  const std::string own = rules::own_lease("$1", "$2", "$3");
  std::vector<PgStatement> d(kStmtCount);
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
  d[kState] = {"SELECT id, owner, until, fence, result, done, progress FROM jobs WHERE id = $1",
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
  // Settings changed: other sidecars' claims parked on the queue look again.
  d[kSetConfig] = {"INSERT INTO queue_config(queue, paused, max_leased, rate, per) "
                   "VALUES($1, $2, $3, $4, $5) ON CONFLICT (queue) DO UPDATE SET paused = "
                   "excluded.paused, max_leased = excluded.max_leased, rate = excluded.rate, "
                   "per = excluded.per RETURNING " + notify_sql("queue"),
                   {kText, kInt8, kInt8, kInt8, kFloat8}};
  d[kDeleteConfig] = {"DELETE FROM queue_config WHERE queue = $1 RETURNING " +
                          notify_sql("queue"),
                      {kText}};
  d[kConfigs] = {"SELECT queue, paused, max_leased, rate, per FROM queue_config WHERE "
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
  d[kSchedules] = {"SELECT name, cron, tz, queue, payload, payload_binary, priority, "
                   "max_attempts, created, last FROM schedules ORDER BY name",
                   {}};
  // One sidecar takes a tick: the others' UPDATE waits for its row, then
  // finds `last` moved (READ COMMITTED re-checks the condition).
  d[kTakeTick] = {"UPDATE schedules SET last = $2 WHERE name = $1 AND created < $2 AND "
                  "(last IS NULL OR last < $2)",
                  {kText, kFloat8}};
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
          "SELECT id, queue, st, priority, attempts, max_attempts, fence, owner, until, "
          "not_before, error, progress, created FROM (SELECT id, queue, " + rules::status("$2") +
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

void lease(PgParams& p, std::string_view id, std::string_view owner, std::int64_t fence,
           double now) {
  p.text(id).text(owner).i8(fence).f8(now);
}

}  // namespace

PgStore::PgStore(const std::string& uri, bool listen)
    : conn_(uri, statements(), &migrate, listen) {}

std::unique_ptr<Store> PgStore::open_reader() const {
  return std::make_unique<PgStore>(conn_.uri(), false);
}

void PgStore::count_changes(PGresult* res) {
  const char* n = PQcmdTuples(res);
  if (n && *n) changes_ += std::strtoll(n, nullptr, 10);
}

void PgStore::freed(std::string_view queue) {
  auto& f = queue_changes_.freed;
  if (std::find(f.begin(), f.end(), queue) == f.end()) f.emplace_back(queue);
}

Store::QueueChanges PgStore::take_queue_changes() { return std::exchange(queue_changes_, {}); }

QueueTally::Entries PgStore::take_queue_totals() { return tally_.take(); }

void PgStore::begin() {
  queue_changes_ = {};
  tally_.clear();
  conn_.begin();
}

void PgStore::commit() { conn_.commit(); }

void PgStore::rollback() noexcept {
  queue_changes_ = {};
  tally_.clear();
  conn_.rollback();
}

// --- writes: every one goes through run(), one round trip for many ------------

namespace {

// What a call needs from the database: one statement (two for enqueue), an
// answer known without asking (a NUL in an id: no such job can exist), or a
// refusal (a NUL in a string to store).
enum class Route { send, local, refuse };

// The statement(s) of call `c` into `p` (and `p2`), or why not.
Route prepare_call(const Call& c, PgParams& p, PgParams& p2, int& stmt, int& stmt2, int& pre,
                   std::string& why, const std::unordered_set<std::string>& configured) {
  auto refuse = [&](const char* field) {
    why = std::string("PostgreSQL text cannot hold U+0000: field '") + field +
          "' contains a NUL character; nothing was applied";
    return Route::refuse;
  };
  using K = Call::Kind;
  switch (c.kind) {
    case K::enqueue: {
      if (has_nul(c.job.id)) return refuse("id");
      if (has_nul(c.job.queue)) return refuse("queue");
      p.text(c.job.id).text(c.job.queue);
      if (c.job.payload) {
        // bytea, with whether it was sent as bin or str, so claim_next gives
        // back the same msgpack type (SQLite keeps BLOB or TEXT).
        p.bytea(c.job.payload->bytes).boolean(c.job.payload->binary);
      } else {
        p.null().boolean(true);
      }
      p.i8(c.job.priority).f8(c.job.delay > 0 ? c.now + c.job.delay : 0.0).i8(c.job.max_attempts)
          .f8(c.now);
      p2.text(c.job.id);
      // The INSERT reads the kept fence of a purged id from its snapshot; a
      // purge by another sidecar that committed after that snapshot is
      // invisible to it. The second statement, with a snapshot of its own,
      // takes the kept fence out and raises the new row's fence to it, so a
      // fence never goes back (C1.2); harmless otherwise.
      stmt = kEnqueue;
      stmt2 = kUnpurge;
      return Route::send;
    }
    case K::claim:
      if (has_nul(c.id)) return Route::local;
      if (has_nul(c.owner)) return refuse("owner");
      p.text(c.id).text(c.owner).f8(c.now + c.ttl).f8(c.now);
      if (configured.empty()) {
        stmt = kClaimFast;
      } else {
        p2.text(c.id);
        pre = kLockQueueOf;  // sent first, with p2
        stmt = kClaim;
      }
      return Route::send;
    case K::claim_next:
      if (has_nul(c.queue)) return Route::local;
      if (has_nul(c.owner)) return refuse("owner");
      p.text(c.queue).text(c.owner).f8(c.now + c.ttl).f8(c.now).i8(c.max);
      if (configured.contains(std::string(c.queue))) {
        p2.text(c.queue);
        pre = kLockQueue;  // sent first, with p2
        stmt = kClaimNext;
      } else {
        stmt = kClaimNextFast;
      }
      return Route::send;
    case K::renew:
    case K::complete:
    case K::fail:
    case K::check:
      if (has_nul(c.id) || has_nul(c.owner)) return Route::local;  // no such lease
      if (c.kind == K::complete && c.result && *c.result && has_nul(**c.result)) {
        return refuse("result");
      }
      if (c.kind == K::fail && has_nul(c.error)) return refuse("error");
      if (c.kind == K::renew && c.progress && has_nul(*c.progress)) return refuse("progress");
      lease(p, c.id, c.owner, c.fence, c.now);
      if (c.kind == K::renew) p.f8(c.now + c.ttl).opt_text(c.progress);
      if (c.kind == K::complete) {
        p.opt_text(c.result && *c.result ? std::optional<std::string_view>(**c.result)
                                         : std::nullopt);
      }
      if (c.kind == K::fail) p.text(c.error).opt_f8(c.retry_in);
      stmt = c.kind == K::renew ? kRenew
             : c.kind == K::complete ? kComplete
             : c.kind == K::fail ? kFail
                                 : kCheck;
      return Route::send;
    case K::release:
      if (has_nul(c.id) || has_nul(c.owner)) return Route::local;
      p.text(c.id).text(c.owner).i8(c.fence);
      stmt = kRelease;
      return Route::send;
    case K::retry:
    case K::cancel:
      if (has_nul(c.id)) return Route::local;
      p.text(c.id).f8(c.now);
      stmt = c.kind == K::retry ? kRetry : kCancel;
      return Route::send;
    case K::purge:
      if (c.purge_queue && has_nul(*c.purge_queue)) return Route::local;  // no such queue
      p.f8(c.now - c.ttl).opt_text(c.purge_queue ? std::optional<std::string_view>(*c.purge_queue)
                                                 : std::nullopt);
      stmt = kPurge;
      return Route::send;
    case K::reap:
      p.f8(c.now);
      stmt = kReap;
      return Route::send;
    case K::set_clock_high_water:
      p.text("clock_high_water").f8(c.mark);
      stmt = kSetMeta;
      return Route::send;
  }
  return Route::local;
}

}  // namespace

namespace {
std::vector<std::pair<std::string, QueueConfig>> read_configs(const PGresult* r) {
  std::vector<std::pair<std::string, QueueConfig>> out;
  for (int i = 0, n = PQntuples(r); i < n; ++i) {
    QueueConfig c;
    c.paused = int_at(r, i, 1) != 0;
    c.max_leased = int_at(r, i, 2);
    c.rate = int_at(r, i, 3);
    c.per = double_at(r, i, 4);
    out.emplace_back(text_at(r, i, 0).value_or(""), c);
  }
  return out;
}
}  // namespace

bool PgStore::run(const std::vector<Call>& calls, std::vector<CallResult>& out,
                  bool commit_after) {
  out.assign(calls.size(), {});
  struct Planned {
    Route route = Route::local;
    int stmt = -1, stmt2 = -1;
    int pre = -1;          // a statement sent before `stmt` (a claim's lock), with its params2
    std::size_t step = 0;  // of `stmt`
  };
  std::vector<Planned> plan(calls.size());
  std::deque<PgParams> params;  // stable: steps point into it
  for (std::size_t i = 0; i < calls.size(); ++i) {
    auto& p1 = params.emplace_back();
    auto& p2 = params.emplace_back();
    plan[i].route = prepare_call(calls[i], p1, p2, plan[i].stmt, plan[i].stmt2, plan[i].pre,
                                 out[i].why, configured_);
  }
  // A refused call refuses its whole group (request): nothing of it is sent.
  std::vector<std::size_t> refused_groups;
  for (std::size_t i = 0; i < calls.size(); ++i) {
    if (plan[i].route == Route::refuse) refused_groups.push_back(calls[i].group);
  }
  for (std::size_t i = 0; i < calls.size(); ++i) {
    if (std::find(refused_groups.begin(), refused_groups.end(), calls[i].group) ==
        refused_groups.end()) {
      continue;
    }
    out[i].refused = true;
    if (out[i].why.empty()) out[i].why = "another entry of the request cannot be stored";
    plan[i].route = Route::refuse;
  }
  // Consecutive completes of distinct jobs (complete_many's items) go as one
  // statement (kCompleteMany): one plan and one execution instead of one
  // per job. Each keeps its own condition, so each is judged as alone.
  using K = Call::Kind;
  const auto completes = [&](std::size_t i) {
    return calls[i].kind == K::complete && plan[i].route == Route::send;
  };
  std::vector<std::size_t> run_end(calls.size(), 0);  // at a run's first call: one past its last
  for (std::size_t i = 0; i < calls.size();) {
    if (!completes(i)) {
      ++i;
      continue;
    }
    std::unordered_set<std::string_view> ids;
    std::size_t j = i;
    while (j < calls.size() && completes(j) && ids.insert(calls[j].id).second) ++j;
    if (j - i >= 2) run_end[i] = j;
    i = j;
  }
  std::deque<std::array<std::string, 5>> arrays;  // stable: run parameters point into it
  std::deque<PgParams> run_params;
  std::vector<bool> in_run(calls.size(), false);
  std::vector<PgConnection::Step> steps;
  // The queues with settings, read again with a batch that claims.
  PgParams all_configs;
  all_configs.null();
  const auto now = std::chrono::steady_clock::now();
  const bool reread = now >= configs_read_ + kConfigsReread &&
                      std::any_of(calls.begin(), calls.end(), [](const Call& c) {
                        return c.kind == K::claim || c.kind == K::claim_next;
                      });
  if (reread) steps.push_back({kConfigs, &all_configs, nullptr});
  for (std::size_t i = 0; i < calls.size(); ++i) {
    auto& pl = plan[i];
    if (pl.route != Route::send || in_run[i]) continue;
    pl.step = steps.size();
    if (run_end[i]) {
      BinaryArray id(kText), owner(kText), fence(kInt8), now(kFloat8), result(kText);
      for (std::size_t k = i; k < run_end[i]; ++k) {
        const auto& c = calls[k];
        id.add(c.id);
        owner.add(c.owner);
        fence.add_i8(c.fence);
        now.add_f8(c.now);
        result.add(c.result && *c.result ? std::optional<std::string_view>(**c.result)
                                         : std::nullopt);
        in_run[k] = true;
        plan[k].step = pl.step;
      }
      auto& a = arrays.emplace_back(std::array<std::string, 5>{
          id.bytes(), owner.bytes(), fence.bytes(), now.bytes(), result.bytes()});
      auto& p = run_params.emplace_back();
      for (const auto& v : a) p.text(v);
      steps.push_back({kCompleteMany, &p, nullptr});
      continue;
    }
    if (pl.pre >= 0) {
      steps.push_back({pl.pre, &params[2 * i + 1], nullptr});
      pl.step = steps.size();
    }
    steps.push_back({pl.stmt, &params[2 * i], nullptr});
    if (pl.stmt2 >= 0) steps.push_back({pl.stmt2, &params[2 * i + 1], nullptr});
  }
  if (steps.empty() && !commit_after) return false;
  auto res = conn_.pipeline(steps, commit_after, "batch");
  if (reread) {
    std::unordered_set<std::string> configured;
    for (auto& [queue, config] : read_configs(res[0].get())) configured.insert(std::move(queue));
    // A queue that got settings: its parked claims look again, now through
    // the full statement.
    for (const auto& q : configured) {
      if (!configured_.contains(q)) freed(q);
    }
    configured_ = std::move(configured);
    configs_read_ = now;
  }
  std::unordered_map<std::string_view, std::string_view> completed;  // of the run being read: id, queue
  // The fenced writes refused, by call: counted for their job's queue below.
  std::vector<std::pair<std::size_t, std::uint64_t QueueTotals::Refused::*>> refusals;
  auto refused_op = [](K kind) -> std::uint64_t QueueTotals::Refused::* {
    switch (kind) {
      case K::renew: return &QueueTotals::Refused::renew;
      case K::complete: return &QueueTotals::Refused::complete;
      case K::release: return &QueueTotals::Refused::release;
      case K::fail: return &QueueTotals::Refused::fail;
      default: return nullptr;
    }
  };
  for (std::size_t i = 0; i < calls.size(); ++i) {
    if (plan[i].route != Route::send) continue;
    const auto& c = calls[i];
    auto& o = out[i];
    PGresult* r = res[plan[i].step].get();
    if (in_run[i]) {
      if (run_end[i]) {  // the run's first call: its ids, read once
        count_changes(r);
        completed.clear();
        for (int k = 0; k < PQntuples(r); ++k) completed.emplace(bytes_at(r, k, 0), bytes_at(r, k, 1));
      }
      auto done = completed.find(c.id);
      o.ok = done != completed.end();
      if (o.ok) {
        tally_.at(done->second).completed++;
      } else {
        refusals.emplace_back(i, &QueueTotals::Refused::complete);
      }
      continue;
    }
    if (c.kind != K::check && c.kind != K::purge) count_changes(r);  // reads and counts: no
    const int rows = PQntuples(r);
    switch (c.kind) {
      case K::enqueue:
        count_changes(res[plan[i].step + 1].get());
        o.ok = rows == 1;
        if (o.ok) freed(c.job.queue);
        break;
      case K::claim:
        if (rows > 0) {
          o.number = int_at(r, 0, 0);
          auto& t = tally_.at(bytes_at(r, 0, 1));
          t.claimed++;
          if (int_at(r, 0, 2) != 0) t.expired++;
        }
        break;
      case K::claim_next: {
        // Its lock found no settings row: the queue has none any more.
        if (plan[i].pre >= 0 && PQntuples(res[plan[i].step - 1].get()) == 0) {
          configured_.erase(std::string(c.queue));
        }
        std::vector<std::pair<std::int64_t, std::int64_t>> order;
        for (int k = 0; k < rows; ++k) {
          ClaimedJob job;
          job.id = text_at(r, k, 0).value_or("");
          job.fence = int_at(r, k, 1);
          if (!PQgetisnull(r, k, 2)) {
            job.payload = Payload{std::string(bytes_at(r, k, 2)), int_at(r, k, 3) != 0};
          }
          job.attempts = int_at(r, k, 4);
          o.jobs.push_back(std::move(job));
          order.emplace_back(int_at(r, k, 5), int_at(r, k, 6));
          if (int_at(r, k, 7) != 0) tally_.at(c.queue).expired++;
        }
        if (rows > 0) tally_.at(c.queue).claimed += static_cast<std::uint64_t>(rows);
        o.jobs = rules::most_urgent_first(std::move(o.jobs), order);
        break;
      }
      case K::renew:
        o.ok = rows == 1;
        if (o.ok) queue_changes_.lease_ends.emplace_back(text_at(r, 0, 0).value_or(""), c.now + c.ttl);
        break;
      case K::complete:
        o.ok = rows == 1;
        if (o.ok) tally_.at(bytes_at(r, 0, 0)).completed++;
        break;
      case K::check: o.ok = rows > 0; break;
      case K::release:
        o.ok = rows == 1;
        if (o.ok) freed(text_at(r, 0, 0).value_or(""));
        break;
      case K::retry:
        o.ok = rows == 1;
        if (o.ok) {
          freed(text_at(r, 0, 0).value_or(""));
          tally_.at(bytes_at(r, 0, 0)).retried++;
        }
        break;
      case K::cancel: o.ok = rows == 1; break;
      case K::fail:
        o.ok = rows == 1;
        if (o.ok) {
          auto& t = tally_.at(bytes_at(r, 0, 1));
          t.failed++;
          if (int_at(r, 0, 0) == 0) {
            // Claimable again after the backoff.
            t.retried++;
            freed(text_at(r, 0, 1).value_or(""));
          } else {
            t.dead++;  // out of attempts
          }
        }
        break;
      case K::purge: {
        const auto n = int_at(r, 0, 0);
        o.number = n;
        changes_ += 2 * n;  // deleted, and their fences kept
        break;
      }
      case K::reap:
        for (int k = 0; k < rows; ++k) {
          auto& t = tally_.at(bytes_at(r, k, 0));
          t.dead++;
          if (int_at(r, k, 1) != 0) t.expired++;  // not released on its last attempt
        }
        break;
      case K::set_clock_high_water: break;
    }
    if (!o.ok) {
      if (auto op = refused_op(c.kind)) refusals.emplace_back(i, op);
    }
  }
  for (std::size_t i = 0; i < calls.size(); ++i) {
    if (plan[i].route != Route::local) continue;
    if (calls[i].kind == K::purge) out[i].number = 0;
    // An owner no lease can have (U+0000): refused without asking; an id
    // with U+0000 names no job, and has no queue.
    if (auto op = refused_op(calls[i].kind); op && !has_nul(calls[i].id)) {
      refusals.emplace_back(i, op);
    }
  }
  if (!refusals.empty()) count_refusals(calls, refusals, commit_after);
  return commit_after;
}

void PgStore::count_refusals(
    const std::vector<Call>& calls,
    const std::vector<std::pair<std::size_t, std::uint64_t QueueTotals::Refused::*>>& refusals,
    bool committed) {
  // Refusals are rare: one lookup of their jobs' queues for the whole batch,
  // in the transaction; or, when the batch's COMMIT went with its statements,
  // right after it (a job's queue never changes). That late lookup failing
  // costs only the per-queue counts: the batch is committed.
  BinaryArray ids(kText);
  std::unordered_set<std::string_view> asked;
  for (const auto& [i, op] : refusals) {
    if (asked.insert(calls[i].id).second) ids.add(calls[i].id);
  }
  const std::string bytes = ids.bytes();
  PgParams p;
  p.text(bytes);
  PgResult res;
  try {
    res = conn_.run(kQueuesOf, p, "queues of refused writes");
  } catch (const StoreError& e) {
    if (!committed) throw;
    spdlog::debug("refused writes not counted per queue: {}", e.what());
    return;
  }
  const PGresult* r = res.get();
  std::unordered_map<std::string_view, std::string_view> queue_of;
  for (int k = 0; k < PQntuples(r); ++k) queue_of.emplace(bytes_at(r, k, 0), bytes_at(r, k, 1));
  for (const auto& [i, op] : refusals) {
    auto q = queue_of.find(calls[i].id);
    if (q != queue_of.end()) tally_.at(q->second).refused.*op += 1;
  }
}

namespace {
// One call through run(), and its result (a refusal thrown, as the single
// operations report it).
CallResult one(PgStore& s, Call c) {
  std::vector<CallResult> out;
  s.run({std::move(c)}, out, false);
  if (out[0].refused) throw StoreError(out[0].why, StoreError::Kind::refused);
  return std::move(out[0]);
}
}  // namespace

bool PgStore::enqueue(const NewJob& job, double now) {
  Call c;
  c.kind = Call::Kind::enqueue;
  c.job = job;
  c.now = now;
  return one(*this, std::move(c)).ok;
}

std::optional<Payload> PgStore::payload(std::string_view id) {
  if (has_nul(id)) return std::nullopt;
  PgParams p;
  p.text(id);
  auto res = conn_.run(kPayload, p, "payload");
  const PGresult* r = res.get();
  if (PQntuples(r) == 0 || PQgetisnull(r, 0, 0)) return std::nullopt;
  return Payload{std::string(bytes_at(r, 0, 0)), int_at(r, 0, 1) != 0};
}

std::optional<JobState> PgStore::state(std::string_view id) {
  if (has_nul(id)) return std::nullopt;  // no stored id holds U+0000
  PgParams p;
  p.text(id);
  auto res = conn_.run(kState, p, "state");
  const PGresult* r = res.get();
  if (PQntuples(r) == 0) return std::nullopt;
  JobState row;
  row.id = text_at(r, 0, 0).value_or("");
  row.owner = text_at(r, 0, 1);
  row.until = double_at(r, 0, 2);
  row.fence = int_at(r, 0, 3);
  row.result = text_at(r, 0, 4);
  row.done = int_at(r, 0, 5) != 0;
  row.progress = text_at(r, 0, 6);
  return row;
}

std::optional<std::int64_t> PgStore::claim(std::string_view id, std::string_view owner,
                                           double now, double ttl) {
  Call c;
  c.kind = Call::Kind::claim;
  c.id = id;
  c.owner = owner;
  c.now = now;
  c.ttl = ttl;
  return one(*this, std::move(c)).number;
}

std::vector<ClaimedJob> PgStore::claim_next(std::string_view queue, std::string_view owner,
                                            double now, double ttl, std::int64_t max) {
  Call c;
  c.kind = Call::Kind::claim_next;
  c.queue = queue;
  c.owner = owner;
  c.now = now;
  c.ttl = ttl;
  c.max = max;
  return one(*this, std::move(c)).jobs;
}

namespace {
Call lease_call(Call::Kind k, std::string_view id, std::string_view owner, std::int64_t fence,
                double now) {
  Call c;
  c.kind = k;
  c.id = id;
  c.owner = owner;
  c.fence = fence;
  c.now = now;
  return c;
}
}  // namespace

bool PgStore::renew(std::string_view id, std::string_view owner, std::int64_t fence, double now,
                    double ttl, std::optional<std::string_view> progress) {
  auto c = lease_call(Call::Kind::renew, id, owner, fence, now);
  c.ttl = ttl;
  c.progress = progress;
  return one(*this, std::move(c)).ok;
}

bool PgStore::complete(std::string_view id, std::string_view owner, std::int64_t fence,
                       const std::optional<std::string>& result, double now) {
  auto c = lease_call(Call::Kind::complete, id, owner, fence, now);
  c.result = &result;
  return one(*this, std::move(c)).ok;
}

bool PgStore::release(std::string_view id, std::string_view owner, std::int64_t fence) {
  return one(*this, lease_call(Call::Kind::release, id, owner, fence, 0)).ok;
}

bool PgStore::fail(std::string_view id, std::string_view owner, std::int64_t fence,
                   std::string_view error, std::optional<double> retry_in, double now) {
  auto c = lease_call(Call::Kind::fail, id, owner, fence, now);
  c.error = error;
  c.retry_in = retry_in;
  return one(*this, std::move(c)).ok;
}

bool PgStore::unclaim(std::string_view id, std::string_view owner, std::int64_t fence) {
  if (has_nul(id) || has_nul(owner)) return false;
  PgParams p;
  p.text(id).text(owner).i8(fence);
  auto res = conn_.run(kUnclaim, p, "unclaim");
  count_changes(res.get());
  if (PQntuples(res.get()) == 0) return false;
  freed(text_at(res.get(), 0, 0).value_or(""));
  return true;
}

bool PgStore::check(std::string_view id, std::string_view owner, std::int64_t fence, double now) {
  return one(*this, lease_call(Call::Kind::check, id, owner, fence, now)).ok;
}

bool PgStore::retry(std::string_view id, double now) {
  Call c;
  c.kind = Call::Kind::retry;
  c.id = id;
  c.now = now;
  return one(*this, std::move(c)).ok;
}

bool PgStore::cancel(std::string_view id, double now) {
  Call c;
  c.kind = Call::Kind::cancel;
  c.id = id;
  c.now = now;
  return one(*this, std::move(c)).ok;
}

void PgStore::reap_exhausted(double now) {
  Call c;
  c.kind = Call::Kind::reap;
  c.now = now;
  one(*this, std::move(c));
}

std::int64_t PgStore::purge(const std::optional<std::string>& queue, double older_than,
                            double now) {
  Call c;
  c.kind = Call::Kind::purge;
  c.purge_queue = queue;
  c.ttl = older_than;
  c.now = now;
  return one(*this, std::move(c)).number.value_or(0);
}

std::vector<JobInfo> PgStore::list(const ListFilter& f, double now) {
  // Ids hold no U+0000, so "after a\0b" is exactly "after a".
  std::string_view after = f.after.substr(0, f.after.find('\0'));
  if (f.queue && has_nul(*f.queue)) return {};  // no such queue
  std::optional<std::string_view> status;
  if (f.status) status = rules::status_text(*f.status);
  PgParams p;
  p.text(after).f8(now).opt_text(f.queue).opt_text(status);
  if (f.limit >= 0) {
    p.i8(f.limit);
  } else {
    p.null();  // no limit, as SQLite reads a negative one
  }
  if (f.id && has_nul(*f.id)) return {};  // no stored id holds U+0000
  p.opt_text(f.id);
  if (has_nul(f.prefix)) return {};  // nor starts with a prefix that does
  ListFilter cut = f;
  cut.after = after;
  const auto b = list_bounds(cut);
  p.text(b.lower)
      .opt_text(b.upper ? std::optional<std::string_view>(*b.upper) : std::nullopt)
      .f8(b.after_created);
  auto res = conn_.run(list_statement(f.order, b.upper.has_value()), p, "list");
  const PGresult* s = res.get();
  std::vector<JobInfo> out;
  for (int i = 0, n = PQntuples(s); i < n; ++i) {
    JobInfo j;
    j.id = text_at(s, i, 0).value_or("");
    j.queue = text_at(s, i, 1).value_or("");
    j.status = rules::parse_status(text_at(s, i, 2).value_or("")).value_or(JobStatus::ready);
    j.priority = int_at(s, i, 3);
    j.attempts = int_at(s, i, 4);
    j.max_attempts = int_at(s, i, 5);
    j.fence = int_at(s, i, 6);
    j.owner = text_at(s, i, 7);
    j.until = double_at(s, i, 8);
    j.not_before = double_at(s, i, 9);
    j.error = text_at(s, i, 10);
    j.progress = text_at(s, i, 11);
    j.created = double_at(s, i, 12);
    out.push_back(std::move(j));
  }
  return out;
}

std::optional<double> PgStore::next_claimable_at(std::string_view queue, double now) {
  if (has_nul(queue)) return std::nullopt;
  PgParams p;
  p.text(queue).f8(now);
  auto res = conn_.run(kNextClaimable, p, "next_claimable_at");
  if (PQntuples(res.get()) == 0 || PQgetisnull(res.get(), 0, 0)) return std::nullopt;
  return double_at(res.get(), 0, 0);
}

std::vector<QueueStats> PgStore::queue_stats(double now) {
  PgParams p;
  p.f8(now);
  auto res = conn_.run(kStats, p, "stats");
  const PGresult* s = res.get();
  std::vector<QueueStats> out;
  for (int i = 0, n = PQntuples(s); i < n; ++i) {
    auto queue = text_at(s, i, 0).value_or("");
    if (out.empty() || out.back().queue != queue) out.push_back({queue});
    auto& q = out.back();
    auto count = int_at(s, i, 2);
    switch (rules::parse_status(text_at(s, i, 1).value_or("")).value_or(JobStatus::ready)) {
      case JobStatus::ready:
        q.ready = count;
        q.oldest_ready_age = std::max(0.0, now - double_at(s, i, 3));
        break;
      case JobStatus::delayed: q.delayed = count; break;
      case JobStatus::leased: q.leased = count; break;
      case JobStatus::done: q.done = count; break;
      case JobStatus::dead: q.dead = count; break;
      case JobStatus::cancelled: q.cancelled = count; break;
    }
  }
  add_configs(out, queue_configs());
  return out;
}

void PgStore::set_queue_config(std::string_view queue, const QueueConfig& c) {
  if (has_nul(queue)) refuse_nul("queue");
  PgParams p;
  p.text(queue);
  if (c == QueueConfig{}) {
    conn_.run(kDeleteConfig, p, "queue_config");
    return;  // the cache learns it at the queue's next claim
  }
  p.i8(c.paused ? 1 : 0).i8(c.max_leased).i8(c.rate).f8(c.per);
  conn_.run(kSetConfig, p, "queue_config");
  // From this transaction's next claim on: the full statement. (Rolled
  // back, the guess is merely pessimistic until the settings are read again.)
  configured_.emplace(queue);
}



std::optional<QueueConfig> PgStore::queue_config(std::string_view queue) {
  if (has_nul(queue)) return std::nullopt;
  PgParams p;
  p.text(queue);
  auto all = read_configs(conn_.run(kConfigs, p, "queue_config").get());
  if (all.empty()) return std::nullopt;
  return all.front().second;
}

std::vector<std::pair<std::string, QueueConfig>> PgStore::queue_configs() {
  PgParams p;
  p.null();
  return read_configs(conn_.run(kConfigs, p, "queue_config").get());
}

bool PgStore::schedule_set(const Schedule& sc, double now) {
  for (auto [field, v] : {std::pair<const char*, std::string_view>{"name", sc.name},
                          {"cron", sc.cron}, {"tz", sc.tz}, {"queue", sc.queue}}) {
    if (has_nul(v)) refuse_nul(field);
  }
  {
    PgParams p;
    p.text(sc.name);
    auto res = conn_.run(kScheduleCount, p, "schedule_set");
    const bool exists = !PQgetisnull(res.get(), 0, 1) && int_at(res.get(), 0, 1) != 0;
    if (!exists && static_cast<std::size_t>(int_at(res.get(), 0, 0)) >= protocol::kMaxSchedules) {
      return false;
    }
  }
  PgParams p;
  p.text(sc.name).text(sc.cron).text(sc.tz).text(sc.queue);
  if (sc.payload) {
    p.bytea(sc.payload->bytes).boolean(sc.payload->binary);
  } else {
    p.null().boolean(true);
  }
  p.i8(sc.priority).i8(sc.max_attempts).f8(now);
  conn_.run(kScheduleSet, p, "schedule_set");
  return true;
}

bool PgStore::schedule_delete(std::string_view name) {
  if (has_nul(name)) return false;
  PgParams p;
  p.text(name);
  auto res = conn_.run(kScheduleDelete, p, "schedule_delete");
  const char* n = PQcmdTuples(res.get());
  return n && std::strtoll(n, nullptr, 10) > 0;
}

std::vector<Store::StoredSchedule> PgStore::schedules() {
  PgParams p;
  auto res = conn_.run(kSchedules, p, "schedule_list");
  const PGresult* r = res.get();
  std::vector<StoredSchedule> out;
  for (int i = 0, n = PQntuples(r); i < n; ++i) {
    StoredSchedule st;
    auto& sc = st.schedule;
    sc.name = text_at(r, i, 0).value_or("");
    sc.cron = text_at(r, i, 1).value_or("");
    sc.tz = text_at(r, i, 2).value_or("UTC");
    sc.queue = text_at(r, i, 3).value_or("");
    if (!PQgetisnull(r, i, 4)) sc.payload = Payload{std::string(bytes_at(r, i, 4)), int_at(r, i, 5) != 0};
    sc.priority = int_at(r, i, 6);
    sc.max_attempts = int_at(r, i, 7);
    st.created = double_at(r, i, 8);
    if (!PQgetisnull(r, i, 9)) sc.last = double_at(r, i, 9);
    out.push_back(std::move(st));
  }
  return out;
}

bool PgStore::take_tick(std::string_view name, double tick) {
  if (has_nul(name)) return false;
  PgParams p;
  p.text(name).f8(tick);
  auto res = conn_.run(kTakeTick, p, "schedule tick");
  count_changes(res.get());
  const char* n = PQcmdTuples(res.get());
  return n && std::strtoll(n, nullptr, 10) == 1;
}

std::string PgStore::claim_next_plan() {
  PgParams p;
  p.text("default").text("plan").f8(0).f8(0).i8(1);
  auto res = conn_.exec_params("EXPLAIN " + claim_next_sql(), p, statements()[kClaimNext].types,
                               "explain");
  std::string plan;
  for (int i = 0, n = PQntuples(res.get()); i < n; ++i) {
    plan += PQgetvalue(res.get(), i, 0);
    plan += "\n";
  }
  return plan;
}

double PgStore::clock_high_water() {
  PgParams p;
  p.text("clock_high_water");
  auto res = conn_.run(kGetMeta, p, "read clock");
  if (PQntuples(res.get()) == 0) return 0;
  return double_at(res.get(), 0, 0);
}

void PgStore::set_clock_high_water(double t) {
  Call c;
  c.kind = Call::Kind::set_clock_high_water;
  c.mark = t;
  one(*this, std::move(c));
}

}  // namespace fenceq::daemon
