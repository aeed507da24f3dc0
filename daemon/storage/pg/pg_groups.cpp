// The PostgreSQL store's groups (docs/contract.md C3.11): claim_next
// of a queue with groups, fenceq_claim_fair, and what keeps its walk bounded
// (C3.11, "Bounded"), as SqliteStore::claim_fair (sqlite_groups.cpp)
// does it in memory.
//
// A group whose head is not claimable leaves the walk: queue_groups.wake is
// 0 for a group in the walk, else the time it may have a claimable job again
// by time alone ('Infinity': by a write alone), and held says that its
// settings (group_max_leased, group_rate) held it back. Before, 50,000 groups
// each holding a job delayed an hour made every claim probe 50,000 heads,
// and 20,000 groups at their group_max_leased counted 20,000 groups' leases.
// Writes that may make a job claimable sooner lower wake (the triggers below,
// in the writing transaction, so across sidecars): a job inserted, one open
// again or whose lease, delay or attempts shrank, a lease that ended (for a
// held group), the queue's group settings changed (every held group). A group
// whose time has come walks again, its turn kept (C3.11's order: a parked
// group had nothing to claim). A new group's row is made at 'Infinity' by a
// batch's enqueues (kLockGroups) and its first job's trigger brings it to
// that job's time, or at its job's time by a single enqueue (kUnpurge,
// pg_enqueue.cpp), so 50,000 new groups of delayed jobs are never probed.
//
// Not a schema version of its own: the columns are added by every start (IF
// NOT EXISTS), and their defaults (0, false: in the walk) are what a fenceqd
// that does not know them does, so an older sidecar's rows are walked.
#include <string>

#include "storage/job_rules.hpp"
#include "storage/pg/pg_statements.hpp"
#include "storage/store_rows.hpp"

namespace fenceq::daemon::pg {
namespace {

constexpr const char* kGroupColumns = R"sql(
ALTER TABLE queue_groups ADD COLUMN IF NOT EXISTS wake double precision NOT NULL DEFAULT 0,
  ADD COLUMN IF NOT EXISTS held boolean NOT NULL DEFAULT false;
CREATE INDEX IF NOT EXISTS queue_groups_walk ON queue_groups(queue, turn, grp) WHERE wake = 0;
CREATE INDEX IF NOT EXISTS queue_groups_waking ON queue_groups(queue, wake, turn, grp)
  WHERE wake > 0;
DROP INDEX IF EXISTS queue_groups_turn;
)sql";

// When a job (`r`, a row of jobs) is claimable by time alone ('Infinity':
// not by time alone, blocked or out of attempts).
std::string claimable_at(const std::string& r) {
  return "CASE WHEN " + r + ".not_before >= " + rules::kBlockedUntilSql + " OR NOT (" + r +
         ".max_attempts = 0 OR " + r + ".attempts < " + r + ".max_attempts) THEN "
         "'Infinity'::float8 ELSE GREATEST(" + r + ".until, " + r + ".not_before) END";
}

// The triggers' functions: a parked group's wake comes sooner (never later).
std::string group_wake_functions() {
  return R"sql(
CREATE OR REPLACE FUNCTION fenceq_groups_joined() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
  UPDATE queue_groups g SET wake = n.at FROM (SELECT j.queue, j.grp, MIN()sql" +
         claimable_at("j") + R"sql() AS at
      FROM fenceq_new j WHERE j.grp IS NOT NULL AND j.done = 0 AND j.dead = 0
      GROUP BY j.queue, j.grp) n
    WHERE g.queue = n.queue AND g.grp = n.grp AND g.wake > n.at;
  RETURN NULL;
END
$fn$;
CREATE OR REPLACE FUNCTION fenceq_group_sooner() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
  UPDATE queue_groups g SET wake = )sql" + claimable_at("NEW") + R"sql(
    WHERE g.queue = NEW.queue AND g.grp = NEW.grp AND g.wake > )sql" + claimable_at("NEW") +
         R"sql(;
  RETURN NULL;
END
$fn$;
CREATE OR REPLACE FUNCTION fenceq_group_freed() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
  UPDATE queue_groups g SET wake = 0, held = false
    WHERE g.queue = OLD.queue AND g.grp = OLD.grp AND g.wake > 0 AND g.held;
  RETURN NULL;
END
$fn$;
CREATE OR REPLACE FUNCTION fenceq_groups_settings() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
  UPDATE queue_groups g SET wake = 0, held = false
    WHERE g.queue = CASE WHEN TG_OP = 'DELETE' THEN OLD.queue ELSE NEW.queue END
      AND g.wake > 0 AND g.held;
  RETURN NULL;
END
$fn$;
)sql";
}

