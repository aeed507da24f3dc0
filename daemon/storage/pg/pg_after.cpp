// The PostgreSQL store's jobs that wait for other jobs
// (docs/contract.md C3.13): schema version 10's tables, the function an
// enqueue with `after` runs, and the triggers that settle a parent's
// children in the transaction of whatever finished it.
//
// The tables are SQLite's (sqlite_schema.cpp, versions 9 and 10): an edge
// of job_after per parent and child, `met` once that parent no longer holds
// the child back; job_waits.blocked, the edges not met; a blocked job's
// not_before is rules::kBlockedUntil, so every claim path steps over it.
//
// Where SQLite's single writer settles children in C++ after each finishing
// write (sqlite_after.cpp), here a row trigger on jobs does it: every path
// that makes a job done, dead or cancelled (complete, complete_many, the
// complete of complete_next, fail, reap, cancel, on any sidecar) is an
// UPDATE of jobs, and the trigger fires for a job others wait for
// (rules::kKidsParent) only, so no other job's write pays more than the
// WHEN test. A refused complete updates no row, so it settles nothing.
//
// Across sidecars: an enqueue with `after` first marks each parent
// (UPDATE ... kids), which waits for a concurrent finishing write of that
// parent to commit and then reads the parent as that write left it; a
// finishing write that comes later waits for the enqueue's commit and then
// finds its edges. Children are settled in id order, so two transactions
// settling parents of the same children take their rows in one order.
//
// Bounded (C3.13, "When"): a transaction settles at most kSettlePage edges
// (counted across its firings in the transaction-local setting
// fenceq.settle_left); a parent whose edges are not all settled waits in
// settle_pending (schema version 15) with the last child settled, and each
// sidecar's steps (PgStore::settle_step, below: fenceq_settle_step) go on
// from there, taking pending parents with FOR UPDATE SKIP LOCKED so that
// sidecars share them, and judging each parent by its state at the step (a
// parent revived meanwhile leaves its children blocked until it ends again;
// a purged one counts as it ended).
//
// Purged (C3.13, "Purged parents"): purged_fences.ended (version 16) keeps how a
// purged job ended, so a parent purged after it died or was cancelled still
// counts as failed: a child enqueued after it is cancelled at once, the
// retry of a child that waits for it is refused (rules::no_lost_parent)
// unless its after_failure is "run", and the purge statements (pg_writes.cpp)
// leave its edges to the steps, which settle the children it still held
// back (retried while it was dead) as its end did.
#include <spdlog/fmt/fmt.h>

#include <cstdlib>

#include "storage/job_rules.hpp"
#include "storage/pg/pg_statements.hpp"
#include "storage/pg/pg_store.hpp"

namespace fenceq::daemon::pg {
namespace {

// Version 10 (version 9 was SQLite's only): the tables, with jobs.kids's two
// bits (rules::kKidsParent, kKidsChild).
constexpr const char* kSchemaV10 = R"sql(
ALTER TABLE jobs ADD COLUMN IF NOT EXISTS kids integer NOT NULL DEFAULT 0;
CREATE TABLE IF NOT EXISTS job_waits(
  child     text COLLATE "C" PRIMARY KEY,
  blocked   bigint NOT NULL,
  after_run integer NOT NULL,
  wait      double precision NOT NULL
);
CREATE TABLE IF NOT EXISTS job_after(
  parent text COLLATE "C" NOT NULL,
  child  text COLLATE "C" NOT NULL,
  met    integer NOT NULL DEFAULT 0,
  PRIMARY KEY(parent, child)
);
CREATE INDEX IF NOT EXISTS job_after_child ON job_after(child, parent);
)sql";

// Version 15 (C3.13, "When"): the parents whose edges a transaction left to the
// steps, taken in order of n: how each ended (1 done, 2 dead, 3 cancelled)
// and the child, in id order, up to which its edges are settled ('' before
// the first). SQLite's too (sqlite_schema.cpp).
constexpr const char* kSchemaV15 = R"sql(
CREATE TABLE IF NOT EXISTS settle_pending(
  parent     text COLLATE "C" PRIMARY KEY,
  how        integer NOT NULL,
  settled_to text COLLATE "C" NOT NULL,
  n          bigserial NOT NULL
);
CREATE INDEX IF NOT EXISTS settle_pending_n ON settle_pending(n);
)sql";

