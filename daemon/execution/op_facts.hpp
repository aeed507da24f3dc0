// How fenceqd serves each op: one row of kOpFacts per op, beside its wire
// facts (protocol/ops.hpp, kOps). The executor asks these tables instead of
// testing op names; what an op does to the store is Executor::plan (writes
// queued with the batch's others) or Executor::apply (the rest), each a switch
// over every op.
#pragma once

#include <array>
#include <cstddef>

#include "fenceq_protocol/ops.hpp"

namespace fenceq::daemon {

// Whether a request that finds nothing and carries a `wait` waits for
// something to answer: a job to claim (claim_next), or the job to finish (await).
enum class Park { never, claim, await };

// Answered by the stats reader thread, when the daemon has one, once the
// batch committed: counts (stats, metrics) or a page of jobs (list).
enum class ByReader { no, counts, page };

// Which of stats' fenced-write counters ("writes") the op's outcome adds to:
// one per job it judged, applied or refused.
enum class Tally { none, renew, complete, release, fail };

struct OpFacts {
  protocol::Op op;
  bool store;  // runs in a transaction (ping alone does not)
  // Reads the clock: every op that uses `now`, and retry, which carries none
  // but judges whether the job's last lease has ended (dead even before
  // reap() wrote it down).
  bool clock;
  Park park;
  ByReader by_reader;
  Tally tally;
};

// clang-format off
inline constexpr std::array<OpFacts, protocol::kOpCount> kOpFacts{{
    // op                           store  clock  park          by_reader         tally
    {protocol::Op::ping,            false, false, Park::never,  ByReader::no,     Tally::none},
    {protocol::Op::enqueue,         true,  true,  Park::never,  ByReader::no,     Tally::none},
    {protocol::Op::state,           true,  false, Park::never,  ByReader::no,     Tally::none},
    {protocol::Op::claim,           true,  true,  Park::never,  ByReader::no,     Tally::none},
    {protocol::Op::renew,           true,  true,  Park::never,  ByReader::no,     Tally::renew},
    {protocol::Op::complete,        true,  true,  Park::never,  ByReader::no,     Tally::complete},
    {protocol::Op::release,         true,  false, Park::never,  ByReader::no,     Tally::release},
    {protocol::Op::claim_next,      true,  true,  Park::claim,  ByReader::no,     Tally::none},
    {protocol::Op::fail,            true,  true,  Park::never,  ByReader::no,     Tally::fail},
    {protocol::Op::check,           true,  true,  Park::never,  ByReader::no,     Tally::none},
    {protocol::Op::retry,           true,  true,  Park::never,  ByReader::no,     Tally::none},
    {protocol::Op::stats,           true,  true,  Park::never,  ByReader::counts, Tally::none},
    {protocol::Op::list,            true,  true,  Park::never,  ByReader::page,   Tally::none},
    {protocol::Op::purge,           true,  true,  Park::never,  ByReader::no,     Tally::none},
    {protocol::Op::metrics,         true,  true,  Park::never,  ByReader::counts, Tally::none},
    {protocol::Op::complete_next,   true,  true,  Park::never,  ByReader::no,     Tally::complete},
    {protocol::Op::enqueue_many,    true,  true,  Park::never,  ByReader::no,     Tally::none},
    {protocol::Op::complete_many,   true,  true,  Park::never,  ByReader::no,     Tally::complete},
    {protocol::Op::renew_many,      true,  true,  Park::never,  ByReader::no,     Tally::renew},
    {protocol::Op::cancel,          true,  true,  Park::never,  ByReader::no,     Tally::none},
    {protocol::Op::job,             true,  true,  Park::never,  ByReader::no,     Tally::none},
    {protocol::Op::queue_config,    true,  false, Park::never,  ByReader::no,     Tally::none},
    {protocol::Op::await_job,       true,  true,  Park::await,  ByReader::no,     Tally::none},
    {protocol::Op::schedule_set,    true,  true,  Park::never,  ByReader::no,     Tally::none},
    {protocol::Op::schedule_delete, true,  false, Park::never,  ByReader::no,     Tally::none},
    {protocol::Op::schedule_list,   true,  true,  Park::never,  ByReader::no,     Tally::none},
}};
// clang-format on
static_assert(protocol::one_row_per_op(kOpFacts), "kOpFacts needs one row per Op, in the enum's order");

// An op that uses `now` reads the clock (without `now`, the client clock's latest).
constexpr bool clock_covers_time_use() {
  for (const auto& row : kOpFacts) {
    if (!row.clock && protocol::op_time_use(row.op) != protocol::TimeUse::none) return false;
  }
  return true;
}
static_assert(clock_covers_time_use(), "an op that uses `now` must read the clock");

constexpr const OpFacts& op_facts(protocol::Op op) {
  return kOpFacts[static_cast<std::size_t>(op)];
}

}  // namespace fenceq::daemon
