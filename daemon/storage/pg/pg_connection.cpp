#include "storage/pg/pg_connection.hpp"

#include <endian.h>
#include <poll.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <utility>

namespace fenceq::daemon {

using Kind = StoreError::Kind;

namespace {

const char* stmt_name(int s) {
  static const auto names = [] {
    std::array<std::string, 128> n;  // past every statement's number (kWriteEnd)
    for (std::size_t i = 0; i < n.size(); ++i) n[i] = "fenceq_" + std::to_string(i);
    return n;
  }();
  return names.at(static_cast<std::size_t>(s)).c_str();
}

Kind classify(const std::string& sqlstate, bool connection_lost) {
  if (connection_lost) return Kind::unavailable;
  if (sqlstate.size() == 5) {
    // 08: connection exceptions. 57P01-03: admin / crash shutdown, cannot
    // connect now. 25006: a read-only transaction, i.e. we are on a standby
    // after a failover. 53300: too many connections.
    if (sqlstate.starts_with("08") || sqlstate == "57P01" || sqlstate == "57P02" ||
        sqlstate == "57P03" || sqlstate == "25006" || sqlstate == "53300") {
      return Kind::unavailable;
    }
    // lock_timeout, statement_timeout: another session held a row too long
    // (a stalled sidecar) or the server is overloaded; the connection is fine.
    if (sqlstate == "55P03" || sqlstate == "57014") return Kind::unavailable;
    if (sqlstate == "40001" || sqlstate == "40P01") return Kind::retry;
  }
  return Kind::internal;
}

// A failed first connection that a retry will not cure: the daemon should
// stop with the server's message rather than serve `unavailable` forever.
bool config_error(PGconn* c, const std::string& msg) {
  if (PQconnectionNeedsPassword(c)) return true;
  for (const char* m : {"authentication failed", "does not exist", "pg_hba.conf",
                        "no password supplied", "permission denied", "not permitted to log in",
                        "unrecognized configuration parameter", "invalid value for parameter"}) {
    if (msg.find(m) != std::string::npos) return true;
  }
  return false;
}


double wall_now() {
  using namespace std::chrono;
  return duration<double>(system_clock::now().time_since_epoch()).count();
}

// The URI (or key=value string) without its password.
}  // namespace

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\r')) s.pop_back();
  return s;
}

void log_notice(void*, const char* message) {
  spdlog::debug("postgresql: {}", trim(message ? message : ""));
}

void PgConnection::on_notice(void* self, const PGresult* r) {
  // A FATAL (or PANIC) that came while no statement of ours ran is the
  // server ending the session (a restart, pg_terminate_backend): libpq
  // hands it here as a notice, and the socket's end may not have come yet.
  const char* severity = PQresultErrorField(r, PG_DIAG_SEVERITY_NONLOCALIZED);
  if (!severity) severity = PQresultErrorField(r, PG_DIAG_SEVERITY);
  if (severity && (std::strcmp(severity, "FATAL") == 0 || std::strcmp(severity, "PANIC") == 0)) {
    static_cast<PgConnection*>(self)->ended_by_server_ = true;
  }
  log_notice(nullptr, PQresultErrorMessage(r));
}

std::string mask_password(const std::string& s) {
  std::string out = s;
  if (out.starts_with("postgresql://") || out.starts_with("postgres://")) {
    std::size_t start = out.find("://") + 3;
    std::size_t end = out.find_first_of("/?", start);
    if (end == std::string::npos) end = out.size();
    std::size_t at = out.rfind('@', end - 1);
    if (end > start && at != std::string::npos && at >= start) {
      std::size_t colon = out.find(':', start);
      if (colon != std::string::npos && colon < at) out.replace(colon + 1, at - colon - 1, "***");
    }
    std::size_t q = out.find('?');
    while (q != std::string::npos) {
      std::size_t key = q + 1;
      std::size_t amp = out.find('&', key);
      std::size_t stop = amp == std::string::npos ? out.size() : amp;
      if (out.compare(key, 9, "password=") == 0 && key + 9 <= stop) {
        out.replace(key + 9, stop - key - 9, "***");
        stop = key + 12;
      }
      q = stop < out.size() ? stop : std::string::npos;
    }
    return out;
  }
  // key = value pairs; a value may be single-quoted with \ escapes.
  std::size_t i = 0;
  while ((i = out.find("password", i)) != std::string::npos) {
    bool word_start = i == 0 || out[i - 1] == ' ' || out[i - 1] == '\t';
    std::size_t j = i + 8;
    while (j < out.size() && (out[j] == ' ' || out[j] == '\t')) ++j;
    if (!word_start || j >= out.size() || out[j] != '=') {
      i += 8;
      continue;
    }
    ++j;
    while (j < out.size() && (out[j] == ' ' || out[j] == '\t')) ++j;
    std::size_t v = j;
    if (j < out.size() && out[j] == '\'') {
      ++j;
      while (j < out.size() && out[j] != '\'') j += out[j] == '\\' ? 2 : 1;
      j = std::min(j + 1, out.size());
    } else {
      while (j < out.size() && out[j] != ' ' && out[j] != '\t') ++j;
    }
    out.replace(v, j - v, "***");
    i = v + 3;
  }
  return out;
}

