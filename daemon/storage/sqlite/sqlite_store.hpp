// The SQLite store: one SQLite file, opened by exactly one fenceqd (C1.3). The
// default store, and the only writer of its file.
//
// Every SQL statement of the SQLite store lives in sqlite_store.cpp, and its
// schema in sqlite_schema.cpp. Statements are prepared once and kept for the
// store's life.
#pragma once

#include <sqlite3.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <map>
#include <set>
#include <unordered_map>
#include <string_view>

#include "storage/sqlite/key_map.hpp"
#include "storage/sqlite/run_state.hpp"
#include "storage/sqlite/sqlite_checkpointer.hpp"
#include "storage/sqlite/sqlite_rows.hpp"
#include "storage/store.hpp"

namespace fenceq::daemon {

struct SqliteCloser {
  void operator()(sqlite3* db) const { sqlite3_close_v2(db); }
};
using SqliteHandle = std::unique_ptr<sqlite3, SqliteCloser>;
using Statement = std::unique_ptr<sqlite3_stmt, sqlite::Finalizer>;

class SqliteStore final : public Store, public EventNotes, public OutboxLedger {
 public:
  // Opens or creates the database at `path` (":memory:" works too), switches it
  // to WAL with the given sync level and creates the schema if it is missing.
  // Opening an existing file changes no row (C1.2); one that is not fenceq's,
  // is not whole, or is of a newer schema is refused before anything is
  // written (sqlite_file_check.hpp). Throws StoreError.
  // `read_only`: opens an existing database for reading only (open_reader()).
  // `restored`: the file is a restored copy whatever its marks say (fenceqd
  // --restored): every fence is raised past the fence epoch (C1.5).
  SqliteStore(const std::string& path, SyncMode sync, bool read_only = false,
              bool restored = false);
  SqliteStore(const SqliteStore&) = delete;
  SqliteStore& operator=(const SqliteStore&) = delete;
  ~SqliteStore() override;

  void begin() override;  // BEGIN IMMEDIATE
  void commit() override;
  void rollback() noexcept override;

  // Every call through its apply() below, in order; never commits itself.
  bool run(const std::vector<Call>& calls, std::vector<CallResult>& out,
           bool commit_after) override;
  std::optional<JobState> state(std::string_view id) override;
  std::vector<JobInfo> list(const ListFilter& filter, double now) override;
  std::optional<Payload> payload(std::string_view id) override;
  JobResults results(const std::vector<std::string>& ids, double now) override;
  Links links(std::string_view id) override;
  QueueChanges take_queue_changes() override;
  QueueTally::Entries take_queue_totals() override;
  std::optional<double> next_claimable_at(std::string_view queue, double now) override;
  std::vector<QueueStats> queue_stats(double now) override;
  std::optional<QueueConfig> queue_config(std::string_view queue) override;
  std::vector<std::pair<std::string, QueueConfig>> queue_configs() override;
  std::vector<std::pair<std::string, Retention>> retentions() override;
  std::vector<std::tuple<std::string, std::string, GroupOverride>> group_configs() override;
  std::vector<StoredSchedule> schedules() override;
  SharedDatabase* shared() override { return nullptr; }  // the file's only writer (C1.3)
  EventNotes* event_notes() override { return this; }
  void note() override;                    // EventNotes (sqlite_events.cpp)
  std::vector<JobEvent> take() override;