// An insert's groups in one statement (an enqueue_many of 1,000 jobs wakes
// each of its groups once); an update's row by row, and only the rows whose
// change may make a job claimable sooner, or end a lease, as SQLite's
// pre-update hook does (group_preupdate, sqlite_groups.cpp).
constexpr const char* kGroupTriggers = R"sql(
DROP TRIGGER IF EXISTS fenceq_groups_joined ON jobs;
CREATE TRIGGER fenceq_groups_joined AFTER INSERT ON jobs REFERENCING NEW TABLE AS fenceq_new
  FOR EACH STATEMENT EXECUTE FUNCTION fenceq_groups_joined();
DROP TRIGGER IF EXISTS fenceq_group_sooner ON jobs;
CREATE TRIGGER fenceq_group_sooner AFTER UPDATE OF until, not_before, attempts, max_attempts,
    done, dead, grp, queue ON jobs FOR EACH ROW
  WHEN (NEW.grp IS NOT NULL AND NEW.done = 0 AND NEW.dead = 0 AND (OLD.done <> 0 OR
    OLD.dead <> 0 OR NEW.until < OLD.until OR NEW.not_before < OLD.not_before OR
    NEW.attempts < OLD.attempts OR NEW.max_attempts IS DISTINCT FROM OLD.max_attempts OR
    NEW.grp IS DISTINCT FROM OLD.grp OR NEW.queue IS DISTINCT FROM OLD.queue))
  EXECUTE FUNCTION fenceq_group_sooner();
DROP TRIGGER IF EXISTS fenceq_group_freed ON jobs;
CREATE TRIGGER fenceq_group_freed AFTER UPDATE OF done, dead, until, held ON jobs FOR EACH ROW
  WHEN (OLD.grp IS NOT NULL AND OLD.held = 1 AND OLD.done = 0 AND OLD.dead = 0 AND
    (NEW.done <> 0 OR NEW.dead <> 0 OR NEW.held = 0 OR NEW.until < OLD.until))
  EXECUTE FUNCTION fenceq_group_freed();
DROP TRIGGER IF EXISTS fenceq_groups_settings ON queue_config;
CREATE TRIGGER fenceq_groups_settings AFTER INSERT OR DELETE OR UPDATE OF group_max_leased,
    group_rate, group_per ON queue_config FOR EACH ROW EXECUTE FUNCTION fenceq_groups_settings();
)sql";

// Whether group v_grp (its counts at v_i) is held back by its settings
// (v_by_leases, v_by_rate); if so it leaves the walk until its hold may end
// by time (its first lease runs out, its oldest claim leaves the window), or
// a lease of it ends, or the settings change (the triggers).
std::string fair_hold_sql() {
  const std::string window = "group_claims c WHERE c.queue = p_queue AND c.grp = v_grp AND "
                             "c.at > p_now - v_ct_pr[v_i]";
  // MIN(until + 0): through jobs_group_leased, never by walking jobs_held's
  // order of until over the queue's every lease (a plan that statistics of
  // a table that just grew may pick).
  return R"sql(
        v_by_leases := v_ct_ml[v_i] > 0 AND v_ct_leased[v_i] >= v_ct_ml[v_i];
        v_by_rate := v_ct_rt[v_i] > 0 AND v_ct_logged[v_i] >= v_ct_rt[v_i];
        IF v_by_leases OR v_by_rate THEN
          v_at := GREATEST(CASE WHEN v_by_leases THEN (SELECT MIN(until + 0) FROM jobs WHERE )sql" +
         rules::group_leased("p_queue", "v_grp", "p_now") + R"sql() END,
            CASE WHEN v_by_rate THEN (SELECT MIN(c.at) FROM )sql" + window +
         R"sql() + v_ct_pr[v_i] END);
          IF v_at > p_now THEN
            UPDATE queue_groups g SET wake = v_at, held = true
              WHERE g.queue = p_queue AND g.grp = v_grp;
          END IF;
        END IF;
)sql";
}

