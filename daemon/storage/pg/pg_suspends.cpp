// The PostgreSQL store's suspend and signal (C3.23) and the reap's part of
// them and of deadlines (C3.24), as pg_writes.cpp has each other write op's:
// one statement each, and how its result is read. sqlite_suspends.cpp says
// what each does; here each is one statement, so that sidecars racing on
// one job or one token are judged by the row locks: a token's row is
// deleted by the one signal that uses it (the others find it gone), a
// timed-out wait by the one reap that takes it.
#include <string>

#include "storage/job_rules.hpp"
#include "storage/pg/pg_batch.hpp"
#include "storage/pg/pg_statements.hpp"

namespace fenceq::daemon {

using namespace pg;  // NOLINT: the statements' numbers
using Batch = PgStore::Batch;

namespace {
// How many waits or deadlines one reap ends at most (the rest at the next).
constexpr int kTimeoutPage = 256;
}  // namespace

// ($1 id, $2 owner, $3 fence, $4 now) the lease, $5 the token, $6 when the
// wait ends, $7 fail. The signal that woke the job before is forgotten.
template <>
void Batch::add_statements<SuspendParams>(std::vector<PgStatement>& d) {
  d[kSuspend] = {
      "WITH j AS (UPDATE jobs SET " +
          rules::end_lease_set(rules::kPostgres, rules::LeaseEnd::suspended) + " WHERE " +
          rules::current_lease("$1", "$2", "$3", "$4") +
          " RETURNING id), f AS (DELETE FROM job_steps WHERE id IN (SELECT id FROM j) AND step = "
          "''), s AS (INSERT INTO job_suspends(id, token, timeout, fail) SELECT id, $5, $6, $7 "
          "FROM j ON CONFLICT (id) DO UPDATE SET token = EXCLUDED.token, timeout = "
          "EXCLUDED.timeout, fail = EXCLUDED.fail) SELECT count(*) FROM j",
      {kText, kText, kInt8, kFloat8, kText, kFloat8, kBool}};
}

template <>
Route Batch::prepare(const SuspendParams& c, Prep& x) {
  if (has_nul(c.id) || has_nul(c.owner)) return Route::local;  // no such lease
  x.p.text(c.id).text(c.owner).i8(c.fence).f8(c.now).text(c.token).f8(c.now + c.timeout)
      .boolean(c.fail);
  return x.send(kSuspend);
}

template <>
void Batch::read(const SuspendParams& c, std::size_t i, PGresult* r) {
  if (int_at(r, 0, 0) == 0) return;
  s.changes_++;
  out[i].ok = true;
  out[i].id = c.token;
}

// ($1 token, $2 now, $3 value, $4 bin). Answers the job's queue when the
// token woke it, with the NOTIFY for the parked claims of every sidecar.
template <>
void Batch::add_statements<SignalParams>(std::vector<PgStatement>& d) {
  d[kSignal] = {
      std::string("WITH t AS (DELETE FROM job_suspends s USING jobs j WHERE s.token = $1 AND "
                  "s.timeout > $2 AND j.id = s.id AND j.done = 0 AND j.dead = 0 AND "
                  "j.not_before >= ") +
          rules::kSuspendedUntilSql +
          " RETURNING s.id), w AS (UPDATE jobs SET not_before = $2, kids = kids | " +
          std::to_string(rules::kKidsSteps) +
          " WHERE id IN (SELECT id FROM t) RETURNING queue), v AS (INSERT INTO job_steps(id, step, "
          "value, is_bin) SELECT id, '', $3, $4 FROM t ON CONFLICT (id, step) DO UPDATE SET value "
          "= EXCLUDED.value, is_bin = EXCLUDED.is_bin) SELECT queue, " +
          notify_sql("queue") + " FROM w",
      {kText, kFloat8, kBytea, kBool}};
}

template <>
Route Batch::prepare(const SignalParams& c, Prep& x) {
  if (has_nul(c.token)) return Route::local;  // no token holds U+0000
  x.p.text(c.token).f8(c.now);
  if (*c.value) {
    x.p.bytea((*c.value)->bytes).boolean((*c.value)->binary);
  } else {
    x.p.null().boolean(false);
  }
  return x.send(kSignal);
}

template <>
void Batch::read(const SignalParams&, std::size_t i, PGresult* r) {
  if (PQntuples(r) == 0) return;
  s.changes_++;
  out[i].ok = true;
}

// ($1 now) A page of the waits that timed out, taken (SKIP LOCKED: another
// sidecar's reap has those), each job ready again at now or dead; a page of
// jobs_expires: the jobs not leased whose deadline came are dead, the
// finished ones leave the index. A suspended job's deadline waits for its
// wake: it cannot be claimed before either (rules::deadline_missed). The
// three UPDATEs of jobs meet disjoint rows, each found by its key from an
// array (`id = ANY(ARRAY(...))`): joined to the CTE, the generic plan read
// all of jobs (a seq scan, 20 ms at 25,000 jobs, every reap; it held
// test_settle_bounded's pings past 20 ms at p99). Answers (queue, dead, expired,
// the NOTIFY) for each job changed.
std::string Batch::timeouts_sql() {
  const std::string page = std::to_string(kTimeoutPage);
  const std::string suspended = std::string("not_before >= ") + rules::kSuspendedUntilSql;
  return "WITH t AS (DELETE FROM job_suspends WHERE id IN (SELECT id FROM job_suspends WHERE "
         "timeout <= $1 ORDER BY timeout LIMIT " + page + " FOR UPDATE SKIP LOCKED) RETURNING id, "
         "fail), w AS (UPDATE jobs j SET error = '" + rules::kSuspendTimedOut +
         "', dead = CASE WHEN t.fail THEN 1 ELSE 0 END, finished = CASE WHEN t.fail THEN $1 ELSE "
         "j.finished END, not_before = CASE WHEN t.fail THEN j.not_before ELSE $1 END FROM t "
         "WHERE j.id = t.id AND j.id = ANY(ARRAY(SELECT id FROM t)) AND j.done = 0 AND "
         "j.dead = 0 AND j." + suspended + " RETURNING j.queue, j.dead), p AS (SELECT id FROM "
         "jobs WHERE expires <= $1 ORDER BY expires LIMIT " + page + "), x AS (UPDATE jobs SET "
         "dead = 1, finished = $1, error = '" + rules::kDeadlinePassed + "', expires = NULL "
         "WHERE id = ANY(ARRAY(SELECT id FROM p)) AND done = 0 AND dead = 0 AND until <= $1 AND "
         "NOT " + suspended + " RETURNING queue), c AS (UPDATE jobs SET expires = NULL WHERE "
         "id = ANY(ARRAY(SELECT id FROM p)) AND (done = 1 OR dead = 1)) SELECT queue, dead, 0, " +
         notify_sql("queue") + " FROM w UNION ALL SELECT queue, 1, 1, NULL FROM x";
}

void Batch::read_timeouts(PGresult* r) {
  s.count_changes(r);
  for (int k = 0, n = PQntuples(r); k < n; ++k) {
    auto& t = s.tally_.at(bytes_at(r, k, 0));
    const bool dead = int_at(r, k, 1) != 0;
    if (int_at(r, k, 2) != 0) {  // its deadline passed
      t.dead++;
      t.deadline_passed++;
      continue;
    }
    t.failed++;  // a wait that timed out: a failed attempt, retried or dead
    (dead ? t.dead : t.retried)++;
  }
}

}  // namespace fenceq::daemon
