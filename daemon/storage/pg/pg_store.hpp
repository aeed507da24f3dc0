// The PostgreSQL store: one database shared by the fenceqd sidecars of many
// hosts (docs/operating.md, "Many hosts").
//
// Each write op's SQL statements live beside its prepare and its read in
// pg_writes.cpp, the others' (reads, the schema) in pg_statements.cpp, all
// built from the rules in job_rules.hpp; the write path's machinery (run())
// is pg_batch.cpp, the reads pg_store.cpp; the connection, its failures and
// its transactions are pg_connection.hpp's. Each operation is one conditional
// statement (claims: UPDATE ... RETURNING, and FOR UPDATE SKIP LOCKED for
// claim_next), so it is atomic against every other sidecar too; fences come
// from the row and never go back.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_set>
#include <string_view>
#include <vector>

#include "storage/pg/pg_connection.hpp"
#include "storage/pg/pg_sweeper.hpp"
#include "storage/store.hpp"

namespace fenceq::daemon {

class PgStore final : public Store, public SharedDatabase, public EventNotes {
 public:
  // Connects (see PgConnection) and creates the schema if it is missing.
  // `listen`: hear the other sidecars' wake-ups (not for a reader).
  // The writer (`listen`) also sweeps the jobs table (pg_sweeper.hpp).
  // `restored` (fenceqd --restored, C1.5): once connected, the first time,
  // the fence epoch is raised (pg::raise_fence_epoch) before any request.
  explicit PgStore(const std::string& uri, bool listen = true, bool restored = false);
  ~PgStore() override;
  // VACUUMs of the jobs table this store's sweeper completed (for tests).
  std::uint64_t sweeps() const;

  // begin: the BEGIN goes out with the first statement (reconnecting first
  // when disconnected). commit: returns once PostgreSQL committed (as durably
  // as its synchronous_commit says). The statements that free a job notify
  // the other sidecars themselves, at COMMIT.
  void begin() override;
  void commit() override;
  void rollback() noexcept override;

  std::optional<JobState> state(std::string_view id) override;
  std::vector<JobInfo> list(const ListFilter& filter, double now) override;
  std::optional<Payload> payload(std::string_view id) override;
  JobResults results(const std::vector<std::string>& ids, double now) override;
  Links links(std::string_view id) override;
  QueueChanges take_queue_changes() override;
  QueueTally::Entries take_queue_totals() override;
  std::optional<double> next_claimable_at(std::string_view queue, double now) override;
  std::optional<QueueConfig> queue_config(std::string_view queue) override;
  std::vector<std::pair<std::string, QueueConfig>> queue_configs() override;
  std::vector<std::pair<std::string, Retention>> retentions() override;
  std::vector<std::tuple<std::string, std::string, GroupOverride>> group_configs() override;
  std::vector<StoredSchedule> schedules() override;
  std::vector<QueueStats> queue_stats(double now) override;

  // A store on its own connection that does not LISTEN.
  std::unique_ptr<StoreReads> open_reader() const override;
  // One round trip for the whole batch (and its COMMIT when asked): every
  // call's statement in one pipeline, BEGIN first when still pending. A
  // batch with a schedule_set (which reads before it writes) runs call by
  // call instead, and never commits itself.
  bool run(const std::vector<Call>& calls, std::vector<CallResult>& out,
           bool commit_after) override;
  std::int64_t total_changes() override { return changes_; }
  double clock_high_water() override;
  SharedDatabase* shared() override { return this; }
  EventNotes* event_notes() override { return this; }
  void note() override;  // EventNotes (pg_events.cpp)
  // pg_after.cpp's: a step of the settling any sidecar left
  // (C3.13); some may always be left, by another sidecar.
  SettleStep settle_step(double now) override;
  bool settle_left() const override { return true; }
  std::vector<JobEvent> take() override { return std::exchange(events_, {}); }

  // SharedDatabase: the connection's.
  std::optional<double> clock_offset() const override { return conn_.clock_offset(); }
  int wakeup_fd() override { return conn_.wakeup_fd(); }
  // A queue another writer put a job of a group in counts as grouped at once.
  Wakeups take_wakeups() override {
    auto w = conn_.take_wakeups();
    for (const auto& q : w.grouped) grouped_.insert(q);
    return w;
  }
  std::uint64_t connection_epoch() const override { return conn_.epoch(); }

  // EXPLAIN of claim_next's statement, one plan line a line (tests and diagnostics).
  std::string claim_next_plan();
  // The URI with any password replaced by ***.
  std::string describe() const override { return conn_.described(); }

  // For tests and diagnostics only: the connection, nullptr while disconnected.
  PGconn* raw() { return conn_.raw(); }
  bool connected() const { return conn_.connected(); }
  // The LISTEN/NOTIFY channel of this database and schema.
  const std::string& channel() const { return conn_.channel(); }

  // One run() in one pipeline (pg_batch.hpp): for pg_batch.cpp and
  // pg_writes.cpp alone.
  struct Batch;

 private:
  // One batch without a schedule_set, in one pipeline (run()).
  bool run_batch(const std::vector<Call>& calls, std::vector<CallResult>& out,
                 bool commit_after);
  // schedule_set: the count of schedules first (kMaxSchedules), then the write.
  void set_schedule(const ScheduleSetParams& p, CallResult& r);
  void freed(std::string_view queue);  // a job of `queue` may have become claimable
  void count_changes(PGresult* res);
  // Counts refused fenced writes (call index, op) for their jobs' queues.
  void count_refusals(
      const std::vector<Call>& calls,
      const std::vector<std::pair<std::size_t, std::uint64_t QueueTotals::Refused::*>>& refusals,
      bool committed);

  PgConnection conn_;
  std::int64_t changes_ = 0;
  std::int64_t swept_from_ = 0;          // changes_ when the sweeper last heard
  std::unique_ptr<PgSweeper> sweeper_;  // the writer's
  void ended();                         // a transaction ended: tell the sweeper
  // The queues this sidecar knows to have settings (pg_writes.cpp, "A queue's
  // settings"): their claims go through the full statement. Read again with
  // a batch that claims, at most every kConfigsReread; set_queue_config adds.
  std::unordered_set<std::string> configured_;
  // The queues it knows to have groups (a row in queue_groups): their
  // claim_next goes through fenceq_claim_fair. Read again with configured_;
  // an enqueue of a grouped job adds its queue; the other statements claim
  // nothing of a queue with groups, so a stale guess only delays a claim.
  std::unordered_set<std::string> grouped_;
  std::chrono::steady_clock::time_point configs_read_{};
  // Whether this transaction holds kWriteLock (taken by its first batch of writes).
  bool write_locked_ = false;
  static constexpr std::chrono::milliseconds kConfigsReread{1000};
  QueueChanges queue_changes_;
  QueueTally tally_;  // take_queue_totals()
  // pg_events.cpp's: with --events, the job changes this session's
  // transaction made, read from its temporary table before COMMIT.
  bool events_on_ = false;
  std::vector<JobEvent> events_;
  void read_events();
};

}  // namespace fenceq::daemon
