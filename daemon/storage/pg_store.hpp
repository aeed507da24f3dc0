// The PostgreSQL store: one database shared by the fenceqd sidecars of many
// hosts (docs/operating.md, "Many hosts").
//
// Every SQL statement of the PostgreSQL store lives in pg_store.cpp, built
// from the rules in job_rules.hpp; the connection, its failures and its
// transactions are pg_connection.hpp's. Each operation is one conditional
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

#include "pg_connection.hpp"
#include "store.hpp"

namespace fenceq::daemon {

class PgStore final : public Store, public SharedDatabase {
 public:
  // Connects (see PgConnection) and creates the schema if it is missing.
  // `listen`: hear the other sidecars' wake-ups (not for a reader).
  explicit PgStore(const std::string& uri, bool listen = true);

  // begin: the BEGIN goes out with the first statement (reconnecting first
  // when disconnected). commit: returns once PostgreSQL committed (as durably
  // as its synchronous_commit says). The statements that free a job notify
  // the other sidecars themselves, at COMMIT.
  void begin() override;
  void commit() override;
  void rollback() noexcept override;

  bool enqueue(const NewJob& job, double now) override;
  std::optional<JobState> state(std::string_view id) override;
  std::optional<std::int64_t> claim(std::string_view id, std::string_view owner, double now,
                                    double ttl) override;
  std::vector<ClaimedJob> claim_next(std::string_view queue, std::string_view owner, double now,
                                     double ttl, std::int64_t max) override;
  using Store::claim_next;
  bool renew(std::string_view id, std::string_view owner, std::int64_t fence, double now,
             double ttl, std::optional<std::string_view> progress = std::nullopt) override;
  bool complete(std::string_view id, std::string_view owner, std::int64_t fence,
                const std::optional<std::string>& result, double now) override;
  bool release(std::string_view id, std::string_view owner, std::int64_t fence) override;
  bool fail(std::string_view id, std::string_view owner, std::int64_t fence,
            std::string_view error, std::optional<double> retry_in, double now) override;
  bool unclaim(std::string_view id, std::string_view owner, std::int64_t fence) override;
  bool check(std::string_view id, std::string_view owner, std::int64_t fence,
             double now) override;
  bool retry(std::string_view id, double now) override;
  bool cancel(std::string_view id, double now) override;
  void reap_exhausted(double now) override;
  std::int64_t purge(const std::optional<std::string>& queue, double older_than,
                     double now) override;
  std::vector<JobInfo> list(const ListFilter& filter, double now) override;
  std::optional<Payload> payload(std::string_view id) override;
  QueueChanges take_queue_changes() override;
  QueueTally::Entries take_queue_totals() override;
  std::optional<double> next_claimable_at(std::string_view queue, double now) override;
  void set_queue_config(std::string_view queue, const QueueConfig& config) override;
  std::optional<QueueConfig> queue_config(std::string_view queue) override;
  std::vector<std::pair<std::string, QueueConfig>> queue_configs() override;
  bool schedule_set(const Schedule& schedule, double now) override;
  bool schedule_delete(std::string_view name) override;
  std::vector<StoredSchedule> schedules() override;
  bool take_tick(std::string_view name, double tick) override;
  std::vector<QueueStats> queue_stats(double now) override;

  // A store on its own connection that does not LISTEN.
  std::unique_ptr<Store> open_reader() const override;
  // One round trip for the whole batch (and its COMMIT when asked): every
  // call's statement in one pipeline, BEGIN first when still pending.
  bool run(const std::vector<Call>& calls, std::vector<CallResult>& out,
           bool commit_after) override;
  std::int64_t total_changes() override { return changes_; }
  double clock_high_water() override;
  // GREATEST(stored, t): several sidecars write it.
  void set_clock_high_water(double t) override;
  SharedDatabase* shared() override { return this; }

  // SharedDatabase: the connection's.
  std::optional<double> clock_offset() const override { return conn_.clock_offset(); }
  int wakeup_fd() override { return conn_.wakeup_fd(); }
  Wakeups take_wakeups() override { return conn_.take_wakeups(); }
  std::uint64_t connection_epoch() const override { return conn_.epoch(); }

  // EXPLAIN of claim_next's statement, one plan line a line.
  std::string claim_next_plan() override;
  // The URI with any password replaced by ***.
  std::string describe() const override { return conn_.described(); }

  // For tests and diagnostics only: the connection, nullptr while disconnected.
  PGconn* raw() { return conn_.raw(); }
  bool connected() const { return conn_.connected(); }
  // The LISTEN/NOTIFY channel of this database and schema.
  const std::string& channel() const { return conn_.channel(); }

 private:
  void freed(std::string_view queue);  // a job of `queue` may have become claimable
  void count_changes(PGresult* res);
  // Counts refused fenced writes (call index, op) for their jobs' queues.
  void count_refusals(
      const std::vector<Call>& calls,
      const std::vector<std::pair<std::size_t, std::uint64_t QueueTotals::Refused::*>>& refusals,
      bool committed);

  PgConnection conn_;
  std::int64_t changes_ = 0;
  // The queues this sidecar knows to have settings (pg_store.cpp, "A queue's
  // settings"): their claims go through the full statement. Read again with
  // a batch that claims, at most every kConfigsReread; set_queue_config adds.
  std::unordered_set<std::string> configured_;
  std::chrono::steady_clock::time_point configs_read_{};
  static constexpr std::chrono::milliseconds kConfigsReread{1000};
  QueueChanges queue_changes_;
  QueueTally tally_;  // take_queue_totals()
};

}  // namespace fenceq::daemon
