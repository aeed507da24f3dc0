// A recorded history of fenceq operations and the checker that judges it.
//
// The workload (run.cpp) records every request as an Op: what was asked, the
// clock value it carried, when it was invoked and when its reply came back
// (positions in one global sequence, so "A's reply came before B was sent" is
// a comparison of two integers), and the outcome. The checker then decides,
// job by job, whether some order of application in arrival order could have
// produced exactly these replies under the contract, looking for the ways a
// fencing queue breaks: a fence repeated or skipped, two completes, a write by
// a superseded or expired lease, a claim while a lease was live, a state that
// no request wrote, an acknowledged write lost across kill -9.
//
// Outcomes are three: ok (a reply with a result), refused (an error reply:
// the contract says nothing of the request was applied, and the checker holds
// the daemon to that), and unknown (no reply: a timeout, the daemon killed).
// An unknown request may or may not have been applied, at any moment after it
// was sent; every check is written so that it only reports what no such
// choice can explain.
//
// Power cuts (fenceq-history --lossyfs) are positions in the same sequence,
// taken while the daemon was down. With --sync full a cut is judged like a
// kill -9: nothing acknowledged may be lost. With --sync normal or off
// (Options::lossy) the contract lets a cut drop the last acknowledged commits
// (C1.4): the store rolls back to an earlier committed state. The checker
// then excuses exactly one thing: a request answered after a cut not seeing a
// write acknowledged before it. Everything else holds across cuts as before,
// above all that a fence is never handed out twice and that a lease is never
// served to a worker after its fence was handed out again or superseded.
//
// Restores (fenceq-history --restores) are two positions: where a backup was
// started while the daemon served, and where the daemons were down and the
// store was put back to that backup. Whatever the --sync mode, a restore may
// lose a write answered after its backup started (never one answered
// before), and the daemon started on the copy raises every fence to a new
// fence epoch's floor and ends every lease (C1.5): fences jump there, and a
// row may show the floor. Nothing else is relaxed across it: a fence is never
// handed out twice, and no write of a lease answered before the restore (the
// lease's claim) is accepted after it.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

namespace fenceq::history {

enum class Kind { enqueue, claim, renew, complete, release, state };
const char* kind_name(Kind k);

enum class Outcome { ok, refused, unknown };

struct Row {  // a job as `state` showed it
  std::optional<std::string> owner;
  double until = 0;
  std::int64_t fence = 0;
  std::optional<std::string> result;
  bool done = false;
};

inline constexpr std::uint64_t kNever = std::numeric_limits<std::uint64_t>::max();

struct Op {
  int thread = 0;
  Kind kind = Kind::state;
  std::string job;
  std::string owner;                  // claim, renew, complete, release
  std::int64_t fence = 0;             // renew, complete, release
  double ttl = 0;                     // claim, renew
  double now = 0;                     // claim, renew, complete
  std::optional<std::string> result;  // complete's argument
  std::uint64_t invoked = 0;          // global sequence number at send
  std::uint64_t returned = kNever;    // at reply; kNever when unknown
  Outcome outcome = Outcome::unknown;
  std::string error;  // the error code when refused, or why unknown
  // The reply when ok: enqueue/renew/complete/release -> flag; claim ->
  // fence (nullopt: nil); state -> row (nullopt: nil).
  bool flag = false;
  std::optional<std::int64_t> fence_got;
  std::optional<Row> row;

  bool acked() const { return outcome == Outcome::ok; }
  // Could have changed the store: acknowledged, or no reply.
  bool maybe_applied() const { return outcome != Outcome::refused; }
};

struct Summary {
  std::uint64_t operations = 0;
  std::uint64_t acknowledged = 0;
  std::uint64_t refused = 0;  // error replies (internal, unavailable, ...)
  std::uint64_t unknown = 0;
  std::uint64_t jobs = 0;
  std::uint64_t fences = 0;          // acknowledged claims
  std::uint64_t completes = 0;       // acknowledged successful completes
  std::uint64_t leases_expired = 0;  // leases taken over by a later claim, not released
  std::uint64_t stale_refused = 0;   // renew/complete/release answered false
  std::uint64_t states = 0;          // acknowledged state reads checked
  std::uint64_t cuts = 0;
  // In lossy mode: reads that showed a fence raised at an unclean start.
  std::uint64_t raised_at_recovery = 0;            // power cuts in the history
  // Times a request answered after a cut did not see a write acknowledged
  // before it: a violation without Options::lossy, excused with it. Counted
  // once per (lost write, later request) pair, so it shows the cuts did
  // drop acknowledged commits.
  std::uint64_t lost_at_cut = 0;
  std::uint64_t restores = 0;
  // As lost_at_cut, for writes answered after a restore's backup started and
  // missing after the restore: shows the restores did take writes back.
  std::uint64_t lost_at_restore = 0;
  // Writes (renew, complete, release) refused after a restore whose lease
  // was claimed before it: the leases the restore ended.
  std::uint64_t refused_across_restore = 0;
};

// A backup taken while the daemon served, put back later (see above).
struct Restore {
  // The backup started here: every request answered before it is in the
  // copy; one answered after it may or may not be.
  std::uint64_t backup = 0;
  // The daemons were down (killed -9) and the copy put back here: a request
  // sent before it may have been applied before it, one answered after it
  // may have been applied after it.
  std::uint64_t at = 0;
};

struct Options {
  // Where in the global sequence the power was cut (the daemon killed -9
  // before, restarted after). A request invoked before a cut may have been
  // applied before it; one answered after it may have been applied after it.
  std::vector<std::uint64_t> cuts;
  // A cut may lose acknowledged writes (--sync normal or off): fences may
  // then have gaps, and a request answered after a cut need not see a write
  // acknowledged before it. Nothing else is relaxed. Without it (--sync
  // full) a cut must lose nothing acknowledged, like a kill -9.
  bool lossy = false;
  // In the order they happened; each backup after the previous restore.
  std::vector<Restore> restores;
};

// Checks the history; returns one line per violation (empty: none found).
std::vector<std::string> check(const std::vector<Op>& ops, Summary& summary,
                               const Options& options = {});

// One line describing an op, for violation reports and history dumps.
std::string describe(const Op& op);

}  // namespace fenceq::history
