// The SQLite store's reads of jobs (list, payload, links, results, stats):
// their statements and their reads, beside the writes of sqlite_store.cpp.
#include <unordered_set>

#include "fenceq_protocol/limits.hpp"
#include "storage/sqlite/sqlite_rows.hpp"
#include "storage/sqlite/sqlite_store.hpp"
#include "storage/store_rows.hpp"

namespace fenceq::daemon {

using sqlite::column_payload;
using sqlite::column_text;
using sqlite::SqliteRow;
using sqlite::Use;

namespace {
// list: a page of rows (rules::list_where; EXPLAIN QUERY PLAN is checked by
// a test).
std::string list_sql(ListOrder order, bool bounded) {
  return "SELECT " + rows::job_info_columns(rules::status(":now")) +
         " FROM jobs WHERE " + rules::list_where(order, bounded) +
         " AND (:queue IS NULL OR queue = :queue) AND (:st IS NULL OR st = :st) "
         "AND (:id IS NULL OR id = :id) AND (:key IS NULL OR ukey = :key) "
         "AND (:grp IS NULL OR grp = :grp) ORDER BY " + rules::list_order(order) + " LIMIT :limit";
}
// A page by id of one queue's dead (:cancelled 0) or cancelled (1) jobs,
// through jobs_dead (ListFilter::reaped).
std::string dead_list_sql(bool bounded) {
  return "SELECT " + rows::job_info_columns(rules::status(":now")) +
         " FROM jobs WHERE dead = 1 AND queue = :queue AND cancelled = :cancelled AND " +
         rules::list_where(ListOrder::id, bounded) +
         " AND done = 0 AND (:grp IS NULL OR grp = :grp) ORDER BY id LIMIT :limit";
}
}  // namespace

void SqliteStore::prepare_job_reads() {
  for (auto order : {ListOrder::id, ListOrder::created, ListOrder::created_desc}) {
    for (bool bounded : {false, true}) {
      list_[static_cast<int>(order)][bounded].reset(prepare(list_sql(order, bounded)));
    }
  }
  for (bool bounded : {false, true}) dead_list_[bounded].reset(prepare(dead_list_sql(bounded)));
  payload_.reset(prepare("SELECT " + rows::payload_sql(false, "jobs.id") + " FROM jobs WHERE id = ?1"));
  links_.reset(prepare(rows::links_sql(false, "?1")));
  // The result only while the reply's budget lasts (:take); whether there is
  // one without reading it (IS NOT NULL reads no overflow page).
  results_.reset(prepare("SELECT " + rules::status(":now") + ", CASE WHEN :take THEN " +
                         rows::result_sql("jobs.id") + " END, " + rows::kHasResultSqlite +
                         " FROM jobs WHERE id = :id"));
  stats_.reset(prepare("SELECT queue, st, COUNT(*), MIN(ready_since), COUNT(DISTINCT grp) FROM "
                       "(SELECT queue, " + rules::status(":now") + " AS st, " +
                       rules::ready_since(rules::kSqlite) +
                       " AS ready_since, grp FROM jobs) GROUP BY queue, st ORDER BY queue"));
}

std::string SqliteStore::plan_of(const std::string& sql) {
  Statement s(prepare("EXPLAIN QUERY PLAN " + sql));
  std::string plan;
  while (sqlite3_step(s.get()) == SQLITE_ROW) {
    plan += reinterpret_cast<const char*>(sqlite3_column_text(s.get(), 3));
    plan += "\n";
  }
  return plan;
}

std::string SqliteStore::list_plan(ListOrder order, bool bounded) {
  return plan_of(list_sql(order, bounded));
}

std::string SqliteStore::dead_list_plan(bool bounded) { return plan_of(dead_list_sql(bounded)); }

std::vector<JobInfo> SqliteStore::list(const ListFilter& f, double now) {
  const auto b = list_bounds(f);
  const bool dead = dead_page(f);
  auto* s = dead ? dead_list_[b.upper.has_value()].get()
                 : list_[static_cast<int>(f.order)][b.upper.has_value()].get();
  Use u(s);
  u.text(u.at(":after"), f.after).real(u.at(":now"), now).integer(u.at(":limit"), f.limit);
  if (b.upper) u.text(u.at(":hi"), *b.upper);
  if (f.group) u.text(u.at(":grp"), *f.group);
  if (dead) {
    u.text(u.at(":from"), b.lower).text(u.at(":queue"), *f.queue)
        .integer(u.at(":cancelled"), *f.status == JobStatus::cancelled ? 1 : 0);
    return read_rows(s, "list");
  }
  if (f.order == ListOrder::id) {
    u.text(u.at(":from"), b.lower);
  } else {
    u.text(u.at(":lo"), b.lower).real(u.at(":after_created"), b.after_created);
  }
  if (f.queue) u.text(u.at(":queue"), *f.queue);
  if (f.status) u.text(u.at(":st"), rules::status_text(*f.status));
  if (f.id) u.text(u.at(":id"), *f.id);
  if (f.key) u.text(u.at(":key"), *f.key);
  return read_rows(s, "list");
}

std::vector<JobInfo> SqliteStore::read_rows(sqlite3_stmt* s, const char* what) {
  std::vector<JobInfo> out;
  int rc;
  while ((rc = sqlite3_step(s)) == SQLITE_ROW) out.push_back(rows::job_info(SqliteRow{s}));
  if (rc != SQLITE_DONE) fail_with(what, rc);
  return out;
}

std::optional<Payload> SqliteStore::payload(std::string_view id) {
  auto* s = payload_.get();
  Use u(s);
  u.text(1, id);
  if (!step_row(s, "payload")) return std::nullopt;
  auto out = column_payload(s, 0);
  end_row(s, "payload");
  return out;
}

Store::Links SqliteStore::links(std::string_view id) {
  auto* s = links_.get();
  Use u(s);
  u.text(1, id);
  Links out;
  int rc;
  while ((rc = sqlite3_step(s)) == SQLITE_ROW) rows::add_link(out, SqliteRow{s});
  if (rc != SQLITE_DONE) fail_with("job", rc);
  return out;
}

JobResults SqliteStore::results(const std::vector<std::string>& ids, double now) {
  JobResults out;
  std::unordered_set<std::string_view> seen;
  auto* s = results_.get();
  std::size_t taken = 0;  // bytes of the results read so far (kMaxResultsBytes)
  for (const auto& id : ids) {
    if (!seen.insert(id).second) continue;
    Use u(s);
    const bool take = taken < protocol::kMaxResultsBytes;
    u.text(u.at(":id"), id).real(u.at(":now"), now).integer(u.at(":take"), take ? 1 : 0);
    std::optional<JobOutcome> o;
    if (step_row(s, "results")) {
      o = JobOutcome{rules::parse_status(column_view(s, 0)).value_or(JobStatus::ready),
                     column_text(s, 1)};
      if (o->result) taken += o->result->size();
      o->omitted = !take && sqlite3_column_int(s, 2) != 0;
      end_row(s, "results");
    }
    out.emplace_back(id, std::move(o));
  }
  return out;
}

std::vector<QueueStats> SqliteStore::queue_stats(double now) {
  auto* s = stats_.get();
  Use u(s);
  u.real(u.at(":now"), now);
  std::vector<QueueStats> out;
  int rc;
  while ((rc = sqlite3_step(s)) == SQLITE_ROW) rows::add_stats_row(out, SqliteRow{s}, now);
  if (rc != SQLITE_DONE) fail_with("stats", rc);
  add_configs(out, queue_configs());
  add_group_configs(out, group_configs());
  add_retentions(out, retentions());
  return out;
}

std::vector<std::tuple<std::string, std::string, GroupOverride>> SqliteStore::group_configs() {
  Statement s(prepare(rows::kGroupConfigs));
  std::vector<std::tuple<std::string, std::string, GroupOverride>> out;
  int rc;
  while ((rc = sqlite3_step(s.get())) == SQLITE_ROW) out.push_back(rows::group_config(SqliteRow{s.get()}));
  if (rc != SQLITE_DONE) fail_with("group_config", rc);
  return out;
}

}  // namespace fenceq::daemon