std::string_view bytes_at(const PGresult* r, int row, int col) {
  return {PQgetvalue(r, row, col), static_cast<std::size_t>(PQgetlength(r, row, col))};
}

std::optional<std::string> text_at(const PGresult* r, int row, int col) {
  if (PQgetisnull(r, row, col)) return std::nullopt;
  return std::string(bytes_at(r, row, col));
}

namespace {

[[noreturn]] void bad_column(const PGresult* r, int col) {
  throw StoreError(std::string("postgresql: unexpected type ") + std::to_string(PQftype(r, col)) +
                       " of column '" + (PQfname(r, col) ? PQfname(r, col) : "?") + "'");
}

}  // namespace

namespace {
template <typename U>
U be_at(std::string_view b) {
  U v;
  std::memcpy(&v, b.data(), sizeof v);
  if constexpr (sizeof(U) == 8) return be64toh(v);
  if constexpr (sizeof(U) == 4) return be32toh(v);
  if constexpr (sizeof(U) == 2) return be16toh(v);
  return v;
}
}  // namespace

std::int64_t int_at(const PGresult* r, int row, int col) {
  if (PQgetisnull(r, row, col)) return 0;
  auto b = bytes_at(r, row, col);
  switch (PQftype(r, col)) {
    case kInt8:
      if (b.size() == 8) return static_cast<std::int64_t>(be_at<std::uint64_t>(b));
      break;
    case kInt4:
      if (b.size() == 4) return static_cast<std::int32_t>(be_at<std::uint32_t>(b));
      break;
    case kInt2:
      if (b.size() == 2) return static_cast<std::int16_t>(be_at<std::uint16_t>(b));
      break;
    case kBool:
      if (b.size() == 1) return b[0] != 0;
      break;
  }
  bad_column(r, col);
}

double double_at(const PGresult* r, int row, int col) {
  if (PQgetisnull(r, row, col)) return 0;
  auto b = bytes_at(r, row, col);
  switch (PQftype(r, col)) {
    case kFloat8:
      if (b.size() == 8) {
        std::uint64_t bits = be_at<std::uint64_t>(b);
        double d;
        std::memcpy(&d, &bits, sizeof d);
        return d;
      }
      break;
    case kFloat4:
      if (b.size() == 4) {
        std::uint32_t bits = be_at<std::uint32_t>(b);
        float f;
        std::memcpy(&f, &bits, sizeof f);
        return f;
      }
      break;
    case kInt8:
    case kInt4:
    case kInt2: return static_cast<double>(int_at(r, row, col));
  }
  bad_column(r, col);
}

bool ok(const PGresult* r) {
  if (!r) return false;
  auto st = PQresultStatus(r);
  return st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK;
}

PgParams& PgParams::text(std::string_view v) { return bytes(v.empty() ? "" : v.data(), v.size()); }

PgParams& PgParams::i8(std::int64_t v) {
  std::uint64_t be = htobe64(static_cast<std::uint64_t>(v));
  std::memcpy(nums_[n_].data(), &be, 8);
  return bytes(nums_[n_].data(), 8);
}

PgParams& PgParams::f8(double v) {
  std::uint64_t bits;
  std::memcpy(&bits, &v, 8);
  bits = htobe64(bits);
  std::memcpy(nums_[n_].data(), &bits, 8);
  return bytes(nums_[n_].data(), 8);
}

PgParams& PgParams::boolean(bool v) {
  nums_[n_][0] = v ? 1 : 0;
  return bytes(nums_[n_].data(), 1);
}