// The walk's check of a group's settings: what group_allowed counts is read
// once a call per group (v_ct_*: only what a setting limits, and no further
// than its limit) and counted on by each claim; a group held
// back leaves the walk (fair_hold_sql). A claim that brings its group to its
// limit parks it at once (fair_served_sql), so that 20,000 groups at their
// group_max_leased are not all found held by one call's walk.
std::string fair_settings_sql() {
  const std::string leased = rules::group_leased("p_queue", "v_grp", "p_now");
  const std::string window = "group_claims c WHERE c.queue = p_queue AND c.grp = v_grp AND "
                             "c.at > p_now - v_g_pr";
  // The group's settings once a call (v_ct_ml, v_ct_rt, v_ct_pr): its own
  // (C3.25, group_config, looked for only when the queue has any) over
  // the queue's.
  return R"sql(
      IF v_grp <> '' AND v_group_limited THEN
        v_i := array_position(v_ct_grp, v_grp);
        IF v_i IS NULL THEN
          v_g_ml := v_group_max_leased;
          v_g_rt := v_group_rate;
          v_g_pr := v_group_per;
          IF v_group_overrides > 0 THEN
            SELECT o.max_leased, o.rate, o.per INTO v_o_ml, v_o_rt, v_o_pr FROM group_config o
              WHERE o.queue = p_queue AND o.grp = v_grp;
            v_g_ml := COALESCE(v_o_ml, v_g_ml);
            v_g_rt := COALESCE(v_o_rt, v_g_rt);
            v_g_pr := COALESCE(v_o_pr, v_g_pr);
          END IF;
          v_ct_grp := v_ct_grp || v_grp;
          v_ct_ml := v_ct_ml || v_g_ml;
          v_ct_rt := v_ct_rt || v_g_rt;
          v_ct_pr := v_ct_pr || v_g_pr;
          v_ct_leased := v_ct_leased || CASE WHEN v_g_ml > 0 THEN (SELECT count(*)
            FROM (SELECT 1 FROM jobs WHERE )sql" + leased + R"sql( LIMIT v_g_ml) n) ELSE 0 END;
          v_ct_logged := v_ct_logged || CASE WHEN v_g_rt > 0 THEN (SELECT count(*)
            FROM (SELECT 1 FROM )sql" + window + R"sql( LIMIT v_g_rt) n) ELSE 0 END;
          v_i := cardinality(v_ct_grp);
        END IF;
        )sql" + fair_hold_sql() + R"sql(
        IF v_by_leases OR v_by_rate THEN
          CONTINUE;
        END IF;
      END IF;
)sql";
}

