// PostgreSQL through libpq, for the PostgreSQL store (pg_store.hpp): the
// connection string and fenceqd's defaults, connecting and reconnecting with
// backoff, the session's settings and LISTEN channel, prepared statements,
// transactions (with the database clock read at BEGIN and the other sidecars
// notified at COMMIT), parameters and results in binary, and what each
// failure means (StoreError's kinds). It knows no job: the statements and
// the schema are the store's.
//
// Failures: a lost connection, a server shutting down, a failover to a
// read-only standby or a full server throw Kind::unavailable and leave the
// connection dropped; the next begin() reconnects with backoff (100 ms
// doubling to 5 s) and never blocks longer than the connect timeout (2 s
// unless the URI sets connect_timeout). A connection that breaks once a
// COMMIT was sent throws Kind::outcome_unknown, unless the server said the
// transaction did not commit (an error it sent for a statement before
// COMMIT): a batch is never run again when it may have been applied. A
// session that ended while idle (a restart, a failover, an idle timeout)
// is, once its end has reached this host, found before a transaction is
// sent on it, and replaced. Deadlocks and serialization failures
// throw Kind::retry; lock and statement timeouts Kind::unavailable (the
// connection kept); everything else Kind::internal.
#pragma once

#include <libpq-fe.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "storage/shared_database.hpp"
#include "storage/store_error.hpp"

namespace fenceq::daemon {

struct PgConnCloser {
  void operator()(PGconn* c) const { PQfinish(c); }
};
struct PgResultClear {
  void operator()(PGresult* r) const { PQclear(r); }
};
using PgConn = std::unique_ptr<PGconn, PgConnCloser>;
using PgResult = std::unique_ptr<PGresult, PgResultClear>;

// Type OIDs of the built-in types fenceq sends and reads (pg_type.dat).
inline constexpr Oid kBool = 16, kBytea = 17, kInt8 = 20, kInt2 = 21, kInt4 = 23, kText = 25,
                     kFloat4 = 700, kFloat8 = 701;

// A statement to prepare on every connection; its number is its place in
// the list given to PgConnection.
struct PgStatement {
  std::string sql;
  std::vector<Oid> types;
};

// Parameters of one statement, all in binary format: strings as their bytes
// (no terminator: a length is sent), numbers big-endian. Views must outlive
// the statement's execution; numbers are kept here.
class PgParams {
 public:
  static constexpr int kMax = 16;
  PgParams() = default;
  PgParams(const PgParams&) = delete;
  PgParams& operator=(const PgParams&) = delete;

  PgParams& text(std::string_view v);
  PgParams& bytea(std::string_view v) { return text(v); }
  PgParams& opt_text(const std::optional<std::string_view>& v) { return v ? text(*v) : null(); }
  PgParams& null() { return bytes(nullptr, 0); }
  PgParams& i8(std::int64_t v);
  PgParams& f8(double v);
  PgParams& opt_f8(std::optional<double> v) { return v ? f8(*v) : null(); }
  PgParams& boolean(bool v);

  int size() const { return n_; }
  const char* const* values() const { return values_.data(); }
  const int* lengths() const { return lengths_.data(); }
  const int* formats() const { return formats_.data(); }

 private:
  PgParams& bytes(const char* p, std::size_t n);
  int n_ = 0;
  std::array<const char*, kMax> values_{};
  std::array<int, kMax> lengths_{}, formats_{};
  std::array<std::array<char, 8>, kMax> nums_{};
};

// Columns of a binary result; a NULL reads as nullopt, 0 or "".
std::string_view bytes_at(const PGresult* r, int row, int col);
std::optional<std::string> text_at(const PGresult* r, int row, int col);
std::int64_t int_at(const PGresult* r, int row, int col);  // int2/4/8 and bool
double double_at(const PGresult* r, int row, int col);    // float4/8 and ints
bool ok(const PGresult* r);  // PGRES_COMMAND_OK or PGRES_TUPLES_OK

// PostgreSQL's text cannot hold U+0000, which strict UTF-8 (the codec's)
// allows: such a string is refused before anything is sent, so the
// transaction stays usable (Kind::refused).
bool has_nul(std::string_view s);
[[noreturn]] void refuse_nul(const char* field);

// The URI (or key=value string) without its password.
std::string mask_password(const std::string& s);
// A server message without its trailing newline.
std::string trim(std::string s);
// libpq's notice processor for fenceqd's connections: notices (a VACUUM's
// skipped table, say) go to the log at debug, not to stderr.
void log_notice(void*, const char* message);

class PgConnection {
 public:
  // Creates the schema; called once per connection object, on its first
  // session, before the statements are prepared.
  using Migrate = std::function<void(PgConnection&)>;

  // Parses `uri` (a postgresql:// URI or a key=value connection string) and
  // connects once. Throws StoreError when the URI is malformed, or when the
  // server refuses the connection for a reason a retry will not cure (bad
  // credentials, no such database or role, a database that is not UTF8, a
  // schema that cannot be created). An unreachable server is not an error:
  // the connection starts dropped and operations throw `unavailable` until
  // it is back. `listen`: LISTEN on the store's channel (wake-ups).
  PgConnection(const std::string& uri, std::vector<PgStatement> statements, Migrate migrate,
               bool listen);
  PgConnection(const PgConnection&) = delete;
  PgConnection& operator=(const PgConnection&) = delete;
  ~PgConnection();

