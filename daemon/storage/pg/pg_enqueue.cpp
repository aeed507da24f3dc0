// The PostgreSQL store's enqueue (EnqueueParams): its statements, what it
// sends and how its result is read, as pg_writes.cpp has each other write
// op's: plain, keyed (C3.10) and with `after` (C3.13, pg_after.cpp).
#include <limits>
#include <string>

#include "storage/job_rules.hpp"
#include "storage/pg/pg_batch.hpp"
#include "storage/pg/pg_statements.hpp"
#include "storage/store_rows.hpp"

namespace fenceq::daemon {

using namespace pg;  // NOLINT: the statements' numbers
using Batch = PgStore::Batch;

namespace {

// A CTE (after a first one) that has the group `grp` of `queue` take turns
// (queue_groups), when `grp` is not NULL. DO UPDATE, not DO NOTHING: it
// locks the group's row until this transaction ends, so a claim that finds
// the group with no open job (fenceq_claim_fair) cannot drop the row while
// this transaction adds a job to it; a row dropped just before is inserted
// again. A new row takes `wake` (pg_groups.cpp: 0 walks at once; the time
// the job is claimable, when it is known, keeps a new group of a delayed job
// out of the walk until then); a row there keeps its own.
std::string join_group_sql(const std::string& queue, const std::string& grp,
                           const std::string& wake = "0") {
  return ", joined AS (INSERT INTO queue_groups(queue, grp, wake) SELECT " + queue + ", " + grp +
         ", " + wake + " WHERE " + grp + "::text IS NOT NULL ON CONFLICT (queue, grp) DO UPDATE SET turn = "
         "queue_groups.turn RETURNING " + notify_grouped_sql("queue_groups.queue") + ") ";
}

// kids of a job enqueued ($6 its not_before, $8 now): parked when delayed.
const std::string kParkedIfDelayed =
    "CASE WHEN $6 > $8 THEN " + std::to_string(rules::kKidsParked) + " ELSE 0 END";

}  // namespace

// --- enqueue: EnqueueParams --------------------------------------------------

template <>
void Batch::add_statements<EnqueueParams>(std::vector<PgStatement>& d) {
  // C3.1: ON CONFLICT DO NOTHING, so a repeated enqueue never touches a
  // lease. An id purged before continues from its kept fence (C1.2);
  // kUnpurge then takes the kept fence out (see prepare()).
  // A job with a delay is parked (schema 20): claim_next's walk of
  // jobs_next leaves it out, and jobs_wake finds it once its delay is over.
  d[kEnqueue] = {"INSERT INTO jobs(id, queue, payload, payload_binary, priority, not_before, "
                 "max_attempts, created, fence, grp, max_runtime, headers, kids, expires) VALUES($1, "
                 "$2, $3, $4, $5, $6, $7, $8, COALESCE((SELECT fence FROM purged_fences WHERE id = "
                 "$1), 0), $9, $10, $11, " + kParkedIfDelayed +
                     ", $12) ON CONFLICT (id) DO NOTHING RETURNING fence, " + notify_sql("queue"),
                 {kText, kText, kBytea, kBool, kInt8, kFloat8, kInt8, kFloat8, kText, kFloat8, kText,
                  kFloat8}};
  // With the job's group ($3, $2 its queue) joining the turns (kJoinGroup).
  d[kUnpurge] = {"WITH p AS (DELETE FROM purged_fences WHERE id = $1 RETURNING fence)" +
                     join_group_sql("$2", "$3", group_wake_sql("$1")) +
                     "UPDATE jobs SET fence = p.fence FROM p WHERE jobs.id = $1 AND jobs.fence < p.fence",
                 {kText, kText, kText}};
  // C3.10, a keyed enqueue: nothing when the id is taken (C3.1, in this
  // statement's snapshot, so no purge can race the kept fence) or a job
  // holds the key (the unfinished one, else the newest enqueued after $10);
  // with $11 (replace) such a job, unfinished and not leased, takes this
  // one's fields, re-checked on the row as it is when the UPDATE gets it.
  // The INSERT's DO NOTHING covers a job of the key that another sidecar
  // inserted after this snapshot (jobs_ukey_open makes it wait for that
  // commit): then kKeyHolder, a statement of its own, finds it. Answers
  // (created, the id found, id taken, replaced, the NOTIFY).
  d[kEnqueueKeyed] = {
      "WITH taken AS (SELECT 1 FROM jobs WHERE id = $1), "
      "found AS (SELECT id, (" + std::string(rules::kKeyOpen) + ") AS open, until > $8 AS leased "
      "FROM jobs WHERE queue = $2 AND ukey = $9 AND ((" + rules::kKeyOpen + ") OR created > $10) "
      "AND NOT EXISTS (SELECT 1 FROM taken) ORDER BY 2 DESC, created DESC LIMIT 1), "
      "replaced AS (UPDATE jobs SET payload = $3, payload_binary = $4, priority = $5, "
      "not_before = $6, max_attempts = $7 FROM found f WHERE $11 AND jobs.id = f.id AND f.open "
      "AND NOT f.leased AND jobs.done = 0 AND jobs.dead = 0 AND jobs.until <= $8 "
      "RETURNING jobs.id), "
      "inserted AS (INSERT INTO jobs(id, queue, payload, payload_binary, priority, not_before, "
      "max_attempts, created, fence, ukey, grp, max_runtime, headers, kids, expires) SELECT $1, $2, "
      "$3, $4, $5, $6, $7, $8, COALESCE((SELECT fence FROM purged_fences WHERE id = $1), 0), $9, "
      "$12, $13, $14, " + kParkedIfDelayed + ", $15 "
      "WHERE NOT EXISTS (SELECT 1 FROM taken) AND NOT EXISTS (SELECT 1 FROM found) "
      "ON CONFLICT DO NOTHING RETURNING fence), "
      "unpurged AS (DELETE FROM purged_fences WHERE id = $1 AND EXISTS (SELECT 1 FROM inserted)) "
      "SELECT EXISTS (SELECT 1 FROM inserted)::int, (SELECT id FROM found), "
      "EXISTS (SELECT 1 FROM taken)::int, EXISTS (SELECT 1 FROM replaced)::int, "
      "CASE WHEN EXISTS (SELECT 1 FROM inserted) OR EXISTS (SELECT 1 FROM replaced) THEN " +
          notify_sql("$2") + " END",
      {kText, kText, kBytea, kBool, kInt8, kFloat8, kInt8, kFloat8, kText, kFloat8, kBool, kText,
       kFloat8, kText, kFloat8}};
  d[kKeyHolder] = {"WITH k AS (SELECT 1)" + join_group_sql("$1", "$3") +
                       "SELECT id FROM jobs WHERE queue = $1 AND ukey = $2 ORDER BY (" +
                       std::string(rules::kKeyOpen) + ") DESC, created DESC LIMIT 1",
                   {kText, kText, kText}};
  // With `after` (C3.13): kEnqueue's INSERT and the job's edges, in
  // fenceq_enqueue_after (pg_after.cpp); no row when the id was taken.
  d[kEnqueueAfter] = {"SELECT fence FROM fenceq_enqueue_after($1, $2, $3, $4, $5, $6, $7, $8, $9, "
                      "$10, $11, $12, $13, $14, $15)",
                      {kText, kText, kBytea, kBool, kInt8, kFloat8, kInt8, kFloat8, kText,
                       kTextArray, kBool, kFloat8, kFloat8, kText, kFloat8}};
}

template <>
Route Batch::prepare(const EnqueueParams& c, Prep& x) {
  const NewJob& j = c.job;
  const bool after = j.parents && !j.parents->empty();
  if (after && j.key) {
    return x.refuse_because("field 'after': a job with a key cannot wait for others on "
                            "PostgreSQL yet; nothing was applied");
  }
  if (has_nul(j.id)) return x.refuse("id");
  if (has_nul(j.queue)) return x.refuse("queue");
  x.p.text(j.id).text(j.queue);
  if (j.payload) {
    // bytea, with whether it was sent as bin or str, so claim_next gives
    // back the same msgpack type (SQLite keeps BLOB or TEXT).
    x.p.bytea(j.payload->bytes).boolean(j.payload->binary);
  } else {
    x.p.null().boolean(true);
  }
  x.p.i8(j.priority).f8(j.delay > 0 ? c.now + j.delay : 0.0).i8(j.max_attempts).f8(c.now);
  if (j.group) {
    if (has_nul(*j.group)) return x.refuse("group");
    x.grouped.emplace(j.queue);  // its claims take turns from now on
  }
  const auto group = [&](PgParams& p) { p.opt_text(j.group); };
  // Its headers (C3.18) as one text (rows::headers_text), NULL for none.
  const bool headed = j.headers && !j.headers->empty();
  if (headed) {
    for (const auto& [k, v] : *j.headers) {
      if (has_nul(k) || has_nul(v)) return x.refuse("headers");
    }
  }
  // Its deadline (C3.24), NULL for none.
  const auto expires = [&](PgParams& p) {
    if (j.deadline > 0) {
      p.f8(j.deadline);
    } else {
      p.null();
    }
  };
  const auto headers = [&](PgParams& p) {
    if (headed) {
      p.text(x.keep.emplace_back(rows::headers_text(*j.headers)));
    } else {
      p.null();
    }
  };
  if (j.key) {
    if (has_nul(*j.key)) return x.refuse("key");
    x.p.text(*j.key)
        .f8(j.unique_for > 0 ? c.now - j.unique_for : std::numeric_limits<double>::infinity())
        .boolean(j.replace);
    group(x.p);
    x.p.f8(j.max_runtime);  // $13
    headers(x.p);           // $14
    expires(x.p);           // $15
    x.p2.text(j.queue).text(*j.key);
    group(x.p2);
    x.plan.stmt2 = kKeyHolder;
    return x.send(kEnqueueKeyed);
  }
  group(x.p);
  x.p2.text(j.id).text(j.queue);
  group(x.p2);
  if (after) {
    // Its parents were found to exist (Batch::check_parents).
    BinaryArray parents(kText);
    for (const auto& parent : *j.parents) {
      if (has_nul(parent)) return x.refuse("after");
      parents.add(parent);
    }
    x.p.text(x.keep.emplace_back(parents.bytes())).boolean(j.after_run).f8(j.delay)
        .f8(j.max_runtime);
    headers(x.p);
    expires(x.p);
    x.plan.stmt2 = kUnpurge;
    return x.send(kEnqueueAfter);
  }
  // The INSERT reads the kept fence of a purged id from its snapshot; a
  // purge by another sidecar that committed after that snapshot is
  // invisible to it. The second statement, with a snapshot of its own,
  // takes the kept fence out and raises the new row's fence to it, so a
  // fence never goes back (C1.2); harmless otherwise.
  x.p.f8(j.max_runtime);  // $10
  headers(x.p);           // $11
  expires(x.p);           // $12
  x.plan.stmt2 = kUnpurge;
  return x.send(kEnqueue);
}

template <>
void Batch::read(const EnqueueParams& c, std::size_t i, PGresult* r) {
  s.count_changes(r);
  if (c.job.key) {
    // (created, the id found, id taken, replaced): see kEnqueueKeyed.
    const auto flag = [&](int col) { return int_at(r, 0, col) != 0; };
    out[i].ok = flag(0);
    if (out[i].ok) {
      out[i].id = std::string(c.job.id);
    } else if (auto found = text_at(r, 0, 1)) {
      out[i].id = std::move(*found);
    } else if (flag(2)) {
      out[i].id = std::string(c.job.id);
    } else {
      // Another sidecar's job of the key, committed after this snapshot.
      const PGresult* holder = res[plan[i].step + 1].get();
      out[i].id = PQntuples(holder) == 1 ? text_at(holder, 0, 0).value_or("")
                                         : std::string(c.job.id);
    }
    if (out[i].ok || flag(3)) s.freed(c.job.queue);
    return;
  }
  s.count_changes(res[plan[i].step + 1].get());
  out[i].ok = PQntuples(r) == 1;
  if (out[i].ok) s.freed(c.job.queue);
}

}  // namespace fenceq::daemon
