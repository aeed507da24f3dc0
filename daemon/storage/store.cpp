#include "storage/store.hpp"

#include <algorithm>
#include <limits>

#include "storage/job_rules.hpp"

namespace fenceq::daemon {

std::string_view job_event_name(JobEventKind k) {
  switch (k) {
    case JobEventKind::enqueued: return "enqueued";
    case JobEventKind::claimed: return "claimed";
    case JobEventKind::completed: return "completed";
    case JobEventKind::failed: return "failed";
    case JobEventKind::retried: return "retried";
    case JobEventKind::dead: return "dead";
    case JobEventKind::cancelled: return "cancelled";
    case JobEventKind::snoozed: return "snoozed";
    case JobEventKind::unblocked: return "unblocked";
    case JobEventKind::suspended: return "suspended";
    case JobEventKind::signalled: return "signalled";
    case JobEventKind::expired: return "expired";
    case JobEventKind::step_saved: return "step_saved";
  }
  return "unknown";
}

std::optional<JobEventKind> job_event(const JobEventRow* before, const JobEventRow& after,
                                      JobEventCall call) {
  using K = JobEventKind;
  if (before == nullptr) return K::enqueued;
  const JobEventRow& b = *before;
  // Finishing and coming back: the flags alone say (job_rules.hpp's SETs).
  const bool was_suspended = b.not_before >= rules::kSuspendedUntil;
  if (!b.dead && after.dead) {
    if (after.cancelled) return K::cancelled;
    // C3.24: its deadline passed (PostgreSQL's trigger: a job not leased and
    // not suspended that became dead with a new error; a reap leaves the
    // error as it was).
    if (call == JobEventCall::expire ||
        (call == JobEventCall::infer && !b.owned && !was_suspended && after.error_changed)) {
      return K::expired;
    }
    return K::dead;
  }
  if (b.dead && after.dead && !b.cancelled && after.cancelled) return K::cancelled;
  if (!b.done && after.done) return K::completed;
  if ((b.dead || b.done) && !after.dead && !after.done) return K::retried;
  if (after.dead || after.done) return std::nullopt;
  // C3.23: woken by a signal, or its wait timed out (a new error: failed).
  if (was_suspended && after.not_before < rules::kSuspendedUntil) {
    if (call == JobEventCall::signal) return K::signalled;
    if (call == JobEventCall::infer && !after.error_changed) return K::signalled;
    return K::failed;
  }
  if (b.owned && !after.owned && !was_suspended && after.not_before >= rules::kSuspendedUntil) {
    return K::suspended;
  }
  if (b.not_before >= rules::kBlockedUntil && after.not_before < rules::kBlockedUntil) {
    return K::unblocked;
  }
  // Only a claim counts an attempt (claim_set).
  if (after.attempts > b.attempts && after.fence > b.fence && after.owned) return K::claimed;
  switch (call) {
    case JobEventCall::retry:  // a job whose last attempt ran out, not yet reaped
      return after.attempts < b.attempts ? std::optional(K::retried) : std::nullopt;
    case JobEventCall::snooze:
      return b.owned && !after.owned ? std::optional(K::snoozed) : std::nullopt;
    case JobEventCall::fail:  // a fail, or a cut, with attempts left
      return b.owned && !after.owned ? std::optional(K::failed) : std::nullopt;
    case JobEventCall::infer:
      if (!b.owned || after.owned) break;
      if (after.attempts < b.attempts) {
        if (after.attempts == 0 && after.not_before == 0) return K::retried;  // revive_set
        if (after.not_before != b.not_before)
          return K::snoozed;  // LeaseEnd::snoozed; not an unclaim
        break;
      }
      if (after.error_changed || after.not_before != b.not_before || after.fence != b.fence) {
        return K::failed;  // LeaseEnd::failed or overrun; not a release
      }
      break;
    case JobEventCall::other:
    case JobEventCall::signal:
    case JobEventCall::expire: break;
  }
  return std::nullopt;
}

CallResult Store::run_one(Call::Params params) {
  std::vector<Call> calls(1);
  calls[0].params = std::move(params);
  std::vector<CallResult> out;
  run(calls, out, false);
  if (out[0].refused) throw StoreError(out[0].why, StoreError::Kind::refused);
  return std::move(out[0]);
}

bool Store::enqueue(const NewJob& job, double now) { return run_one(EnqueueParams{job, now}).ok; }

std::vector<ClaimedJob> Store::claim_next(std::string_view queue, std::string_view owner,
                                          double now, double ttl, std::int64_t max) {
  return std::move(run_one(ClaimNextParams{queue, owner, now, ttl, max}).jobs);
}

bool Store::unclaim(std::string_view id, std::string_view owner, std::int64_t fence) {
  return run_one(UnclaimParams{{id, owner, fence}}).ok;
}

void Store::reap_exhausted(double now) { run_one(ReapParams{now}); }
void Store::end_waits(double now) { run_one(ReapParams{now, true}); }

void Store::set_clock_high_water(double t) { run_one(ClockMarkParams{t}); }

void Store::set_queue_config(std::string_view queue, const QueueConfig& config) {
  run_one(QueueConfigParams{queue, config});
}

void Store::set_group_config(const GroupConfigParams& params) { run_one(params); }

void Store::set_retention(std::string_view queue, const Retention& retention) {
  run_one(RetentionParams{queue, retention});
}

bool Store::schedule_set(const Schedule& schedule, double now) {
  return run_one(ScheduleSetParams{&schedule, now}).ok;
}

bool Store::schedule_delete(std::string_view name) {
  return run_one(ScheduleDeleteParams{name}).ok;
}

bool Store::take_tick(std::string_view name, double tick) {
  return run_one(TakeTickParams{name, tick}).ok;
}

namespace {
// Merges `extra` (by queue name, sorted) into `stats` (sorted) with `set`; a
// queue of `extra` without stats gets an entry of its own.
template <class T, class Set>
void merge_by_queue(std::vector<QueueStats>& stats, std::vector<std::pair<std::string, T>> extra,
                    Set set) {
  if (extra.empty()) return;
  std::vector<QueueStats> merged;
  merged.reserve(stats.size() + extra.size());
  auto only = [&](const std::pair<std::string, T>& e) {
    QueueStats q;
    q.queue = e.first;
    set(q, e.second);
    merged.push_back(std::move(q));
  };
  auto c = extra.begin();
  for (auto& q : stats) {
    for (; c != extra.end() && c->first < q.queue; ++c) only(*c);
    if (c != extra.end() && c->first == q.queue) set(q, (c++)->second);
    merged.push_back(std::move(q));
  }
  for (; c != extra.end(); ++c) only(*c);
  stats = std::move(merged);
}
}  // namespace

void add_configs(std::vector<QueueStats>& stats,
                 std::vector<std::pair<std::string, QueueConfig>> configs) {
  merge_by_queue(stats, std::move(configs), [](QueueStats& q, const QueueConfig& c) { q.config = c; });
}

void add_group_configs(std::vector<QueueStats>& stats,
                       std::vector<std::tuple<std::string, std::string, GroupOverride>> rows) {
  using Groups = std::vector<std::pair<std::string, GroupOverride>>;
  std::vector<std::pair<std::string, Groups>> by_queue;
  for (auto& [queue, group, o] : rows) {
    if (by_queue.empty() || by_queue.back().first != queue) by_queue.emplace_back(queue, Groups{});
    by_queue.back().second.emplace_back(std::move(group), o);
  }
  merge_by_queue(stats, std::move(by_queue),
                 [](QueueStats& q, const Groups& g) { q.group_config = g; });
}

void add_retentions(std::vector<QueueStats>& stats,
                    std::vector<std::pair<std::string, Retention>> retentions) {
  merge_by_queue(stats, std::move(retentions),
                 [](QueueStats& q, const Retention& r) { q.retention = r; });
}

bool dead_page(const ListFilter& f) {
  return f.reaped && f.queue && f.order == ListOrder::id && !f.id && !f.key && f.status &&
         (*f.status == JobStatus::dead || *f.status == JobStatus::cancelled);
}

ListBounds list_bounds(const ListFilter& f) {
  constexpr double inf = std::numeric_limits<double>::infinity();
  ListBounds b;
  b.lower = f.order == ListOrder::id ? std::max(f.after, f.prefix) : f.prefix;
  // One job (`job`, `await`): the index walk starts at its id, so its cost
  // does not grow with the id's place among the others.
  if (f.id && f.order == ListOrder::id) b.lower = std::max(b.lower, *f.id);
  b.upper = rules::id_prefix_end(f.prefix);
  b.after_created = f.after_created.value_or(f.order == ListOrder::created_desc ? inf : -inf);
  return b;
}

}  // namespace fenceq::daemon