  // Opens a transaction. Its BEGIN ISOLATION LEVEL READ COMMITTED, with a
  // read of the database clock (clock_offset()), goes out with the first
  // statement, in the same round trip (reconnecting first when dropped).
  void begin();
  // COMMIT; nothing to send when no statement ran. A connection that breaks
  // during COMMIT throws Kind::outcome_unknown.
  void commit();
  void rollback() noexcept;

  // One statement of a pipeline: a prepared statement with its parameters,
  // or (stmt < 0) plain SQL without any.
  struct Step {
    int stmt = -1;
    const PgParams* params = nullptr;
    const char* sql = nullptr;
  };
  // `steps` in one round trip (libpq's pipeline mode), inside the open
  // transaction: its BEGIN first when still pending, and COMMIT last when
  // `commit` (the transaction then ends here). Returns each step's result, in
  // order. On the first failure the transaction is aborted: a classified
  // StoreError (the caller rolls back); a connection that breaks after a
  // COMMIT was sent: Kind::outcome_unknown, unless the server's answer
  // proves the transaction did not commit. A pipeline that carries the
  // BEGIN is sent again, once, on a new session, only when nothing of it can
  // have been applied: the connection broke before BEGIN's answer, and the
  // pipeline carried no COMMIT or the server's answer to BEGIN was an error
  // (the FATAL of a session it ended).
  std::vector<PgResult> pipeline(const std::vector<Step>& steps, bool commit, const char* what);

  // Runs prepared statement `stmt` (binary results). Throws a classified
  // StoreError unless the result is PGRES_COMMAND_OK / PGRES_TUPLES_OK.
  PgResult run(int stmt, const PgParams& p, const char* what);
  // Two prepared statements in one round trip (a pipeline); the second's
  // result is PGRES_PIPELINE_ABORTED when the first failed.
  std::array<PgResult, 2> run_both(int first, const PgParams& p1, int second,
                                   const PgParams& p2, const char* what);
  // A plain SQL string (no parameters, text results), on the open session.
  PgResult exec(const char* sql, const char* what);
  // Runs `setup` on this session now (when connected) and on every session
  // after a reconnection, once the statements are prepared.
  void on_session(std::function<void(PgConnection&)> setup);
  // A statement with text parameters of the given types, not prepared.
  PgResult exec_params(const std::string& sql, const PgParams& p, const std::vector<Oid>& types,
                       const char* what);

  // Database clock - this host's wall clock, measured by the last begin()
  // (and at each connect); nullopt until measured once.
  std::optional<double> clock_offset() const { return clock_offset_; }
  // The socket (-1 while dropped): readable when a notification may have come.
  int wakeup_fd();
  // What arrived from other sessions (ours are ignored); `all` when the
  // connection was found lost. Notifications that came while a statement of
  // ours ran wait inside libpq: call this after each batch as well.
  SharedDatabase::Wakeups take_wakeups();
  // 0 before the first successful connection; +1 with every (re)connection.
  std::uint64_t epoch() const { return epoch_; }

  const std::string& uri() const { return uri_; }
  const std::string& described() const { return described_; }  // without the password
  const std::string& channel() const { return channel_; }  // of this database and schema
  PGconn* raw() { return conn_.get(); }  // nullptr while dropped
  bool connected() const { return conn_ != nullptr; }

 private:
  using SteadyClock = std::chrono::steady_clock;

  // Connects when dropped and the backoff allows; throws unavailable
  // otherwise (or the setup's error).
  void ensure_connected();
  // One connection attempt: connects, checks the server, creates the schema
  // (once), LISTENs, prepares. False with last_error_ set when the server
  // cannot be reached; throws StoreError for what a retry will not cure.
  bool try_connect(bool first);
  void setup_session();
  void prepare_all();
  void drop_connection(const std::string& why) noexcept;
  // Between transactions, before a BEGIN is sent: a session the server
  // ended (its FATAL or the end of the stream waiting in the socket) is
  // dropped, so that the BEGIN goes out on a new one. One poll() of the
  // socket when it is alive.
  void check_idle() noexcept;
  // libpq's notice receiver: logs the notice (log_notice); a FATAL marks
  // the session ended by the server (ended_by_server_).
  static void on_notice(void* self, const PGresult* r);
  // The connection for an operation: inside a transaction the one it runs
  // on (unavailable when it was lost); outside, connecting if needed.
  PGconn* conn_for_op();
  [[noreturn]] void fail_with(PGresult* res, const char* what);
  // A pipeline's BEGIN and its clock read (sent at `sent_at`, this host's
  // wall clock) answered: the transaction is open, the offset measured.
  void begun(PGresult* begin, const PGresult* clock, double sent_at);

  std::string uri_;        // as given
  std::string described_;  // without the password
  std::vector<PgStatement> statements_;
  Migrate migrate_;
  std::function<void(PgConnection&)> session_setup_;  // on_session()
  bool listen_;
  std::vector<std::string> keys_, values_;  // for PQconnectdbParams

  PgConn conn_;
  bool schema_ready_ = false;
  bool begin_pending_ = false;  // in_tx_, and its BEGIN not sent yet
  bool warned_async_ = false;
  bool in_tx_ = false;
  bool ended_by_server_ = false;  // a FATAL came as a notice: the session is over
  std::uint64_t epoch_ = 0;
  std::optional<double> clock_offset_;
  std::string channel_;
  std::string last_error_ = "not connected yet";
  SteadyClock::time_point next_attempt_{};
  std::chrono::milliseconds backoff_{100};
};

}  // namespace fenceq::daemon
