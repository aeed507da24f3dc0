// Bulk actions by filter (issue 33): retry_many, cancel_many, and purge with
// a filter. Each acts on one page of at most `limit` jobs, inside the
// batch's transaction, and answers {count, more}.
//
// retry_many and cancel_many find their page with the store's `list` (the
// same filters and indexes), then retry or cancel each job exactly as the
// single ops do (the same statements: groups take turns again, children
// settle, awaits are answered, parked claims look again). A page stops
// early once kBulkBudget has passed, so that the claims of the batch it
// shares a transaction with are not held up for long: `more` then says so.
// purge's page is one statement per store (PurgeParams with a limit).
#include <algorithm>
#include <chrono>

#include "executor.hpp"

namespace fenceq::daemon {

using protocol::Op;

namespace {

// How long one request's page may work before it answers `more`.
constexpr std::chrono::milliseconds kBulkBudget{10};
// Jobs run through the store at a time, between looks at the budget.
constexpr std::size_t kBulkChunk = 256;

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

Executor::Outcome Executor::bulk(const protocol::Request& r, double now) {
  std::vector<CallResult> results;
  if (r.op == Op::purge) {
    const auto group = r.group ? std::optional<std::string_view>(*r.group) : std::nullopt;
    PurgeParams p{r.all_queues ? std::nullopt : std::optional<std::string>(r.queue),
                  r.older_than, now, finished_bits(r.status), r.prefix, group, r.limit};
    store_.run({Call{p, 0}}, results, false);
    return protocol::Result{BulkOutcome{results.at(0).number.value_or(0), results.at(0).ok}};
  }
  // The page: up to limit + 1 jobs, so that `more` is known.
  std::vector<JobInfo> page;
  for (const auto status : states_of(r)) {
    const auto want = r.limit + 1 - static_cast<std::int64_t>(page.size());
    if (want <= 0) break;
    ListFilter f;
    f.queue = r.queue;
    f.status = status;
    f.limit = want;
    f.prefix = r.prefix;
    if (r.group) f.group = *r.group;
    auto rows = store_.list(f, now);
    std::move(rows.begin(), rows.end(), std::back_inserter(page));
  }
  bool more = static_cast<std::int64_t>(page.size()) > r.limit;
  if (more) page.resize(static_cast<std::size_t>(r.limit));
  const auto start = SteadyClock::now();
  std::int64_t count = 0;
  std::vector<Call> calls;
  for (std::size_t i = 0; i < page.size(); i += kBulkChunk) {
    if (i > 0 && SteadyClock::now() - start >= kBulkBudget) {
      more = true;  // the rest in the next request
      break;
    }
    calls.clear();
    for (std::size_t k = i; k < std::min(page.size(), i + kBulkChunk); ++k) {
      if (r.op == Op::retry_many) {
        calls.push_back({RetryParams{page[k].id, now}, 0});
      } else {
        calls.push_back({CancelParams{page[k].id, now}, 0});
      }
    }
    store_.run(calls, results, false);
    awaits_.note_writes(calls, results);  // cancelled jobs are finished
    count += std::count_if(results.begin(), results.end(), [](const auto& c) { return c.ok; });
  }
  return protocol::Result{BulkOutcome{count, more}};
}

}  // namespace fenceq::daemon