// Version 16: how a purged job ended (1 done, 2 dead, 3
// cancelled; rules::kEndedAs), so that a parent purged after it failed
// still counts as failed (C3.13). Ids purged before could only read as
// done; one an edge still waits for had failed (a done parent's edges are
// met), so it reads as dead, or cancelled when the child's error (kept by
// retry) says so, and the steps settle the children it left blocked for
// good. SQLite's too (sqlite_schema.cpp).
constexpr const char* kSchemaV16 = R"sql(
ALTER TABLE purged_fences ADD COLUMN IF NOT EXISTS ended integer NOT NULL DEFAULT 1;
UPDATE purged_fences f SET ended = CASE WHEN EXISTS(SELECT 1 FROM job_after a, jobs c
    WHERE a.parent = f.id AND a.met = 0 AND c.id = a.child
      AND c.error = 'parent ' || f.id || ' cancelled') THEN 3 ELSE 2 END
  WHERE EXISTS(SELECT 1 FROM job_after a WHERE a.parent = f.id AND a.met = 0)
    AND NOT EXISTS(SELECT 1 FROM settle_pending p WHERE p.parent = f.id);
INSERT INTO settle_pending(parent, how, settled_to)
  SELECT id, ended, '' FROM purged_fences WHERE ended >= 2 ON CONFLICT DO NOTHING;
)sql";

// Edges one transaction that finishes jobs settles at most (SQLite's
// SqliteStore::kSettlePage); a step's chunk, and how long a step goes on.
constexpr int kSettlePage = 100;
constexpr int kSettleChunk = 10000;
constexpr double kStepMs = 3.0;
// Edges a page of the walk reads: how often a step looks at the time.
constexpr int kWalkPage = 16;

// The children of a page (v_children) that `which` holds for (a condition
// on job_waits w) lose a blocking parent: those whose last edge it was and
// that are unfinished become ready, their delay counting from v_now, and
// the parked claims of their queues, on every sidecar, look again.
std::string unblock_page_sql(const std::string& which) {
  return R"sql(
      WITH w AS (
        UPDATE job_waits w SET blocked = w.blocked - 1
          WHERE w.child = ANY(v_children) AND w.blocked > 0 AND )sql" + which + R"sql(
          RETURNING w.child, w.blocked, w.wait),
      r AS (
        UPDATE jobs j SET not_before = v_now + w.wait FROM w
          WHERE j.id = w.child AND w.blocked = 0 AND j.done = 0 AND j.dead = 0
          RETURNING j.queue)
      SELECT array_agg(DISTINCT r.queue) INTO v_queues FROM r;
      FOREACH v_queue IN ARRAY COALESCE(v_queues, '{}') LOOP
        PERFORM )sql" + notify_sql("v_queue", true) + R"sql(;
      END LOOP;)sql";
}