// The walk's look at a group's head: after the last job this call took of
// it (v_tk_*: at its priority after its seq, else below its priority), so
// that the walk of jobs_group does not step over the jobs it leased. None
// claimable: the group leaves the turns (no open job; its row locked, then
// looked at again with a statement of its own, so a snapshot of its own), or
// the walk until its first job is claimable by time alone.
std::string fair_head_sql() {
  const std::string head_of = "SELECT j.id, j.priority, j.seq INTO v_head, v_prio, v_seq FROM "
                              "jobs j WHERE j.queue = p_queue AND ";
  const std::string claimable = " AND " + rules::claimable("p_now") + " ORDER BY " +
                                rules::urgency() + " LIMIT 1 FOR UPDATE SKIP LOCKED";
  // The no-group turn's head (schema 20): the more urgent of the unparked
  // head and the most urgent of the parked jobs whose lease or delay is over
  // (the kWakePagePg soonest, as claim_next reads them: parked_due_sql).
  const std::string woken =
      "SELECT j.id, j.priority, j.seq INTO v_head2, v_prio2, v_seq2 FROM jobs j WHERE j.id IN (" +
      parked_due_sql("p_queue", "p_now", std::to_string(rules::kWakePagePg)) +
      ") AND j.queue = p_queue AND " + rules::claimable("p_now") + " ORDER BY " +
      rules::urgency() + " LIMIT 1 FOR UPDATE SKIP LOCKED";
  // Whether the group has an open job (v_open), each case its own
  // statement: one condition `CASE WHEN v_grp = '' THEN grp IS NULL ELSE grp
  // = v_grp END` (a generic plan) read the queue's every open job, 20-35 ms
  // beside 50,000 groups of a delayed job (test_bounded_groups.py), where
  // jobs_group and jobs_next each answer with one entry. The ungrouped one
  // in jobs_next's order: as EXISTS, the generic plan of a queue among big
  // ones was a seq scan that stops at the first row (and read all 55,000
  // jobs, 21 ms, for a queue with none); ordered, only the index is cheap.
  const std::string open = R"sql(
        IF v_grp = '' THEN
          v_open := (SELECT 1 FROM jobs WHERE queue = p_queue AND grp IS NULL AND done = 0
            AND dead = 0 AND )sql" + std::string(rules::kJobsNextPg) + " ORDER BY " +
                           rules::kNextKeyPg + R"sql(, priority DESC, seq LIMIT 1) IS NOT NULL;
        ELSE
          v_open := EXISTS(SELECT 1 FROM jobs WHERE queue = p_queue AND grp = v_grp AND done = 0
            AND dead = 0);
        END IF;)sql";
  return R"sql(
      v_i := CASE WHEN v_grp = '' THEN NULL ELSE array_position(v_tk_grp, v_grp) END;
      IF v_grp = '' THEN
        )sql" + head_of + "j." + rules::kNoGroup + " AND " + rules::kJobsNextPg + " AND " +
         rules::kNextKeyPg + " = 0" +
         claimable + R"sql(;
        )sql" + woken + R"sql(;
        IF v_head2 IS NOT NULL AND (v_head IS NULL OR v_prio2 > v_prio OR
            (v_prio2 = v_prio AND v_seq2 < v_seq)) THEN
          v_head := v_head2;
          v_prio := v_prio2;
          v_seq := v_seq2;
        END IF;
      ELSIF v_i IS NULL THEN
        )sql" + head_of + "j.grp = v_grp" + claimable + R"sql(;
      ELSE
        )sql" + head_of + "j.grp = v_grp AND j.priority = v_tk_prio[v_i] AND j.seq > v_tk_seq[v_i]" +
         claimable + R"sql(;
        IF NOT FOUND THEN
          )sql" + head_of + "j.grp = v_grp AND j.priority < v_tk_prio[v_i]" + claimable + R"sql(;
        END IF;
      END IF;
      IF v_head IS NULL THEN)sql" + open + R"sql(
        IF NOT v_open THEN
          PERFORM 1 FROM queue_groups g WHERE g.queue = p_queue AND g.grp = v_grp
            FOR UPDATE SKIP LOCKED;
          IF FOUND THEN)sql" + open + R"sql(
            IF NOT v_open THEN
              DELETE FROM queue_groups g WHERE g.queue = p_queue AND g.grp = v_grp;
            END IF;
          END IF;
        ELSIF v_grp <> '' THEN
          SELECT COALESCE(MIN()sql" + rules::claimable_from(rules::kPostgres) + R"sql(), 'Infinity')
            INTO v_at FROM jobs WHERE queue = p_queue AND grp = v_grp AND done = 0 AND dead = 0
              AND not_before < )sql" + rules::kBlockedUntilSql + " AND " + rules::attempts_left() +
         R"sql(;
          IF v_at > p_now THEN
            UPDATE queue_groups g SET wake = v_at, held = false
              WHERE g.queue = p_queue AND g.grp = v_grp;
          END IF;
        END IF;
        CONTINUE;
      END IF;
)sql";
}