  std::unique_ptr<StoreReads> open_reader() const override;
  bool ends_by_time() const override { return suspends_seen_ || deadlines_seen_; }
  std::optional<std::chrono::steady_clock::time_point> upkeep_due() const override {
    return beat_ ? beat_->owed_at() : std::nullopt;
  }
  std::int64_t total_changes() override { return sqlite3_total_changes64(db_.get()); }
  double clock_high_water() override;
  // EXPLAIN QUERY PLAN of claim_next's statement (tests and diagnostics:
  // through jobs_next, never a scan).
  std::string claim_next_plan();
  // The same for the statement that picks the one job of a claim_next of
  // one (claim_one_next).
  std::string pick_next_plan();
  // EXPLAIN QUERY PLAN of a `list` page's statement (tests).
  std::string list_plan(ListOrder order, bool bounded);
  // The plan of a page through jobs_dead (ListFilter::reaped), for a test.
  std::string dead_list_plan(bool bounded);
  std::string describe() const override { return path_; }
  // sqlite_after.cpp's: the settling left to steps (C3.13, "When").
  SettleStep settle_step(double now) override;
  void relax_next_commit() override { relax_next_ = sync_full_; }
  bool settle_left() const override { return settle_left_ || !marking_.empty(); }
  OutboxLedger* outbox_ledger() override { return this; }
  std::vector<std::int64_t> recorded() override;  // OutboxLedger (sqlite_outbox.cpp)
  bool record(std::int64_t seq) override;
  void forget(const std::vector<std::int64_t>& seqs) override;

  sqlite3* raw() { return db_.get(); }  // for tests and diagnostics only
  // The fence a new job starts from: 0, or the floor of the fence epoch
  // raised after an unclean stop of a --sync normal run or on opening a
  // restored copy (guard_fences()).
  std::int64_t fence_floor() const { return fence_floor_; }
  // Whether opening raised the epoch (the last run was lossy and unclean,
  // or the file is a restored copy).
  bool recovered_fences() const { return recovered_; }