// The settling of parent p_parent, ended as p_how (1 done, 2 dead, 3
// cancelled) at p_now, from after its child p_to: each edge of it not met
// yet is met, once, in child id order. Done: its children lose a blocking
// parent. Dead or cancelled: a child with after_failure "run" does too;
// another still blocked is cancelled ("parent ID dead"), and so are its own
// blocked children, and theirs (depth first, on a stack of its own).
//
// Its pages go through job_after's primary key in child order: with
// enable_sort off, as the statistics of a table that just grew by 100,000
// edges (autovacuum has not analyzed it yet) made the planner read every
// edge of the parent and sort them for each page (quadratic).
//
// As far as the transaction's budget goes (fenceq.settle_left, kSettlePage
// when unset): the parents left, with the child each is settled up to, go
// to settle_pending. fenceq.settling is on while it runs, so the trigger of
// a child it cancels returns at once (it settles that child's children
// itself): no nesting, whatever the depth (a trigger nested per
// generation ended in "stack depth limit exceeded" at about 800).
std::string settle_walk_function() {
  return R"sql(
CREATE OR REPLACE FUNCTION fenceq_settle_walk(p_parent text, p_how integer, p_to text,
    p_now double precision, p_until timestamptz DEFAULT NULL) RETURNS bigint
LANGUAGE plpgsql SET enable_sort = off AS $fn$
DECLARE
  v_left bigint := COALESCE(NULLIF(pg_catalog.current_setting('fenceq.settle_left', true), '')::bigint,
                            )sql" +
         std::to_string(kSettlePage) + R"sql();
  v_met_n bigint := 0;
  v_parents text[] := ARRAY[p_parent];
  v_hows integer[] := ARRAY[p_how];
  v_tos text[] := ARRAY[p_to];
  v_k integer;
  v_parent text;
  v_how integer;
  v_to text;
  v_last text;
  v_read bigint;
  v_take bigint;
  v_children text[];
  v_more text[];
  v_queues text[];
  v_n bigint;
  v_queue text;
  v_now double precision := p_now;
BEGIN
  PERFORM pg_catalog.set_config('fenceq.settling', 'on', true);
  WHILE cardinality(v_parents) > 0 AND v_left > 0
      AND (p_until IS NULL OR pg_catalog.clock_timestamp() < p_until) LOOP
    v_k := cardinality(v_parents);
    v_parent := v_parents[v_k];
    v_how := v_hows[v_k];
    v_to := v_tos[v_k];
    v_parents := v_parents[1:v_k - 1];
    v_hows := v_hows[1:v_k - 1];
    v_tos := v_tos[1:v_k - 1];
    -- A page: the next edges, met or not (each read counts), then those
    -- of them not met yet, met by this transaction.
    v_take := LEAST(v_left, )sql" +
         std::to_string(kWalkPage) + R"sql();
    SELECT count(*), max(e.child) INTO v_read, v_last FROM (SELECT a.child FROM job_after a
      WHERE a.parent = v_parent AND a.child > v_to ORDER BY a.child LIMIT v_take) e;
    IF v_read = 0 THEN
      CONTINUE;
    END IF;
    v_left := v_left - v_read;
    IF v_read >= v_take THEN
      -- Its next page, if any: after the children this one cancels.
      v_parents := v_parents || v_parent;
      v_hows := v_hows || v_how;
      v_tos := v_tos || v_last;
    END IF;
    WITH m AS (UPDATE job_after a SET met = 1 WHERE a.parent = v_parent AND a.child > v_to
                 AND a.child <= v_last AND a.met = 0 RETURNING a.child)
      SELECT array_agg(m.child ORDER BY m.child) INTO v_children FROM m;
    v_met_n := v_met_n + COALESCE(cardinality(v_children), 0);
    CONTINUE WHEN v_children IS NULL;
    -- Done: each child loses a blocking parent (set-based, a page at a
    -- time; rows taken in id order through the primary keys).
    IF v_how = 1 THEN)sql" +
         unblock_page_sql("true") + R"sql(
      CONTINUE;
    END IF;
    -- Dead or cancelled: each child still blocked and unfinished is
    -- cancelled, and settled in turn if others wait for it; ...
    WITH c AS (
      UPDATE jobs j SET )sql" +
         rules::end_lease_set(rules::kPostgres, rules::LeaseEnd::cancelled, {.now = "v_now"}) +
         R"sql(,
        error = 'parent ' || v_parent || CASE WHEN v_how = 3 THEN ' cancelled' ELSE ' dead' END
        FROM job_waits w
        WHERE j.id = ANY(v_children) AND j.done = 0 AND j.dead = 0 AND w.child = j.id
          AND w.after_run = 0 AND w.blocked > 0
        RETURNING j.id, j.kids)
      SELECT count(*), array_agg(c.id ORDER BY c.id DESC) FILTER (WHERE (c.kids & 1) <> 0)
        INTO v_n, v_more FROM c;
    v_parents := v_parents || COALESCE(v_more, '{}');
    v_hows := v_hows || array_fill(3, ARRAY[COALESCE(cardinality(v_more), 0)]);
    v_tos := v_tos || array_fill(''::text, ARRAY[COALESCE(cardinality(v_more), 0)]);
    -- ... and one with after_failure "run" loses a blocking parent.
    IF v_n < cardinality(v_children) THEN)sql" +
         unblock_page_sql(
             "w.after_run = 1 AND EXISTS(SELECT 1 FROM jobs j WHERE j.id = w.child "
             "AND j.done = 0 AND j.dead = 0)") +
         R"sql(
    END IF;
  END LOOP;
  FOR v_k IN 1 .. COALESCE(cardinality(v_parents), 0) LOOP
    INSERT INTO settle_pending(parent, how, settled_to) VALUES (v_parents[v_k], v_hows[v_k], v_tos[v_k])
      ON CONFLICT (parent) DO UPDATE SET how = EXCLUDED.how, settled_to = EXCLUDED.settled_to;
  END LOOP;
  PERFORM pg_catalog.set_config('fenceq.settle_left', GREATEST(v_left, 0)::text, true);
  PERFORM pg_catalog.set_config('fenceq.settling', 'off', true);
  RETURN v_met_n;