PgParams& PgParams::bytes(const char* p, std::size_t n) {
  if (n_ >= kMax) throw StoreError("postgresql: too many parameters");
  if (n > static_cast<std::size_t>(INT_MAX)) throw StoreError("postgresql: value too long");
  values_[n_] = p;
  lengths_[n_] = static_cast<int>(n);
  formats_[n_] = 1;
  ++n_;
  return *this;
}

bool has_nul(std::string_view s) { return s.find('\0') != std::string_view::npos; }

void refuse_nul(const char* field) {
  throw StoreError(std::string("PostgreSQL text cannot hold U+0000: field '") + field +
                       "' contains a NUL character; nothing was applied",
                   Kind::refused);
}

PgConnection::PgConnection(const std::string& uri, std::vector<PgStatement> statements,
                           Migrate migrate, bool listen)
    : uri_(uri),
      described_(mask_password(uri)),
      statements_(std::move(statements)),
      migrate_(std::move(migrate)),
      listen_(listen) {
  char* err = nullptr;
  PQconninfoOption* opts = PQconninfoParse(uri.c_str(), &err);
  if (!opts) {
    std::string msg = err ? trim(err) : "out of memory";
    if (err) PQfreemem(err);
    throw StoreError("invalid PostgreSQL URI " + described_ + ": " + msg);
  }
  std::vector<std::string> given;
  for (auto* o = opts; o->keyword; ++o) {
    if (o->val) given.emplace_back(o->keyword);
  }
  PQconninfoFree(opts);
  auto has = [&](const char* k) { return std::find(given.begin(), given.end(), k) != given.end(); };
  // The URI first (expanded by libpq); our defaults only where it is silent.
  keys_.push_back("dbname");
  values_.push_back(uri);
  auto fallback = [&](const char* k, const char* v) {
    if (!has(k)) {
      keys_.push_back(k);
      values_.push_back(v);
    }
  };
  // A connection attempt blocks the serving thread at most this long.
  fallback("connect_timeout", "2");
  // After a failover, reconnect to the primary only (a standby refuses writes).
  fallback("target_session_attrs", "read-write");
  // A peer that vanished is noticed within about half a minute.
  fallback("keepalives_idle", "10");
  fallback("keepalives_interval", "5");
  fallback("keepalives_count", "3");
  // ... and while a query's bytes wait for an acknowledgement (keepalives do
  // not run then), within 10 s.
  fallback("tcp_user_timeout", "10000");
  keys_.push_back("fallback_application_name");
  values_.push_back("fenceqd");
  // Strings are UTF-8 on the wire whatever the URI says.
  keys_.push_back("client_encoding");
  values_.push_back("UTF8");

  bool connected = false;
  try {
    connected = try_connect(true);
  } catch (const StoreError& e) {
    throw StoreError(std::string("PostgreSQL ") + described_ + ": " + e.what(), Kind::internal);
  }
  if (!connected) {
    next_attempt_ = SteadyClock::now() + backoff_;
    spdlog::warn("PostgreSQL {} unreachable, serving `unavailable` until it is back: {}",
                 described_, last_error_);
  }
}

PgConnection::~PgConnection() { rollback(); }

bool PgConnection::try_connect(bool first) {
  std::vector<const char*> k, v;
  for (std::size_t i = 0; i < keys_.size(); ++i) {
    k.push_back(keys_[i].c_str());
    v.push_back(values_[i].c_str());
  }
  k.push_back(nullptr);
  v.push_back(nullptr);
  PgConn c(PQconnectdbParams(k.data(), v.data(), 1));
  if (!c) {
    last_error_ = "out of memory";
    return false;
  }
  if (PQstatus(c.get()) != CONNECTION_OK) {
    last_error_ = trim(PQerrorMessage(c.get()));
    if (first && config_error(c.get(), last_error_)) throw StoreError(last_error_);
    return false;
  }
  PQsetNoticeReceiver(c.get(), &PgConnection::on_notice, this);
  conn_ = std::move(c);
  ended_by_server_ = false;
  in_tx_ = false;
  begin_pending_ = false;
  try {
    setup_session();
  } catch (const StoreError& e) {
    last_error_ = e.what();
    drop_connection(e.what());
    if (e.kind == Kind::unavailable) return false;
    throw;
  }
  ++epoch_;
  backoff_ = std::chrono::milliseconds(100);
  last_error_.clear();
  return true;
}