 private:
  // Every row of a page statement bound by list(), as JobInfo.
  std::vector<JobInfo> read_rows(sqlite3_stmt* s, const char* what);
  // One call each (Store::run). A SQLite store refuses none.
  void apply(const EnqueueParams& p, CallResult& r);
  // sqlite_keys.cpp's: C3.10, before the insert (key_taken) and before a
  // retry (key_allows_retry), through keys_.
  bool key_taken(const EnqueueParams& p, CallResult& r);
  struct KeyRow {
    std::string id;
    bool leased = false;
    bool open = false;  // unfinished: holds its key
  };
  // false: no such row; `what` names the op in an error
  bool key_row(std::int64_t rowid, double now, KeyRow& out, const char* what);
  // `e`: the key's entry, as key_taken found it
  std::optional<std::string> key_recent(const NewJob& job, const KeyMap::Entry& e, double now,
                                        double since);
  struct KeyOf {
    std::int64_t rowid = 0;
    std::string queue, key;
  };
  bool key_allows_retry(std::string_view id, double now, std::optional<KeyOf>& key);
  void load_keys();
  // The SQL function fenceq_key_gone(queue, key, rowid) of the TEMP trigger
  // on jobs' deletes: the job leaves keys_.
  static void key_gone(sqlite3_context* ctx, int argc, sqlite3_value** argv);
  static void bind_job_fields(sqlite::Use& u, const NewJob& job, double now);
  KeyMap keys_;
  void apply(const ClaimParams& p, CallResult& r);
  void apply(const ClaimNextParams& p, CallResult& r);
  // claim_next of one job from a queue without settings: pick_next_, then claim_picked_.
  void claim_one_next(const ClaimNextParams& p, CallResult& r);
  void apply(const RenewParams& p, CallResult& r);
  void apply(const CompleteParams& p, CallResult& r);
  void apply(const ReleaseParams& p, CallResult& r);
  void apply(const FailParams& p, CallResult& r);
  void apply(const CheckParams& p, CallResult& r);
  void apply(const StepSaveParams& p, CallResult& r);
  // step_save past its one statement: the state read, then the step saved
  // in the row or in job_steps, or refused (sqlite_writes.cpp).
  void save_step_by_state(const StepSaveParams& p, CallResult& r);
  // The step_saved event of a save (its job's queue and group read by `s`).
  JobEvent step_saved_event(const StepSaveParams& p, sqlite3_stmt* s, int at);
  // A row of job_steps (step_save's).
  void insert_step(std::string_view id, std::string_view step, const std::optional<Payload>& value);
  // sqlite_suspends.cpp's (C3.23, C3.24): suspend and signal, and the
  // reap's part: waits that timed out, deadlines that passed.
  void apply(const SuspendParams& p, CallResult& r);
  void apply(const SignalParams& p, CallResult& r);
  void prepare_suspend_statements();
  void end_suspends(double now);
  void expire_deadlines(double now);
  void add_deadline(const NewJob& job);
  bool suspends_seen_ = false;   // a job was suspended: the reap looks for timeouts
  bool deadlines_seen_ = false;  // a job had a deadline: the reap looks for passed ones
  void apply(const UnclaimParams& p, CallResult& r);
  void apply(const RetryParams& p, CallResult& r);
  void apply(const CancelParams& p, CallResult& r);
  void apply(const PurgeParams& p, CallResult& r);
  void apply(const ReapParams& p, CallResult& r);
  void apply(const ClockMarkParams& p, CallResult& r);
  void apply(const QueueConfigParams& p, CallResult& r);
  void apply(const GroupConfigParams& p, CallResult& r);
  void apply(const ScheduleSetParams& p, CallResult& r);
  void apply(const ScheduleDeleteParams& p, CallResult& r);
  void apply(const TakeTickParams& p, CallResult& r);
  // The writes declared in ops.json with a `store` section (kDeclaredCall,
  // store.hpp): sqlite_writes.cpp applies each, in Declared (its statement by
  // its name, through cached()), beside this one dispatch of them;
  // apply_call() hands it every such call. No edit here per op
  // (docs/architecture.md, "Adding an op: every file it touches").
  void apply_declared(const Call::Params& p, CallResult& r);
  struct Declared;
  // A statement by its name, prepared from sql() on its first use and kept
  // (finalized before the connection closes, as every Statement member).
  sqlite3_stmt* cached(std::string_view name, std::string (*sql)());
  // sqlite_control.cpp's (C3.17, C3.16): retention, and purge with a limit.
  void apply(const RetentionParams& p, CallResult& r);
  void purge_page(const PurgeParams& p, CallResult& r);
  void prepare_control_statements();
  Statement set_retention_, delete_retention_, retentions_stmt_, purge_window_,
      purge_window_left_, keep_fence_;
  Statement purge_page_, purge_left_, purge_pick_, next_finished_queue_[2];
  void purge_every_queue(const PurgeParams& p, CallResult& r);
  void prepare_statements();
  void prepare_reads();
  std::string plan_of(const std::string& sql);  // EXPLAIN QUERY PLAN, one step a line
  sqlite3_stmt* prepare(const std::string& sql);
  void exec(const std::string& sql);
  [[noreturn]] void fail_with(const char* what, int rc);
  int step_done(sqlite3_stmt* s, const char* what);  // runs to SQLITE_DONE, returns changes
  // Steps a statement that returns at most one row: true when it did (read
  // it, then end_row()), false when it returned none.
  bool step_row(sqlite3_stmt* s, const char* what);
  void end_row(sqlite3_stmt* s, const char* what);
  // Runs a statement that ends `RETURNING queue`: true when it changed a row,
  // whose queue is then noted as freed.
  bool step_freeing(sqlite3_stmt* s, const char* what);
  void freed(std::string_view queue);
  // A fenced write `op` was refused: counted for the job's queue, if the job exists.
  void refused(std::string_view id, std::uint64_t QueueTotals::Refused::*op);
  // The SQL function fenceq_count(queue, event, value): counts `event` (a
  // CountEvent, sqlite_store.cpp) for `queue` in tally_, returns `value`.
  static void count(sqlite3_context* ctx, int argc, sqlite3_value** argv);
  // jobs.khash of a job of `queue` with unique key `key` (schema v8), and
  // the SQL function fenceq_khash(queue, key) that gives it to migrate().
  static std::int64_t key_hash(std::string_view queue, std::string_view key);
  static void khash_function(sqlite3_context* ctx, int argc, sqlite3_value** argv);
  static std::string_view column_view(sqlite3_stmt* s, int i);  // text, valid until the next step
  // The SQL function fenceq_step_fits(steps, step, bytes, text_bytes): 1 when
  // a job's steps text (jobs.steps) takes the step `step` of `bytes` bytes
  // of value and `text_bytes` of text within every bound and does not hold
  // it yet (step_save's one statement, sqlite_writes.cpp).
  static void step_fits(sqlite3_context* ctx, int argc, sqlite3_value** argv);