END
$fn$;
)sql";
}

// The trigger of a job others wait for that became done, dead or
// cancelled: its settling, as far as the transaction's budget goes. A
// firing inside a settling (a child it cancelled) returns at once.
std::string settle_function() {
  return R"sql(
CREATE OR REPLACE FUNCTION fenceq_settle() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
  IF pg_catalog.pg_trigger_depth() > 1
     OR pg_catalog.current_setting('fenceq.settling', true) = 'on' THEN
    RETURN NULL;
  END IF;
  PERFORM fenceq_settle_walk(NEW.id, CASE WHEN NEW.done = 1 THEN 1 WHEN NEW.cancelled = 1 THEN 3
    ELSE 2 END, '', NEW.finished);
  RETURN NULL;
END
$fn$;
)sql";
}

// A step of the settling left (PgStore::settle_step): pending parents, the
// first in, each taken (FOR UPDATE SKIP LOCKED: another sidecar's step takes
// others) and settled for at most p_chunk edges, until p_ms have gone by
// (looked at after each page of kWalkPage edges) or none is left. A parent is judged by its state now: revived, its row is
// dropped (its next end settles its children); purged, as it ended. A row
// lock it would wait for longer than 200 ms (a batch of another sidecar's)
// ends the step, rolled back, to be tried again a second later: a step
// never holds the serving thread longer than that. Answers
// the edges it met and rows it wrote, and whether it stopped with parents left.
std::string settle_step_function() {
  return R"sql(
CREATE OR REPLACE FUNCTION fenceq_settle_step(p_now double precision, p_chunk bigint,
    p_ms double precision, OUT changed bigint, OUT more boolean)
LANGUAGE plpgsql SET enable_sort = off SET lock_timeout = '200ms' AS $fn$
DECLARE
  v_end timestamptz := pg_catalog.clock_timestamp() + make_interval(secs => p_ms / 1000);
  v_parent text;
  v_how integer;
  v_to text;
  v_state integer;
BEGIN
  -- Its COMMIT does not wait for the WAL's flush: lost in a crash, the step
  -- is done again from settle_pending, and any later commit that saw what
  -- it did (a claim of a child it made ready) flushes it first.
  PERFORM pg_catalog.set_config('synchronous_commit', 'off', true);
  changed := 0;
  more := false;
  LOOP
    IF pg_catalog.clock_timestamp() >= v_end THEN
      more := true;
      EXIT;
    END IF;
    SELECT p.parent, p.how, p.settled_to INTO v_parent, v_how, v_to FROM settle_pending p
      ORDER BY p.n LIMIT 1 FOR UPDATE SKIP LOCKED;
    EXIT WHEN NOT FOUND;
    DELETE FROM settle_pending WHERE parent = v_parent;
    changed := changed + 1;
    SELECT CASE WHEN j.done = 1 THEN 1 WHEN j.cancelled = 1 THEN 3 WHEN j.dead = 1 THEN 2 ELSE 0 END
      INTO v_state FROM jobs j WHERE j.id = v_parent;
    IF NOT FOUND THEN
      v_state := v_how;
    END IF;
    CONTINUE WHEN v_state = 0;
    PERFORM pg_catalog.set_config('fenceq.settle_left', p_chunk::text, true);
    changed := changed + fenceq_settle_walk(v_parent, v_state, v_to, p_now, v_end);
  END LOOP;
END
$fn$;
)sql";
}