void PgConnection::setup_session() {
  PGconn* c = conn_.get();
  const char* enc = PQparameterStatus(c, "server_encoding");
  if (!enc || std::string_view(enc) != "UTF8") {
    throw StoreError(std::string("the database's encoding is ") + (enc ? enc : "unknown") +
                         ", fenceq needs UTF8 (CREATE DATABASE ... ENCODING 'UTF8')");
  }
  if (PQserverVersion(c) < 90600) {
    throw StoreError("PostgreSQL " + std::to_string(PQserverVersion(c)) +
                         " is too old: fenceq needs 9.6 or later");
  }
  // A sidecar that stalls inside a transaction (SIGSTOP, a frozen VM) would
  // hold its jobs' row locks and block every other sidecar that touches them;
  // unless the DBA chose otherwise, PostgreSQL ends such a session, and a
  // statement waits at most lock_timeout for a row another session holds
  // (then `unavailable`: nothing applied, try again) or runs at most
  // statement_timeout: the serving thread is never blocked for long.
  exec("SELECT set_config('idle_in_transaction_session_timeout', '10s', false) "
       "WHERE current_setting('idle_in_transaction_session_timeout') = '0'",
       "session setup");
  exec("SELECT set_config('lock_timeout', '5s', false) "
       "WHERE current_setting('lock_timeout') = '0'",
       "session setup");
  exec("SELECT set_config('statement_timeout', '10s', false) "
       "WHERE current_setting('statement_timeout') = '0'",
       "session setup");
  // A reply leaves after COMMIT (C1.4). With synchronous_commit off, COMMIT
  // returns before its WAL is flushed: a crash of the server can undo claims
  // already answered, and any sidecar could then hand their fences out again.
  // fenceqd's own sessions commit with `on` whatever the database's default
  // (local, remote_write and remote_apply are durable on the primary, kept).
  auto sc = exec("SELECT current_setting('synchronous_commit')", "session setup");
  if (std::string_view(PQgetvalue(sc.get(), 0, 0)) == "off") {
    exec("SET synchronous_commit = on", "session setup");
    if (!warned_async_) {
      spdlog::warn("PostgreSQL {}: synchronous_commit is off for this database or role; "
                   "fenceqd's sessions use on, so that no acknowledged claim can be lost",
                   described_);
      warned_async_ = true;
    }
  }
  if (!schema_ready_) {
    migrate_(*this);
    schema_ready_ = true;
  }
  // One channel per database (NOTIFY's scope) and schema, a plain identifier.
  auto ch = exec("SELECT 'fenceq_' || substr(md5(COALESCE(current_schema()::text, '')), 1, 16)",
                 "session setup");
  channel_ = PQgetvalue(ch.get(), 0, 0);
  // The second channel, `_u`, is of jobs a trigger made claimable (a
  // child unblocked, pg_after.cpp): heard from this session too, since no
  // statement of this sidecar's knew of it.
  if (listen_) {
    exec(("LISTEN " + channel_).c_str(), "listen");
    exec(("LISTEN " + channel_ + "_u").c_str(), "listen");
    // The third, `_g`: a job of a group in that queue (notify_grouped_sql).
    exec(("LISTEN " + channel_ + "_g").c_str(), "listen");
  }
  prepare_all();
  if (session_setup_) session_setup_(*this);
  double t0 = wall_now();
  auto clock = exec("SELECT extract(epoch from clock_timestamp())::float8", "read the clock");
  double t1 = wall_now();
  clock_offset_ = std::strtod(PQgetvalue(clock.get(), 0, 0), nullptr) - (t0 + t1) / 2;
}

void PgConnection::on_session(std::function<void(PgConnection&)> setup) {
  session_setup_ = std::move(setup);
  if (conn_) session_setup_(*this);
}

void PgConnection::prepare_all() {
  for (std::size_t i = 0; i < statements_.size(); ++i) {
    const auto& s = statements_[i];
    PgResult res(PQprepare(conn_.get(), stmt_name(static_cast<int>(i)), s.sql.c_str(),
                           static_cast<int>(s.types.size()), s.types.data()));
    if (!ok(res.get())) fail_with(res.get(), "prepare");
  }
}

void PgConnection::drop_connection(const std::string& why) noexcept {
  if (!conn_) return;
  try {
    spdlog::warn("PostgreSQL {}: connection lost: {}", described_, why);
    last_error_ = why;
  } catch (...) {
  }
  conn_.reset();
  // The first reconnection may be tried at once, then with backoff.
  next_attempt_ = SteadyClock::now();
}