  std::string path_;
  bool read_only_ = false;
  bool fsync_failed_ = false;  // a COMMIT's fsync failed: the stop is not clean
  // --sync full, and whether this transaction's COMMIT skips its fsync:
  // a settle step's (derived work, redone from what the commits before it
  // made durable; the next synced COMMIT fsyncs its WAL frames too).
  // SQLite changes the level only outside a transaction.
  bool sync_full_ = false;
  bool relax_next_ = false;  // relax_next_commit(): the next BEGIN's
  bool relaxed_ = false;     // this transaction runs at synchronous=NORMAL
  void unrelax() noexcept;
  bool recovered_ = false;
  std::int64_t fence_floor_ = 0;
  SqliteHandle db_;
  std::unique_ptr<SqliteCheckpointer> checkpointer_;  // a writer's, in WAL mode
  Statement begin_, commit_, rollback_;
  void migrate();
  // Notes how this run syncs, durably; after an unclean stop of a lossy run,
  // first raises every fence past what that run can have handed out.
  // A restored copy (C1.5: `restored`, a `fenceq backup` mark, a database
  // behind its state file) is treated the same way. Then notes the run in the
  // database and in the state file.
  void guard_fences(SyncMode sync, bool restored);
  std::optional<RunState> run_state_;  // this run's, once noted (a file on disk)
  std::unique_ptr<RunBeat> beat_;
  Statement beat_stmt_;  // the beat's row, stored by commit()