// The trigger of a job that waits for others and was revived (retry): its
// edges counted again from its parents as they are (a purged parent as it
// ended, purged_fences.ended: one that failed still holds back a child
// without after_failure "run", whose retry rules::no_lost_parent refuses
// anyway), and blocked again while one is not done.
std::string recount_function() {
  return R"sql(
CREATE OR REPLACE FUNCTION fenceq_recount() RETURNS trigger LANGUAGE plpgsql AS $fn$
DECLARE
  v_blocked bigint;
BEGIN
  UPDATE job_after a SET met = COALESCE((SELECT (p.done = 1 OR (p.dead = 1 AND w.after_run = 1))::int
    FROM jobs p, job_waits w WHERE p.id = a.parent AND w.child = a.child),
    (SELECT (f.ended = 1 OR (f.ended >= 2 AND w.after_run = 1))::int
    FROM purged_fences f, job_waits w WHERE f.id = a.parent AND w.child = a.child), 1)
    WHERE a.child = NEW.id;
  UPDATE job_waits w SET blocked = (SELECT count(*) FROM job_after a WHERE a.child = NEW.id AND a.met = 0)
    WHERE w.child = NEW.id RETURNING w.blocked INTO v_blocked;
  IF FOUND AND v_blocked > 0 THEN
    UPDATE jobs SET not_before = )sql" + std::string(rules::kBlockedUntilSql) + R"sql( WHERE id = NEW.id;
  END IF;
  RETURN NULL;
END
$fn$;
)sql";
}

// The triggers, made again by every start (after the functions).
constexpr const char* kTriggers = R"sql(
DROP TRIGGER IF EXISTS fenceq_settle ON jobs;
CREATE TRIGGER fenceq_settle AFTER UPDATE OF done, dead ON jobs FOR EACH ROW
  WHEN ((NEW.kids & 1) <> 0 AND ((NEW.done = 1 AND OLD.done = 0) OR (NEW.dead = 1 AND OLD.dead = 0)))
  EXECUTE FUNCTION fenceq_settle();
DROP TRIGGER IF EXISTS fenceq_recount ON jobs;
CREATE TRIGGER fenceq_recount AFTER UPDATE OF dead ON jobs FOR EACH ROW
  WHEN ((NEW.kids & 2) <> 0 AND OLD.dead = 1 AND NEW.dead = 0)
  EXECUTE FUNCTION fenceq_recount();
)sql";

