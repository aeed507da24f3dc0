// Transactional enqueue on the PostgreSQL store (docs/contract.md
// C3.20): fenceq_enqueue(), an SQL function an application calls inside its
// own transaction on the database its sidecars share. The job exists if and
// only if that transaction commits; its NOTIFY, sent at the commit, wakes
// the parked claims of every sidecar.
//
// It is enqueue's plain path (pg_enqueue.cpp, kEnqueue then kUnpurge) as one
// function: idempotent by id (a taken id changes nothing and answers false),
// an id purged before continuing from its kept fence (C1.2), the protocol's
// limits (fenceq_protocol/limits.hpp, read here, not copied) refused with
// SQLSTATE 22023 before anything is written. The job's times are the
// database clock's, which is the sidecars' server clock on this store
// (PgConnection::clock_offset), never below its stored high-water mark (C2.3).
//
// SECURITY DEFINER, owned by the role the sidecars connect as, with its own
// search_path: an application's role needs EXECUTE on it and USAGE on the
// schema, no right on jobs. EXECUTE is revoked from PUBLIC at every start
// (grants to roles stay: CREATE OR REPLACE keeps them). Nothing the caller
// controls reaches it (kDefinerComment, docs/operating.md "What the
// application role can do"): the search_path is pinned with pg_temp last, and
// fenceq.events is forced off, so the events trigger (pg_events.cpp) cannot
// write into the caller's pg_temp on its behalf.
//
// Not here: a key, `after` and events. A job of the function is not published
// on --events (no sidecar committed it). A grouped one also notifies the
// `_g` channel (notify_grouped_sql), so a claim parked on any sidecar, even
// one that never saw the queue's groups, claims it as soon as it commits.
#include <string>

#include "fenceq/types.hpp"
#include "fenceq_protocol/limits.hpp"
#include "storage/pg/pg_connection.hpp"
#include "storage/pg/pg_statements.hpp"
#include "storage/store_error.hpp"

