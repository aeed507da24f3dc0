// The rows both stores read, decoded once: the column lists their SELECTs
// and RETURNINGs name, and one reader per row over a column source, either
// a SQLite statement's current row (SqliteRow, sqlite_store.cpp) or one row
// of a PostgreSQL result (pg::PgRow, pg_statements.hpp). A source offers:
//   bool null(int c); std::optional<std::string> text(int c) (NULL: nullopt);
//   std::int64_t integer(int c); double real(int c);
//   std::optional<Payload> payload(int c): the last column(s) of a row that
//   has one (SQLite: one BLOB or TEXT column; PostgreSQL: bytea, then
//   whether it was sent as bin).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "fenceq_protocol/limits.hpp"
#include "storage/job_rules.hpp"
#include "storage/store.hpp"

namespace fenceq::daemon::rows {

// state(): a job's row (JobState).
inline constexpr const char* kJobState = "id, owner, until, fence, result, done, progress";
template <class Row>
JobState job_state(const Row& r) {
  JobState row;
  row.id = r.text(0).value_or("");
  row.owner = r.text(1);
  row.until = r.real(2);
  row.fence = r.integer(3);
  row.result = r.text(4);
  row.done = r.integer(5) != 0;
  row.progress = r.text(6);
  return row;
}

// A list page's rows (JobInfo), with `status` (rules::status, or a column
// that holds it) as st.
inline std::string job_info_columns(const std::string& status) {
  return "id, queue, " + status +
         " AS st, priority, attempts, max_attempts, fence, owner, until, not_before, error, "
         "progress, created, ukey, grp";
}
template <class Row>
JobInfo job_info(const Row& r) {
  JobInfo j;
  j.id = r.text(0).value_or("");
  j.queue = r.text(1).value_or("");
  j.status = rules::parse_status(r.text(2).value_or("")).value_or(JobStatus::ready);
  j.priority = r.integer(3);
  j.attempts = r.integer(4);
  j.max_attempts = r.integer(5);
  j.fence = r.integer(6);
  j.owner = r.text(7);
  j.until = r.real(8);
  // A blocked job's not_before is no time (rules::kBlockedUntil): none shown.
  j.not_before = r.real(9) >= rules::kBlockedUntil ? 0.0 : r.real(9);
  j.error = r.text(10);
  j.progress = r.text(11);
  j.created = r.real(12);
  j.key = r.text(13);
  j.group = r.text(14);
  return j;
}

// A job's parents (`after`, C3.13) as one text, each id as its length in
// bytes, ':' and the id, in id order; NULL for a job that waits for none
// (no kKidsChild bit), so that the claims of every other job look up none.
// `id` names the job's id column.
inline std::string parents_sql(bool postgres, const std::string& id) {
  const std::string kids = postgres ? "jobs.kids" : "kids";
  if (postgres) {
    return "CASE WHEN " + kids + " & 2 <> 0 THEN (SELECT string_agg(octet_length(parent) || ':' || "
           "parent, '' ORDER BY parent) FROM job_after WHERE child = " + id + ") END";
  }
  return "CASE WHEN " + kids + " & 2 <> 0 THEN (SELECT group_concat(length(CAST(parent AS BLOB)) "
         "|| ':' || parent, '') FROM (SELECT parent FROM job_after WHERE child = " + id +
         " ORDER BY parent)) END";
}
// parents_sql's text back as ids.
inline std::vector<std::string> parent_ids(const std::optional<std::string>& text) {
  std::vector<std::string> ids;
  if (!text) return ids;
  std::size_t at = 0;
  while (at < text->size()) {
    const auto colon = text->find(':', at);
    if (colon == std::string::npos) break;
    const auto n = std::stoul(text->substr(at, colon - at));
    ids.push_back(text->substr(colon + 1, n));
    at = colon + 1 + n;
  }
  return ids;
}

// A job's headers (C3.18) as one text, each key and value as its
// length in bytes, ':' and the bytes (as parents_sql's ids), in key order.
inline std::string headers_text(const Headers& h) {
  std::string out;
  for (const auto& [k, v] : h) {
    out += std::to_string(k.size()) + ":" + k + std::to_string(v.size()) + ":" + v;
  }
  return out;
}
inline Headers headers_of(const std::optional<std::string>& text) {
  Headers out;
  const auto parts = parent_ids(text);
  for (std::size_t i = 0; i + 1 < parts.size(); i += 2) out.emplace(parts[i], parts[i + 1]);
  return out;
}
// A row of job_steps' value (SQLite) as steps_sql's text spells it: its kind
// letter (n: nil, b: bin, s: str) and the value in hex.
inline constexpr const char* kStepValueSqlite =
    "CASE WHEN value IS NULL THEN 'n' WHEN is_bin <> 0 THEN 'b' ELSE 's' END || "
    "COALESCE(hex(value), '')";
// The column of a claimed job's headers: on PostgreSQL jobs.headers; on
// SQLite its row of job_headers, looked up only with the kKidsHeaders bit.
inline std::string headers_sql(bool postgres, const std::string& id) {
  if (postgres) return "jobs.headers";
  return "CASE WHEN kids & 8 <> 0 THEN (SELECT headers FROM job_headers WHERE id = " + id +
         ") END";
}

// A job's steps (C3.22) as one text: each step as the length of its name in
// bytes, ':', the name, a letter (n: nil, b: bin, s: str) and its value in
// hex, then ';'. Its rows of job_steps are looked up only with the kKidsSteps
// bit; on SQLite (schema 24) a job's first steps are kept in its row,
// jobs.steps, values as they are (StepText), and the two are joined (the
// row's hold no step of job_steps' but its signal, C3.23). `id` is the
// job's id.
inline std::string steps_sql(bool postgres, const std::string& id) {
  static_assert(rules::kKidsSteps == 128, "steps_sql spells it");
  if (postgres) {
    return "CASE WHEN jobs.kids & 128 <> 0 THEN (SELECT string_agg(octet_length(s.step)::text || "
           "':' || s.step || CASE WHEN s.value IS NULL THEN 'n' WHEN s.is_bin THEN 'b' ELSE 's' END "
           "|| COALESCE(encode(s.value, 'hex'), '') || ';', '') FROM job_steps s WHERE s.id = " +
           id + ") END";
  }
  return std::string("CASE WHEN jobs.kids & 128 <> 0 THEN COALESCE(jobs.steps, '') || "
                     "COALESCE((SELECT group_concat(length(CAST(step AS BLOB)) || ':' || step || ") +
         kStepValueSqlite + " || ';', '') FROM job_steps WHERE id = " + id +
         "), '') ELSE jobs.steps END";
}
// One step of steps_sql's text: its name, kind letter (n: nil, b: bin, s:
// str) and value, in hex (a row of job_steps, read by SQL) or as it is (a
// step kept in SQLite's jobs.steps: its kind letter in upper case, then the
// value's length in bytes and ':' before it; nil as in hex).
struct StepText {
  std::string_view name;
  char kind;  // n, b or s
  std::string_view value;
  bool hex;
  std::size_t bytes() const { return hex ? value.size() / 2 : value.size(); }
};
// Calls `f` with each step of steps_sql's text, in its order.
template <class F>
void each_step(std::string_view text, F&& f) {
  const auto number = [&](std::size_t from, std::size_t to) {
    std::size_t n = 0;
    for (std::size_t i = from; i < to; ++i) n = n * 10 + static_cast<std::size_t>(text[i] - '0');
    return n;
  };
  std::size_t at = 0;
  while (at < text.size()) {
    const auto colon = text.find(':', at);
    if (colon == std::string_view::npos) return;
    const std::size_t n = number(at, colon);
    if (n >= text.size() - colon - 1) return;
    const auto name = text.substr(colon + 1, n);
    at = colon + 1 + n;
    const char kind = text[at++];
    if (kind == 'S' || kind == 'B') {  // as it is
      const auto vcolon = text.find(':', at);
      if (vcolon == std::string_view::npos) return;
      const std::size_t len = number(at, vcolon);
      if (len >= text.size() - vcolon - 1) return;  // and its ';'
      f(StepText{name, static_cast<char>(kind | 0x20), text.substr(vcolon + 1, len), false});
      at = vcolon + 1 + len + 1;
      continue;
    }
    const auto end = text.find(';', at);
    if (end == std::string_view::npos) return;
    f(StepText{name, kind, text.substr(at, end - at), true});
    at = end + 1;
  }
}
// What the bounds of a job's steps (rules::steps_fit) read of a text of
// them: how many, their values' bytes, and whether `step` is among them.
struct StepsTally {
  std::size_t n = 0;
  std::size_t held = 0;
  bool saved = false;
};
inline StepsTally tally_steps(std::string_view text, std::string_view step) {
  StepsTally t;
  each_step(text, [&](const StepText& s) {
    ++t.n;
    t.held += s.bytes();
    t.saved = t.saved || s.name == step;
  });
  return t;
}
// A step as SQLite's jobs.steps keeps it (its value as it is).
inline void append_step_text(std::string& out, std::string_view name,
                             const std::optional<Payload>& value) {
  out += std::to_string(name.size());
  out += ':';
  out += name;
  if (!value) {
    out += "n;";
    return;
  }
  out += value->binary ? 'B' : 'S';
  out += std::to_string(value->bytes.size());
  out += ':';
  out += value->bytes;
  out += ';';
}
// A step's value back from its text.
inline std::optional<Payload> step_value(const StepText& t) {
  if (t.kind == 'n') return std::nullopt;
  Payload p;
  p.binary = t.kind == 'b';
  if (!t.hex) {
    p.bytes = std::string(t.value);
    return p;
  }
  auto nibble = [](char c) { return c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10; };
  p.bytes.reserve(t.value.size() / 2);
  for (std::size_t i = 0; i + 1 < t.value.size(); i += 2) {
    p.bytes.push_back(static_cast<char>(nibble(t.value[i]) * 16 + nibble(t.value[i + 1])));
  }
  return p;
}
// steps_sql's text back as steps; the step named rules::kSignalStep is the
// signal that woke the job (C3.23), taken out into `signal` (and
// `signalled` set) when they are given.
inline Steps steps_of(const std::optional<std::string>& text, bool* signalled = nullptr,
                      std::optional<Payload>* signal = nullptr) {
  Steps out;
  if (!text) return out;
  each_step(*text, [&](const StepText& t) {
    if (t.name == rules::kSignalStep && signalled != nullptr) {
      *signalled = true;
      *signal = step_value(t);
    } else {
      out.emplace(std::string(t.name), step_value(t));
    }
  });
  return out;
}

// A job's payload: on SQLite from job_payloads when it is long (kKidsPayload).
inline std::string payload_sql(bool postgres, const std::string& id) {
  if (postgres) return "payload";
  return "CASE WHEN kids & 16 <> 0 THEN (SELECT payload FROM job_payloads WHERE id = " + id +
         ") ELSE payload END";
}
// A job's result, likewise (kKidsResult), and whether it has one: neither
// reads a long result's pages.
inline std::string result_sql(const std::string& id) {
  return "CASE WHEN kids & 32 <> 0 THEN (SELECT result FROM job_results WHERE id = " + id +
         ") ELSE result END";
}
inline constexpr const char* kHasResultSqlite = "(result IS NOT NULL OR kids & 32 <> 0)";

// Store::links: (0, a parent) rows, then (1, a blocked child) rows, each in
// id order, then (2, its headers) when it has some, then (3, its steps,
// steps_sql's text) when it has some; `id` is the job's id parameter.
inline std::string links_sql(bool postgres, const std::string& id) {
  const std::string headers =
      postgres ? " UNION ALL SELECT 2, headers FROM jobs WHERE id = " + id + " AND headers IS NOT NULL"
               : " UNION ALL SELECT 2, headers FROM job_headers WHERE id = " + id;
  return "SELECT 0, parent FROM (SELECT parent FROM job_after WHERE child = " + id +
         " ORDER BY parent) p UNION ALL SELECT 1, child FROM (SELECT a.child FROM job_after a, "
         "jobs j WHERE a.parent = " + id + " AND j.id = a.child AND j.done = 0 AND j.dead = 0 AND "
         "j.not_before >= " + rules::kBlockedUntilSql + " AND j.not_before < " +
         rules::kSuspendedUntilSql + " ORDER BY a.child LIMIT " +
         std::to_string(protocol::kMaxBlockedChildren) + ") c" + headers +
         " UNION ALL SELECT 3, " + steps_sql(postgres, "jobs.id") + " FROM jobs WHERE id = " +
         id + (postgres ? " AND jobs.kids & 128 <> 0" : "") + " UNION ALL SELECT 4, CASE WHEN s.fail" +
         (postgres ? "" : " <> 0") + " THEN 'f' ELSE 'r' END || " +
         // Every digit of the double: PostgreSQL's text of a float8 is
         // exact, SQLite's CAST keeps 15 (printf's '!' all 17).
         (postgres ? "CAST(s.timeout AS TEXT)" : "printf('%!.17g', s.timeout)") + " FROM "
         "job_suspends s, jobs j WHERE s.id = " + id + " AND j.id = s.id AND j.done = 0 AND j.dead = 0 "
         "AND j.not_before >= " + rules::kSuspendedUntilSql;
}
template <class Row>
void add_link(Store::Links& links, const Row& r) {
  if (r.integer(0) == 2) {
    links.headers = headers_of(r.text(1));
    return;
  }
  if (r.integer(0) == 3) {
    links.steps = steps_of(r.text(1), &links.signalled, &links.signal);
    return;
  }
  if (r.integer(0) == 4) {  // C3.23: f or r (on_timeout), then the timeout
    const auto t = r.text(1).value_or("r0");
    links.suspend_fails = t[0] == 'f';
    links.suspend_timeout = std::strtod(t.c_str() + 1, nullptr);
    return;
  }
  (r.integer(0) == 0 ? links.after : links.blocked_children).push_back(r.text(1).value_or(""));
}

// A job claim_next took (its RETURNING: kClaimedHead, its parents, its
// headers, its steps, the payload last), with the (priority, seq) it is
// sorted by (rules::most_urgent_first).
inline constexpr const char* kClaimedHead = "id, fence, attempts, priority, seq";
inline std::string claimed_sqlite() {
  return std::string(kClaimedHead) + ", " + parents_sql(false, "jobs.id") + ", " +
         headers_sql(false, "jobs.id") + ", " + steps_sql(false, "jobs.id") + ", " +
         payload_sql(false, "jobs.id");
}
template <class Row>
ClaimedJob claimed_job(const Row& r, std::vector<std::pair<std::int64_t, std::int64_t>>& order) {
  ClaimedJob job;
  job.id = r.text(0).value_or("");
  job.fence = r.integer(1);
  job.attempts = r.integer(2);
  order.emplace_back(r.integer(3), r.integer(4));
  job.after = parent_ids(r.text(5));
  job.headers = headers_of(r.text(6));
  job.steps = steps_of(r.text(7), &job.signalled, &job.signal);
  job.payload = r.payload(8);
  return job;
}

// queue_stats: (queue, st, count, oldest ready_since, distinct groups) by
// queue, then st.
// Adds the row to the last queue of `out`, or a new one.
template <class Row>
void add_stats_row(std::vector<QueueStats>& out, const Row& r, double now) {
  auto queue = r.text(0).value_or("");
  if (out.empty() || out.back().queue != queue) out.push_back({queue});
  auto& q = out.back();
  const auto n = r.integer(2);
  switch (rules::parse_status(r.text(1).value_or("")).value_or(JobStatus::ready)) {
    case JobStatus::ready:
      q.ready = n;
      q.oldest_ready_age = std::max(0.0, now - r.real(3));
      q.groups_waiting = r.integer(4);
      break;
    case JobStatus::delayed: q.delayed = n; break;
    case JobStatus::leased: q.leased = n; break;
    case JobStatus::done: q.done = n; break;
    case JobStatus::dead: q.dead = n; break;
    case JobStatus::cancelled: q.cancelled = n; break;
    case JobStatus::blocked: q.blocked = n; break;
    case JobStatus::suspended: q.suspended = n; break;
  }
}

// A queue's settings, by queue name.
inline constexpr const char* kQueueConfig =
    "queue, paused, max_leased, rate, per, group_max_leased, group_rate, group_per, "
    "group_overrides";
template <class Row>
std::pair<std::string, QueueConfig> queue_config(const Row& r) {
  QueueConfig c;
  c.paused = r.integer(1) != 0;
  c.max_leased = r.integer(2);
  c.rate = r.integer(3);
  c.per = r.real(4);
  c.group_max_leased = r.integer(5);
  c.group_rate = r.integer(6);
  c.group_per = r.real(7);
  c.group_overrides = r.integer(8);
  return {r.text(0).value_or(""), c};
}

// The groups' own settings (C3.25) that stats lists: the first
// kMaxStatsOverrides of each queue by group name, in (queue, group) order.
inline constexpr const char* kGroupConfigs =
    "SELECT queue, grp, max_leased, rate, per FROM (SELECT queue, grp, max_leased, rate, per, "
    "row_number() OVER (PARTITION BY queue ORDER BY grp) AS n FROM group_config) o "
    "WHERE n <= 100 ORDER BY queue, grp";
static_assert(protocol::kMaxStatsOverrides == 100, "kGroupConfigs spells it");
template <class Row>
std::tuple<std::string, std::string, GroupOverride> group_config(const Row& r) {
  GroupOverride o;
  if (!r.null(2)) o.max_leased = r.integer(2);
  if (!r.null(3)) o.rate = r.integer(3);
  if (!r.null(4)) o.per = r.real(4);
  return {r.text(0).value_or(""), r.text(1).value_or(""), o};
}

// A periodic job as stored (the payload last).
inline constexpr const char* kSchedule =
    "name, cron, tz, queue, priority, max_attempts, created, last, payload";
template <class Row>
Store::StoredSchedule schedule(const Row& r) {
  Store::StoredSchedule st;
  auto& sc = st.schedule;
  sc.name = r.text(0).value_or("");
  sc.cron = r.text(1).value_or("");
  sc.tz = r.text(2).value_or("UTC");
  sc.queue = r.text(3).value_or("");
  sc.priority = r.integer(4);
  sc.max_attempts = r.integer(5);
  st.created = r.real(6);
  if (!r.null(7)) sc.last = r.real(7);
  sc.payload = r.payload(8);
  return st;
}

}  // namespace fenceq::daemon::rows
