// Every op as fenceqd serves it, in one place: its row of kOpFacts (how the
// executor runs it: transaction, clock, park, stats reader, write counters;
// generated from ops.json's `daemon` facts), and what it does: its case in Executor::plan (a write queued with the
// batch's others, answered by finish in the shape of its Answer) or in
// Executor::apply (the rest). Its wire facts are its row of kOps
// (protocol/ops.hpp); its store calls are Call's params (store.hpp). Each
// switch over Op has no `default:`: -Werror=switch-enum names an op left out.
#include <algorithm>
#include <array>
#include <cstddef>

#include "execution/executor.hpp"
#include "base/metrics.hpp"
#include "execution/op_facts.hpp"

namespace fenceq::daemon {

using protocol::Answer;
using protocol::ErrorCode;
using protocol::Op;

namespace {

// Each op's row, from its `daemon` facts in protocol/ops/ops.json (emit_daemon.py).
constexpr std::array<OpFacts, protocol::kOpCount> kOpFacts{{
#include "fenceq_protocol/op_facts.inc"
}};
static_assert(protocol::one_row_per_op(kOpFacts), "kOpFacts needs one row per Op, in the enum's order");

// An op that uses `now` reads the clock (without `now`, the client clock's latest).
constexpr bool clock_covers_time_use() {
  for (const auto& row : kOpFacts) {
    if (!row.clock && protocol::op_time_use(row.op) != protocol::TimeUse::none) return false;
  }
  return true;
}
static_assert(clock_covers_time_use(), "an op that uses `now` must read the clock");


}  // namespace

const OpFacts& op_facts(protocol::Op op) { return kOpFacts[static_cast<std::size_t>(op)]; }

bool Executor::plan(const protocol::Request& r, double now, std::size_t index) {
  namespace req = protocol::req;
  const std::size_t first = calls_.size();
  auto call = [&](Call::Params params) { calls_.push_back({std::move(params), index}); };
  // A job to create: enqueue's request itself (a JobSpec), or an entry of enqueue_many.
  const auto view = [](const std::optional<std::string>& s) {
    return s ? std::optional<std::string_view>(*s) : std::nullopt;
  };
  auto job = [&](const protocol::JobSpec& j) {
    call(EnqueueParams{NewJob{j.id, j.queue, j.payload ? &*j.payload : nullptr, j.priority,
                              j.delay, j.max_attempts,
                              view(j.key), j.unique_for, j.replace, view(j.group),
                              &j.parents, j.after_run, j.max_runtime,
                              j.headers.empty() ? nullptr : &j.headers},
                       now});
  };
  auto claim_next = [&](std::string_view queue, std::string_view owner, double ttl,
                        std::int64_t max) {
    call(ClaimNextParams{queue, owner, now, ttl, max});
  };
  auto renew = [&](const LeaseParams& l, double ttl, const std::optional<std::string>& progress) {
    call(RenewParams{l, now, ttl,
                     progress ? std::optional<std::string_view>(*progress) : std::nullopt});
  };
  auto complete = [&](const LeaseParams& l, const std::optional<std::string>& result) {
    call(CompleteParams{l, now, &result});
  };
  auto lease = [](const auto& q) { return LeaseParams{q.id, q.owner, q.fence}; };  // its lease
  switch (r.op) {
    case Op::enqueue: job(r.as<req::Enqueue>()); break;
    case Op::enqueue_and_wait: job(r.as<req::EnqueueAndWait>()); break;  // then awaited
    case Op::claim: {
      const auto& q = r.as<req::Claim>();
      call(ClaimParams{q.id, q.owner, now, q.ttl});
      break;
    }
    case Op::claim_next: {
      const auto& q = r.as<req::ClaimNext>();
      claim_next(q.queue, q.owner, q.ttl, q.max.value_or(1));
      break;
    }
    case Op::renew: {
      const auto& q = r.as<req::Renew>();
      renew(lease(q), q.ttl, q.progress);
      break;
    }
    case Op::complete: {
      const auto& q = r.as<req::Complete>();
      complete(lease(q), q.result);
      break;
    }
    case Op::release: call(ReleaseParams{lease(r.as<req::Release>())}); break;
    case Op::fail: {
      const auto& q = r.as<req::Fail>();
      call(FailParams{lease(q), now, q.error, q.retry_in});
      break;
    }
    // The writes declared with a `store` section in ops.json (emit_store.py):
    // each its struct, from its request and `now`.
#include "fenceq_protocol/store_plan.inc"
    case Op::check: call(CheckParams{lease(r.as<req::Check>()), now}); break;
    case Op::retry: call(RetryParams{r.as<req::Retry>().id, now}); break;
    case Op::cancel: call(CancelParams{r.as<req::Cancel>().id, now}); break;
    case Op::purge:  // a page (apply()), or bounded chunks (purge_first, purge_all.cpp)
      return false;
    case Op::complete_next: {
      // The same checks as complete, then as claim_next: one round trip.
      const auto& q = r.as<req::CompleteNext>();
      complete(lease(q), q.result);
      claim_next(q.queue, q.owner, q.ttl, 1);
      break;
    }
    case Op::enqueue_many:
      // Each job as enqueue would take it, in order, in this transaction.
      for (const auto& j : r.as<req::EnqueueMany>().jobs) job(j);
      break;
    case Op::complete_many: {
      const auto& q = r.as<req::CompleteMany>();
      // Each item judged as complete would judge it: a stale one fails alone.
      for (const auto& l : q.items) complete({l.id, l.owner, l.fence}, l.result);
      // Then the next jobs, claimed by the owner of the last item.
      if (q.next) claim_next(q.next->queue, q.items.back().owner, q.next->ttl, q.next->max);
      break;
    }
    case Op::renew_many: {
      const auto& q = r.as<req::RenewMany>();
      for (const auto& l : q.items) renew({l.id, l.owner, l.fence}, q.ttl, l.progress);
      break;
    }
    // Not a batched store write: apply() answers it.
    case Op::ping: case Op::state: case Op::stats: case Op::list: case Op::metrics:
    case Op::job: case Op::queue_config: case Op::await_job: case Op::schedule_set:
    case Op::schedule_delete: case Op::schedule_list: case Op::results: case Op::retry_many:
    case Op::cancel_many: return false;
  }
  planned_.push_back({index, first, calls_.size() - first});
  return true;
}

Executor::Outcome Executor::finish(const protocol::Request& r, const Planned& p) const {
  namespace req = protocol::req;
  const CallResult* res = results_.data() + p.first;
  for (std::size_t k = 0; k < p.count; ++k) {
    // PostgreSQL cannot hold U+0000: the request alone is refused, nothing of it applied.
    if (res[k].refused) return protocol::Error{ErrorCode::invalid_argument, res[k].why};
  }
  using protocol::Result;
  auto bools = [&](std::size_t n) {
    protocol::BoolList out(n);
    for (std::size_t k = 0; k < n; ++k) out[k] = res[k].ok;
    return out;
  };
  // The answer in the shape the op's Answer (protocol/ops.hpp) gives it.
  switch (protocol::op_info(r.op).answer) {
    case Answer::flag: return Result{res[0].ok};
    case Answer::fence:
      if (!res[0].number) return Result{};
      return Result{*res[0].number};
    case Answer::claimed: {
      auto jobs = res[0].jobs;
      if (r.as<req::ClaimNext>().max) return Result{std::move(jobs)};  // asked for an array
      if (jobs.empty()) return Result{};
      return Result{std::move(jobs.front())};
    }
    case Answer::count: return Result{res[0].number.value_or(0)};
    case Answer::completed_next: {
      protocol::CompletedAndNext out;
      out.completed = res[0].ok;
      if (!res[1].jobs.empty()) out.next = res[1].jobs.front();
      return Result{std::move(out)};
    }
    case Answer::flags: return Result{bools(p.count)};
    case Answer::flags_next:
      if (!r.as<req::CompleteMany>().next) return Result{bools(p.count)};
      return Result{protocol::CompletedManyAndNext{bools(p.count - 1), res[p.count - 1].jobs}};
    case Answer::detail: {
      // enqueue_and_wait: a job it created is not finished (nil: parked while
      // its wait lasts); one that was there already is awaited all the same
      // (C3.1: the enqueue changed nothing), and may be finished.
      if (res[0].ok) return Result{};
      auto d = job_detail(store_, r.as<req::EnqueueAndWait>().id, time_.parked_now());
      if (!d || !finished(d->info.status)) return Result{};
      return Result{*std::move(d)};
    }
    case Answer::enqueued:
      if (!r.as<req::Enqueue>().key) return Result{res[0].ok};
      return Result{protocol::Enqueued{res[0].id, res[0].ok, true}};
    case Answer::enqueued_list: {
      const auto& jobs = r.as<req::EnqueueMany>().jobs;
      const bool keyed = std::any_of(jobs.begin(), jobs.end(),
                                     [](const protocol::JobSpec& j) { return j.key.has_value(); });
      if (!keyed) return Result{bools(p.count)};
      protocol::EnqueuedList out(p.count);
      for (std::size_t k = 0; k < p.count; ++k) {
        out[k] = {res[k].id, res[k].ok, jobs[k].key.has_value()};
      }
      return Result{std::move(out)};
    }
    case Answer::info:
    case Answer::lease_state:
    case Answer::stats:
    case Answer::text:
    case Answer::jobs:
    case Answer::schedules:
    case Answer::results:
    case Answer::bulk: break;  // no planned op answers these: apply() does
  }
  return protocol::Error{ErrorCode::internal, "unhandled op"};
}

Executor::Outcome Executor::apply(const protocol::Request& r, double now) {
  namespace req = protocol::req;
  using protocol::Result;
  switch (r.op) {
    case Op::ping:
      return Result{ServerInfo{protocol::kProtocolVersion, std::string(protocol::kVersion),
                               std::string(protocol::clock_name(clock_.mode())),
                               r.as<req::Ping>().describe, {}}};
    case Op::state: {
      auto row = store_.state(r.as<req::State>().id);
      if (!row) return Result{};
      return Result{*std::move(row)};
    }
    case Op::job: {
      auto d = job_detail(store_, r.as<req::Job>().id, now);
      if (!d) return Result{};
      return Result{*std::move(d)};
    }
    case Op::await_job: {
      const auto& q = r.as<req::AwaitJob>();
      auto d = job_detail(store_, q.id, now);
      if (!d) {
        return protocol::Error{ErrorCode::invalid_argument,
                               "no job with id '" + q.id + "' to await"};
      }
      // Not finished yet: nil, which parks the request while its wait lasts.
      if (!finished(d->info.status)) return Result{};
      return Result{*std::move(d)};
    }
    case Op::queue_config: return configure(r.as<req::QueueConfig>());
    case Op::schedule_set: {
      // The schedules are read again after this batch.
      if (auto refused = schedules_.set(r.as<req::ScheduleSet>(), now)) return *refused;
      return Result{true};
    }
    case Op::schedule_delete: return Result{schedules_.remove(r.as<req::ScheduleDelete>().name)};
    case Op::schedule_list: return Result{schedules_.list(now)};
    case Op::list: return Result{bounded_page(store_.list(list_filter(r.as<req::List>()), now))};
    case Op::results: {
      // At most kMaxResultsBytes of results and one more (the store leaves
      // the rest out: omitted), so a reply no one reads holds little.
      const auto& q = r.as<req::Results>();
      auto out = store_.results(q.ids, now);
      if (q.states_only) {  // the dashboard's job page: states, no bodies
        for (auto& [id, o] : out) {
          if (o && o->result) {
            o->result.reset();
            o->omitted = true;
          }
        }
      }
      return Result{std::move(out)};
    }
    case Op::stats: return Result{counters_.stats_snapshot(now)};
    case Op::metrics: return Result{prometheus_text(counters_.stats_snapshot(now))};
    case Op::retry_many: case Op::cancel_many: return bulk(r, now);
    case Op::purge:  // with a filter (plan() queued the others)
      if (r.as<req::Purge>().paged) return bulk(r, now);
      break;
    // Batched store writes: plan() queued them, finish() answers them.
    case Op::enqueue: case Op::claim: case Op::renew: case Op::complete: case Op::release:
    case Op::claim_next: case Op::fail: case Op::check: case Op::retry:
    case Op::complete_next: case Op::enqueue_many: case Op::complete_many:
    case Op::renew_many: case Op::cancel: case Op::enqueue_and_wait:
#define FENCEQ_STORE_CALL(op, Name, P, event) case Op::op:
#include "fenceq_protocol/store_call_list.inc"
#undef FENCEQ_STORE_CALL
      break;
  }
  return protocol::Error{ErrorCode::internal, "unhandled op"};
}

Executor::Outcome Executor::configure(const protocol::req::QueueConfig& r) {
  QueueConfig c = store_.queue_config(r.queue).value_or(QueueConfig{});
  if (r.paused) c.paused = *r.paused;
  if (r.max_leased) c.max_leased = *r.max_leased;
  if (r.rate) c.rate = *r.rate;
  if (r.per) c.per = *r.per;
  if (r.group_max_leased) c.group_max_leased = *r.group_max_leased;
  if (r.group_rate) c.group_rate = *r.group_rate;
  if (r.group_per) c.group_per = *r.group_per;
  // Settings that hold nothing back (a `per` without a rate) go.
  const bool limits = r.paused || r.max_leased || r.rate || r.per || r.group_max_leased ||
                      r.group_rate || r.group_per;
  if (limits) store_.set_queue_config(r.queue, c.limited() ? c : QueueConfig{});
  // Retention (issue 33), apart: it holds no claim back.
  if (r.keep_done || r.keep_dead || r.keep_cancelled) {
    Retention k;
    for (const auto& [name, keep] : store_.retentions()) {
      if (name == r.queue) k = keep;
    }
    if (r.keep_done) k.keep_done = *r.keep_done;
    if (r.keep_dead) k.keep_dead = *r.keep_dead;
    if (r.keep_cancelled) k.keep_cancelled = *r.keep_cancelled;
    store_.set_retention(r.queue, k);
    retention_.changed();
  }
  if (!limits) return protocol::Result{true};
  // Claims parked on it look again: resumed, or a limit raised.
  claims_.mark_dirty(r.queue);
  return protocol::Result{true};
}

}  // namespace fenceq::daemon
