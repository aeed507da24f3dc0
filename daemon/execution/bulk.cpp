// Bulk actions by filter (issue 33): retry_many, cancel_many, and purge with
// a filter. Each acts on one page of at most `limit` jobs, inside the
// batch's transaction, and answers {count, more}.
//
// retry_many and cancel_many read their page with the store's `list` (the
// same filters and indexes), a chunk at a time from a cursor, then retry or
// cancel each job exactly as the single ops do (the same statements: groups
// take turns again, children settle, awaits are answered, parked claims
// look again). A page stops early once kBulkBudget has passed, so that the
// claims of the batch it shares a transaction with are not held up for
// long: `more` then says whether jobs that pass are left. Dead and
// cancelled jobs are read through the index of those alone (jobs_dead,
// ListFilter::reaped), once the exhausted jobs are marked dead: each page
// starts from the first id again, and a walk of every job would step over
// all those the pages before it retried (50,000 dead jobs: 10 ms a page).
// purge's page is one statement per store (PurgeParams with a limit).
#include <algorithm>
#include <chrono>

#include "executor.hpp"

namespace fenceq::daemon {

using protocol::Op;

namespace {

// How long one request's page may work before it answers `more`.
constexpr std::chrono::milliseconds kBulkBudget{2};
// Jobs run through the store at a time, between looks at the budget.
constexpr std::size_t kBulkChunk = 64;
// Filters whose last page's stop is kept (Executor::bulk_resume_).
constexpr std::size_t kMaxResumes = 256;

// The states an action changes when the request names none.
std::vector<JobStatus> states_of(const protocol::Request& r) {
  if (r.status) return {*r.status};
  if (r.op == Op::retry_many) return {JobStatus::dead, JobStatus::cancelled};
  return {JobStatus::ready, JobStatus::delayed, JobStatus::leased, JobStatus::blocked,
          JobStatus::dead};
}

int finished_bits(const std::optional<JobStatus>& s) {
  if (!s) return kFinishedAll;
  if (*s == JobStatus::done) return kFinishedDone;
  if (*s == JobStatus::dead) return kFinishedDead;
  if (*s == JobStatus::cancelled) return kFinishedCancelled;
  return 0;  // the codec lets no other state through
}

}  // namespace

std::string Executor::resume_key(const protocol::Request& r, JobStatus status) {
  std::string key;
  for (auto part : {std::to_string(static_cast<int>(r.op)), std::to_string(static_cast<int>(status)),
                    r.queue, r.prefix, r.group ? "=" + *r.group : std::string()}) {
    key += std::to_string(part.size()) + ":" + part;
  }
  return key;
}

void Executor::remember_resume(const std::string& key, std::string after) {
  if (after.empty()) {
    bulk_resume_.erase(key);
    return;
  }
  // Only where to start: forgetting one costs a walk from the first id.
  if (bulk_resume_.size() >= kMaxResumes && !bulk_resume_.contains(key)) bulk_resume_.clear();
  bulk_resume_[key] = std::move(after);
}

Executor::Outcome Executor::bulk(const protocol::Request& r, double now) {
  std::vector<CallResult> results;
  if (r.op == Op::purge) {
    const auto group = r.group ? std::optional<std::string_view>(*r.group) : std::nullopt;
    PurgeParams p{r.all_queues ? std::nullopt : std::optional<std::string>(r.queue),
                  r.older_than, now, finished_bits(r.status), r.prefix, group, r.limit};
    store_.run({Call{p, 0}}, results, false);
    return protocol::Result{BulkOutcome{results.at(0).number.value_or(0), results.at(0).ok}};
  }
  // The page, a chunk at a time from a cursor (each state in id order), so
  // that neither the reads nor the writes hold the batch up for long.
  const auto states = states_of(r);
  const auto start = SteadyClock::now();
  if (std::find(states.begin(), states.end(), JobStatus::dead) != states.end()) {
    store_.reap_exhausted(now);
  }
  std::int64_t count = 0, left = r.limit;
  bool more = false;
  std::vector<Call> calls;
  auto read = [&](JobStatus status, std::string_view after, std::int64_t n) {
    ListFilter f;
    f.queue = r.queue;
    f.status = status;
    f.limit = n;
    f.after = after;
    f.prefix = r.prefix;
    if (r.group) f.group = *r.group;
    f.reaped = true;  // above, when a dead job is asked for
    return store_.list(f, now);
  };
  for (std::size_t s = 0; s < states.size() && !more; ++s) {
    // A state walked by the primary key starts where the last page of the
    // same filter stopped (bulk_resume_), and goes round to the first id
    // once at the end of its walk: a page from the first id would step over
    // every job the pages before it changed.
    const bool by_id = states[s] != JobStatus::dead && states[s] != JobStatus::cancelled;
    const std::string key = by_id ? resume_key(r, states[s]) : std::string();
    auto resume = by_id ? bulk_resume_.find(key) : bulk_resume_.end();
    std::string after = resume != bulk_resume_.end() ? resume->second : std::string();
    bool round = after.empty();  // the walk has reached the first id
    for (;;) {
      // The limit reached, or the time used up: are jobs that pass left?
      if (left == 0 || (count > 0 && SteadyClock::now() - start >= kBulkBudget)) {
        more = !read(states[s], after, 1).empty() || (!round && !read(states[s], "", 1).empty());
        for (std::size_t t = s + 1; t < states.size() && !more; ++t) {
          more = !read(states[t], "", 1).empty();
        }
        if (by_id) remember_resume(key, more ? after : std::string());
        break;
      }
      const auto want = std::min<std::int64_t>(left, kBulkChunk);
      const auto rows = read(states[s], after, want);
      calls.clear();
      for (const auto& row : rows) {
        if (r.op == Op::retry_many) {
          calls.push_back({RetryParams{row.id, now}, 0});
        } else {
          calls.push_back({CancelParams{row.id, now}, 0});
        }
      }
      if (!calls.empty()) {
        store_.run(calls, results, false);
        awaits_.note_writes(calls, results);  // cancelled jobs are finished
        count += std::count_if(results.begin(), results.end(), [](const auto& c) { return c.ok; });
      }
      left -= static_cast<std::int64_t>(rows.size());
      if (static_cast<std::int64_t>(rows.size()) < want) {
        if (!round) {  // on from the first id
          round = true;
          after.clear();
          continue;
        }
        if (by_id) remember_resume(key, std::string());
        break;  // none of this state left
      }
      after = rows.back().id;
    }
  }
  return protocol::Result{BulkOutcome{count, more}};
}

}  // namespace fenceq::daemon
