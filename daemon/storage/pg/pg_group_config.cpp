// The PostgreSQL store's group_config (C3.25; GroupConfigParams), as
// pg_writes.cpp has each other write op's: one call of fenceq_group_config,
// made with the other functions of groups at every start (migrate_groups).
// The sidecars' write lock (kWriteLock) orders it with every other write,
// so its count of the queue's groups with settings of their own
// (queue_config.group_overrides) is never raced.
#include <string>

#include "storage/pg/pg_batch.hpp"
#include "storage/pg/pg_statements.hpp"

namespace fenceq::daemon {

using namespace pg;  // NOLINT: the statements' numbers
using Batch = PgStore::Batch;

namespace pg {
// Merges the settings named (p_set_*) into the group's row, removes the row
// once it holds none, counts the queue's rows in queue_config (a queue whose
// settings then hold nothing back has none), and notifies the sidecars: their
// claims parked on the queue look again.
std::string group_config_function_sql() {
  return R"sql(
CREATE OR REPLACE FUNCTION fenceq_group_config(p_queue text, p_grp text, p_set_ml boolean,
    p_ml bigint, p_set_rt boolean, p_rt bigint, p_set_pr boolean, p_pr double precision)
RETURNS void LANGUAGE plpgsql AS $fn$
DECLARE
  v_had boolean;
  v_has boolean;
BEGIN
  v_had := EXISTS (SELECT 1 FROM group_config o WHERE o.queue = p_queue AND o.grp = p_grp);
  INSERT INTO group_config AS o (queue, grp, max_leased, rate, per) VALUES (p_queue, p_grp,
      CASE WHEN p_set_ml THEN p_ml END, CASE WHEN p_set_rt THEN p_rt END,
      CASE WHEN p_set_pr THEN p_pr END)
    ON CONFLICT (queue, grp) DO UPDATE SET
      max_leased = CASE WHEN p_set_ml THEN p_ml ELSE o.max_leased END,
      rate = CASE WHEN p_set_rt THEN p_rt ELSE o.rate END,
      per = CASE WHEN p_set_pr THEN p_pr ELSE o.per END;
  DELETE FROM group_config o WHERE o.queue = p_queue AND o.grp = p_grp
    AND o.max_leased IS NULL AND o.rate IS NULL AND o.per IS NULL;
  v_has := EXISTS (SELECT 1 FROM group_config o WHERE o.queue = p_queue AND o.grp = p_grp);
  IF v_has <> v_had THEN
    INSERT INTO queue_config AS k (queue, group_overrides)
      VALUES (p_queue, CASE WHEN v_has THEN 1 ELSE -1 END)
      ON CONFLICT (queue) DO UPDATE SET group_overrides = k.group_overrides + excluded.group_overrides;
    DELETE FROM queue_config k WHERE k.queue = p_queue AND k.paused = 0 AND k.max_leased = 0
      AND k.rate = 0 AND k.group_max_leased = 0 AND k.group_rate = 0 AND k.group_overrides = 0;
  END IF;
  PERFORM )sql" + notify_sql("p_queue") + R"sql(;
END
$fn$;
)sql";
}
}  // namespace pg

template <>
void Batch::add_statements<GroupConfigParams>(std::vector<PgStatement>& d) {
  d[kGroupConfig] = {"SELECT fenceq_group_config($1, $2, $3, $4, $5, $6, $7, $8)",
                     {kText, kText, kBool, kInt8, kBool, kInt8, kBool, kFloat8}};
}

template <>
Route Batch::prepare(const GroupConfigParams& c, Prep& x) {
  if (has_nul(c.queue)) return x.refuse("queue");
  if (has_nul(c.group)) return x.refuse("group");
  x.p.text(c.queue).text(c.group).boolean(c.set_max_leased);
  c.value.max_leased ? x.p.i8(*c.value.max_leased) : x.p.null();
  x.p.boolean(c.set_rate);
  c.value.rate ? x.p.i8(*c.value.rate) : x.p.null();
  x.p.boolean(c.set_per);
  c.value.per ? x.p.f8(*c.value.per) : x.p.null();
  return x.send(kGroupConfig);
}

template <>
void Batch::read(const GroupConfigParams& c, std::size_t, PGresult*) {
  // The queue may have settings now: its claims take the full statement
  // (as queue_config's read).
  s.configured_.emplace(c.queue);
}

}  // namespace fenceq::daemon