void PgConnection::check_idle() noexcept {
  if (!conn_) return;
  PGconn* c = conn_.get();
  // Nothing is due from the server between transactions but notifications:
  // a readable socket may be a session the server ended (its FATAL, then
  // the end of the stream, each may take a read; as take_wakeups).
  for (int reads = 0; !ended_by_server_ && reads < 4; ++reads) {
    pollfd p{PQsocket(c), POLLIN, 0};
    if (::poll(&p, 1, 0) != 1) break;
    if (PQconsumeInput(c) != 1 || PQstatus(c) == CONNECTION_BAD) {
      drop_connection(trim(PQerrorMessage(c)));
      return;
    }
  }
  if (ended_by_server_) drop_connection("the server ended the session");
}

void PgConnection::ensure_connected() {
  if (conn_) return;
  if (SteadyClock::now() < next_attempt_) {
    throw StoreError("PostgreSQL unavailable: " + last_error_, Kind::unavailable);
  }
  auto schedule_next = [&] {
    next_attempt_ = SteadyClock::now() + backoff_;
    backoff_ = std::min(backoff_ * 2, std::chrono::milliseconds(5000));
  };
  bool connected;
  try {
    connected = try_connect(false);
  } catch (...) {
    schedule_next();
    throw;
  }
  if (!connected) {
    schedule_next();
    throw StoreError("PostgreSQL unavailable: " + last_error_, Kind::unavailable);
  }
  spdlog::info("PostgreSQL {}: connected (connection {})", described_, epoch_);
}

PGconn* PgConnection::conn_for_op() {
  if (in_tx_) {
    if (!conn_) {
      throw StoreError("PostgreSQL connection lost during the transaction: " + last_error_, Kind::unavailable);
    }
    return conn_.get();
  }
  ensure_connected();
  return conn_.get();
}

void PgConnection::fail_with(PGresult* res, const char* what) {
  std::string state;
  std::string msg;
  if (res) {
    if (const char* s = PQresultErrorField(res, PG_DIAG_SQLSTATE)) state = s;
    msg = trim(PQresultErrorMessage(res));
  }
  if (msg.empty() && conn_) msg = trim(PQerrorMessage(conn_.get()));
  if (msg.empty()) msg = "no connection";
  bool lost = !conn_ || PQstatus(conn_.get()) == CONNECTION_BAD;
  Kind kind = classify(state, lost);
  // A timeout leaves the connection usable; anything else unavailable means
  // it is gone or pointed at the wrong server (a standby).
  if (kind == Kind::unavailable && (lost || (state != "55P03" && state != "57014"))) {
    drop_connection(msg);
  }
  throw StoreError(std::string("postgresql ") + what + ": " + msg, kind);
}

PgResult PgConnection::run(int stmt, const PgParams& p, const char* what) {
  if (begin_pending_) return std::move(pipeline({{stmt, &p, nullptr}}, false, what).front());
  PGconn* c = conn_for_op();
  PgResult res(PQexecPrepared(c, stmt_name(stmt), p.size(), p.values(), p.lengths(), p.formats(),
                              1));
  if (!ok(res.get())) fail_with(res.get(), what);
  return res;
}

PgResult PgConnection::exec(const char* sql, const char* what) {
  if (begin_pending_) pipeline({}, false, what);  // the transaction's BEGIN first
  if (!conn_) fail_with(nullptr, what);
  PgResult res(PQexec(conn_.get(), sql));
  if (!ok(res.get())) fail_with(res.get(), what);
  return res;
}

std::array<PgResult, 2> PgConnection::run_both(int first, const PgParams& p1, int second,
                                                const PgParams& p2, const char* what) {
  auto res = pipeline({{first, &p1, nullptr}, {second, &p2, nullptr}}, false, what);
  return {std::move(res[0]), std::move(res[1])};
}

namespace {

// Whether the server itself refused a query of a pipeline (an error result
// with a SQLSTATE; one libpq makes up for a lost connection has none) before
// its last query when `but_last` (COMMIT): the queries after it were skipped.
bool server_refused(const std::vector<PgResult>& res, bool but_last) {
  for (std::size_t i = 0; i + (but_last ? 1 : 0) < res.size(); ++i) {
    if (ok(res[i].get())) continue;
    return res[i] && PQresultErrorField(res[i].get(), PG_DIAG_SQLSTATE) != nullptr;
  }
  return false;
}

}  // namespace

