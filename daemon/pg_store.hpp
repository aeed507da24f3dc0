// The PostgreSQL store: one database shared by the fenceqd sidecars of many
// hosts, through libpq.
//
// Every SQL statement of the PostgreSQL store lives in pg_store.cpp. Each
// operation is one conditional statement (claims: UPDATE ... RETURNING, and
// FOR UPDATE SKIP LOCKED for claim_next), so it is atomic against every other
// sidecar too; fences come from the row and never go back. Statements are
// prepared once per connection (again after a reconnect).
//
// Failures: a lost connection, a server shutting down, a failover to a
// read-only standby or a full server throw StoreError Kind::unavailable and
// leave the store disconnected; begin() reconnects with backoff (100 ms
// doubling to 5 s) and never blocks longer than the connect timeout (2 s
// unless the URI sets connect_timeout). A connection that breaks during
// COMMIT throws Kind::outcome_unknown. Deadlocks and serialization failures
// throw Kind::retry; everything else Kind::internal.
#pragma once

#include <libpq-fe.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "store.hpp"

namespace fenceq::daemon {

struct PgConnCloser {
  void operator()(PGconn* c) const { PQfinish(c); }
};
struct PgResultClear {
  void operator()(PGresult* r) const { PQclear(r); }
};
using PgConn = std::unique_ptr<PGconn, PgConnCloser>;
using PgResult = std::unique_ptr<PGresult, PgResultClear>;

class PgParams;

class PgStore final : public Store {
 public:
  // Parses `uri` (a postgresql:// URI or a key=value connection string) and
  // connects once. Throws StoreError when the URI is malformed, or when the
  // server refuses the connection for a reason a retry will not cure (bad
  // credentials, no such database or role, a database that is not UTF8, a
  // schema that cannot be created). An unreachable server is not an error:
  // the store starts disconnected and answers `unavailable` until it is back.
  // `listen`: hear the other sidecars' wake-ups (not for a reader).
  explicit PgStore(const std::string& uri, bool listen = true);
  PgStore(const PgStore&) = delete;
  PgStore& operator=(const PgStore&) = delete;
  ~PgStore() override;

  // BEGIN ISOLATION LEVEL READ COMMITTED, in the same round trip as reading
  // the database clock (clock_offset()). Reconnects first when disconnected
  // and the backoff has elapsed; otherwise throws unavailable at once.
  void begin() override;
  // Sends the wake-up (pg_notify) when the transaction may have made a job
  // claimable, then COMMIT; returns once PostgreSQL committed (as durably as
  // its synchronous_commit says). When the connection dies during COMMIT the
  // outcome is unknown: Kind::outcome_unknown. When it was lost earlier in
  // the transaction (nothing can have been committed): Kind::unavailable.
  void commit() override;
  void rollback() noexcept override;

  bool enqueue(const protocol::Request& r, double now) override;
  std::optional<JobState> state(std::string_view id) override;
  std::optional<std::int64_t> claim(std::string_view id, std::string_view owner, double now,
                                    double ttl) override;
  std::optional<ClaimedJob> claim_next(std::string_view queue, std::string_view owner,
                                              double now, double ttl) override;
  bool renew(std::string_view id, std::string_view owner, std::int64_t fence, double now,
             double ttl) override;
  bool complete(std::string_view id, std::string_view owner, std::int64_t fence,
                const std::optional<std::string>& result, double now) override;
  bool release(std::string_view id, std::string_view owner, std::int64_t fence) override;
  bool fail(std::string_view id, std::string_view owner, std::int64_t fence,
            std::string_view error, std::optional<double> retry_in, double now) override;
  bool unclaim(std::string_view id, std::string_view owner, std::int64_t fence) override;
  bool check(std::string_view id, std::string_view owner, std::int64_t fence,
             double now) override;
  bool retry(std::string_view id, double now) override;
  void reap_exhausted(double now) override;
  std::int64_t purge(const std::optional<std::string>& queue, double older_than,
                     double now) override;
  protocol::JobList list(const protocol::Request& r, double now) override;
  QueueChanges take_queue_changes() override;
  std::optional<double> next_claimable_at(std::string_view queue, double now) override;
  std::vector<protocol::QueueStats> queue_stats(double now) override;
  // With SET LOCAL statement_timeout: in its own short transaction between
  // batches, under a savepoint inside one. nullopt on timeout or when the
  // database cannot be reached (it does not reconnect).
  std::optional<std::vector<protocol::QueueStats>> queue_stats_within(double now,
                                                                      int budget_ms) override;

