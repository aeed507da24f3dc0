// The PostgreSQL store's job events (C3.19; store.hpp's JobEvent): each
// sidecar publishes the changes of its own transactions. A row trigger on
// jobs, fenceq_note_event, notes each insert and update, old and new, in a
// temporary table of the session (fenceq_events) when the session has set
// fenceq.events = 'on': only the sessions of sidecars started with --events
// do, and for the others the trigger's WHEN is false. PgStore::commit reads
// and empties the table inside the transaction, before its COMMIT, and
// job_event() (JobEventCall::infer: a trigger does not know the call) says
// what each change is. A transaction rolled back takes its rows along.
//
// Any session may set fenceq.events, and pg_temp is the caller's own schema:
// so the trigger must never fire where the current role is not the session's
// (an application's role once called the SECURITY DEFINER
// fenceq_enqueue() with its own pg_temp.fenceq_events carrying a trigger of
// its own, which then ran with the sidecars' rights). Two guards:
// fenceq_enqueue() runs with fenceq.events forced off (pg_app.cpp), and the
// trigger's WHEN requires the session's login role to be a member of the
// current role, which a definer's function run by another role fails.
#include <cstdlib>
#include <string>

#include "storage/pg/pg_store.hpp"

namespace fenceq::daemon {
namespace {

// The trigger, made (or made again) by the first sidecar started with
// --events; one at a time (an advisory lock), in a transaction of its own.
constexpr const char* kTrigger = R"sql(
BEGIN;
SELECT pg_advisory_xact_lock(7305729513946520001);
CREATE OR REPLACE FUNCTION fenceq_note_event() RETURNS trigger LANGUAGE plpgsql AS $f$
BEGIN
  IF TG_OP = 'INSERT' THEN
    INSERT INTO pg_temp.fenceq_events(ins, id, queue, grp, owner, fence, done, dead, cancelled,
                                      attempts, not_before)
    VALUES (true, NEW.id, NEW.queue, NEW.grp, NEW.owner, NEW.fence, NEW.done, NEW.dead,
            NEW.cancelled, NEW.attempts, NEW.not_before);
  ELSE
    INSERT INTO pg_temp.fenceq_events(ins, id, queue, grp, owner, fence, done, dead, cancelled,
                                      attempts, not_before, o_owned, o_fence, o_done, o_dead,
                                      o_cancelled, o_attempts, o_not_before, error_changed)
    VALUES (false, NEW.id, NEW.queue, NEW.grp, NEW.owner, NEW.fence, NEW.done, NEW.dead,
            NEW.cancelled, NEW.attempts, NEW.not_before, OLD.owner IS NOT NULL, OLD.fence,
            OLD.done, OLD.dead, OLD.cancelled, OLD.attempts, OLD.not_before,
            OLD.error IS DISTINCT FROM NEW.error);
  END IF;
  RETURN NULL;
END $f$;
CREATE OR REPLACE TRIGGER fenceq_events AFTER INSERT OR UPDATE ON jobs FOR EACH ROW
  WHEN (pg_catalog.current_setting('fenceq.events', true) = 'on' AND
        pg_catalog.pg_has_role(session_user, current_user, 'MEMBER'))
  EXECUTE FUNCTION fenceq_note_event();
COMMIT;
)sql";

// Each session of this sidecar: the table, and the setting the trigger looks at.
constexpr const char* kSession = R"sql(
CREATE TEMP TABLE IF NOT EXISTS fenceq_events(
  n bigserial, ins boolean, id text, queue text, grp text, owner text, fence bigint,
  done integer, dead integer, cancelled integer, attempts bigint, not_before float8,
  o_owned boolean, o_fence bigint, o_done integer, o_dead integer, o_cancelled integer,
  o_attempts bigint, o_not_before float8, error_changed boolean);
SET fenceq.events = 'on';
)sql";

constexpr const char* kTake =
    "WITH d AS (DELETE FROM pg_temp.fenceq_events RETURNING *) SELECT ins, id, queue, grp, "
    "owner, fence, done, dead, cancelled, attempts, not_before, o_owned, o_fence, o_done, o_dead, "
    "o_cancelled, o_attempts, o_not_before, error_changed FROM d ORDER BY n";

}  // namespace

void PgStore::note() {
  conn_.exec(kTrigger, "--events: the trigger");
  conn_.on_session([](PgConnection& c) { c.exec(kSession, "--events: the session"); });
  events_on_ = true;
}

void PgStore::read_events() {
  auto res = conn_.exec(kTake, "--events: read the events");
  const PGresult* r = res.get();
  auto text = [&](int row, int col) {
    return std::string(PQgetvalue(r, row, col), static_cast<std::size_t>(PQgetlength(r, row, col)));
  };
  auto integer = [&](int row, int col) { return std::strtoll(PQgetvalue(r, row, col), nullptr, 10); };
  auto truth = [&](int row, int col) { return PQgetvalue(r, row, col)[0] == 't'; };
  for (int i = 0, n = PQntuples(r); i < n; ++i) {
    JobEventRow after;
    after.fence = integer(i, 5);
    after.done = integer(i, 6) != 0;
    after.dead = integer(i, 7) != 0;
    after.cancelled = integer(i, 8) != 0;
    after.attempts = integer(i, 9);
    after.not_before = std::strtod(PQgetvalue(r, i, 10), nullptr);
    after.owned = !PQgetisnull(r, i, 4);
    std::optional<JobEventKind> kind;
    if (truth(i, 0)) {
      kind = job_event(nullptr, after, JobEventCall::infer);
    } else {
      JobEventRow before;
      before.owned = truth(i, 11);
      before.fence = integer(i, 12);
      before.done = integer(i, 13) != 0;
      before.dead = integer(i, 14) != 0;
      before.cancelled = integer(i, 15) != 0;
      before.attempts = integer(i, 16);
      before.not_before = std::strtod(PQgetvalue(r, i, 17), nullptr);
      after.error_changed = truth(i, 18);
      kind = job_event(&before, after, JobEventCall::infer);
    }
    if (!kind) continue;
    JobEvent e;
    e.kind = *kind;
    e.id = text(i, 1);
    e.queue = text(i, 2);
    if (!PQgetisnull(r, i, 3)) e.group = text(i, 3);
    if (*kind == JobEventKind::claimed) e.owner = text(i, 4);
    e.fence = after.fence;
    events_.push_back(std::move(e));
  }
}

}  // namespace fenceq::daemon