void PgConnection::begun(PGresult* begin, const PGresult* clock, double sent_at) {
  if (!ok(begin)) fail_with(begin, "begin");
  begin_pending_ = false;
  if (ok(clock) && PQntuples(clock) == 1) clock_offset_ = double_at(clock, 0, 0) - sent_at;
}

std::vector<PgResult> PgConnection::pipeline(const std::vector<Step>& steps, bool commit,
                                             const char* what) {
  if (!in_tx_) throw StoreError(std::string("postgresql ") + what + ": no transaction is open");
  for (int attempt = 0;; ++attempt) {
    const bool with_begin = begin_pending_;
    // Nothing sent yet: a session found ended now is replaced at no risk.
    if (with_begin && attempt == 0) check_idle();
    const bool fresh = !conn_;
    if (with_begin) {
      // A (re)connection resets the transaction state: ours is still to begin.
      ensure_connected();
      in_tx_ = begin_pending_ = true;
    }
    PGconn* c = with_begin ? conn_.get() : conn_for_op();
    if (PQenterPipelineMode(c) != 1) fail_with(nullptr, what);
    auto plain = [&](const char* sql) {
      return PQsendQueryParams(c, sql, 0, nullptr, nullptr, nullptr, nullptr, 1) == 1;
    };
    const double t0 = wall_now();
    bool sent = !with_begin || (plain("BEGIN ISOLATION LEVEL READ COMMITTED") &&
                                plain("SELECT extract(epoch from clock_timestamp())::float8"));
    for (const auto& st : steps) {
      sent = sent && (st.stmt >= 0 ? PQsendQueryPrepared(c, stmt_name(st.stmt), st.params->size(),
                                                         st.params->values(), st.params->lengths(),
                                                         st.params->formats(), 1) == 1
                                   : plain(st.sql));
    }
    if (commit) sent = sent && plain("COMMIT");
    sent = sent && PQpipelineSync(c) == 1;
    // Each query's result (one, or more: the rest are dropped), up to the null
    // that ends it; then the sync point.
    std::vector<PgResult> res((with_begin ? 2 : 0) + steps.size() + (commit ? 1 : 0));
    if (sent) {
      for (auto& r : res) {
        while (PGresult* one = PQgetResult(c)) {
          if (!r) {
            r.reset(one);
          } else {
            PQclear(one);
          }
        }
        if (PQstatus(c) == CONNECTION_BAD) break;
      }
      if (PQstatus(c) == CONNECTION_OK) PQclear(PQgetResult(c));  // PGRES_PIPELINE_SYNC
    }
    const double t1 = wall_now();
    if (PQexitPipelineMode(c) != 1 && PQstatus(c) == CONNECTION_OK) {
      // Results still pending: the connection's state is unknown.
      std::string why = "pipeline not finished: " + trim(PQerrorMessage(c));
      drop_connection(why);
      throw StoreError(std::string("postgresql ") + what + ": " + why,
                       commit ? Kind::outcome_unknown : Kind::unavailable);
    }
    const bool broken = PQstatus(c) == CONNECTION_BAD;
    if (broken && commit && ok(res.back().get()) &&
        std::strcmp(PQcmdStatus(res.back().get()), "COMMIT") == 0) {
      // COMMIT's answer came, and every result before it: the transaction
      // committed, whatever became of the connection afterwards.
      drop_connection(trim(PQerrorMessage(c)));
    } else if (broken) {
      std::string msg = trim(PQerrorMessage(c));
      drop_connection(msg);
      // Whether the transaction may have committed. Without COMMIT in this
      // pipeline it cannot have: it died with its session. With COMMIT, only
      // the server can say it did not: an error it sent (with a SQLSTATE; an
      // error libpq makes up for a lost connection has none) for a query
      // before COMMIT, which then was skipped, or never run by a session
      // that ended (FATAL). A connection that broke with nothing of the
      // kind may have lost the answer of a COMMIT the server made.
      if (commit && !server_refused(res, true)) {
        throw StoreError(std::string("postgresql ") + what +
                             ": the connection broke during COMMIT, outcome unknown: " + msg,
                         Kind::outcome_unknown);
      }
      // A session that died while idle (a restart, a failover, a proxy's
      // timeout; when check_idle did not see it yet), found by a BEGIN that
      // did not succeed: nothing ran, so connect again at once.
      if (with_begin && (!res[0] || !ok(res[0].get())) && !fresh && attempt == 0) continue;
      throw StoreError(std::string("postgresql ") + what + ": " + msg, Kind::unavailable);
    }
    const std::size_t k = with_begin ? 2 : 0;
    if (with_begin) begun(res[0].get(), res[1].get(), (t0 + t1) / 2);
    // The first failure says why; the queries after it were skipped.
    for (std::size_t i = k; i < res.size(); ++i) {
      if (!ok(res[i].get())) fail_with(res[i].get(), what);
    }
    if (commit) {
      if (std::strcmp(PQcmdStatus(res.back().get()), "COMMIT") != 0) {
        throw StoreError(std::string("postgresql commit: the transaction was rolled back (") +
                         PQcmdStatus(res.back().get()) + ")");
      }
      in_tx_ = false;
      res.pop_back();
    }
    res.erase(res.begin(), res.begin() + static_cast<std::ptrdiff_t>(k));
    return res;
  }
}

