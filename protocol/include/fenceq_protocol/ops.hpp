// The protocol's ops, and what each one is on the wire: one row of kOps per
// op. The enum and kOps are generated from protocol/ops/ops.json, the one
// declaration of each op (its name, facts, fields), as is each
// op's list of fields (op_spec.hpp). The codec's other table (kOpFields in
// op_fields.cpp: each op's reader and writer) and the daemon's (kOpFacts in
// daemon/execution/op_table.cpp) are in the same order, and each checks at
// compile time that it has one row per op.
//
// Adding an op: its declaration in ops.json, its reader and writer
// (op_fields.cpp; codec.hpp for new Request fields), for a new Answer its
// reader (client_side.cpp) and writer (replies.cpp), then the daemon's side
// (daemon/execution/op_table.cpp: its row of kOpFacts and its case in
// Executor::plan or apply). PROTOCOL.md says it to people.
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string_view>

namespace fenceq::protocol {

// The ops, in protocol/ops/ops.json's order (generated: ops_enum.inc).
enum class Op {
#include "fenceq_protocol/ops_enum.inc"
};
// The last op of the enum: a new op goes after it, and then this names it.
inline constexpr Op kLastOp =
#include "fenceq_protocol/ops_last.inc"
    ;
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
  bulk,            // retry_many, cancel_many: {count, more}
  token            // suspend: the signal token (str), or false (C3.23)
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

// One row per op, generated from protocol/ops/ops.json (ops_rows.inc).
inline constexpr std::array<OpInfo, kOpCount> kOps{{
#include "fenceq_protocol/ops_rows.inc"
}};

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
