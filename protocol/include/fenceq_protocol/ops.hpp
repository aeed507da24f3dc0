// The protocol's ops, and what each one is on the wire: one row of kOps per
// op. The codec's other table (kOpFields in op_fields.cpp: each op's reader
// and writer) and the daemon's (kOpFacts in daemon/execution/op_table.cpp) are in the same order,
// and each checks at compile time that it has one row per op.
//
// Adding an op: the enum below, its row here, its reader and writer
// (op_fields.cpp; codec.hpp for new Request fields), for a new Answer its
// reader (client_side.cpp) and writer (replies.cpp), then the daemon's side
// (daemon/execution/op_table.cpp: its row of kOpFacts and its case in
// Executor::plan or apply). PROTOCOL.md says
// it to people.
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string_view>

namespace fenceq::protocol {

enum class Op {
  ping, enqueue, state, claim, renew, complete, release,  // the contract's ops (C3)
  claim_next, fail, check, retry, stats, list, purge, metrics,  // the work queue's
  complete_next,  // complete, then claim_next, in one round trip
  enqueue_many, complete_many, renew_many,  // batches: up to kMaxBatchItems jobs
  cancel,  // queue control (issue 18): a fenced cancel
  job,     // a job's whole record (payload, result): operators, `fenceq show`
  queue_config,  // pause, max_leased, rate (issue 18)
  await_job,     // "await": the job's record once it is finished (long-poll)
  schedule_set, schedule_delete, schedule_list,  // periodic jobs
  enqueue_and_wait,  // enqueue, then await the job, in one round trip
  results,          // the state and result of up to 1,000 jobs (fan-in, issue 32)
  snooze,           // give a current lease back with its attempt, claimable after a delay (issue 33)
  retry_many, cancel_many  // retry and cancel by filter, a page at a time (issue 33)
};
// The last op of the enum: a new op goes after it, and then this names it.
inline constexpr Op kLastOp = Op::cancel_many;
inline constexpr std::size_t kOpCount = static_cast<std::size_t>(kLastOp) + 1;

// How an op uses `now` in client clock mode (C2.2). `required`: the ops that
// decide whether a lease is current. `optional`: ops that only stamp or
// classify (enqueue's delay, purge, list, stats); without `now` the daemon
// uses the highest `now` any request carried. In server clock mode `now` is
// refused on every op (C2.3).
enum class TimeUse { none, optional, required };

// Whether an op sets a lease that ends at now + ttl: always, or only when the
// request asks for next jobs (complete_many's `next`).
enum class Lease { none, always, with_next };

// What a successful reply's result is (PROTOCOL.md gives each one's shape).
enum class Answer {
  info,            // ping: {protocol, version, clock}
  flag,            // a bool: applied or refused
  fence,           // claim: the new fence, or nil
  count,           // purge: how many jobs went; with a filter, as `bulk`
  lease_state,     // state: the job's lease and result, or nil
  claimed,         // claim_next: a claimed job or nil; with `max`, an array of them
  completed_next,  // complete_next: {completed, next}
  flags,           // a bool per entry
  flags_next,      // complete_many: flags, or {completed, next} with `next`
  stats,           // stats: per-queue counts and the daemon's counters
  text,            // metrics: Prometheus text
  jobs,            // list: job rows
  detail,          // job, await: a job's whole record, or nil
  schedules,       // schedule_list: the periodic jobs
  enqueued,        // enqueue: a bool; with a key, {id, created}
  enqueued_list,   // enqueue_many: a bool per entry; a keyed entry's {id, created}
  results,         // results: a map of each id to {state, result}, or nil
  bulk             // retry_many, cancel_many: {count, more}
};

// One op's wire facts.
struct OpInfo {
  Op op;
  std::string_view name;  // as on the wire
  bool writes;            // writes the store; the others only read it
  TimeUse time;
  Lease lease;
  bool batch;             // carries up to kMaxBatchItems entries (jobs or items)
  Answer answer;
};

// clang-format off
inline constexpr std::array<OpInfo, kOpCount> kOps{{
    // op                 name               writes time               lease               batch  answer
    {Op::ping,            "ping",            false, TimeUse::none,     Lease::none,        false, Answer::info},
    {Op::enqueue,         "enqueue",         true,  TimeUse::optional, Lease::none,        false, Answer::enqueued},
    {Op::state,           "state",           false, TimeUse::none,     Lease::none,        false, Answer::lease_state},
    {Op::claim,           "claim",           true,  TimeUse::required, Lease::always,      false, Answer::fence},
    {Op::renew,           "renew",           true,  TimeUse::required, Lease::always,      false, Answer::flag},
    {Op::complete,        "complete",        true,  TimeUse::required, Lease::none,        false, Answer::flag},
    {Op::release,         "release",         true,  TimeUse::none,     Lease::none,        false, Answer::flag},
    {Op::claim_next,      "claim_next",      true,  TimeUse::required, Lease::always,      false, Answer::claimed},
    {Op::fail,            "fail",            true,  TimeUse::required, Lease::none,        false, Answer::flag},
    {Op::check,           "check",           false, TimeUse::required, Lease::none,        false, Answer::flag},
    {Op::retry,           "retry",           true,  TimeUse::none,     Lease::none,        false, Answer::flag},
    {Op::stats,           "stats",           false, TimeUse::optional, Lease::none,        false, Answer::stats},
    {Op::list,            "list",            false, TimeUse::optional, Lease::none,        false, Answer::jobs},
    {Op::purge,           "purge",           true,  TimeUse::optional, Lease::none,        false, Answer::count},
    {Op::metrics,         "metrics",         false, TimeUse::optional, Lease::none,        false, Answer::text},
    {Op::complete_next,   "complete_next",   true,  TimeUse::required, Lease::always,      false, Answer::completed_next},
    {Op::enqueue_many,    "enqueue_many",    true,  TimeUse::optional, Lease::none,        true,  Answer::enqueued_list},
    {Op::complete_many,   "complete_many",   true,  TimeUse::required, Lease::with_next,   true,  Answer::flags_next},
    {Op::renew_many,      "renew_many",      true,  TimeUse::required, Lease::always,      true,  Answer::flags},
    {Op::cancel,          "cancel",          true,  TimeUse::optional, Lease::none,        false, Answer::flag},
    {Op::job,             "job",             false, TimeUse::optional, Lease::none,        false, Answer::detail},
    {Op::queue_config,    "queue_config",    true,  TimeUse::none,     Lease::none,        false, Answer::flag},
    {Op::await_job,       "await",           false, TimeUse::optional, Lease::none,        false, Answer::detail},
    {Op::schedule_set,    "schedule_set",    true,  TimeUse::optional, Lease::none,        false, Answer::flag},
    {Op::schedule_delete, "schedule_delete", true,  TimeUse::none,     Lease::none,        false, Answer::flag},
    {Op::schedule_list,   "schedule_list",   false, TimeUse::optional, Lease::none,        false, Answer::schedules},
    {Op::enqueue_and_wait, "enqueue_and_wait", true, TimeUse::optional, Lease::none,        false, Answer::detail},
    {Op::results,         "results",         false, TimeUse::optional, Lease::none,        false, Answer::results},
    {Op::snooze,          "snooze",          true,  TimeUse::required, Lease::none,        false, Answer::flag},
    {Op::retry_many,      "retry_many",      true,  TimeUse::optional, Lease::none,        false, Answer::bulk},
    {Op::cancel_many,     "cancel_many",     true,  TimeUse::optional, Lease::none,        false, Answer::bulk},
}};
// clang-format on

// Whether `rows`, a table keyed by Op, has one row per op in the enum's order
// (a row left out reads as the op with value 0, so it shows as out of order).
template <typename Rows>
constexpr bool one_row_per_op(const Rows& rows) {
  if (rows.size() != kOpCount) return false;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    if (static_cast<std::size_t>(rows[i].op) != i) return false;
  }
  return true;
}
static_assert(one_row_per_op(kOps), "kOps needs one row per Op, in the enum's order");

constexpr const OpInfo& op_info(Op op) { return kOps[static_cast<std::size_t>(op)]; }
constexpr std::string_view op_name(Op op) { return op_info(op).name; }
constexpr TimeUse op_time_use(Op op) { return op_info(op).time; }
constexpr bool op_writes(Op op) { return op_info(op).writes; }
std::optional<Op> op_from_name(std::string_view name);

}  // namespace fenceq::protocol
