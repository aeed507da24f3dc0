// PgStore::Batch, one run() of the PostgreSQL store in one pipeline, for
// pg_batch.cpp and pg_writes.cpp alone. pg_batch.cpp has the machinery:
// every call becomes its statement(s), all of them go out in one pipeline
// with the batch's BEGIN (and its COMMIT when asked), consecutive completes
// go as one statement, and refused fenced writes are counted per queue.
// pg_writes.cpp has each write op (each alternative of Call::Params): its
// statements, its prepare() and its read(), side by side.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "storage/pg/pg_connection.hpp"
#include "storage/pg/pg_statements.hpp"
#include "storage/pg/pg_store.hpp"

namespace fenceq::daemon {
namespace pg {

// What a call needs from the database: its statement(s), an answer known
// without asking (a NUL in an id: no such job can exist), or a refusal (a
// NUL in a string to store).
enum class Route { send, local, refuse };

// A call's statements: `stmt`, `stmt2` after it (enqueue's), and `pre` sent
// before it (a claim's lock) with the second parameters; `step` is where
// `stmt`'s result is in the pipeline.
struct Planned {
  Route route = Route::local;
  int stmt = -1, stmt2 = -1;
  int pre = -1;
  std::size_t step = 0;
};

// What prepare() fills for one call.
struct Prep {
  PgParams& p;
  PgParams& p2;
  Planned& plan;
  std::string& why;
  const std::unordered_set<std::string>& configured;
  // The queues it knows to have groups (PgStore::grouped_): an enqueue of a
  // grouped job adds its queue.
  std::unordered_set<std::string>& grouped;
  // Storage a parameter points into, as long as the batch runs.
  std::deque<std::string>& keep;
  Route send(int stmt) {
    plan.stmt = stmt;
    return Route::send;
  }
  Route refuse_because(std::string reason) {
    why = std::move(reason);
    return Route::refuse;
  }
  Route refuse(const char* field) {
    why = std::string("PostgreSQL text cannot hold U+0000: field '") + field +
          "' contains a NUL character; nothing was applied";
    return Route::refuse;
  }
};

// The write statements' numbers, after the others' (pg_statements.hpp): one
// op's a line (pg_writes.cpp, pg_enqueue.cpp), in Call::Params order.
enum Write : int {
  kEnqueue = kStmtCount, kUnpurge, kEnqueueKeyed, kKeyHolder, kEnqueueAfter,
  kClaim, kClaimFast, kLockQueueOf,
  kClaimNext, kClaimNextFast, kLockQueue, kClaimFair,
  kRenew,
  kComplete,
  kRelease,
  kFail,
  kCheck,
  kUnclaim,
  kRetry,
  kCancel,
  kPurge, kPurgePage, kPurgeWindow,
  kReap, kOverrun, kTimeouts,
  kSetMeta,
  kSetConfig, kDeleteConfig, kGroupConfig,
  kScheduleCount, kScheduleSet,
  kScheduleDelete,
  kTakeTick,
  kSetRetention, kDeleteRetention,
  kStepSave,
  kSuspend, kSignal,
  // Each write declared in ops.json with a `store` section (store.hpp): one
  // statement, kNAME (NAME: its request struct's, req::NAME), after the
  // others'. No edit here per op.
#define FENCEQ_STORE_CALL(op, Name, P, event) k##Name,
#include "fenceq_protocol/store_call_list.inc"
#undef FENCEQ_STORE_CALL
  kWriteEnd
};

// The per-queue count a refused fenced write adds to.
using RefusedCount = std::uint64_t QueueTotals::Refused::*;

}  // namespace pg

struct PgStore::Batch {
  PgStore& s;
  const std::vector<Call>& calls;
  std::vector<CallResult>& out;
  std::vector<pg::Planned> plan;
  std::deque<PgParams> params;  // two a call; stable: steps point into it
  std::deque<std::string> kept;  // Prep::keep
  // Consecutive completes of distinct jobs (complete_many's items) go as one
  // statement (kCompleteMany): one plan and one execution instead of one
  // per job. Each keeps its own condition, so each is judged as alone.
  std::vector<std::size_t> run_end;  // at a run's first call: one past its last
  std::vector<bool> in_run;
  std::deque<std::array<std::string, 5>> arrays;  // stable: run parameters point into it
  std::deque<PgParams> run_params;
  PgParams all_configs;
  PgParams no_params;  // kGroupedQueues
  // kLockGroups: the groups the batch's enqueues join, sorted (lock_groups()).
  std::array<std::string, 2> group_arrays;
  PgParams group_params;
  void lock_groups();
  std::vector<PgConnection::Step> steps;
  std::vector<PgResult> res;
  std::unordered_map<std::string_view, std::string_view> completed;  // of the run read: id, queue
  // The fenced writes refused, by call: counted for their job's queue.
  std::vector<std::pair<std::size_t, pg::RefusedCount>> refusals;

