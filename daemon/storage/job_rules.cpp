#include "storage/job_rules.hpp"

#include <algorithm>
#include <utility>

namespace fenceq::daemon::rules {

const Dialect kSqlite{"MAX", "MIN", "(1 << ", ")"};
const Dialect kPostgres{"GREATEST", "LEAST", "(1::bigint << (", ")::integer)::float8"};

namespace {

std::string cat(std::initializer_list<std::string_view> parts) {
  std::string out;
  for (auto p : parts) out += p;
  return out;
}

std::string call(const char* f, std::string_view a, std::string_view b) {
  return cat({f, "(", a, ", ", b, ")"});
}

}  // namespace

std::string attempts_left() { return "(max_attempts = 0 OR attempts < max_attempts)"; }

std::string exhausted(std::string_view now) {
  return cat({"(max_attempts > 0 AND attempts >= max_attempts AND until <= ", now, ")"});
}

std::string claimable(std::string_view now) {
  return cat({"done = 0 AND dead = 0 AND until <= ", now, " AND not_before <= ", now, " AND ",
              attempts_left(), " AND fence < 9223372036854775807 AND ", before_deadline(now)});
}

std::string claim_set(std::string_view owner, std::string_view until, bool held) {
  return cat({"owner = ", owner, ", until = ", until,
              ", fence = fence + 1, attempts = attempts + 1, progress = NULL",
              held ? ", held = 1" : ""});
}

std::string runtime_claim_set(std::string_view owner, std::string_view until,
                              std::string_view now, bool held) {
  const std::string cap = cat({"(", now, " + max_runtime)"});
  return claim_set(owner,
                   cat({"CASE WHEN max_runtime > 0 THEN LEAST(", until, ", ", cap, ") ELSE ",
                        until, " END"}),
                   held) +
         cat({", deadline = CASE WHEN max_runtime > 0 THEN ", cap, " ELSE 0 END"});
}

std::string renewed_until(std::string_view until) {
  return cat({"CASE WHEN deadline > 0 THEN LEAST(", until, ", deadline) ELSE ", until, " END"});
}

std::string overrun(std::string_view now) {
  return cat({"deadline > 0 AND deadline <= ", now,
              " AND until >= deadline AND done = 0 AND dead = 0"});
}

std::string deadline_passed(std::string_view now) {
  return cat({"deadline > 0 AND deadline <= ", now,
              " AND (until < deadline OR done = 1 OR dead = 1)"});
}

std::string current_lease(std::string_view id, std::string_view owner, std::string_view fence,
                          std::string_view now, std::string_view p) {
  return cat({p, "id = ", id, " AND ", p, "owner = ", owner, " AND ", p, "fence = ", fence, " AND ",
              p, "done = 0 AND ", p, "dead = 0 AND ", p, "until > ", now});
}

std::string own_lease(std::string_view id, std::string_view owner, std::string_view fence) {
  return cat({"id = ", id, " AND owner = ", owner, " AND fence = ", fence,
              " AND done = 0 AND dead = 0"});
}

std::string lease_expired() { return "until > 0"; }

std::string urgency() { return "priority DESC, seq"; }

std::vector<ClaimedJob> most_urgent_first(
    std::vector<ClaimedJob> jobs, const std::vector<std::pair<std::int64_t, std::int64_t>>& order) {
  if (jobs.size() < 2) return jobs;
  std::vector<std::size_t> idx(jobs.size());
  for (std::size_t i = 0; i < idx.size(); ++i) idx[i] = i;
  std::sort(idx.begin(), idx.end(), [&](std::size_t a, std::size_t b) {
    if (order[a].first != order[b].first) return order[a].first > order[b].first;
    return order[a].second < order[b].second;
  });
  std::vector<ClaimedJob> out;
  out.reserve(jobs.size());
  for (auto i : idx) out.push_back(std::move(jobs[i]));
  return out;
}

std::string complete_set(std::string_view result, std::string_view now) {
  return cat({"result = ", result, ", done = 1, finished = ", now});
}

std::string revivable(std::string_view now) {
  return cat({"done = 0 AND (dead = 1 OR ", exhausted(now), ")"});
}

std::string key_free() {
  return "(ukey IS NULL OR NOT EXISTS (SELECT 1 FROM jobs o WHERE o.queue = jobs.queue AND "
         "o.ukey = jobs.ukey AND o.done = 0 AND o.dead = 0 AND o.id <> jobs.id))";
}

std::string no_lost_parent() {
  return "((kids & 2) = 0 OR NOT EXISTS (SELECT 1 FROM job_after a, purged_fences f, job_waits w "
         "WHERE a.child = jobs.id AND f.id = a.parent AND f.ended >= 2 AND w.child = a.child AND "
         "w.after_run = 0))";
}

std::string cancellable() { return "done = 0 AND cancelled = 0"; }

std::string revive_set() {
  return "dead = 0, cancelled = 0, attempts = 0, not_before = 0, finished = 0, owner = NULL, until = 0";
}

std::string reap_set(std::string_view now) {
  return cat({"dead = 1, finished = ", now,
              ", error = COALESCE(error, 'the last allowed attempt ended without a complete')"});
}

std::string finished() { return "(done = 1 OR dead = 1)"; }

std::string list_where(ListOrder order, bool bounded) {
  const std::string below = bounded ? " AND id < :hi" : "";
  switch (order) {
    case ListOrder::id:
      // One lower end, so that the index walk starts there (of two, SQLite
      // takes either): :from = max(:after, :lo), and :after itself left out.
      return "id >= :from AND id <> :after" + below;
    case ListOrder::created:
      return "(created, id) > (:after_created, :after) AND id >= :lo" + below;
    case ListOrder::created_desc:
      return "(created, id) < (:after_created, :after) AND id >= :lo" + below;
  }
  return "0";
}

std::string list_order(ListOrder order) {
  switch (order) {
    case ListOrder::id: return "id";
    case ListOrder::created: return "created, id";
    case ListOrder::created_desc: return "created DESC, id DESC";
  }
  return "id";
}

std::optional<std::string> id_prefix_end(std::string_view prefix) {
  std::string s(prefix);
  while (!s.empty()) {
    // The start of the last code point (a byte that is not 10xxxxxx).
    std::size_t start = s.size() - 1;
    while (start > 0 && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
    // Decode it (ids are valid UTF-8: the decoder checked them).
    const auto* b = reinterpret_cast<const unsigned char*>(s.data() + start);
    const std::size_t n = s.size() - start;
    char32_t cp = n == 1 ? b[0] : n == 2 ? b[0] & 0x1F : n == 3 ? b[0] & 0x0F : b[0] & 0x07;
    for (std::size_t i = 1; i < n; ++i) cp = (cp << 6) | (b[i] & 0x3F);
    s.resize(start);
    if (cp >= 0x10FFFF) continue;  // nothing above it: step up the one before
    cp = cp + 1 == 0xD800 ? 0xE000 : cp + 1;
    if (cp < 0x80) {
      s += static_cast<char>(cp);
    } else if (cp < 0x800) {
      s += static_cast<char>(0xC0 | (cp >> 6));
      s += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      s += static_cast<char>(0xE0 | (cp >> 12));
      s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      s += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      s += static_cast<char>(0xF0 | (cp >> 18));
      s += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      s += static_cast<char>(0x80 | (cp & 0x3F));
    }
    return s;
  }
  return std::nullopt;
}

namespace {
constexpr std::pair<JobStatus, std::string_view> kStatusText[] = {
    {JobStatus::ready, "ready"},   {JobStatus::delayed, "delayed"}, {JobStatus::leased, "leased"},
    {JobStatus::done, "done"},     {JobStatus::dead, "dead"},
    {JobStatus::cancelled, "cancelled"}, {JobStatus::blocked, "blocked"},
    {JobStatus::suspended, "suspended"}};
}  // namespace

std::string_view status_text(JobStatus s) {
  for (const auto& [status, text] : kStatusText) {
    if (status == s) return text;
  }
  return "ready";
}

std::optional<JobStatus> parse_status(std::string_view text) {
  for (const auto& [status, t] : kStatusText) {
    if (t == text) return status;
  }
  return std::nullopt;
}

std::string ready_since(const Dialect& d) { return call(d.greatest, "created", "not_before"); }

std::string status(std::string_view now) {
  return cat({"CASE WHEN done = 1 THEN 'done' WHEN cancelled = 1 THEN 'cancelled' WHEN dead = 1 OR ", exhausted(now),
              " OR (", deadline_missed(now), ") THEN 'dead' WHEN not_before >= ", kSuspendedUntilSql,
              " THEN 'suspended' WHEN not_before >= ", kBlockedUntilSql, " THEN 'blocked' WHEN until > ", now,
              " THEN 'leased' WHEN not_before > ", now,
              " THEN 'delayed' ELSE 'ready' END"});
}

std::string failed_set(const Dialect& d, std::string_view error, std::string_view now,
                       std::string_view retry_in) {
  const std::string used_up = "max_attempts > 0 AND attempts >= max_attempts";
  const std::string exponent = call(d.least, call(d.greatest, "attempts - 1", "0"), "12");
  return cat({"error = ", error, ", dead = CASE WHEN ", used_up,
              " THEN 1 ELSE 0 END, finished = ", "CASE WHEN ", used_up, " THEN ", now,
              " ELSE finished END, not_before = ", now, " + COALESCE(", retry_in, ", ",
              call(d.least, "3600.0", cat({d.pow2_before, exponent, d.pow2_after})), ")"});
}

std::string claimable_from(const Dialect& d) { return call(d.greatest, "until", "not_before"); }

std::string becomes_claimable(const Dialect& d, std::string_view queue, std::string_view now) {
  return cat({"queue = ", queue, " AND done = 0 AND dead = 0 AND not_before < ", kBlockedUntilSql,
              " AND ", attempts_left(), " AND ", claimable_from(d), " > ", now});
}

std::string next_claimable_sql(const Dialect& d, std::string_view queue, std::string_view now) {
  auto part = [&](const char* which) {
    return cat({"(SELECT MIN(", claimable_from(d), ") FROM jobs WHERE ",
                becomes_claimable(d, queue, now), " AND ", which, ")"});
  };
  // SQLite's MIN(a, b) and PostgreSQL's LEAST differ on NULL: both
  // arguments are made non-NULL first (1e308 stands for none).
  // On PostgreSQL through jobs_next, which a statement walks only when it
  // says kJobsNextPg (always true: SQLite's statement says it too).
  const std::string no_group = cat({kNoGroup, " AND ", kJobsNextPg});
  const std::string a = cat({"COALESCE(", part(no_group.c_str()), ", 1e308)"});
  const std::string b = cat({"COALESCE(", part(kInGroup), ", 1e308)"});
  return cat({"SELECT NULLIF(", call(d.least, a, b), ", 1e308)"});
}

std::string group_leased(std::string_view queue, std::string_view grp, std::string_view now) {
  return cat({"queue = ", queue, " AND grp = ", grp,
              " AND held = 1 AND done = 0 AND dead = 0 AND until > ", now});
}

std::string group_settings(std::string_view queue, std::string_view grp) {
  return cat({"SELECT COALESCE(o.max_leased, k.group_max_leased) AS ml, COALESCE(o.rate, "
              "k.group_rate) AS rt, COALESCE(o.per, k.group_per) AS pr FROM queue_config k LEFT "
              "JOIN group_config o ON k.group_overrides > 0 AND o.queue = k.queue AND o.grp = ",
              grp, " WHERE k.queue = ", queue});
}

std::string group_allowed(std::string_view queue, std::string_view grp, std::string_view now) {
  // The group's own settings (C3.25) over its queue's: g.
  return cat({"COALESCE((SELECT CASE WHEN g.ml > 0 AND (SELECT count(*) FROM jobs "
              "WHERE ", group_leased(queue, grp, now),
              ") >= g.ml THEN 0 WHEN g.rt > 0 AND (SELECT count(*) FROM "
              "group_claims c WHERE c.queue = ", queue, " AND c.grp = ", grp, " AND c.at > ", now,
              " - g.pr) >= g.rt THEN 0 ELSE 1 END FROM (", group_settings(queue, grp), ") g), 1)"});
}

std::string leased_in(std::string_view queue, std::string_view now) {
  return cat({"queue = ", queue, " AND held = 1 AND done = 0 AND dead = 0 AND until > ", now});
}

std::string allowance(const Dialect& d, std::string_view queue, std::string_view now,
                      std::string_view max) {
  const std::string m(max);
  const std::string by_leases =
      cat({"CASE WHEN k.max_leased > 0 THEN ",
           call(d.greatest, "0", cat({"k.max_leased - (SELECT count(*) FROM jobs WHERE ",
                                      leased_in(queue, now), ")"})),
           " ELSE ", m, " END"});
  const std::string by_rate =
      cat({"CASE WHEN k.rate > 0 THEN ",
           call(d.greatest, "0", cat({"k.rate - (SELECT count(*) FROM queue_claims r WHERE r.queue = ",
                                      queue, " AND r.at > ", now, " - k.per)"})),
           " ELSE ", m, " END"});
  return cat({"COALESCE((SELECT CASE WHEN k.paused <> 0 THEN 0 ELSE ",
              call(d.least, m, call(d.least, by_leases, by_rate)),
              " END FROM queue_config k WHERE k.queue = ", queue, "), ", m, ")"});
}

}  // namespace fenceq::daemon::rules