// fenceq_claim_fair's walk of the turns for one job: v_best (its group
// v_best_grp, priority v_best_prio, seq v_best_seq) is the head of the least
// recently served group among those of the top priority v_top, NULL when
// none is claimable. Only the groups in the walk (wake = 0) are read, and
// once 256 were, for 4 ms of the call at most: many groups still in the
// walk with nothing to claim (as after settings loosened and then tightened:
// 20,000 groups each found held went past the 10 s statement_timeout) are
// parked over several calls. Never before 256: a busy machine must not make
// a walk of a few groups answer nothing.
std::string fair_walk_sql() {
  return R"sql(
    FOR v_grp IN SELECT g.grp FROM queue_groups g WHERE g.queue = p_queue AND g.wake = 0
        ORDER BY g.turn, g.grp LOOP
      v_seen := v_seen + 1;
      EXIT WHEN v_seen % 16 = 0 AND v_seen >= 256
        AND clock_timestamp() - v_started >= interval '4 milliseconds';)sql" +
         fair_settings_sql() + fair_head_sql() + R"sql(
      IF v_best IS NULL OR v_prio > v_best_prio THEN
        PERFORM 1 FROM queue_groups g WHERE g.queue = p_queue AND g.grp = v_grp
          FOR UPDATE SKIP LOCKED;
        IF FOUND THEN
          v_best := v_head;
          v_best_grp := v_grp;
          v_best_prio := v_prio;
          v_best_seq := v_seq;
        END IF;
      END IF;
      EXIT WHEN v_best IS NOT NULL AND v_best_prio >= v_top;
    END LOOP;
)sql";
}

// After a claim of v_best: its group's turn (once for consecutive claims of
// one group: each update of its row is a dead row version that the walk's
// index scans step over), its claim in the group's window, and the call's
// state of the group (v_tk_*, v_ct_*); at its limit, it leaves the walk.
std::string fair_served_sql() {
  return R"sql(
    IF v_best_grp IS DISTINCT FROM v_last_grp THEN
      UPDATE queue_groups g SET turn = nextval('queue_groups_turn_seq')
        WHERE g.queue = p_queue AND g.grp = v_best_grp;
      v_last_grp := v_best_grp;
    END IF;
    IF v_best_grp <> '' THEN
      v_i := array_position(v_ct_grp, v_best_grp);
      IF v_i IS NOT NULL AND v_ct_rt[v_i] > 0 THEN
        IF array_position(v_tk_grp, v_best_grp) IS NULL THEN
          DELETE FROM group_claims c WHERE c.queue = p_queue AND c.grp = v_best_grp
            AND c.at <= p_now - v_ct_pr[v_i] - )sql" + std::to_string(rules::kClaimLogKeep) + R"sql(;
        END IF;
        INSERT INTO group_claims(queue, grp, at) VALUES (p_queue, v_best_grp, p_now);
      END IF;
      v_i := array_position(v_tk_grp, v_best_grp);
      IF v_i IS NULL THEN
        v_tk_grp := v_tk_grp || v_best_grp;
        v_tk_prio := v_tk_prio || v_best_prio;
        v_tk_seq := v_tk_seq || v_best_seq;
      ELSE
        v_tk_prio[v_i] := v_best_prio;
        v_tk_seq[v_i] := v_best_seq;
      END IF;
      v_i := array_position(v_ct_grp, v_best_grp);
      IF v_i IS NOT NULL THEN
        v_ct_leased[v_i] := v_ct_leased[v_i] + 1;
        IF v_ct_rt[v_i] > 0 THEN
          v_ct_logged[v_i] := v_ct_logged[v_i] + 1;
        END IF;
        v_grp := v_best_grp;)sql" + fair_hold_sql() + R"sql(
      END IF;
    END IF;
)sql";
}

constexpr const char* kFairDeclare = R"sql(
DECLARE
  v_allowed bigint;
  v_top bigint;
  v_grp text;
  v_head text;
  v_prio bigint;
  v_seq bigint;
  v_head2 text;
  v_prio2 bigint;
  v_seq2 bigint;
  v_best text;
  v_best_grp text;
  v_best_prio bigint;
  v_best_seq bigint;
  v_last_grp text;
  v_taken bigint := 0;
  v_rate bigint;
  v_per double precision;
  v_group_max_leased bigint;
  v_group_rate bigint;
  v_group_per double precision;
  v_group_limited boolean;
  v_group_overrides bigint;
  v_g_ml bigint;
  v_g_rt bigint;
  v_g_pr double precision;
  v_o_ml bigint;
  v_o_rt bigint;
  v_o_pr double precision;
  v_ct_ml bigint[] := '{}';
  v_ct_rt bigint[] := '{}';
  v_ct_pr double precision[] := '{}';
  v_at double precision;
  v_i integer;
  v_by_leases boolean;
  v_by_rate boolean;
  v_tk_grp text[] := '{}';
  v_tk_prio bigint[] := '{}';
  v_tk_seq bigint[] := '{}';
  v_ct_grp text[] := '{}';
  v_ct_leased bigint[] := '{}';
  v_ct_logged bigint[] := '{}';
  v_started timestamptz := clock_timestamp();
  v_seen bigint := 0;
  v_open boolean;
)sql";

