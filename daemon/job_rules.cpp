#include "job_rules.hpp"

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
              attempts_left(), " AND fence < 9223372036854775807"});
}

std::string claim_set(std::string_view owner, std::string_view until, bool held) {
  return cat({"owner = ", owner, ", until = ", until,
              ", fence = fence + 1, attempts = attempts + 1, progress = NULL",
              held ? ", held = 1" : ""});
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

std::string release_set() { return "owner = NULL, until = 0"; }

std::string unclaim_set(const Dialect& d) {
  return release_set() + ", attempts = " + call(d.greatest, "attempts - 1", "0");
}

std::string revivable(std::string_view now) {
  return cat({"done = 0 AND (dead = 1 OR ", exhausted(now), ")"});
}

std::string cancellable() { return "done = 0 AND cancelled = 0"; }

std::string cancel_set(std::string_view now) {
  return cat({"dead = 1, cancelled = 1, finished = ", now,
              ", owner = NULL, until = 0, fence = CASE WHEN fence < 9223372036854775807 THEN "
              "fence + 1 ELSE fence END"});
}

std::string revive_set() {
  return "dead = 0, cancelled = 0, attempts = 0, not_before = 0, finished = 0, owner = NULL, until = 0";
}

std::string reap_set(std::string_view now) {
  return cat({"dead = 1, finished = ", now,
              ", error = COALESCE(error, 'the last allowed attempt ended without a complete')"});
}

std::string finished() { return "(done = 1 OR dead = 1)"; }

namespace {
constexpr std::pair<JobStatus, std::string_view> kStatusText[] = {
    {JobStatus::ready, "ready"},   {JobStatus::delayed, "delayed"}, {JobStatus::leased, "leased"},
    {JobStatus::done, "done"},     {JobStatus::dead, "dead"},
    {JobStatus::cancelled, "cancelled"}};
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
              " THEN 'dead' WHEN until > ", now, " THEN 'leased' WHEN not_before > ", now,
              " THEN 'delayed' ELSE 'ready' END"});
}

std::string fail_set(const Dialect& d, std::string_view error, std::string_view now,
                     std::string_view retry_in) {
  const std::string used_up = "max_attempts > 0 AND attempts >= max_attempts";
  const std::string exponent = call(d.least, call(d.greatest, "attempts - 1", "0"), "12");
  return cat({"error = ", error, ", owner = NULL, until = 0, dead = CASE WHEN ", used_up,
              " THEN 1 ELSE 0 END, finished = CASE WHEN ", used_up, " THEN ", now,
              " ELSE finished END, not_before = ", now, " + COALESCE(", retry_in, ", ",
              call(d.least, "3600.0", cat({d.pow2_before, exponent, d.pow2_after})), ")"});
}

std::string claimable_from(const Dialect& d) { return call(d.greatest, "until", "not_before"); }

std::string becomes_claimable(const Dialect& d, std::string_view queue, std::string_view now) {
  return cat({"queue = ", queue, " AND done = 0 AND dead = 0 AND ", attempts_left(), " AND ",
              claimable_from(d), " > ", now});
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
