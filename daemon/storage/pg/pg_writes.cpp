// The PostgreSQL store's writes, one op at a time: for each alternative of
// Call::Params (store.hpp), its statement(s) with their parameter types
// (add_statements), what the call sends or answers without the database
// (prepare) and how its result is read into its CallResult (read), side by
// side. Adding a write op to the PostgreSQL store is adding its section
// here: its three specializations (PgStore::Batch, pg_batch.hpp; a missing
// one is a compile error), and its statements' numbers to Write
// (pg_batch.hpp), unless it is declared with a `store` section in ops.json
// and has one statement: Write then numbers it (kNAME: snooze's kSnooze). Enqueue's, the largest, are in pg_enqueue.cpp.
// The batch machinery around them is pg_batch.cpp; the statements of the
// reads and the schema are pg_statements.cpp. The SQL is built from the
// rules in job_rules.hpp.
#include <cstdlib>
#include <limits>
#include <string>
#include <utility>  // std::index_sequence
#include <variant>

#include "fenceq_protocol/limits.hpp"
#include "storage/job_rules.hpp"
#include "storage/pg/pg_batch.hpp"
#include "storage/pg/pg_statements.hpp"
#include "storage/store_rows.hpp"

namespace fenceq::daemon {

using namespace pg;  // NOLINT: the statements' numbers
using Batch = PgStore::Batch;

namespace {

using rules::kPostgres;


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

// What both claim_next statements return: rows::claimed_job's columns (the
// parents' lookup only once PostgreSQL has job_after: schema 10), then
// payload_binary (PgRow::payload) and whether the claim took over an
// expired lease.
const std::string kClaimedReturning = qualified(rows::kClaimedHead, "jobs") + ", " +
                                      rows::parents_sql(true, "jobs.id") +
                                      ", jobs.headers, " + rows::steps_sql(true, "jobs.id") +
                                      ", jobs.payload, jobs.payload_binary, c.c_expired";

// A claim by id: the job's queue.
const std::string kQueueOfId = "(SELECT q.queue FROM jobs q WHERE q.id = $1)";

// A claim's SET parks the job (schema 20): claim_next's walk of jobs_next
// leaves it out while leased, and finds it through jobs_wake once its lease
// ends.
const std::string kParks = pg::parks_sql();

// The fenced writes' lease is ($1 id, $2 owner, $3 fence, $4 now).
void lease(PgParams& p, const LeaseParams& l, double now) {
  p.text(l.id).text(l.owner).i8(l.fence).f8(now);
}

// No lease can have an id or owner with U+0000.
bool nul_lease(const LeaseParams& l) { return has_nul(l.id) || has_nul(l.owner); }

std::int64_t command_rows(const PGresult* r) {
  const char* n = PQcmdTuples(const_cast<PGresult*>(r));
  return n && *n ? std::strtoll(n, nullptr, 10) : 0;
}

}  // namespace

// --- claim (by id): ClaimParams ----------------------------------------------

template <>
void Batch::add_statements<ClaimParams>(std::vector<PgStatement>& d) {
  // One UPDATE: a concurrent claim by another sidecar waits for this row,
  // then finds it leased (READ COMMITTED re-checks the condition on the new row).
  // The row before, as kRenew reads it: whether the claim took over a lease
  // that expired (rules::lease_expired).
  // By id, within its queue's allowance (after kLockQueueOf).
  d[kClaim] = {"WITH claimed AS (UPDATE jobs SET " + rules::runtime_claim_set("$2", "$3", "$4", true) +
                   kParks + " FROM (SELECT " + rules::lease_expired() +
                   " AS c_expired FROM jobs WHERE id = $1) o WHERE id = $1 AND " +
                   rules::claimable("$4") + " AND " +
                   rules::allowance(kPostgres, kQueueOfId, "$4", "1") +
                   " > 0 AND (grp IS NULL OR " +
                   rules::group_allowed(kQueueOfId, "(SELECT q.grp FROM jobs q WHERE q.id = $1)", "$4") +
                   " > 0) RETURNING fence, queue, grp, o.c_expired)" +
                   rate_window_sql("claimed", kQueueOfId, "$4") +
                   // The group's own settings over its queue's (C3.25): g.
                   ", group_logged AS (INSERT INTO group_claims(queue, grp, at) SELECT c.queue, "
                   "c.grp, $4 FROM claimed c, LATERAL (" + rules::group_settings("c.queue", "c.grp") +
                   ") g WHERE c.grp IS NOT NULL AND g.rt > 0), group_pruned AS (DELETE FROM "
                   "group_claims r USING claimed c, LATERAL (" +
                   rules::group_settings("c.queue", "c.grp") + ") g WHERE "
                   "g.rt > 0 AND r.queue = c.queue AND r.grp = c.grp AND r.at <= $4 - "
                   "g.pr - " + std::to_string(rules::kClaimLogKeep) + ") "
                   "SELECT fence, queue, c_expired FROM claimed",
               {kText, kText, kFloat8, kFloat8}};
  // The claim of a sidecar that believes no queue has settings: as before
  // queue settings existed, nothing when the job's queue has some.
  d[kClaimFast] = {"UPDATE jobs SET " + rules::runtime_claim_set("$2", "$3", "$4", true) +
                       kParks + " FROM (SELECT " + rules::lease_expired() +
                       " AS c_expired FROM jobs WHERE id = $1) o WHERE id = $1 AND " +
                       rules::claimable("$4") +
                       " AND NOT EXISTS (SELECT 1 FROM queue_config k WHERE k.queue = "
                       "jobs.queue) RETURNING fence, queue, o.c_expired",
                   {kText, kText, kFloat8, kFloat8}};
  // The settings row of the job's queue, locked; none when it has no settings.
  d[kLockQueueOf] = {"SELECT queue FROM queue_config WHERE queue = " + kQueueOfId +
                         " FOR UPDATE",
                     {kText}};
}

template <>
Route Batch::prepare(const ClaimParams& c, Prep& x) {
  if (has_nul(c.id)) return Route::local;
  if (has_nul(c.owner)) return x.refuse("owner");
  x.p.text(c.id).text(c.owner).f8(c.now + c.ttl).f8(c.now);
  if (x.configured.empty()) return x.send(kClaimFast);
  x.p2.text(c.id);
  x.plan.pre = kLockQueueOf;  // sent first, with p2
  return x.send(kClaim);
}

template <>
void Batch::read(const ClaimParams&, std::size_t i, PGresult* r) {
  s.count_changes(r);
  if (PQntuples(r) == 0) return;
  out[i].number = int_at(r, 0, 0);
  auto& t = s.tally_.at(bytes_at(r, 0, 1));
  t.claimed++;
  if (int_at(r, 0, 2) != 0) t.expired++;
}

// --- claim_next: ClaimNextParams ---------------------------------------------

namespace pg {

// claim_next ($1 queue, $2 owner, $3 until, $4 now, $5 max): claim as claim
// does the $5 most urgent claimable jobs of the queue, within the queue's
// allowance (after kLockQueue). Neither walk steps over a leased or delayed
// job (schema 20): the unparked jobs come from jobs_next, most urgent first
// (`limit` of them, locked as found); the parked ones (every job claimed
// before, or enqueued with a delay) whose lease or delay is over from
// jobs_wake, soonest first, `limit` or rules::kWakePagePg of them at most
// (so while more came due at once, the first calls choose among the
// soonest, as SQLite's wake_parked: docs/contract.md, claim_next). The
// claim takes the most urgent of both, each locked as it is taken and
// looked at again then (READ COMMITTED); an unparked one not taken stays
// locked until the transaction ends. SKIP LOCKED steps over a job another sidecar's open
// transaction holds, so two sidecars never wait on (or take) the same job.
// The rows come back in no set order: with their priority and seq to sort
// by; and with whether each took over a lease that expired
// (rules::lease_expired, read from the row as locked, before the update).
std::string claim_candidates(const std::string& limit, const std::string& also) {
  return "fresh AS (SELECT id FROM jobs WHERE queue = $1 AND " + std::string(rules::kNoGroup) +
         " AND " + rules::claimable("$4") + also + " AND " + rules::kJobsNextPg + " AND " +
         rules::kNextKeyPg + " = 0 ORDER BY " + rules::urgency() + " LIMIT " + limit +
         " FOR UPDATE SKIP LOCKED), woken AS (" +
         parked_due_sql("$1", "$4",
                        "GREATEST(" + limit + ", " + std::to_string(rules::kWakePagePg) + ")",
                        also) +
         "), c AS (SELECT id AS c_id, " + rules::lease_expired() +
         " AS c_expired FROM jobs WHERE id IN (SELECT id FROM fresh UNION ALL SELECT id FROM "
         "woken) AND queue = $1 AND " + rules::claimable("$4") +
         " ORDER BY " + rules::urgency() + " LIMIT " + limit + " FOR UPDATE SKIP LOCKED)";
}

std::string parked_due_sql(std::string_view queue, std::string_view now, std::string_view limit,
                           std::string_view also) {
  const std::string due = "GREATEST(until, not_before)";
  return "SELECT id FROM jobs WHERE queue = " + std::string(queue) + " AND " + rules::kNoGroup +
         " AND " + rules::claimable(now) + std::string(also) + " AND (kids & " +
         std::to_string(rules::kKidsParked) + ") <> 0 AND " + due + " <= " + std::string(now) +
         " ORDER BY " + due + " LIMIT " + std::string(limit);
}

std::string parks_sql() { return std::string(", kids = ") + rules::kParkedKids; }

// The claim of the candidates c: parked (kKidsParked) while leased.
std::string claim_candidates_update() {
  return "UPDATE jobs SET " + rules::runtime_claim_set("$2", "$3", "$4", true) +
         kParks + " FROM c WHERE jobs.id = c.c_id RETURNING " + kClaimedReturning;
}

PgStatement claim_next_statement() {
  const std::string no_groups = " AND NOT EXISTS (SELECT 1 FROM queue_groups WHERE queue = $1)";
  return {"WITH lim AS (SELECT " + rules::allowance(kPostgres, "$1", "$4", "$5") + " AS n), " +
              claim_candidates("(SELECT n FROM lim)", no_groups) + ", claimed AS (" +
              claim_candidates_update() + ")" + rate_window_sql("claimed", "$1", "$4") +
              "SELECT * FROM claimed",
          {kText, kText, kFloat8, kFloat8, kInt8}};
}

}  // namespace pg

template <>
void Batch::add_statements<ClaimNextParams>(std::vector<PgStatement>& d) {
  d[kClaimNext] = claim_next_statement();
  // claim_next of a queue the sidecar believes has no settings: the
  // statement of before, which claims nothing when it has some.
  d[kClaimNextFast] = {"WITH " +
                           pg::claim_candidates(
                               "$5",
                               " AND NOT EXISTS (SELECT 1 FROM queue_config WHERE queue = $1) "
                               "AND NOT EXISTS (SELECT 1 FROM queue_groups WHERE queue = $1)") +
                           " " + pg::claim_candidates_update(),
                       {kText, kText, kFloat8, kFloat8, kInt8}};
  // The queue's settings row, locked; none when the queue has no settings.
  d[kLockQueue] = {"SELECT queue FROM queue_config WHERE queue = $1 FOR UPDATE", {kText}};
  // A queue with groups: fenceq_claim_fair (pg_statements.cpp), after kLockQueue.
  d[kClaimFair] = {"SELECT * FROM fenceq_claim_fair($1, $2, $3, $4, $5)",
                   {kText, kText, kFloat8, kFloat8, kInt8}};
}

template <>
Route Batch::prepare(const ClaimNextParams& c, Prep& x) {
  if (has_nul(c.queue)) return Route::local;
  if (has_nul(c.owner)) return x.refuse("owner");
  x.p.text(c.queue).text(c.owner).f8(c.now + c.ttl).f8(c.now).i8(c.max);
  const bool grouped = x.grouped.contains(std::string(c.queue));
  if (!grouped && !x.configured.contains(std::string(c.queue))) return x.send(kClaimNextFast);
  x.p2.text(c.queue);
  x.plan.pre = kLockQueue;  // sent first, with p2
  return x.send(grouped ? kClaimFair : kClaimNext);
}

template <>
void Batch::read(const ClaimNextParams& c, std::size_t i, PGresult* r) {
  s.count_changes(r);
  // Its lock found no settings row: the queue has none any more.
  if (plan[i].pre >= 0 && PQntuples(res[plan[i].step - 1].get()) == 0) {
    s.configured_.erase(std::string(c.queue));
  }
  const int rows = PQntuples(r);
  std::vector<std::pair<std::int64_t, std::int64_t>> order;
  auto& jobs = out[i].jobs;
  for (int k = 0; k < rows; ++k) {
    jobs.push_back(rows::claimed_job(PgRow{r, k}, order));
    if (int_at(r, k, 10) != 0) s.tally_.at(c.queue).expired++;
  }
  if (rows > 0) s.tally_.at(c.queue).claimed += static_cast<std::uint64_t>(rows);
  // fenceq_claim_fair's rows come in the order its turns took them.
  if (plan[i].stmt != kClaimFair) jobs = rules::most_urgent_first(std::move(jobs), order);
}

// --- renew: RenewParams ------------------------------------------------------

template <>
void Batch::add_statements<RenewParams>(std::vector<PgStatement>& d) {
  // The lease end before, to tell the other sidecars when it came sooner
  // (their parked claims may wait for it).
  d[kRenew] = {"UPDATE jobs j SET until = " + rules::renewed_until("$5") +
                   ", progress = COALESCE($6, j.progress) FROM (SELECT until AS before FROM "
                   "jobs WHERE id = $1) o WHERE " + rules::current_lease("$1", "$2", "$3", "$4", "j.") +
                   " RETURNING j.queue, CASE WHEN o.before > $5 THEN " + notify_sql("j.queue") +
                   " END",
               {kText, kText, kInt8, kFloat8, kFloat8, kText}};
}

template <>
Route Batch::prepare(const RenewParams& c, Prep& x) {
  if (nul_lease(c)) return Route::local;  // no such lease
  if (c.progress && has_nul(*c.progress)) return x.refuse("progress");
  lease(x.p, c, c.now);
  x.p.f8(c.now + c.ttl).opt_text(c.progress);
  return x.send(kRenew);
}

template <>
void Batch::read(const RenewParams& c, std::size_t i, PGresult* r) {
  s.count_changes(r);
  out[i].ok = PQntuples(r) == 1;
  if (out[i].ok) {
    s.queue_changes_.lease_ends.emplace_back(text_at(r, 0, 0).value_or(""), c.now + c.ttl);
  }
}

// --- complete: CompleteParams (consecutive ones: kCompleteMany, pg_batch.cpp) ---

template <>
void Batch::add_statements<CompleteParams>(std::vector<PgStatement>& d) {
  d[kComplete] = {"UPDATE jobs SET " + rules::complete_set("$5", "$4") + " WHERE " +
                      rules::current_lease("$1", "$2", "$3", "$4") + " RETURNING queue",
                  {kText, kText, kInt8, kFloat8, kText}};
}

template <>
Route Batch::prepare(const CompleteParams& c, Prep& x) {
  if (nul_lease(c)) return Route::local;
  const bool given = c.result && *c.result;
  if (given && has_nul(**c.result)) return x.refuse("result");
  lease(x.p, c, c.now);
  x.p.opt_text(given ? std::optional<std::string_view>(**c.result) : std::nullopt);
  return x.send(kComplete);
}

template <>
void Batch::read(const CompleteParams&, std::size_t i, PGresult* r) {
  s.count_changes(r);
  out[i].ok = PQntuples(r) == 1;
  if (out[i].ok) s.tally_.at(bytes_at(r, 0, 0)).completed++;
}

// --- release: ReleaseParams --------------------------------------------------

template <>
void Batch::add_statements<ReleaseParams>(std::vector<PgStatement>& d) {
  d[kRelease] = {"UPDATE jobs SET " + rules::end_lease_set(kPostgres, rules::LeaseEnd::released) +
                     " WHERE " + rules::own_lease("$1", "$2", "$3") + " RETURNING queue, " +
                     notify_sql("queue"),
                 {kText, kText, kInt8}};
}

template <>
Route Batch::prepare(const ReleaseParams& c, Prep& x) {
  if (nul_lease(c)) return Route::local;
  x.p.text(c.id).text(c.owner).i8(c.fence);
  return x.send(kRelease);
}

template <>
void Batch::read(const ReleaseParams&, std::size_t i, PGresult* r) {
  s.count_changes(r);
  out[i].ok = PQntuples(r) == 1;
  if (out[i].ok) s.freed(text_at(r, 0, 0).value_or(""));
}

// --- fail: FailParams --------------------------------------------------------

template <>
void Batch::add_statements<FailParams>(std::vector<PgStatement>& d) {
  d[kFail] = {"UPDATE jobs SET " +
                  rules::end_lease_set(kPostgres, rules::LeaseEnd::failed,
                                       {.now = "$4", .error = "$5", .retry_in = "$6"}) +
                  " WHERE " + rules::current_lease("$1", "$2", "$3", "$4") +
                  " RETURNING dead, queue, CASE WHEN dead = 0 THEN " + notify_sql("queue") + " END",
              {kText, kText, kInt8, kFloat8, kText, kFloat8}};
}

template <>
Route Batch::prepare(const FailParams& c, Prep& x) {
  if (nul_lease(c)) return Route::local;
  if (has_nul(c.error)) return x.refuse("error");
  lease(x.p, c, c.now);
  x.p.text(c.error).opt_f8(c.retry_in);
  return x.send(kFail);
}

template <>
void Batch::read(const FailParams&, std::size_t i, PGresult* r) {
  s.count_changes(r);
  out[i].ok = PQntuples(r) == 1;
  if (!out[i].ok) return;
  auto& t = s.tally_.at(bytes_at(r, 0, 1));
  t.failed++;
  if (int_at(r, 0, 0) == 0) {
    // Claimable again after the backoff.
    t.retried++;
    s.freed(text_at(r, 0, 1).value_or(""));
  } else {
    t.dead++;  // out of attempts
  }
}

// --- check: CheckParams (reads only) -----------------------------------------

template <>
void Batch::add_statements<CheckParams>(std::vector<PgStatement>& d) {
  d[kCheck] = {"SELECT 1 FROM jobs WHERE " + rules::current_lease("$1", "$2", "$3", "$4"),
               {kText, kText, kInt8, kFloat8}};
}

template <>
Route Batch::prepare(const CheckParams& c, Prep& x) {
  if (nul_lease(c)) return Route::local;
  lease(x.p, c, c.now);
  return x.send(kCheck);
}

template <>
void Batch::read(const CheckParams&, std::size_t i, PGresult* r) {
  out[i].ok = PQntuples(r) > 0;
}

// --- snooze: SnoozeParams (C3.14) --------------------------------------------

template <>
void Batch::add_statements<SnoozeParams>(std::vector<PgStatement>& d) {
  // The current lease only, as complete's guard (C3.5).
  d[kSnooze] = {"UPDATE jobs SET " +
                    rules::end_lease_set(kPostgres, rules::LeaseEnd::snoozed, {.at = "$4 + $5"}) +
                    " WHERE " + rules::current_lease("$1", "$2", "$3", "$4") +
                    " RETURNING queue, " + notify_sql("queue"),
                {kText, kText, kInt8, kFloat8, kFloat8}};
}

template <>
Route Batch::prepare(const SnoozeParams& c, Prep& x) {
  if (nul_lease(c)) return Route::local;
  lease(x.p, c, c.now);
  x.p.f8(c.delay);
  return x.send(kSnooze);
}

template <>
void Batch::read(const SnoozeParams&, std::size_t i, PGresult* r) {
  s.count_changes(r);
  out[i].ok = PQntuples(r) == 1;
  if (out[i].ok) s.freed(text_at(r, 0, 0).value_or(""));
}

// --- unclaim: UnclaimParams --------------------------------------------------

template <>
void Batch::add_statements<UnclaimParams>(std::vector<PgStatement>& d) {
  d[kUnclaim] = {"UPDATE jobs SET " + rules::end_lease_set(kPostgres, rules::LeaseEnd::unclaimed) +
                     " WHERE " + rules::own_lease("$1", "$2", "$3") + " RETURNING queue, " +
                     notify_sql("queue"),
                 {kText, kText, kInt8}};
}

template <>
Route Batch::prepare(const UnclaimParams& c, Prep& x) {
  if (nul_lease(c)) return Route::local;
  x.p.text(c.id).text(c.owner).i8(c.fence);
  return x.send(kUnclaim);
}

template <>
void Batch::read(const UnclaimParams&, std::size_t i, PGresult* r) {
  s.count_changes(r);
  out[i].ok = PQntuples(r) > 0;
  if (out[i].ok) s.freed(text_at(r, 0, 0).value_or(""));
}

// --- retry: RetryParams ------------------------------------------------------

template <>
void Batch::add_statements<RetryParams>(std::vector<PgStatement>& d) {
  // Open again: its group, if it has one, takes turns again.
  d[kRetry] = {"WITH revived AS (UPDATE jobs SET " + rules::revive_set() + " WHERE id = $1 AND " +
                   rules::revivable("$2") + " AND " + rules::key_free() + " AND " +
                   rules::no_lost_parent() +
                   " RETURNING queue, grp), joined AS (INSERT INTO queue_groups(queue, grp) "
                   "SELECT queue, grp FROM revived WHERE grp IS NOT NULL ON CONFLICT (queue, grp) "
                   "DO UPDATE SET turn = queue_groups.turn RETURNING " +
                   notify_grouped_sql("queue_groups.queue") + ") SELECT queue, " + notify_sql("queue") +
                   ", grp FROM revived",
               {kText, kFloat8}};
}

template <>
Route Batch::prepare(const RetryParams& c, Prep& x) {
  if (has_nul(c.id)) return Route::local;
  x.p.text(c.id).f8(c.now);
  return x.send(kRetry);
}

template <>
void Batch::read(const RetryParams&, std::size_t i, PGresult* r) {
  s.count_changes(r);
  out[i].ok = PQntuples(r) == 1;
  if (!out[i].ok) return;
  s.freed(text_at(r, 0, 0).value_or(""));
  s.tally_.at(bytes_at(r, 0, 0)).retried++;
  if (!PQgetisnull(r, 0, 2)) s.grouped_.emplace(bytes_at(r, 0, 0));
}

// --- cancel: CancelParams ----------------------------------------------------

template <>
void Batch::add_statements<CancelParams>(std::vector<PgStatement>& d) {
  d[kCancel] = {"UPDATE jobs SET " +
                    rules::end_lease_set(kPostgres, rules::LeaseEnd::cancelled, {.now = "$2"}) +
                    " WHERE id = $1 AND " + rules::cancellable() + " RETURNING queue",
                {kText, kFloat8}};
}

template <>
Route Batch::prepare(const CancelParams& c, Prep& x) {
  if (has_nul(c.id)) return Route::local;
  x.p.text(c.id).f8(c.now);
  return x.send(kCancel);
}

template <>
void Batch::read(const CancelParams&, std::size_t i, PGresult* r) {
  s.count_changes(r);
  out[i].ok = PQntuples(r) == 1;
}

// --- purge: PurgeParams ------------------------------------------------------

// What a purge's DELETE (del) returns, and what it writes beside it: each
// id's fence (C1.2) and how it ended (version 16), and a failed parent's
// edges for the steps (settle_pending, pg_after.cpp), from its first child.
const std::string kPurgedReturning =
    std::string("id, fence, ") + rules::kEndedAs + " AS ended, " + rules::kHasChildren + " AS kids";
const std::string kPurgedKeep =
    "keep AS (INSERT INTO purged_fences(id, fence, ended) SELECT id, fence, ended FROM del "
    "ON CONFLICT (id) DO UPDATE SET fence = GREATEST(purged_fences.fence, excluded.fence), "
    "ended = excluded.ended), pend AS (INSERT INTO settle_pending(parent, how, settled_to) "
    "SELECT id, ended, '' FROM del WHERE ended >= 2 AND kids <> 0 ON CONFLICT (parent) DO "
    "UPDATE SET how = excluded.how, settled_to = '')";

template <>
void Batch::add_statements<PurgeParams>(std::vector<PgStatement>& d) {
  // One statement: the rows deleted are exactly the rows whose fences are
  // kept, whatever other sidecars commit meanwhile (C1.2), with how each
  // ended (version 16); a failed parent's edges go to the steps, which
  // settle the children it still holds back (C3.13, "Purged parents").
  d[kPurge] = {"WITH del AS (DELETE FROM jobs WHERE " + rules::finished() +
                   " AND finished <= $1 AND ($2::text IS NULL OR queue = $2) RETURNING " +
                   kPurgedReturning + "), " + kPurgedKeep + " SELECT count(*) FROM del",
               {kFloat8, kText}};
  // A page (purge's filter, retention; C3.16, C3.17): at most $7 jobs of the
  // finished states $3 (kFinished* bits), ids from $4 below $5 (a prefix),
  // of group $6; and whether one more passed the filter. With $8 > 0
  // (PurgeParams::max_bytes, retention), only the jobs, by id, before which
  // fewer than $8 bytes of payloads, results, errors and progress were
  // taken: the first always. octet_length reads a TOASTed value's size, not the value.
  d[kPurgePage] = {"WITH pick AS (SELECT id, COALESCE(octet_length(payload), 0) + "
                       "COALESCE(octet_length(result), 0) + COALESCE(octet_length(error), 0) + "
                       "COALESCE(octet_length(progress), 0) AS b FROM jobs WHERE " + rules::finished() +
                       " AND finished <= $1 AND ($2::text IS NULL OR queue = $2) AND ($3::bigint & "
                       "CASE WHEN done = 1 THEN 1 WHEN cancelled = 1 THEN 4 ELSE 2 END) <> 0 AND "
                       "id >= $4 AND ($5::text IS NULL OR id < $5) AND ($6::text IS NULL OR grp = "
                       "$6) LIMIT $7 + 1), run AS (SELECT id, row_number() OVER w AS k, sum(b) "
                       "OVER w - b AS before FROM pick WINDOW w AS (ORDER BY id ROWS UNBOUNDED "
                       "PRECEDING)), take AS (SELECT id FROM run WHERE k <= $7 AND ($8::bigint = 0 "
                       "OR before < $8)), del AS (DELETE FROM jobs WHERE id IN (SELECT id FROM "
                       "take) RETURNING " + kPurgedReturning + "), " + kPurgedKeep +
                       " SELECT (SELECT count(*) FROM del), (SELECT count(*) FROM pick) > "
                       "(SELECT count(*) FROM take)",
                   {kFloat8, kText, kInt8, kText, kText, kText, kInt8, kInt8}};
  // A window of kPurgePage's (PurgeParams::upto): ids from $4
  // below $5, both always given, so that every plan, the generic one too,
  // walks that range of the primary key alone (finished + 0: not through
  // jobs_finished, whose walk steps over every finished job to find none:
  // 334 ms for each window of 200,000 cancelled jobs).
  d[kPurgeWindow] = {"WITH pick AS (SELECT id FROM jobs WHERE " + rules::finished() +
                         " AND finished + 0 <= $1 AND ($2::text IS NULL OR queue = $2) AND "
                         "($3::bigint & CASE WHEN done = 1 THEN 1 WHEN cancelled = 1 THEN 4 ELSE "
                         "2 END) <> 0 AND id >= $4 AND id < $5 AND ($6::text IS NULL OR grp = $6) "
                         "LIMIT $7 + 1), del AS (DELETE FROM jobs WHERE id IN (SELECT id FROM "
                         "pick LIMIT $7) RETURNING " + kPurgedReturning + "), " + kPurgedKeep +
                         " SELECT (SELECT count(*) FROM del), (SELECT count(*) FROM pick) > $7",
                     {kFloat8, kText, kInt8, kText, kText, kText, kInt8}};
}

template <>
Route Batch::prepare(const PurgeParams& c, Prep& x) {
  if (c.queue && has_nul(*c.queue)) return Route::local;  // no such queue
  x.p.f8(c.now - c.older_than)
      .opt_text(c.queue ? std::optional<std::string_view>(*c.queue) : std::nullopt);
  if (c.limit == 0) return x.send(kPurge);
  if (has_nul(c.prefix) || (c.group && has_nul(*c.group))) return Route::local;  // none has it
  const auto& upper = x.keep.emplace_back(rules::id_prefix_end(c.prefix).value_or(""));
  if (c.upto) {
    // A window (after, upto] (purge's filter; never by bytes) as the range
    // [lo, hi) of kPurgeWindow: no id holds U+0000, so none lies between X
    // and X + U+0001, and with the ids' "C" collation `id >= after +
    // U+0001` is `id > after`, `id < upto + U+0001` is `id <= upto`.
    std::string lo(c.prefix), hi = std::string(*c.upto) + '\x01';
    if (!c.after.empty()) lo = std::max(lo, std::string(c.after) + '\x01');
    if (!upper.empty()) hi = std::min(hi, upper);
    x.p.i8(c.states).text(x.keep.emplace_back(std::move(lo)))
        .text(x.keep.emplace_back(std::move(hi))).opt_text(c.group).i8(c.limit);
    return x.send(kPurgeWindow);
  }
  x.p.i8(c.states).text(c.prefix);
  if (c.prefix.empty()) {
    x.p.null();
  } else {
    x.p.text(upper);
  }
  x.p.opt_text(c.group).i8(c.limit).i8(c.max_bytes);
  return x.send(kPurgePage);
}

template <>
void Batch::read(const PurgeParams& c, std::size_t i, PGresult* r) {
  const auto n = int_at(r, 0, 0);
  if (c.retention && c.queue && n > 0) s.tally_.at(*c.queue).removed += static_cast<std::uint64_t>(n);
  out[i].number = n;
  if (PQnfields(r) > 1) out[i].ok = int_at(r, 0, 1) != 0;  // a page: more are left
  s.changes_ += 2 * n;  // deleted, and their fences kept
}

// --- retention: RetentionParams (C3.17) --------------------------------------

template <>
void Batch::add_statements<RetentionParams>(std::vector<PgStatement>& d) {
  d[kSetRetention] = {"INSERT INTO queue_retention(queue, keep_done, keep_dead, keep_cancelled) "
                      "VALUES($1, $2, $3, $4) ON CONFLICT (queue) DO UPDATE SET keep_done = "
                      "excluded.keep_done, keep_dead = excluded.keep_dead, keep_cancelled = "
                      "excluded.keep_cancelled",
                      {kText, kFloat8, kFloat8, kFloat8}};
  d[kDeleteRetention] = {"DELETE FROM queue_retention WHERE queue = $1", {kText}};
}

template <>
Route Batch::prepare(const RetentionParams& c, Prep& x) {
  if (has_nul(c.queue)) return x.refuse("queue");
  x.p.text(c.queue);
  if (!c.retention.any()) return x.send(kDeleteRetention);
  x.p.opt_f8(c.retention.keep_done).opt_f8(c.retention.keep_dead)
      .opt_f8(c.retention.keep_cancelled);
  return x.send(kSetRetention);
}

template <>
void Batch::read(const RetentionParams&, std::size_t, PGresult*) {}

// --- reap: ReapParams --------------------------------------------------------

template <>
void Batch::add_statements<ReapParams>(std::vector<PgStatement>& d) {
  d[kReap] = {"UPDATE jobs SET " + rules::reap_set("$1") + " WHERE done = 0 AND dead = 0 AND " +
                  rules::exhausted("$1") + " RETURNING queue, " + rules::lease_expired(),
              {kFloat8}};
  // Retried ones are claimable at once or after the backoff: the other
  // sidecars' parked claims hear of it.
  // With the other passed deadlines cleared (disjoint rows).
  d[kOverrun] = {"WITH cleared AS (UPDATE jobs SET deadline = 0 WHERE " +
                     rules::deadline_passed("$1") + ") UPDATE jobs SET " +
                     rules::end_lease_set(kPostgres, rules::LeaseEnd::overrun, {.now = "$1"}) +
                     ", deadline = 0 WHERE " + rules::overrun("$1") + " RETURNING queue, dead, " +
                     notify_sql("queue"),
                 {kFloat8}};
  d[kTimeouts] = {timeouts_sql(), {kFloat8}};  // pg_suspends.cpp
}

template <>
Route Batch::prepare(const ReapParams& c, Prep& x) {
  x.p.f8(c.now);
  if (c.waits_only) return x.send(kTimeouts);  // pg_suspends.cpp
  // First the attempts past their max_runtime (C3.15): an
  // overrun last attempt is dead of that, not of its lease.
  x.p2.f8(c.now);
  x.plan.pre = kOverrun;
  x.plan.stmt2 = kTimeouts;  // then the waits and deadlines that ended (C3.23, C3.24)
  return x.send(kReap);
}

template <>
void Batch::read(const ReapParams& c, std::size_t i, PGresult* r) {
  if (c.waits_only) return read_timeouts(r);
  PGresult* over = res[plan[i].step - 1].get();
  s.count_changes(over);
  for (int k = 0; k < PQntuples(over); ++k) {
    auto& t = s.tally_.at(bytes_at(over, k, 0));
    t.failed++;
    (int_at(over, k, 1) != 0 ? t.dead : t.retried)++;
  }
  s.count_changes(r);
  for (int k = 0; k < PQntuples(r); ++k) {
    auto& t = s.tally_.at(bytes_at(r, k, 0));
    t.dead++;
    if (int_at(r, k, 1) != 0) t.expired++;  // not released on its last attempt
  }
  read_timeouts(res[plan[i].step + 1].get());
}

// --- the clock's high-water mark: ClockMarkParams ----------------------------

template <>
void Batch::add_statements<ClockMarkParams>(std::vector<PgStatement>& d) {
  // Never lowers a mark: another sidecar may have stored a higher one.
  d[kSetMeta] = {"INSERT INTO fenceq_meta(key, value) VALUES($1, $2) ON CONFLICT (key) "
                 "DO UPDATE SET value = GREATEST(fenceq_meta.value, excluded.value)",
                 {kText, kFloat8}};
}

template <>
Route Batch::prepare(const ClockMarkParams& c, Prep& x) {
  x.p.text("clock_high_water").f8(c.mark);
  return x.send(kSetMeta);
}

template <>
void Batch::read(const ClockMarkParams&, std::size_t, PGresult* r) {
  s.count_changes(r);
}

// --- queue settings: QueueConfigParams ---------------------------------------

template <>
void Batch::add_statements<QueueConfigParams>(std::vector<PgStatement>& d) {
  // Settings changed: other sidecars' claims parked on the queue look again.
  d[kSetConfig] = {"INSERT INTO queue_config(queue, paused, max_leased, rate, per, "
                   "group_max_leased, group_rate, group_per) "
                   "VALUES($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (queue) DO UPDATE SET paused = "
                   "excluded.paused, max_leased = excluded.max_leased, rate = excluded.rate, "
                   "per = excluded.per, group_max_leased = excluded.group_max_leased, group_rate "
                   "= excluded.group_rate, group_per = excluded.group_per RETURNING " +
                       notify_sql("queue"),
                   {kText, kInt8, kInt8, kInt8, kFloat8, kInt8, kInt8, kFloat8}};
  d[kDeleteConfig] = {"DELETE FROM queue_config WHERE queue = $1 RETURNING " +
                          notify_sql("queue"),
                      {kText}};
}

// Settings changed or removed: the statement notifies the other sidecars.
template <>
Route Batch::prepare(const QueueConfigParams& c, Prep& x) {
  if (has_nul(c.queue)) return x.refuse("queue");
  x.p.text(c.queue);
  if (c.config == QueueConfig{}) return x.send(kDeleteConfig);
  x.p.i8(c.config.paused ? 1 : 0).i8(c.config.max_leased).i8(c.config.rate).f8(c.config.per)
      .i8(c.config.group_max_leased).i8(c.config.group_rate).f8(c.config.group_per);
  return x.send(kSetConfig);
}

template <>
void Batch::read(const QueueConfigParams& c, std::size_t, PGresult*) {
  // From this transaction's next claim on: the full statement. (Rolled
  // back, the guess is merely pessimistic until the settings are read
  // again.) Removed settings: the cache learns it at the queue's next claim.
  if (!(c.config == QueueConfig{})) s.configured_.emplace(c.queue);
}

// --- schedule_set: ScheduleSetParams (apart from the pipeline: run()) --------

template <>
void Batch::add_statements<ScheduleSetParams>(std::vector<PgStatement>& d) {
  d[kScheduleCount] = {"SELECT count(*), bool_or(name = $1) FROM schedules", {kText}};
  d[kScheduleSet] = {"INSERT INTO schedules(name, cron, tz, queue, payload, payload_binary, "
                     "priority, max_attempts, created) VALUES($1, $2, $3, $4, $5, $6, $7, $8, $9) "
                     "ON CONFLICT (name) DO UPDATE SET cron = excluded.cron, tz = excluded.tz, "
                     "queue = excluded.queue, payload = excluded.payload, payload_binary = "
                     "excluded.payload_binary, priority = excluded.priority, max_attempts = "
                     "excluded.max_attempts",
                     {kText, kText, kText, kText, kBytea, kBool, kInt8, kInt8, kFloat8}};
}

// Never reached: run() sets a batch with a schedule_set apart.
template <>
Route Batch::prepare(const ScheduleSetParams&, Prep&) {
  return Route::local;
}

template <>
void Batch::read(const ScheduleSetParams&, std::size_t, PGresult*) {}  // never sent here

void PgStore::set_schedule(const ScheduleSetParams& p, CallResult& r) {
  const Schedule& sc = *p.schedule;
  for (auto [field, v] : {std::pair<const char*, std::string_view>{"name", sc.name},
                          {"cron", sc.cron}, {"tz", sc.tz}, {"queue", sc.queue}}) {
    if (has_nul(v)) {
      r.refused = true;
      r.why = std::string("PostgreSQL text cannot hold U+0000: field '") + field +
              "' contains a NUL character; nothing was applied";
      return;
    }
  }
  {
    PgParams n;
    n.text(sc.name);
    auto res = conn_.run(kScheduleCount, n, "schedule_set");
    const bool exists = !PQgetisnull(res.get(), 0, 1) && int_at(res.get(), 0, 1) != 0;
    if (!exists && static_cast<std::size_t>(int_at(res.get(), 0, 0)) >= protocol::kMaxSchedules) {
      return;
    }
  }
  PgParams w;
  w.text(sc.name).text(sc.cron).text(sc.tz).text(sc.queue);
  if (sc.payload) {
    w.bytea(sc.payload->bytes).boolean(sc.payload->binary);
  } else {
    w.null().boolean(true);
  }
  w.i8(sc.priority).i8(sc.max_attempts).f8(p.now);
  conn_.run(kScheduleSet, w, "schedule_set");
  r.ok = true;
}

// --- schedule_delete: ScheduleDeleteParams -----------------------------------

template <>
void Batch::add_statements<ScheduleDeleteParams>(std::vector<PgStatement>& d) {
  d[kScheduleDelete] = {"DELETE FROM schedules WHERE name = $1", {kText}};
}

template <>
Route Batch::prepare(const ScheduleDeleteParams& c, Prep& x) {
  if (has_nul(c.name)) return Route::local;
  x.p.text(c.name);
  return x.send(kScheduleDelete);
}

template <>
void Batch::read(const ScheduleDeleteParams&, std::size_t i, PGresult* r) {
  out[i].ok = command_rows(r) > 0;
}

// --- take_tick: TakeTickParams -----------------------------------------------

template <>
void Batch::add_statements<TakeTickParams>(std::vector<PgStatement>& d) {
  // One sidecar takes a tick: the others' UPDATE waits for its row, then
  // finds `last` moved (READ COMMITTED re-checks the condition).
  d[kTakeTick] = {"UPDATE schedules SET last = $2 WHERE name = $1 AND created < $2 AND "
                  "(last IS NULL OR last < $2)",
                  {kText, kFloat8}};
}

template <>
Route Batch::prepare(const TakeTickParams& c, Prep& x) {
  if (has_nul(c.name)) return Route::local;
  x.p.text(c.name).f8(c.tick);
  return x.send(kTakeTick);
}

template <>
void Batch::read(const TakeTickParams&, std::size_t i, PGresult* r) {
  s.count_changes(r);
  out[i].ok = command_rows(r) == 1;
}

// --- every op ----------------------------------------------------------------

Route Batch::prepare_call(std::size_t i, Prep& x) const {
  return std::visit([&](const auto& p) { return prepare(p, x); }, calls[i].params);
}

void Batch::read_call(std::size_t i, PGresult* r) {
  std::visit([&](const auto& p) { read(p, i, r); }, calls[i].params);
}

void pg::add_write_statements(std::vector<PgStatement>& d) {
  static_assert(kWriteEnd <= 128, "stmt_name (pg_connection.cpp) names 128 statements");
  d.resize(kWriteEnd);
  // Each alternative of Call::Params, in turn.
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    (Batch::add_statements<std::variant_alternative_t<I, Call::Params>>(d), ...);
  }(std::make_index_sequence<std::variant_size_v<Call::Params>>());
}

}  // namespace fenceq::daemon
