// The PostgreSQL store's step_save (C3.22; StepSaveParams), as pg_writes.cpp
// has each other write op's: one statement that looks at the lease and the
// job's steps and saves the step when it may, and how its result is read.
// Its rows of job_steps go with their job (schema 21: ON DELETE CASCADE).
#include <string>

#include "storage/job_rules.hpp"
#include "storage/pg/pg_batch.hpp"
#include "storage/pg/pg_statements.hpp"

namespace fenceq::daemon {

using namespace pg;  // NOLINT: the statements' numbers
using Batch = PgStore::Batch;

// ($1 id, $2 owner, $3 fence, $4 now) the lease, $5 the step, $6 its value
// (NULL: nil), $7 whether it was bin, $8 and $9 the bounds of a job's steps.
// The job's row is locked first, so that two sidecars saving steps of one
// job count its steps one after the other. Answers (the lease is current,
// the step was saved before, the job's steps and their bytes, saved now).
template <>
void Batch::add_statements<StepSaveParams>(std::vector<PgStatement>& d) {
  d[kStepSave] = {
      "WITH j AS (SELECT id, queue, grp FROM jobs WHERE " +
          rules::current_lease("$1", "$2", "$3", "$4") +
          " FOR UPDATE), st AS (SELECT count(*) AS n, COALESCE(sum(octet_length(value)), 0) AS "
          "bytes, COALESCE(bool_or(step = $5), false) AS saved FROM job_steps WHERE id = $1 AND "
          "step <> ''), "
          "ins AS (INSERT INTO job_steps(id, step, value, is_bin) SELECT $1, $5, $6, $7 FROM j, st "
          "WHERE NOT st.saved AND st.n < $8 AND st.bytes + COALESCE(octet_length($6), 0) <= $9 "
          "ON CONFLICT DO NOTHING RETURNING 1), mark AS (UPDATE jobs SET kids = kids | " +
          std::to_string(rules::kKidsSteps) + " WHERE id = $1 AND kids & " +
          std::to_string(rules::kKidsSteps) + " = 0 AND EXISTS (SELECT 1 FROM ins) RETURNING 1) "
          "SELECT EXISTS (SELECT 1 FROM j), st.saved, st.n, st.bytes, EXISTS (SELECT 1 FROM ins), "
          "(SELECT queue FROM j), (SELECT grp FROM j) FROM st",
      {kText, kText, kInt8, kFloat8, kText, kBytea, kBool, kInt8, kInt8}};
}

template <>
Route Batch::prepare(const StepSaveParams& c, Prep& x) {
  // No lease has an id or owner with U+0000: refused as a stale lease.
  if (has_nul(c.id) || has_nul(c.owner)) return Route::local;
  if (has_nul(c.step)) return x.refuse("step");
  x.p.text(c.id).text(c.owner).i8(c.fence).f8(c.now).text(c.step);
  if (*c.value) {
    x.p.bytea((*c.value)->bytes).boolean((*c.value)->binary);
  } else {
    x.p.null().boolean(false);
  }
  x.p.i8(static_cast<std::int64_t>(protocol::kMaxSteps))
      .i8(static_cast<std::int64_t>(protocol::kMaxStepsBytes));
  return x.send(kStepSave);
}

template <>
void Batch::read(const StepSaveParams& c, std::size_t i, PGresult* r) {
  if (int_at(r, 0, 4) != 0) {
    out[i].ok = true;
    if (s.events_on_) {  // C3.19: the trigger on jobs sees no step saved
      JobEvent e{JobEventKind::step_saved, std::string(c.id), text_at(r, 0, 5).value_or(""),
                 c.fence, std::nullopt, std::nullopt};
      e.group = text_at(r, 0, 6);
      s.events_.push_back(std::move(e));
    }
    return;
  }
  if (int_at(r, 0, 0) == 0 || int_at(r, 0, 1) != 0) return;  // stale, or saved before
  const std::size_t bytes = *c.value ? (*c.value)->bytes.size() : 0;
  if (auto why = rules::steps_refused(c.id, static_cast<std::size_t>(int_at(r, 0, 2)),
                                      static_cast<std::size_t>(int_at(r, 0, 3)), bytes)) {
    out[i].refused = true;
    out[i].why = std::move(*why);
  }
}

}  // namespace fenceq::daemon