  // A store on its own connection that does not LISTEN.
  std::unique_ptr<Store> open_reader() const override;
  std::int64_t total_changes() override { return changes_; }
  double clock_high_water() override;
  // GREATEST(stored, t): several sidecars write it.
  void set_clock_high_water(double t) override;

  // Database clock - this host's wall clock, measured by the last begin()
  // (and at each connect); nullopt until measured once.
  std::optional<double> clock_offset() const override { return clock_offset_; }
  // The connection's socket (it changes with a reconnect; -1 while
  // disconnected): readable when a LISTEN notification from another sidecar
  // may have arrived.
  int wakeup_fd() override;
  // Reads what arrived: the queues other sidecars freed a job in, or all
  // (a sender with many queues; the connection found lost: the caller should
  // try its parked claims, and will get `unavailable` or a fresh
  // connection). Our own notifications are ignored. Notifications that
  // arrived while one of our statements ran are queued inside libpq without
  // making the socket readable: call this after each batch as well.
  Wakeups take_wakeups() override;
  bool shared() const override { return true; }
  // The strings a write would store that hold U+0000 (PostgreSQL text cannot).
  std::optional<std::string> unstorable(const protocol::Request& r) const override;
  // 0 before the first successful connection; +1 with every (re)connection.
  std::uint64_t connection_epoch() const override { return epoch_; }

  // EXPLAIN of claim_next's statement, one plan line a line.
  std::string claim_next_plan() override;
  // The URI with any password replaced by ***.
  std::string describe() const override { return described_; }

  // For tests and diagnostics only: the connection, nullptr while disconnected.
  PGconn* raw() { return conn_.get(); }
  bool connected() const { return conn_ != nullptr; }
  // The LISTEN/NOTIFY channel of this database and schema.
  const std::string& channel() const { return channel_; }

 private:
  using SteadyClock = std::chrono::steady_clock;

  // Connects when disconnected and the backoff allows; throws unavailable
  // otherwise (or the setup's error).
  void ensure_connected();
  // One connection attempt: connects, checks the server, creates the schema
  // (once per store), LISTENs, prepares. False with last_error_ set when the
  // server cannot be reached; throws StoreError for what a retry will not cure.
  bool try_connect(bool first);
  void setup_session();
  void migrate();
  void prepare_all();
  void drop_connection(const std::string& why) noexcept;

  // The connection for an operation: inside a transaction the one it runs
  // on (unavailable when it was lost); outside, connecting if needed.
  PGconn* conn_for_op();
  // Runs prepared statement `stmt` (binary results). Throws a classified
  // StoreError unless the result is PGRES_COMMAND_OK / PGRES_TUPLES_OK.
  PgResult run(int stmt, const PgParams& p, const char* what);
  // A plain SQL string (no parameters, text results).
  PgResult exec(const char* sql, const char* what);
  [[noreturn]] void fail_with(PGresult* res, const char* what);
  void freed(std::string_view queue);  // a job of `queue` may have become claimable
  void notify(std::string_view queue);  // tell the other sidecars, at COMMIT
  void count_changes(PGresult* res);

  std::string uri_;        // as given
  std::string described_;  // without the password
  std::vector<std::string> keys_, values_;  // for PQconnectdbParams

  PgConn conn_;
  bool listen_ = true;
  bool schema_ready_ = false;
  bool in_tx_ = false;
  // The queues in which the open transaction may have made a job claimable:
  // for take_freed_queues(), and for the other sidecars (pg_notify at COMMIT).
  QueueChanges queue_changes_;
  std::vector<std::string> notify_;
  std::uint64_t epoch_ = 0;
  std::int64_t changes_ = 0;
  std::optional<double> clock_offset_;
  std::string channel_;
  std::string last_error_ = "not connected yet";
  SteadyClock::time_point next_attempt_{};
  std::chrono::milliseconds backoff_{100};
};

// Opens the PostgreSQL store at `uri` (postgresql://...).
std::unique_ptr<Store> open_pg_store(const std::string& uri);

}  // namespace fenceq::daemon