// claim_next of a queue with groups (docs/contract.md C3.11), as
// SqliteStore::claim_fair does it, in one round trip: one job at a time,
// each the head of the least recently served group among those of the top
// priority. Run after kLockQueue, so the claims of a queue with settings take
// turns across sidecars, and each statement here counts (READ COMMITTED: a
// snapshot per statement) what those before it committed. A group's row and
// its head are taken FOR UPDATE SKIP LOCKED: two sidecars serve different
// groups and different jobs, and never wait on each other.
//
// Bounded (C3.11): parked groups whose time has come walk again, 256 a
// call (the soonest first, then by turn); the top priority is read once (no
// claim of the call changes it: a claimed job stays open); and after 2 ms,
// once it has 16 jobs, the call answers what it took, fewer than p_max
// (PROTOCOL.md: a grouped claim_next answers a bounded page).
// enable_sort off, as the statistics of a table that just grew by 50,000
// groups still say it is small: the planner then read a group's head by
// sorting the queue's every open job (jobs_group_top, 37 ms), where the
// order of jobs_group is the one asked. jit off: a sort that must stay (the
// no-group turn's parked jobs, a page of them) costs a plan past
// jit_above_cost with enable_sort off, and compiling it took 200-860 ms a
// call (three sidecars under 16 clients: 178 requests in 15 s, not 3,000).
// Generic plans: each statement is planned
// once a connection, not on each of its first five calls (a claim then
// spent 10-20 ms planning).
std::string fair_function_sql() {
  const auto top = [](const char* which) {
    return std::string("(SELECT priority FROM jobs WHERE queue = p_queue AND ") + which +
           " AND done = 0 AND dead = 0 ORDER BY priority DESC LIMIT 1)";
  };
  // Of no group: jobs_next is keyed by kNextKeyPg before the priority
  // (schema 20), so one look for each of its four values.
  const auto top_no_group = [&top] {
    std::string out;
    for (const char* key : {"0", "1", "64", "65"}) {
      out += (out.empty() ? "" : ", ") +
             top((std::string(rules::kNoGroup) + " AND " + rules::kJobsNextPg + " AND " +
                  rules::kNextKeyPg + " = " + key).c_str());
    }
    return out;
  };
  return std::string(R"sql(
CREATE OR REPLACE FUNCTION fenceq_claim_fair(p_queue text, p_owner text, p_until double precision,
    p_now double precision, p_max bigint)
RETURNS TABLE(id text, fence bigint, attempts bigint, priority bigint, seq bigint, parents text,
    headers text, steps text, payload bytea, payload_binary boolean, c_expired boolean)
LANGUAGE plpgsql SET enable_sort = off SET jit = off SET plan_cache_mode = force_generic_plan AS $fn$
#variable_conflict use_column)sql") + kFairDeclare + R"sql(BEGIN
  SELECT k.rate, k.per, k.group_max_leased, k.group_rate, k.group_per, k.group_overrides,
      k.group_max_leased > 0 OR k.group_rate > 0 OR k.group_overrides > 0
    INTO v_rate, v_per, v_group_max_leased, v_group_rate, v_group_per, v_group_overrides,
      v_group_limited
    FROM queue_config k WHERE k.queue = p_queue;
  v_allowed := )sql" + rules::allowance(rules::kPostgres, "p_queue", "p_now", "p_max") + R"sql(;
  IF EXISTS ()sql" + "SELECT 1 FROM jobs WHERE queue = p_queue AND " + rules::kNoGroup +
         " AND done = 0 AND dead = 0 AND " + rules::kJobsNextPg + R"sql() THEN
    INSERT INTO queue_groups(queue, grp, wake) VALUES (p_queue, '', 0) ON CONFLICT DO NOTHING;
  END IF;
  UPDATE queue_groups g SET wake = 0, held = false FROM (SELECT w.grp FROM queue_groups w
      WHERE w.queue = p_queue AND w.wake > 0 AND w.wake <= p_now ORDER BY w.wake, w.turn, w.grp
      LIMIT 256 FOR UPDATE SKIP LOCKED) d
    WHERE g.queue = p_queue AND g.grp = d.grp;
  v_top := GREATEST()sql" + top_no_group() + ", " + top(rules::kInGroup) + R"sql();
  WHILE v_top IS NOT NULL AND v_taken < v_allowed LOOP
    EXIT WHEN v_taken >= 16 AND clock_timestamp() - v_started >= interval '2 milliseconds';
    v_best := NULL;)sql" + fair_walk_sql() + R"sql(    EXIT WHEN v_best IS NULL;
    RETURN QUERY UPDATE jobs SET )sql" + rules::runtime_claim_set("p_owner", "p_until", "p_now", true) +
         parks_sql() + R"sql( FROM (SELECT )sql" + rules::lease_expired() + R"sql( AS e FROM jobs WHERE id = v_best) o
      WHERE jobs.id = v_best RETURNING jobs.id, jobs.fence, jobs.attempts, jobs.priority,
        jobs.seq, )sql" + rows::parents_sql(true, "jobs.id") + R"sql(, jobs.headers, )sql" +
         rows::steps_sql(true, "jobs.id") + R"sql(, jobs.payload,
        jobs.payload_binary, o.e;)sql" + fair_served_sql() + R"sql(
    v_taken := v_taken + 1;
  END LOOP;
  IF COALESCE(v_rate, 0) > 0 AND v_taken > 0 THEN
    DELETE FROM queue_claims r WHERE r.queue = p_queue
      AND r.at <= p_now - v_per - )sql" + std::to_string(rules::kClaimLogKeep) + R"sql(;
    INSERT INTO queue_claims(queue, at) SELECT p_queue, p_now FROM generate_series(1, v_taken);
  END IF;
END
$fn$;
)sql";
}

}  // namespace

