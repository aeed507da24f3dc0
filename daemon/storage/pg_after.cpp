// The PostgreSQL store's jobs that wait for other jobs (issue 32;
// docs/contract.md C3.13): schema version 10's tables, the function an
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
#include "job_rules.hpp"
#include "pg_statements.hpp"

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

// One child of a settled parent becomes ready when this was its last edge
// not met: its delay counts from now (the parent's finishing time), and the
// parked claims of its queue, on every sidecar, look again.
std::string unblock_sql() {
  return R"sql(
      UPDATE job_waits w SET blocked = w.blocked - 1 WHERE w.child = v_child AND w.blocked > 0
        RETURNING w.blocked, w.wait INTO v_blocked, v_wait;
      IF FOUND AND v_blocked = 0 THEN
        UPDATE jobs j SET not_before = v_now + v_wait
          WHERE j.id = v_child AND j.done = 0 AND j.dead = 0 RETURNING j.queue INTO v_queue;
        IF FOUND THEN
          PERFORM )sql" + notify_sql("v_queue", true) + R"sql(;
        END IF;
      END IF;)sql";
}

// The trigger of a job others wait for that became done, dead or
// cancelled: each edge of it not met yet is met, once. Done: its children
// lose a blocking parent. Dead or cancelled: a child with after_failure
// "run" does too; another still blocked is cancelled ("parent ID dead"),
// and so are its own blocked children, and theirs.
//
// Without recursion (issue 55): each cancel below fires this trigger again
// for the cancelled child, and nesting a trigger per generation ended in
// "stack depth limit exceeded" at about 800 generations, which failed every
// batch that reaped or cancelled the root, for good. So a firing nested in
// this trigger's own cancels returns at once, and the outermost firing walks
// the descendants a generation at a time (v_gen, then v_next: breadth
// first), at a constant depth whatever the chain's length.
std::string settle_function() {
  return R"sql(
CREATE OR REPLACE FUNCTION fenceq_settle() RETURNS trigger LANGUAGE plpgsql AS $fn$
DECLARE
  v_gen text[] := ARRAY[NEW.id];
  v_next text[];
  v_parent text;
  v_children text[];
  v_child text;
  v_run integer;
  v_blocked bigint;
  v_wait double precision;
  v_queue text;
  v_kids integer;
  v_now double precision := NEW.finished;
  v_done boolean := NEW.done = 1;
  v_why text := CASE WHEN NEW.cancelled = 1 THEN ' cancelled' ELSE ' dead' END;
BEGIN
  IF pg_catalog.pg_trigger_depth() > 1 THEN
    RETURN NULL;  -- a child cancelled by the loop below, which settles its children itself
  END IF;
  WHILE cardinality(v_gen) > 0 LOOP
    v_next := '{}';
    FOREACH v_parent IN ARRAY v_gen LOOP
      WITH m AS (UPDATE job_after a SET met = 1 WHERE a.parent = v_parent AND a.met = 0
                 RETURNING a.child)
        SELECT array_agg(m.child ORDER BY m.child) INTO v_children FROM m;
      FOREACH v_child IN ARRAY COALESCE(v_children, '{}') LOOP
        IF v_done THEN)sql" + unblock_sql() + R"sql(
          CONTINUE;
        END IF;
        SELECT w.after_run, w.blocked INTO v_run, v_blocked FROM job_waits w, jobs j
          WHERE w.child = v_child AND j.id = w.child AND j.done = 0 AND j.dead = 0;
        CONTINUE WHEN NOT FOUND;
        IF v_run = 1 THEN)sql" + unblock_sql() + R"sql(
        ELSIF v_blocked > 0 THEN
          UPDATE jobs SET )sql" + rules::cancel_set("v_now") + R"sql(,
            error = 'parent ' || v_parent || v_why
            WHERE id = v_child AND done = 0 AND dead = 0 RETURNING kids INTO v_kids;
          IF FOUND AND (v_kids & 1) <> 0 THEN
            v_next := array_append(v_next, v_child);
          END IF;
        END IF;
      END LOOP;
    END LOOP;
    -- The next generation's parents were cancelled by this one.
    v_gen := v_next;
    v_done := false;
    v_why := ' cancelled';
  END LOOP;
  RETURN NULL;
END
$fn$;
)sql";
}

// The trigger of a job that waits for others and was revived (retry): its
// edges counted again from its parents as they are (a purged parent was
// done), and blocked again while one is not done.
std::string recount_function() {
  return R"sql(
CREATE OR REPLACE FUNCTION fenceq_recount() RETURNS trigger LANGUAGE plpgsql AS $fn$
DECLARE
  v_blocked bigint;
BEGIN
  UPDATE job_after a SET met = COALESCE((SELECT (p.done = 1 OR (p.dead = 1 AND w.after_run = 1))::int
    FROM jobs p, job_waits w WHERE p.id = a.parent AND w.child = a.child), 1)
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
// then read: 1 done (or purged), 2 dead, 3 cancelled, 0 unfinished. A
// parent dead or cancelled already cancels the job at once, unless
// after_failure is "run". Answers the new job's fence, or no row.
std::string enqueue_after_function() {
  return R"sql(
CREATE OR REPLACE FUNCTION fenceq_enqueue_after(p_id text, p_queue text, p_payload bytea,
    p_binary boolean, p_priority bigint, p_not_before double precision, p_max_attempts bigint,
    p_now double precision, p_grp text, p_parents text[], p_run boolean, p_wait double precision,
    p_max_runtime double precision, p_headers text)
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
      fence, grp, kids, max_runtime, headers)
    VALUES (p_id, p_queue, p_payload, p_binary, p_priority, p_not_before, p_max_attempts, p_now,
      COALESCE((SELECT f.fence FROM purged_fences f WHERE f.id = p_id), 0), p_grp, 2, p_max_runtime,
      p_headers)
    ON CONFLICT (id) DO NOTHING RETURNING jobs.fence INTO v_fence;
  IF NOT FOUND THEN
    RETURN;
  END IF;
  FOREACH v_parent IN ARRAY p_parents LOOP
    UPDATE jobs j SET kids = j.kids | 1 WHERE j.id = v_parent
      RETURNING CASE WHEN j.done = 1 THEN 1 WHEN j.cancelled = 1 THEN 3 WHEN j.dead = 1 THEN 2
        ELSE 0 END INTO v_state;
    IF NOT FOUND THEN
      v_state := 1;
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
    UPDATE jobs SET not_before = )sql" + std::string(rules::kBlockedUntilSql) + R"sql( WHERE id = p_id;
  END IF;
  IF v_failed IS NOT NULL THEN
    UPDATE jobs SET )sql" + rules::cancel_set("p_now") + R"sql(, error = v_failed
      WHERE id = p_id AND done = 0 AND dead = 0;
  ELSIF v_waiting = 0 THEN
    PERFORM )sql" + notify_sql("p_queue") + R"sql(;
  END IF;
  fence := v_fence;
  RETURN NEXT;
END
$fn$;
)sql";
}

}  // namespace

void migrate_after(PgConnection& c, int version) {
  if (version < 10) {
    c.exec(kSchemaV10, "create the schema");
    c.exec("INSERT INTO fenceq_schema_version(version) VALUES (9), (10) ON CONFLICT DO NOTHING",
           "create the schema");
  }
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
