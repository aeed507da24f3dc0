// Every op as fenceqd serves it, in one place: its row of kOpFacts (how the
// executor runs it: transaction, clock, park, stats reader, write counters)
// and its handler (kOpHandlers), both generated from ops.json's `daemon`
// facts (emit_daemon.py), and the handlers themselves: plan_OP for a
// planned op (its store calls queued with the batch's others, answered by
// finish() in the shape of its Answer), answer_OP for the rest. Its wire
// facts are its row of kOps (protocol/ops.hpp); its store calls are Call's
// params (store.hpp). No switch over Op: a handler not written is a link error.
#include <algorithm>
#include <array>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <stdexcept>
#include <string>

#include <sys/random.h>

#include "execution/executor.hpp"
#include "base/metrics.hpp"
#include "execution/op_facts.hpp"

namespace fenceq::daemon {

using protocol::Answer;
using protocol::ErrorCode;
using protocol::Op;

namespace {

// suspend's signal token (C3.23): 128 random bits from the kernel, as 32 hex
// digits. Whoever holds it can wake the job once: it is never derived from
// the job, the clock or a counter.
std::string signal_token() {
  unsigned char bytes[16];
  std::size_t got = 0;
  while (got < sizeof bytes) {
    const auto n = getrandom(bytes + got, sizeof bytes - got, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw std::runtime_error(std::string("getrandom failed: ") + std::strerror(errno));
    }
    got += static_cast<std::size_t>(n);
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned char b : bytes) {
    out += kHex[b >> 4];
    out += kHex[b & 15];
  }
  return out;
}

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

// What a planned op's handler queues its store calls with: the calls of the
// batch, each marked with its request (a refused call refuses its request's).
struct Executor::Planner {
  std::vector<Call>& calls;
  std::size_t index;
  double now;