PgResult PgConnection::exec_params(const std::string& sql, const PgParams& p,
                                   const std::vector<Oid>& types, const char* what) {
  PGconn* c = conn_for_op();
  PgResult res(PQexecParams(c, sql.c_str(), p.size(), types.data(), p.values(), p.lengths(),
                            p.formats(), 0));
  if (!ok(res.get())) fail_with(res.get(), what);
  return res;
}

void PgConnection::begin() {
  if (in_tx_) throw StoreError("postgresql begin: a transaction is already open");
  in_tx_ = true;
  begin_pending_ = true;
}

void PgConnection::commit() {
  if (!in_tx_) throw StoreError("postgresql commit: no transaction is open");
  if (begin_pending_) {  // nothing ran: nothing to commit
    in_tx_ = begin_pending_ = false;
    return;
  }
  try {
    pipeline({}, true, "commit");
  } catch (...) {
    rollback();  // the transaction ends here, whatever happened to it
    throw;
  }
}

void PgConnection::rollback() noexcept {
  in_tx_ = false;
  if (std::exchange(begin_pending_, false)) return;  // nothing was sent
  if (!conn_) return;
  PGconn* c = conn_.get();
  auto status = PQtransactionStatus(c);
  if (status == PQTRANS_IDLE) return;
  if (status == PQTRANS_INTRANS || status == PQTRANS_INERROR) {
    PgResult res(PQexec(c, "ROLLBACK"));
    if (ok(res.get()) && PQstatus(c) == CONNECTION_OK) return;
  }
  drop_connection("ROLLBACK failed");
}

int PgConnection::wakeup_fd() { return conn_ ? PQsocket(conn_.get()) : -1; }

SharedDatabase::Wakeups PgConnection::take_wakeups() {
  SharedDatabase::Wakeups out;
  if (!conn_) return out;
  PGconn* c = conn_.get();
  // Read while the socket stays readable: a server that ends the session
  // sends its FATAL message (libpq hands it to the notice processor) and
  // then closes, and only a second read sees the end of the stream.
  for (int reads = 0; reads < 4; ++reads) {
    if (PQconsumeInput(c) != 1 || PQstatus(c) == CONNECTION_BAD) {
      // The server went away: stop watching the socket; the next begin()
      // reconnects or answers unavailable.
      drop_connection(trim(PQerrorMessage(c)));
      out.all = true;
      return out;
    }
    pollfd p{PQsocket(c), POLLIN, 0};
    if (::poll(&p, 1, 0) != 1) break;
  }
  if (ended_by_server_) {  // its FATAL came; the end of the stream will
    drop_connection("the server ended the session");
    out.all = true;
    return out;
  }
  const int self = PQbackendPID(c);
  while (PGnotify* n = PQnotifies(c)) {
    if (n->be_pid != self || std::string_view(n->relname).ends_with("_u")) {
      std::string_view queue = n->extra ? n->extra : "";
      if (!queue.empty() && std::string_view(n->relname).ends_with("_g") &&
          std::find(out.grouped.begin(), out.grouped.end(), queue) == out.grouped.end()) {
        out.grouped.emplace_back(queue);
      }
      if (queue.empty()) {
        out.all = true;
      } else if (std::find(out.queues.begin(), out.queues.end(), queue) == out.queues.end()) {
        out.queues.emplace_back(queue);
      }
    }
    PQfreemem(n);
  }
  return out;
}

}  // namespace fenceq::daemon