std::string group_wake_sql(const std::string& id) {
  return "COALESCE((SELECT " + claimable_at("w") + " FROM jobs w WHERE w.id = " + id +
         " AND w.done = 0 AND w.dead = 0), 0)";
}

void migrate_groups(PgConnection& c) {
  // The columns, indexes and triggers once (read from the catalogs, which
  // takes no lock on the tables): ALTER TABLE and CREATE TRIGGER lock
  // queue_groups and jobs, and done on every start they deadlocked with the
  // statements another sidecar, started a moment before, was preparing
  // (pg store: eight sidecars creating the schema at once, 3 runs in 4).
  auto made = c.exec(
      "SELECT EXISTS(SELECT 1 FROM pg_catalog.pg_attribute WHERE attrelid = "
      "'queue_groups'::regclass AND attname = 'wake' AND NOT attisdropped) AND "
      "EXISTS(SELECT 1 FROM pg_catalog.pg_trigger WHERE tgrelid = 'jobs'::regclass AND "
      "tgname = 'fenceq_group_freed')",
      "create the schema");
  const bool present = std::string(PQgetvalue(made.get(), 0, 0)) == "t";
  if (!present) c.exec(kGroupColumns, "create the schema");
  c.exec(group_wake_functions().c_str(), "create the schema");
  if (!present) c.exec(kGroupTriggers, "create the schema");
  // Its answer's columns changed with version 10: made anew.
  c.exec("DROP FUNCTION IF EXISTS fenceq_claim_fair(text, text, double precision, "
         "double precision, bigint)", "create the schema");
  c.exec(fair_function_sql().c_str(), "create the schema");
  c.exec(group_config_function_sql().c_str(), "create the schema");
  // C3.25: a group's own settings changed: the held groups of its queue
  // walk again (schema 23's table; once, as the triggers above).
  auto own = c.exec("SELECT EXISTS(SELECT 1 FROM pg_catalog.pg_trigger WHERE tgrelid = "
                    "'group_config'::regclass AND tgname = 'fenceq_group_config_settings')",
                    "create the schema");
  if (std::string(PQgetvalue(own.get(), 0, 0)) != "t") {
    c.exec("CREATE TRIGGER fenceq_group_config_settings AFTER INSERT OR DELETE OR UPDATE ON "
           "group_config FOR EACH ROW EXECUTE FUNCTION fenceq_groups_settings()",
           "create the schema");
  }
}

}  // namespace fenceq::daemon::pg