  Batch(PgStore& store, const std::vector<Call>& c, std::vector<CallResult>& o);

  // pg_batch.cpp, in the order run_batch() calls them.
  void prepare_all();
  void check_parents();  // `after`'s ids exist: else the request is refused
  void refuse_groups();  // a refused call refuses its whole group (request)
  bool completes(std::size_t i) const;
  void find_complete_runs();
  void add_complete_run(std::size_t i);
  void add_steps();
  void configs_read(std::chrono::steady_clock::time_point now);
  void read_run(std::size_t i, PGresult* r);
  void read_all();
  void answer_local();

  // pg_writes.cpp: call i by its Params, through the op's prepare and read.
  pg::Route prepare_call(std::size_t i, pg::Prep& x) const;
  void read_call(std::size_t i, PGresult* r);

  // Each write op, one specialization per Call::Params alternative
  // (pg_writes.cpp); a missing one is a compile error there.
  // Its statements, at their numbers in d (pg::add_write_statements).
  template <class P>
  static void add_statements(std::vector<PgStatement>& d) = delete;
  // Its statement(s) and parameters, or an answer without the database.
  template <class P>
  static pg::Route prepare(const P& c, pg::Prep& x) = delete;
  // Its result r into out[i], counting changes and per-queue events (reads
  // and counts move no change count).
  template <class P>
  void read(const P& c, std::size_t i, PGresult* r) = delete;
  // The reap's part of suspend and deadlines (C3.23, C3.24; pg_suspends.cpp):
  // its statement (kTimeouts: waits that timed out, deadlines that passed),
  // and its result counted.
  static std::string timeouts_sql();
  void read_timeouts(PGresult* r);
};

// Enqueue's specializations are pg_enqueue.cpp's: declared here, so that
// the dispatch of pg_writes.cpp finds them.
template <>
void PgStore::Batch::add_statements<EnqueueParams>(std::vector<PgStatement>& d);
template <>
pg::Route PgStore::Batch::prepare<EnqueueParams>(const EnqueueParams& c, pg::Prep& x);
template <>
void PgStore::Batch::read<EnqueueParams>(const EnqueueParams& c, std::size_t i, PGresult* r);
// suspend's and signal's are pg_suspends.cpp's.
template <>
void PgStore::Batch::add_statements<SuspendParams>(std::vector<PgStatement>& d);
template <>
pg::Route PgStore::Batch::prepare<SuspendParams>(const SuspendParams& c, pg::Prep& x);
template <>
void PgStore::Batch::read<SuspendParams>(const SuspendParams& c, std::size_t i, PGresult* r);
template <>
void PgStore::Batch::add_statements<SignalParams>(std::vector<PgStatement>& d);
template <>
pg::Route PgStore::Batch::prepare<SignalParams>(const SignalParams& c, pg::Prep& x);
template <>
void PgStore::Batch::read<SignalParams>(const SignalParams& c, std::size_t i, PGresult* r);
// group_config's are pg_group_config.cpp's.
template <>
void PgStore::Batch::add_statements<GroupConfigParams>(std::vector<PgStatement>& d);
template <>
pg::Route PgStore::Batch::prepare<GroupConfigParams>(const GroupConfigParams& c, pg::Prep& x);
template <>
void PgStore::Batch::read<GroupConfigParams>(const GroupConfigParams& c, std::size_t i, PGresult* r);
// step_save's are pg_steps.cpp's.
template <>
void PgStore::Batch::add_statements<StepSaveParams>(std::vector<PgStatement>& d);
template <>
pg::Route PgStore::Batch::prepare<StepSaveParams>(const StepSaveParams& c, pg::Prep& x);
template <>
void PgStore::Batch::read<StepSaveParams>(const StepSaveParams& c, std::size_t i, PGresult* r);

}  // namespace fenceq::daemon