// An enqueue with `after` (kEnqueueAfter, pg_writes.cpp): kEnqueue's INSERT,
// and when it created the job, its edges. Each parent is marked first (its
// row locked: a concurrent complete of it commits before this reads it),
// then read: 1 done, 2 dead, 3 cancelled (purged: as it ended), 0 unfinished. A
// parent dead or cancelled already cancels the job at once, unless
// after_failure is "run". Answers the new job's fence, or no row.
std::string enqueue_after_function() {
  return R"sql(
CREATE OR REPLACE FUNCTION fenceq_enqueue_after(p_id text, p_queue text, p_payload bytea,
    p_binary boolean, p_priority bigint, p_not_before double precision, p_max_attempts bigint,
    p_now double precision, p_grp text, p_parents text[], p_run boolean, p_wait double precision,
    p_max_runtime double precision, p_headers text, p_expires double precision)
RETURNS TABLE(fence bigint) LANGUAGE plpgsql AS $fn$
#variable_conflict use_column
DECLARE
  v_fence bigint;
  v_parent text;
  v_state integer;
  v_waiting bigint := 0;
  v_failed text;
  v_met boolean;
BEGIN
  INSERT INTO jobs(id, queue, payload, payload_binary, priority, not_before, max_attempts, created,
      fence, grp, kids, max_runtime, headers, expires)
    VALUES (p_id, p_queue, p_payload, p_binary, p_priority, p_not_before, p_max_attempts, p_now,
      COALESCE((SELECT f.fence FROM purged_fences f WHERE f.id = p_id), 0), p_grp,
      CASE WHEN p_not_before > p_now THEN 66 ELSE 2 END, p_max_runtime,
      p_headers, p_expires)
    ON CONFLICT (id) DO NOTHING RETURNING jobs.fence INTO v_fence;
  IF NOT FOUND THEN
    RETURN;
  END IF;
  FOREACH v_parent IN ARRAY p_parents LOOP
    UPDATE jobs j SET kids = j.kids | 1 WHERE j.id = v_parent
      RETURNING CASE WHEN j.done = 1 THEN 1 WHEN j.cancelled = 1 THEN 3 WHEN j.dead = 1 THEN 2
        ELSE 0 END INTO v_state;
    IF NOT FOUND THEN
      -- Purged: as it ended (version 16), so a failed one cancels the job.
      v_state := COALESCE((SELECT f.ended FROM purged_fences f WHERE f.id = v_parent), 1);
    END IF;
    v_met := v_state = 1 OR (v_state >= 2 AND p_run);
    IF NOT v_met AND v_state = 0 THEN
      v_waiting := v_waiting + 1;
    END IF;
    IF NOT v_met AND v_state >= 2 AND v_failed IS NULL THEN
      v_failed := 'parent ' || v_parent || CASE WHEN v_state = 3 THEN ' cancelled' ELSE ' dead' END;
    END IF;
    INSERT INTO job_after(parent, child, met) VALUES (v_parent, p_id, v_met::int)
      ON CONFLICT DO NOTHING;
  END LOOP;
  INSERT INTO job_waits(child, blocked, after_run, wait) VALUES (p_id, v_waiting, p_run::int, p_wait)
    ON CONFLICT (child) DO UPDATE SET blocked = EXCLUDED.blocked, after_run = EXCLUDED.after_run,
      wait = EXCLUDED.wait;
  IF v_waiting > 0 THEN
    UPDATE jobs SET not_before = )sql" +
         std::string(rules::kBlockedUntilSql) + R"sql( WHERE id = p_id;
  END IF;
  IF v_failed IS NOT NULL THEN
    UPDATE jobs SET )sql" +
         rules::end_lease_set(rules::kPostgres, rules::LeaseEnd::cancelled, {.now = "p_now"}) +
         R"sql(, error = v_failed
      WHERE id = p_id AND done = 0 AND dead = 0;
  ELSIF v_waiting = 0 THEN
    PERFORM )sql" +
         notify_sql("p_queue") + R"sql(;
  END IF;
  fence := v_fence;
  RETURN NEXT;
END
$fn$;
)sql";
}

}  // namespace

std::vector<Migration> after_migrations() {
  return {{9, ""}, {10, kSchemaV10}, {15, kSchemaV15}, {16, kSchemaV16}};
}

void create_after_functions(PgConnection& c) {
  c.exec(settle_walk_function().c_str(), "create the schema");
  c.exec(settle_step_function().c_str(), "create the schema");
  c.exec(settle_function().c_str(), "create the schema");
  c.exec(recount_function().c_str(), "create the schema");
  // Version 11 added max_runtime to its parameters, 12 headers: the former ones go.
  c.exec("DROP FUNCTION IF EXISTS fenceq_enqueue_after(text, text, bytea, boolean, bigint, "
         "double precision, bigint, double precision, text, text[], boolean, double precision)",
         "create the schema");
  c.exec("DROP FUNCTION IF EXISTS fenceq_enqueue_after(text, text, bytea, boolean, bigint, "
         "double precision, bigint, double precision, text, text[], boolean, double precision, "
         "double precision)",
         "create the schema");
  c.exec(enqueue_after_function().c_str(), "create the schema");
  c.exec(kTriggers, "create the schema");
}

}  // namespace fenceq::daemon::pg

namespace fenceq::daemon {

Store::SettleStep PgStore::settle_step(double now) {
  // Plain SQL (exec sends the transaction's BEGIN first): the time as the
  // shortest text that reads back as the same double.
  const std::string sql = fmt::format("SELECT changed, more FROM fenceq_settle_step({}::float8, "
                                      "{}, {})",
                                      now, pg::kSettleChunk, pg::kStepMs);
  auto res = conn_.exec(sql.c_str(), "settling children");
  SettleStep out;
  const std::int64_t n = std::strtoll(PQgetvalue(res.get(), 0, 0), nullptr, 10);
  changes_ += n;
  out.changed = n > 0;
  out.left = PQgetvalue(res.get(), 0, 1)[0] == 't';
  return out;
}

}  // namespace fenceq::daemon
