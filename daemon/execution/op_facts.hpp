// How fenceqd serves each op: the shape of its row of kOpFacts, which
// op_table.cpp holds beside what the op does (Executor::plan and apply), as
// protocol/ops.hpp's kOps holds its wire facts. The executor asks these
// tables instead of testing op names.
#pragma once

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

// Its row of kOpFacts (op_table.cpp).
const OpFacts& op_facts(protocol::Op op);
}  // namespace fenceq::daemon