  void call(Call::Params params) { calls.push_back({std::move(params), index}); }
  static std::optional<std::string_view> view(const std::optional<std::string>& s) {
    return s ? std::optional<std::string_view>(*s) : std::nullopt;
  }
  // A job to create: enqueue's request itself (a JobSpec), or an entry of enqueue_many.
  void job(const protocol::JobSpec& j) {
    call(EnqueueParams{NewJob{j.id, j.queue, j.payload ? &*j.payload : nullptr, j.priority,
                              j.delay, j.max_attempts, view(j.key), j.unique_for, j.replace,
                              view(j.group), &j.parents, j.after_run, j.max_runtime,
                              j.headers.empty() ? nullptr : &j.headers, j.deadline},
                       now});
  }
  void claim_next(std::string_view queue, std::string_view owner, double ttl, std::int64_t max) {
    call(ClaimNextParams{queue, owner, now, ttl, max});
  }
  void renew(const LeaseParams& l, double ttl, const std::optional<std::string>& progress) {
    call(RenewParams{l, now, ttl, view(progress)});
  }
  void complete(const LeaseParams& l, const std::optional<std::string>& result) {
    call(CompleteParams{l, now, &result});
  }
  // A request's lease.
  template <typename Q>
  static LeaseParams lease(const Q& q) {
    return LeaseParams{q.id, q.owner, q.fence};
  }
};

// Each op's handler, from ops.json (emit_daemon.py): plan_OP for the planned
// ops, answer_OP for the others, in the Op enum's order.
struct Executor::OpHandler {
  void (Executor::*plan)(const protocol::Request&, double, Planner&);
  Outcome (Executor::*answer)(const protocol::Request&, double);
};

// kOpHandlers names Executor's private members: built inside a member.
const Executor::OpHandler& Executor::handler(protocol::Op op) {
  static constexpr std::array<OpHandler, protocol::kOpCount> kOpHandlers{{
#include "fenceq_protocol/op_handlers.inc"
  }};
  return kOpHandlers[static_cast<std::size_t>(op)];
}

bool Executor::plan(const protocol::Request& r, double now, std::size_t index) {
  const auto& h = handler(r.op);
  if (!h.plan) return false;  // answer() answers it
  const std::size_t first = calls_.size();
  Planner p{calls_, index, now};
  (this->*h.plan)(r, now, p);
  planned_.push_back({index, first, calls_.size() - first});
  return true;
}

// The planned ops' handlers: each queues its store calls.
namespace req = protocol::req;

void Executor::plan_enqueue(const protocol::Request& r, double, Planner& p) {
  p.job(r.as<req::Enqueue>());
}
void Executor::plan_enqueue_and_wait(const protocol::Request& r, double, Planner& p) {
  p.job(r.as<req::EnqueueAndWait>());  // then awaited (finish)
}
void Executor::plan_claim(const protocol::Request& r, double now, Planner& p) {
  const auto& q = r.as<req::Claim>();
  p.call(ClaimParams{q.id, q.owner, now, q.ttl});
}
void Executor::plan_claim_next(const protocol::Request& r, double, Planner& p) {
  const auto& q = r.as<req::ClaimNext>();
  p.claim_next(q.queue, q.owner, q.ttl, q.max.value_or(1));
}
void Executor::plan_renew(const protocol::Request& r, double, Planner& p) {
  const auto& q = r.as<req::Renew>();
  p.renew(Planner::lease(q), q.ttl, q.progress);
}
void Executor::plan_complete(const protocol::Request& r, double, Planner& p) {
  const auto& q = r.as<req::Complete>();
  p.complete(Planner::lease(q), q.result);
}
void Executor::plan_release(const protocol::Request& r, double, Planner& p) {
  p.call(ReleaseParams{Planner::lease(r.as<req::Release>())});
}
void Executor::plan_fail(const protocol::Request& r, double now, Planner& p) {
  const auto& q = r.as<req::Fail>();
  p.call(FailParams{Planner::lease(q), now, q.error, q.retry_in});
}
void Executor::plan_step_save(const protocol::Request& r, double now, Planner& p) {
  const auto& q = r.as<req::StepSave>();
  p.call(StepSaveParams{Planner::lease(q), now, q.step, &q.value});
}
void Executor::plan_suspend(const protocol::Request& r, double now, Planner& p) {
  const auto& q = r.as<req::Suspend>();
  p.call(SuspendParams{Planner::lease(q), now, q.timeout, q.fail, signal_token()});
}
void Executor::plan_signal(const protocol::Request& r, double now, Planner& p) {
  const auto& q = r.as<req::Signal>();
  p.call(SignalParams{q.token, now, &q.value});
}
void Executor::plan_check(const protocol::Request& r, double now, Planner& p) {
  p.call(CheckParams{Planner::lease(r.as<req::Check>()), now});
}
void Executor::plan_retry(const protocol::Request& r, double now, Planner& p) {
  p.call(RetryParams{r.as<req::Retry>().id, now});
}
void Executor::plan_cancel(const protocol::Request& r, double now, Planner& p) {
  p.call(CancelParams{r.as<req::Cancel>().id, now});
}
void Executor::plan_complete_next(const protocol::Request& r, double, Planner& p) {
  // The same checks as complete, then as claim_next: one round trip.
  const auto& q = r.as<req::CompleteNext>();
  p.complete(Planner::lease(q), q.result);
  p.claim_next(q.queue, q.owner, q.ttl, 1);
}
void Executor::plan_enqueue_many(const protocol::Request& r, double, Planner& p) {
  // Each job as enqueue would take it, in order, in this transaction.
  for (const auto& j : r.as<req::EnqueueMany>().jobs) p.job(j);
}
void Executor::plan_complete_many(const protocol::Request& r, double, Planner& p) {
  const auto& q = r.as<req::CompleteMany>();
  // Each item judged as complete would judge it: a stale one fails alone.
  for (const auto& l : q.items) p.complete({l.id, l.owner, l.fence}, l.result);
  // Then the next jobs, claimed by the owner of the last item.
  if (q.next) p.claim_next(q.next->queue, q.items.back().owner, q.next->ttl, q.next->max);
}
void Executor::plan_renew_many(const protocol::Request& r, double, Planner& p) {
  const auto& q = r.as<req::RenewMany>();
  for (const auto& l : q.items) p.renew({l.id, l.owner, l.fence}, q.ttl, l.progress);
}

// The writes declared with a `store` section in ops.json (emit_store.py):
// each its struct, from its request and `now`.
#include "fenceq_protocol/store_plan.inc"

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
    case Answer::token:  // suspend (C3.23): the token it stored, or false
      if (!res[0].ok) return Result{false};
      return Result{res[0].id};
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
  const auto& h = handler(r.op);
  if (!h.answer) return protocol::Error{ErrorCode::internal, "unhandled op"};  // plan()'s
  return (this->*h.answer)(r, now);
}

// The other ops' handlers: each answers its request.
using protocol::Result;

Executor::Outcome Executor::answer_ping(const protocol::Request& r, double) {
  return Result{ServerInfo{protocol::kProtocolVersion, std::string(protocol::kVersion),
                           std::string(protocol::clock_name(clock_.mode())),
                           r.as<req::Ping>().describe, {}}};
}
Executor::Outcome Executor::answer_state(const protocol::Request& r, double) {
  auto row = store_.state(r.as<req::State>().id);
  if (!row) return Result{};
  return Result{*std::move(row)};
}
Executor::Outcome Executor::answer_job(const protocol::Request& r, double now) {
  auto d = job_detail(store_, r.as<req::Job>().id, now);
  if (!d) return Result{};
  return Result{*std::move(d)};
}
Executor::Outcome Executor::answer_await_job(const protocol::Request& r, double now) {
  const auto& q = r.as<req::AwaitJob>();
  auto d = job_detail(store_, q.id, now);
  if (!d) {
    return protocol::Error{ErrorCode::invalid_argument, "no job with id '" + q.id + "' to await"};
  }
  // Not finished yet: nil, which parks the request while its wait lasts.
  if (!finished(d->info.status)) return Result{};
  return Result{*std::move(d)};
}
Executor::Outcome Executor::answer_schedule_set(const protocol::Request& r, double now) {
  // The schedules are read again after this batch.
  if (auto refused = schedules_.set(r.as<req::ScheduleSet>(), now)) return *refused;
  return Result{true};
}
Executor::Outcome Executor::answer_schedule_delete(const protocol::Request& r, double) {
  return Result{schedules_.remove(r.as<req::ScheduleDelete>().name)};
}
Executor::Outcome Executor::answer_schedule_list(const protocol::Request&, double now) {
  return Result{schedules_.list(now)};
}
Executor::Outcome Executor::answer_list(const protocol::Request& r, double now) {
  return Result{bounded_page(store_.list(list_filter(r.as<req::List>()), now))};
}
Executor::Outcome Executor::answer_results(const protocol::Request& r, double now) {
  // At most kMaxResultsBytes of results and one more (the store leaves the
  // rest out: omitted), so a reply no one reads holds little.
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
Executor::Outcome Executor::answer_stats(const protocol::Request&, double now) {
  return Result{counters_.stats_snapshot(now)};
}
Executor::Outcome Executor::answer_metrics(const protocol::Request&, double now) {
  return Result{prometheus_text(counters_.stats_snapshot(now))};
}
Executor::Outcome Executor::answer_retry_many(const protocol::Request& r, double now) {
  return bulk(r, now);
}
Executor::Outcome Executor::answer_cancel_many(const protocol::Request& r, double now) {
  return bulk(r, now);
}
Executor::Outcome Executor::answer_purge(const protocol::Request& r, double now) {
  // With a filter, a page; without, bounded chunks (purge_first, purge_all.cpp).
  if (r.as<req::Purge>().paged) return bulk(r, now);
  return protocol::Error{ErrorCode::internal, "unhandled op"};
}

// queue_config: the request's settings over the stored ones.
Executor::Outcome Executor::answer_queue_config(const protocol::Request& req, double) {
  const auto& r = req.as<protocol::req::QueueConfig>();
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
  // Retention (C3.17), apart: it holds no claim back.
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

// group_config (C3.25): the settings named over the group's own, merged
// in the store (a setting left out keeps its value, nil removes it).
Executor::Outcome Executor::answer_group_config(const protocol::Request& req, double) {
  const auto& r = req.as<protocol::req::GroupConfig>();
  GroupConfigParams p{r.queue, r.group};
  if (r.max_leased) {
    p.set_max_leased = true;
    p.value.max_leased = *r.max_leased;
  }
  if (r.rate) {
    p.set_rate = true;
    p.value.rate = *r.rate;
  }
  if (r.per) {
    p.set_per = true;
    p.value.per = *r.per;
  }
  store_.set_group_config(p);
  // Claims parked on the queue look again: a limit may be lifted.
  claims_.mark_dirty(r.queue);
  return protocol::Result{true};
}

}  // namespace fenceq::daemon