  Statement key_row_, key_latest_, key_of_, key_replace_, key_replace_wait_, id_exists_;
  // sqlite_lifecycle.cpp's (C3.15).
  void prepare_lifecycle_statements();
  void prepare_job_reads();  // sqlite_reads.cpp
  // Ends each attempt whose max_runtime ran out by `now` as a failure, the
  // fence raised (C3.15); run with the reap.
  void end_overruns(double now);
  // An enqueued job's max_runtime, in job_runtimes; the deadlines the last
  // statement's claims started (fenceq_deadline), stored.
  void add_runtime(const NewJob& job);
  // An enqueued job's headers (C3.18), in job_headers.
  void add_headers(const NewJob& job);
  Statement add_headers_;
  // Long payloads and results (schema 18, rules::kSpillBytes), kept in
  // job_payloads and job_results: a payload's row written, or dropped when
  // the payload is short (a key's replace); a result's row written.
  static bool spills(const Payload* p);
  void spill_payload(std::string_view id, const Payload* p);
  void spill_result(std::string_view id, std::string_view result);
  Statement spill_payload_, drop_payload_, spill_result_;
  Statement outbox_record_, outbox_forget_, outbox_mark_;  // sqlite_outbox.cpp
  // The bytes of the pages on the free list (PurgeParams::max_bytes).
  std::int64_t freed_bytes();
  Statement freelist_count_, purge_one_;
  std::int64_t page_size_ = 0;
  static void note_deadline(sqlite3_context* ctx, int argc, sqlite3_value** argv);
  void start_deadlines();
  std::vector<std::pair<std::string, double>> deadlines_;
  bool runtimes_seen_ = false;  // a job had a max_runtime: the reap looks for overruns
  Statement overrun_, deadline_passed_, add_runtime_, start_deadline_;
  std::vector<std::pair<std::string_view, Statement>> cached_;  // cached(): a few, by name
  Statement enqueue_, state_, claim_, renew_, complete_[2], release_;
  Statement claim_next_, fail_, check_, retry_, cancel_, reap_, unpurge_, unclaim_;
  Statement pick_next_, claim_picked_, reap_probe_;  // claim_one_next, apply(ReapParams)
  Statement wake_probe_, wake_parked_, any_parked_;  // wake_parked: rules::kKidsParked
  Statement park_walked_;
  // False only when no job is parked (the last wake found none left, and no
  // park or rollback since): claim_next then probes nothing. True at start.
  bool maybe_parked_ = true;
  Statement purge_keep_, purge_delete_, purge_parents_, payload_, links_, results_, stats_,
      next_claimable_;
  Statement list_[3][2];  // by ListOrder, and with an upper end of the ids
  Statement dead_list_[2];  // through jobs_dead (ListFilter::reaped)
  Statement get_meta_, set_meta_, queue_of_;
  Statement claim_next_limited_, allowance_, log_claims_, prune_claims_, claim_held_;
  Statement set_config_, delete_config_, configs_stmt_;
  Statement schedule_set_, schedule_delete_, schedules_stmt_, take_tick_;
  // The queues with settings (the file's only writer knows them all): a
  // claim of any other queue runs the statement it ran before queue_config
  // existed. configs_dirty_: changed in the open transaction.
  std::unordered_map<std::string, QueueConfig> configs_;
  bool configs_dirty_ = false;
  // Bumped by every group_config (C3.25) and rollback: a group held back
  // under its old settings takes turns again (wake_due).
  std::uint64_t overrides_gen_ = 0;
  void load_configs();
  // The settings of `queue` when they hold its claims back, else nullptr.
  const QueueConfig* limits_of(std::string_view queue) const;
  bool marking(std::string_view queue) const;  // its leases are being marked held
  // Notes `n` claims at `now` in a rate-limited queue's window.
  void log_claims(std::string_view queue, const QueueConfig& c, double now, std::int64_t n);
  // claim through `s`: claim_ (a queue without settings) or claim_held_.
  std::optional<std::int64_t> claim_one(sqlite3_stmt* s, std::string_view id,
                                        std::string_view owner, double now, double ttl);
  // Groups (C3.11; sqlite_groups.cpp). The file's only writer keeps the
  // turns in memory: the groups of each queue that has any (their claims
  // take groups in turn, claim_fair; every other queue's claim runs the
  // statement of before), each with its turn, the number of its last
  // claim_next claim (0: never served). Read from the open jobs at start
  // (load_groups) and again after a rollback; a queue stays until then.
  struct Turns {
    std::map<std::string, std::int64_t, std::less<>> turn_of;  // by group ('' for none)
    std::set<std::pair<std::int64_t, std::string>> order;      // (turn, group): next first
    // Groups whose head was not claimable (C3.11): out of `order`
    // (their turn kept in turn_of) until `at`, when their first job becomes
    // claimable by time alone (inf: by a write alone), or until a write that
    // may make one of their jobs claimable sooner (group_woke) puts them back.
    std::map<std::string, double, std::less<>> parked;  // by group: at
    std::set<std::pair<double, std::string>> waking;    // (at, group): soonest first
    // Of those, the groups held back by the queue's group settings as they
    // were (held_by: group_max_leased, group_rate, group_per), all back in
    // the walk once these change.
    std::set<std::string, std::less<>> held;
    // and the groups' own settings as they were (overrides_gen_).
    std::tuple<std::int64_t, std::int64_t, double, std::uint64_t> held_by{0, 0, 1, 0};
  };
  std::map<std::string, Turns, std::less<>> grouped_;
  std::int64_t turn_ = 0;  // the last turn handed out
  bool groups_dirty_ = false;  // the open transaction changed them
  Statement groups_of_open_, group_head_, no_group_head_;
  Statement group_open_, no_group_open_, top_priority_, group_allowed_;
  Statement allowance_max_, claim_row_, claim_row_held_, log_group_claim_, prune_group_claims_;
  Statement group_wakes_, group_head_same_, group_head_below_, group_counts_, group_hold_;
  void prepare_group_statements();