namespace fenceq::daemon::pg {
namespace {

namespace lim = fenceq::protocol;

// The checks of enqueue's fields that the codec makes (protocol/op_fields.cpp),
// from the same limits; each raises invalid_parameter_value (22023).
std::string checks() {
  const auto refuse = [](const std::string& cond, const std::string& message) {
    return "  IF " + cond + " THEN\n    RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'fenceq_enqueue: " +
           message + "';\n  END IF;\n";
  };
  const auto n = [](auto v) { return std::to_string(v); };
  std::string s;
  s += refuse("p_id IS NULL", "id must not be NULL");
  s += refuse("octet_length(p_id) > " + n(lim::kMaxKeyBytes),
              "id is longer than " + n(lim::kMaxKeyBytes) + " bytes");
  s += refuse("p_id ~ '.@[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}Z$'",
              "id: NAME@YYYY-MM-DDTHH:MMZ is a periodic job''s id, the schedules'' alone");
  s += refuse("p_queue IS NULL OR p_queue = ''", "queue must not be empty");
  s += refuse("octet_length(p_queue) > " + n(lim::kMaxQueueBytes),
              "queue is longer than " + n(lim::kMaxQueueBytes) + " bytes");
  s += refuse("p_payload IS NOT NULL AND p_payload_bytes IS NOT NULL",
              "give payload or payload_bytes, not both");
  s += refuse("COALESCE(octet_length(p_payload), octet_length(p_payload_bytes), 0) > " +
                  n(lim::kMaxPayloadBytes),
              "payload is longer than " + n(lim::kMaxPayloadBytes) + " bytes");
  s += refuse("p_priority IS NULL OR p_priority < -2147483648 OR p_priority > 2147483647",
              "priority must be an integer from -2^31 to 2^31-1");
  s += refuse("p_delay IS NULL OR NOT (p_delay >= 0 AND p_delay <= 1e9)",
              "delay must be from 0 to 1e9 seconds");
  s += refuse("p_max_attempts IS NULL OR p_max_attempts < 0 OR p_max_attempts > 1000000",
              "max_attempts must be from 0 (no limit) to 1000000");
  s += refuse("p_grp = '' OR octet_length(p_grp) > " + n(lim::kMaxGroupBytes),
              "grp must be 1 to " + n(lim::kMaxGroupBytes) + " bytes");
  s += refuse("p_max_runtime IS NOT NULL AND NOT (p_max_runtime > 0 AND p_max_runtime <= 1e9)",
              "max_runtime must be > 0 and at most 1e9 seconds");
  s += refuse("p_headers IS NOT NULL AND jsonb_typeof(p_headers) <> 'object'",
              "headers must be a JSON object of strings");
  s += refuse("EXISTS (SELECT 1 FROM jsonb_each(p_headers) h WHERE h.key = '' OR "
              "jsonb_typeof(h.value) <> 'string')",
              "headers must be a JSON object of strings with non-empty keys");
  s += refuse("(SELECT COALESCE(sum(octet_length(h.key) + octet_length(h.value)), 0) FROM "
              "jsonb_each_text(p_headers) h) > " + n(lim::kMaxHeadersBytes),
              "headers hold more than " + n(lim::kMaxHeadersBytes) + " bytes of keys and values");
  return s;
}

// `schema`: quoted; the function runs with it first on its search_path.
std::string enqueue_function(const std::string& schema) {
  return R"sql(
CREATE OR REPLACE FUNCTION fenceq_enqueue(p_id text, p_queue text DEFAULT 'default',
    p_payload text DEFAULT NULL, p_priority bigint DEFAULT 0, p_delay double precision DEFAULT 0,
    p_max_attempts bigint DEFAULT )sql" + std::to_string(kDefaultMaxAttempts) + R"sql(,
    p_grp text DEFAULT NULL, p_max_runtime double precision DEFAULT NULL,
    p_headers jsonb DEFAULT NULL, p_payload_bytes bytea DEFAULT NULL)
RETURNS boolean LANGUAGE plpgsql SECURITY DEFINER SET search_path = )sql" + schema + R"sql(, pg_temp
  SET fenceq.events = 'off'
AS $fn$
#variable_conflict use_column
DECLARE
  v_now double precision;
  v_headers text;
  v_kept bigint;
BEGIN
)sql" + checks() + R"sql(
  v_now := GREATEST(extract(epoch from clock_timestamp())::float8,
    COALESCE((SELECT m.value FROM fenceq_meta m WHERE m.key = 'clock_high_water'), 0));
  -- rows::headers_text: each key and value as BYTES:TEXT, in byte order of the keys.
  SELECT string_agg(octet_length(h.key) || ':' || h.key || octet_length(h.value) || ':' || h.value,
      '' ORDER BY h.key COLLATE "C")
    INTO v_headers FROM jsonb_each_text(p_headers) h;
  INSERT INTO jobs(id, queue, payload, payload_binary, priority, not_before, max_attempts, created,
      fence, grp, max_runtime, headers)
    VALUES (p_id, p_queue, COALESCE(convert_to(p_payload, 'UTF8'), p_payload_bytes),
      p_payload IS NULL, p_priority, CASE WHEN p_delay > 0 THEN v_now + p_delay ELSE 0 END,
      p_max_attempts, v_now, COALESCE((SELECT f.fence FROM purged_fences f WHERE f.id = p_id), 0),
      p_grp, COALESCE(p_max_runtime, 0), v_headers)
    ON CONFLICT (id) DO NOTHING;
  IF NOT FOUND THEN
    RETURN false;
  END IF;
  -- As kUnpurge: a purge another transaction committed after the INSERT's
  -- snapshot leaves its kept fence, which the job takes (a fence never goes back).
  DELETE FROM purged_fences f WHERE f.id = p_id RETURNING f.fence INTO v_kept;
  IF FOUND THEN
    UPDATE jobs SET fence = v_kept WHERE id = p_id AND fence < v_kept;
  END IF;
  IF p_grp IS NOT NULL THEN
    INSERT INTO queue_groups(queue, grp) VALUES (p_queue, p_grp)
      ON CONFLICT (queue, grp) DO UPDATE SET turn = queue_groups.turn;
    PERFORM )sql" + notify_grouped_sql("p_queue") + R"sql(;
  END IF;
  PERFORM )sql" + notify_sql("p_queue") + R"sql(;
  RETURN true;
END
$fn$;
)sql";
}

// What the caller cannot influence, kept on the function itself (COMMENT ON
// FUNCTION), where a reviewer of the database finds it (docs/operating.md,
// "What the application role can do").
constexpr const char* kDefinerComment =
    "SECURITY DEFINER: runs with the rights of fenceq''s sidecars. What the caller cannot "
    "influence: its search_path is pinned (fenceq''s schema, then pg_temp last), so no table, "
    "function or operator of the caller''s temporary schema is resolved; it names no relation in "
    "pg_temp; fenceq.events is forced off while it runs, so the events trigger, which writes into "
    "the session''s pg_temp.fenceq_events, never fires on its behalf (and that trigger also "
    "requires the session''s login role to be a member of the current role); its arguments are "
    "checked against the protocol''s limits (SQLSTATE 22023) before anything is written; the job''s "
    "times come from the database clock, not the caller. The caller can only add a job, as "
    "enqueue would.";

constexpr const char* kSignature =
    "fenceq_enqueue(text, text, text, bigint, double precision, bigint, text, double precision, "
    "jsonb, bytea)";

}  // namespace

void migrate_app(PgConnection& c) {
  auto schema = c.exec("SELECT quote_ident(current_schema())", "create the schema");
  if (PQgetisnull(schema.get(), 0, 0)) {
    throw StoreError("no schema to create fenceq's tables in (search_path names none that exists)");
  }
  c.exec(enqueue_function(PQgetvalue(schema.get(), 0, 0)).c_str(), "create the schema");
  c.exec(("REVOKE ALL ON FUNCTION " + std::string(kSignature) + " FROM PUBLIC").c_str(),
         "create the schema");
  c.exec(("COMMENT ON FUNCTION " + std::string(kSignature) + " IS '" + kDefinerComment + "'").c_str(),
         "create the schema");
}

}  // namespace fenceq::daemon::pg