  // Jobs that wait for others (docs/contract.md C3.13;
  // sqlite_after.cpp). A job that became done, dead or cancelled while
  // others wait for it (jobs.kids) is noted in settled_ by the statement
  // that finished it (fenceq_count's 5-argument form in its SET, or its
  // RETURNING), and settle_noted() then meets its children's edges.
  //
  // Bounded (C3.13, "When"): a transaction settles at most budget_ edges
  // (kSettlePage from begin()); the parents whose edges are left wait in
  // settle_pending (schema v15) for settle_step(), each with the child its
  // edges are settled up to.
  enum Settled : int { kSettledDone = 0, kSettledDead = 1, kSettledCancelled = 2 };
  std::vector<std::pair<std::string, Settled>> settled_;
  // The parents one request (run_guarded) named: the state it read of each
  // (parents_known), and whether it marked it kKidsParent (wait_for_parents).
  // A batch of 1,000 children of one parent reads and marks it once, not
  // 1,000 times. Only an entry of the request could change a parent's
  // state, and it changes only itself, before any later entry can name it;
  // on_conflict "replace" leaves a job unfinished.
  struct ParentSeen {
    int state = 0;
    bool marked = false;
  };
  std::map<std::string, ParentSeen, std::less<>> parents_seen_;
  bool guarded_ = false;  // inside run_guarded (a throw ends the transaction)
  // A parent being settled: how it ended, and the last child (in id order)
  // whose edge is settled, "" before the first.
  struct SettleWork {
    std::string parent;
    Settled how;
    std::string to;
  };
  // Edges a transaction that finishes parents settles itself; edges a page
  // reads (a step looks at the time after each).
  static constexpr std::int64_t kSettlePage = 100;
  static constexpr std::int64_t kWalkPage = 32;
  std::int64_t budget_ = kSettlePage;  // edges the open transaction may still settle
  // When a step stops (settle_step); none in a transaction of requests.
  std::chrono::steady_clock::time_point settle_until_ = std::chrono::steady_clock::time_point::max();
  bool settle_left_ = false;  // settle_pending may have rows
  // The leases a queue took before it had limits, marked held in steps
  // (sqlite_control.cpp; docs/architecture.md, "Bounded work on the serving
  // thread"): queue -> the rowid marked up to, kept in fenceq_meta
  // ('mark_held:' queue) until done. While a queue is here its limited claims
  // take nothing (limits_of), so that max_leased counts every lease.
  // marking_begin_: as the open transaction began.
  std::map<std::string, std::int64_t, std::less<>> marking_, marking_begin_;
  void start_marking(std::string_view queue);
  void load_marking();
  bool mark_step(std::chrono::steady_clock::time_point until);  // true: it wrote
  Statement mark_page_, mark_note_, mark_drop_, max_rowid_;
  bool settle_taken_ = false;  // the open transaction took some (a rollback brings them back)
  Statement savepoint_, rollback_to_, release_savepoint_;
  Statement parent_state_, add_edge_, mark_kids_, add_wait_, block_child_, edges_page_, meet_page_;
  Statement unblock_, waits_of_, ready_child_;
  Statement child_state_, cancel_child_, recount_edges_, recount_blocked_;
  Statement pending_put_, pending_take_, pending_drop_, ended_as_;
  void prepare_after_statements();
  // Whether calls [from, to), one request's, hold a job that waits for others.
  static bool names_parents(const std::vector<Call>& calls, std::size_t from, std::size_t to);
  // Runs them in a savepoint: one refused call undoes and refuses them all.
  void run_guarded(const std::vector<Call>& calls, std::vector<CallResult>& out, std::size_t from,
                   std::size_t to);
  // A new job's parents as they are (read once, before its INSERT, which
  // then writes the job marked and blocked: an UPDATE of the new row after
  // it, twice, was 2/3 of an enqueue with `after`, callgrind).
  struct Parents {
    std::vector<int> states;  // by job.parents: 0 unfinished, 1 done, 2 dead, 3 cancelled
    std::int64_t waiting = 0;  // unfinished parents not met
    std::string failed;        // the error of a parent that is dead or cancelled already
  };
  // Whether each parent of `job` exists (or was purged), with its state;
  // refuses `r` if not.
  bool parents_known(const NewJob& job, CallResult& r, Parents& parents);
  // The new job's edges, and it cancelled when a parent failed.
  void wait_for_parents(const NewJob& job, const Parents& parents, double now);
  // Sets a bit of jobs.kids (rules::kKidsParent, kKidsChild).
  void mark(std::string_view id, int bit);
  // The children of the jobs in settled_ (and theirs, for a cancel), as
  // far as budget_ goes.
  void settle_noted(double now);
  // Settles `work` (and the children it cancels) until budget_ runs out;
  // what is left goes to settle_pending.
  void settle(std::vector<SettleWork> work, double now);
  // One page of w's edges after w.to: true when none is left after it.
  bool settle_page(SettleWork& w, double now, std::vector<SettleWork>& cancelled);
  void unblock(const std::string& child, double now);
  void block(std::string_view id);  // its not_before rules::kBlockedUntil
  // A revived job's edges and blocked count, from its parents as they are.
  void recount(std::string_view id);
  void prepare_key_statements();
  void load_groups();
  // A job of `group` ('' for none) is open in `queue`: the group takes
  // turns; the first group of a queue brings its open jobs of no group in.
  void join_group(std::string_view queue, std::string_view group);
  // '' in queue_groups: the jobs of no group, one group of their own.
  static constexpr std::string_view kNoGroupTurn = "";
  // Whether `group` of `queue` may take one more claim at `now` (its queue's
  // group settings; call only with a queue that has settings).
  bool group_allowed(std::string_view queue, std::string_view group, double now);
  // A claim of `group` ('' for no group) at `now`: with `turn` (claim_next's)
  // its turn is the newest; under a group_rate it is logged in its window.
  void served(std::string_view queue, std::string_view group, const QueueConfig* limits,
              double now, bool turn);
  // claim_next of a queue in grouped_: one job at a time, each from the
  // least recently served group whose head is of the top priority (C3.11).
  void claim_fair(const ClaimNextParams& p, const QueueConfig* limits, CallResult& r);
  // Before a claim_next: a page of :queue's parked jobs whose delay is over
  // back in the claims' walk (rules::kKidsParked).
  void wake_parked(std::string_view queue, double now);
  // After a claim_next's `walk` (its statement, which claimed `claimed`
  // jobs), when it stepped over many it could not claim
  // (rules::kLongWalkSteps): the leased ones at the head of the walk are
  // parked, out of the next walks, until their leases end.
  void park_walked(sqlite3_stmt* walk, std::size_t claimed, std::string_view queue, double now);
  // Whether any job is parked (jobs_wake's first entry).
  bool parked_exist();
  // claim_fair's steps (sqlite_groups.cpp), on the call's state.
  struct FairCall;
  // A group's settings (C3.25): its own (group_config) over its queue's.
  struct GroupLimits {
    std::int64_t max_leased = 0;
    std::int64_t rate = 0;
    double per = 1;
    bool limited() const { return max_leased > 0 || rate > 0; }
  };
  GroupLimits group_limits(std::string_view queue, std::string_view group, const QueueConfig& k);
  // group_limits once per group and call.
  const GroupLimits& fair_limits(FairCall& f, const std::string& group);
  struct FairHead {
    std::string id, group;
    std::int64_t priority = 0;
  };
  // The call's bounds: the claims its queue allows, the top priority.
  bool fair_bounds(FairCall& f);
  // Parked groups whose time came, or whose settings changed, walk again.
  void wake_due(FairCall& f);
  // Whether `group` may take one more claim (nullopt: a statement failed);
  // one held back is parked until its hold may end.
  std::optional<bool> fair_allowed(FairCall& f, const std::string& group);
  // Whether `group`, with these counts (leased, claims in the window), is
  // held back; if so it is noted in f.parking until its hold may end.
  std::optional<bool> fair_hold(FairCall& f, const std::string& group,
                                std::pair<std::int64_t, std::int64_t> counts);
  bool fair_head(FairCall& f, const std::string& group, FairHead& head);
  bool fair_nothing_claimable(FairCall& f, const std::string& group);
  bool fair_walk(FairCall& f, std::optional<FairHead>& best);
  bool fair_take(FairCall& f, const FairHead& best);
  void fair_leave(FairCall& f);
  // A group leaves the walk until `at` (again: `at` is its new time).
  void park(Turns& t, std::string_view group, double at);
  // A parked group takes turns again (its time has come).
  void unpark(Turns& t, std::string_view group);
  // A grouped job of `queue` and `group` new, or changed so that it may be
  // claimable sooner, at `at` (by time; 0: now, a lease of the group ended).
  void group_woke(std::string_view queue, std::string_view group, double at);
  // The pre-update hook's part for groups (sqlite_groups.cpp): which change
  // of a row of jobs may wake its group, and when.
  void group_preupdate(sqlite3* db, int op);
  struct Joining {
    std::string queue, group;
    double at;
  };
  std::optional<Joining> joining_;  // the group of a job the last statement opened
  std::pair<double, std::string> pruned_{-1, {}};  // served(): the last prune's time, queue\0group
  std::int64_t seq_ = 0;         // enqueue order, for FIFO among equal priorities
  bool any_purged_ = false;      // purged_fences has rows: enqueue must look there
  QueueChanges changes_;  // take_queue_changes()
  // sqlite_events.cpp's: the events of the open transaction (take()),
  // and the columns of jobs the pre-update hook reads, by kCol*. The hook
  // is the writer's (hook_jobs()): it sees every row of jobs a statement
  // inserts or changes, before and after; the groups' part always, the
  // events' with --events. A TEMP trigger would do the same at a price on
  // every statement that writes jobs (a statement journal, and no one-pass
  // UPDATE): 23% more of the serving thread's instructions per request.
  enum { kColId, kColOwner, kColFence, kColDone, kColQueue, kColNotBefore, kColAttempts, kColDead,
         kColCancelled, kColGroup, kColUntil, kColMaxAttempts, kColHeld, kJobColumns };
  void hook_jobs();
  bool hooked_ = false;
  // The groups' part of the hook is needed once a grouped job was stored
  // (sqlite_groups.cpp); until then no statement pays for the hook, which
  // unpacks each row it sees (about 4,000 instructions a request, 9%).
  // fenceq_meta's `grouped` says so across starts: hook_if_grouped() at
  // open (a file from before the mark is scanned once), mark_grouped() by
  // the first grouped enqueue, in its transaction.
  void hook_if_grouped();
  void mark_grouped(bool grouped);
  bool events_on_ = false;
  JobEventCall event_call_ = JobEventCall::other;  // the call being applied
  std::vector<JobEvent> events_;
  std::array<int, kJobColumns> event_cols_{};
  // The events' part of the hook.
  void event_preupdate(sqlite3* db, int op);
  static void preupdate(void* self, sqlite3* db, int op, const char* schema, const char* table,
                        sqlite3_int64, sqlite3_int64);
  // Applies one call, its JobEventCall noted for the hook.
  void apply_call(const Call& c, CallResult& r);
  QueueTally tally_;      // take_queue_totals()
};

}  // namespace fenceq::daemon
