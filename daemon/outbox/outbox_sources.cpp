// The two kinds of application database an outbox lives in (outbox.hpp):
// PostgreSQL through libpq (LISTEN fenceq_outbox, which an insert trigger
// notifies, with a poll as the fallback), and a SQLite file (PRAGMA
// data_version, which moves when another connection commits). Each creates
// fenceq_outbox when it is missing, with the protocol's limits as CHECKs so
// that an application's bad row fails its own transaction.
#include <libpq-fe.h>
#include <poll.h>
#include <sqlite3.h>

#include <cstdlib>
#include <stdexcept>
#include <string>

#include "fenceq_protocol/limits.hpp"
#include "outbox/outbox.hpp"
#include "storage/pg/pg_connection.hpp"

namespace fenceq::daemon {
namespace {

namespace lim = fenceq::protocol;
std::string n(auto v) { return std::to_string(v); }

// Limits shared by both schemas; `len` gives a column's length in bytes.
std::string checks(const std::string& len_id, const std::string& len_queue,
                   const std::string& len_payload, const std::string& len_grp) {
  return "  CONSTRAINT fenceq_outbox_id CHECK (" + len_id + " BETWEEN 1 AND " + n(lim::kMaxKeyBytes) +
         "),\n  CONSTRAINT fenceq_outbox_queue CHECK (" + len_queue + " BETWEEN 1 AND " +
         n(lim::kMaxQueueBytes) + "),\n  CONSTRAINT fenceq_outbox_payload CHECK (" + len_payload +
         " <= " + n(lim::kMaxPayloadBytes) +
         "),\n  CONSTRAINT fenceq_outbox_priority CHECK (priority BETWEEN -2147483648 AND "
         "2147483647),\n  CONSTRAINT fenceq_outbox_delay CHECK (delay >= 0 AND delay <= 1e9),\n"
         "  CONSTRAINT fenceq_outbox_max_attempts CHECK (max_attempts BETWEEN 0 AND 1000000),\n"
         "  CONSTRAINT fenceq_outbox_grp CHECK (grp IS NULL OR " + len_grp + " BETWEEN 1 AND " +
         n(lim::kMaxGroupBytes) +
         "),\n  CONSTRAINT fenceq_outbox_max_runtime CHECK (max_runtime IS NULL OR "
         "(max_runtime > 0 AND max_runtime <= 1e9))\n";
}

std::string pg_schema() {
  return "CREATE TABLE IF NOT EXISTS fenceq_outbox (\n"
         "  seq          bigserial PRIMARY KEY,\n"
         "  id           text NOT NULL,\n"
         "  queue        text NOT NULL DEFAULT 'default',\n"
         "  payload      text,\n"
         "  payload_bytes bytea,\n"
         "  priority     bigint NOT NULL DEFAULT 0,\n"
         "  delay        double precision NOT NULL DEFAULT 0,\n"
         "  max_attempts bigint NOT NULL DEFAULT " + n(kDefaultMaxAttempts) + ",\n"
         "  grp          text,\n"
         "  max_runtime  double precision,\n"
         "  created_at   timestamptz NOT NULL DEFAULT clock_timestamp(),\n" +
         checks("octet_length(id)", "octet_length(queue)",
                "COALESCE(octet_length(payload), octet_length(payload_bytes), 0)",
                "octet_length(grp)") +
         "  , CONSTRAINT fenceq_outbox_one_payload CHECK (payload IS NULL OR payload_bytes IS NULL)\n"
         ");\n"
         "CREATE OR REPLACE FUNCTION fenceq_outbox_notify() RETURNS trigger LANGUAGE plpgsql AS\n"
         "  $fn$ BEGIN PERFORM pg_notify('fenceq_outbox', ''); RETURN NULL; END $fn$;\n"
         "DO $do$ BEGIN\n"
         "  IF NOT EXISTS (SELECT 1 FROM pg_trigger WHERE tgname = 'fenceq_outbox_notify'\n"
         "                 AND tgrelid = 'fenceq_outbox'::regclass) THEN\n"
         "    CREATE TRIGGER fenceq_outbox_notify AFTER INSERT ON fenceq_outbox\n"
         "      FOR EACH STATEMENT EXECUTE FUNCTION fenceq_outbox_notify();\n"
         "  END IF;\n"
         "END $do$;\n";
}

std::string sqlite_schema() {
  return "CREATE TABLE IF NOT EXISTS fenceq_outbox (\n"
         "  seq          INTEGER PRIMARY KEY AUTOINCREMENT,\n"
         "  id           TEXT NOT NULL,\n"
         "  queue        TEXT NOT NULL DEFAULT 'default',\n"
         "  payload,     -- TEXT, or a BLOB for a binary payload; NULL: none\n"
         "  priority     INTEGER NOT NULL DEFAULT 0,\n"
         "  delay        REAL NOT NULL DEFAULT 0,\n"
         "  max_attempts INTEGER NOT NULL DEFAULT " + n(kDefaultMaxAttempts) + ",\n"
         "  grp          TEXT,\n"
         "  max_runtime  REAL,\n"
         "  created_at   REAL NOT NULL DEFAULT ((julianday('now') - 2440587.5) * 86400.0),\n" +
         checks("length(CAST(id AS BLOB))", "length(CAST(queue AS BLOB))",
                "COALESCE(length(CAST(payload AS BLOB)), 0)", "length(CAST(grp AS BLOB))") +
         ");\n";
}

std::string seq_array(const std::vector<std::int64_t>& seqs) {
  std::string s = "{";
  for (std::size_t i = 0; i < seqs.size(); ++i) {
    if (i) s += ',';
    s += n(seqs[i]);
  }
  return s + "}";
}

int hex(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return c >= 'A' && c <= 'F' ? c - 'A' + 10 : 0;
}

class PgOutbox final : public OutboxSource {
 public:
  explicit PgOutbox(std::string uri) : uri_(std::move(uri)), described_(mask_password(uri_)) {}
  ~PgOutbox() override { close(); }

  void open() override {
    conn_.reset(PQconnectdb(uri_.c_str()));
    if (!conn_ || PQstatus(conn_.get()) != CONNECTION_OK) {
      std::string why = conn_ ? PQerrorMessage(conn_.get()) : "out of memory";
      conn_.reset();
      throw std::runtime_error("cannot connect: " + why);
    }
    // The table (and its trigger) only when missing: a role with SELECT and
    // DELETE on an existing one needs nothing more.
    auto there = exec("SELECT to_regclass('fenceq_outbox') IS NOT NULL");
    if (std::string(PQgetvalue(there.get(), 0, 0)) != "t") exec(pg_schema());
    exec("LISTEN fenceq_outbox");
  }
  void close() noexcept override { conn_.reset(); }

  std::vector<OutboxRow> read(std::size_t max, std::size_t max_bytes) override {
    // The page's rows up to max_bytes of payload, counted in the query (a
    // running sum), so that libpq never holds more than one page of them.
    auto r = exec("SELECT seq, id, queue, payload, encode(payload_bytes, 'hex'), priority, delay, "
                  "max_attempts, grp, max_runtime, extract(epoch FROM created_at)::float8 FROM ("
                  "SELECT *, sum(COALESCE(octet_length(payload), octet_length(payload_bytes), 0)) "
                  "OVER (ORDER BY seq) - COALESCE(octet_length(payload), "
                  "octet_length(payload_bytes), 0) AS before FROM (SELECT * FROM fenceq_outbox "
                  "ORDER BY seq LIMIT " + n(max) + ") page) o WHERE before < " + n(max_bytes) +
                  " ORDER BY seq");
    std::vector<OutboxRow> rows;
    for (int i = 0; i < PQntuples(r.get()); ++i) {
      OutboxRow row;
      row.seq = std::atoll(PQgetvalue(r.get(), i, 0));
      row.id = PQgetvalue(r.get(), i, 1);
      row.queue = PQgetvalue(r.get(), i, 2);
      if (!PQgetisnull(r.get(), i, 3)) {
        row.payload = Payload{PQgetvalue(r.get(), i, 3), false};
      } else if (!PQgetisnull(r.get(), i, 4)) {
        const std::string h = PQgetvalue(r.get(), i, 4);
        Payload p{{}, true};
        for (std::size_t k = 0; k + 1 < h.size(); k += 2) {
          p.bytes.push_back(static_cast<char>(hex(h[k]) * 16 + hex(h[k + 1])));
        }
        row.payload = std::move(p);
      }
      row.priority = std::atoll(PQgetvalue(r.get(), i, 5));
      row.delay = std::strtod(PQgetvalue(r.get(), i, 6), nullptr);
      row.max_attempts = std::atoll(PQgetvalue(r.get(), i, 7));
      if (!PQgetisnull(r.get(), i, 8)) row.group = PQgetvalue(r.get(), i, 8);
      if (!PQgetisnull(r.get(), i, 9)) row.max_runtime = std::strtod(PQgetvalue(r.get(), i, 9), nullptr);
      row.created = std::strtod(PQgetvalue(r.get(), i, 10), nullptr);
      rows.push_back(std::move(row));
    }
    return rows;
  }

  void remove(const std::vector<std::int64_t>& seqs) override {
    exec("DELETE FROM fenceq_outbox WHERE seq = ANY('" + seq_array(seqs) + "'::bigint[])");
  }

  std::vector<std::int64_t> present(const std::vector<std::int64_t>& seqs) override {
    auto r = exec("SELECT seq FROM fenceq_outbox WHERE seq = ANY('" + seq_array(seqs) +
                  "'::bigint[])");
    std::vector<std::int64_t> out;
    for (int i = 0; i < PQntuples(r.get()); ++i) out.push_back(std::atoll(PQgetvalue(r.get(), i, 0)));
    return out;
  }

  std::pair<std::int64_t, double> backlog() override {
    auto r = exec("SELECT count(*), COALESCE(extract(epoch FROM clock_timestamp() - "
                  "min(created_at))::float8, 0) FROM fenceq_outbox");
    return {std::atoll(PQgetvalue(r.get(), 0, 0)), std::strtod(PQgetvalue(r.get(), 0, 1), nullptr)};
  }

  bool wait(std::chrono::milliseconds timeout, int stop_fd) override {
    if (notified()) return true;
    pollfd p[2] = {{PQsocket(conn_.get()), POLLIN, 0}, {stop_fd, POLLIN, 0}};
    const int rc = ::poll(p, 2, static_cast<int>(timeout.count()));
    if (rc > 0 && (p[1].revents & POLLIN)) return false;
    if (rc > 0 && PQconsumeInput(conn_.get()) == 0) {
      throw std::runtime_error(std::string("connection lost: ") + PQerrorMessage(conn_.get()));
    }
    notified();
    return true;  // a NOTIFY, or the poll's fallback
  }

  std::string describe() const override { return described_; }

 private:
  bool notified() {
    bool any = false;
    while (PGnotify* note = PQnotifies(conn_.get())) {
      PQfreemem(note);
      any = true;
    }
    return any;
  }
  PgResult exec(const std::string& sql) {
    if (!conn_) throw std::runtime_error("not connected");
    PgResult r(PQexec(conn_.get(), sql.c_str()));
    if (!r || (PQresultStatus(r.get()) != PGRES_COMMAND_OK &&
               PQresultStatus(r.get()) != PGRES_TUPLES_OK)) {
      throw std::runtime_error(PQerrorMessage(conn_.get()));
    }
    return r;
  }

  std::string uri_, described_;
  PgConn conn_;
};

struct SqliteCloser {
  void operator()(sqlite3* db) const { sqlite3_close_v2(db); }
};

class SqliteOutbox final : public OutboxSource {
 public:
  explicit SqliteOutbox(std::string path) : path_(std::move(path)) {}
  ~SqliteOutbox() override { close(); }

  void open() override {
    sqlite3* raw = nullptr;
    // The application's file: never created here (a typo would drain nothing, silently).
    const int rc = sqlite3_open_v2(path_.c_str(), &raw, SQLITE_OPEN_READWRITE, nullptr);
    db_.reset(raw);
    if (rc != SQLITE_OK) throw std::runtime_error(std::string("cannot open: ") + sqlite3_errstr(rc));
    sqlite3_busy_timeout(db_.get(), 5000);
    // Our deletes must survive a power cut: forgetting a seq relies on it.
    exec("PRAGMA synchronous=FULL");
    exec(sqlite_schema());
    version_ = data_version();
  }
  void close() noexcept override { db_.reset(); }

  std::vector<OutboxRow> read(std::size_t max, std::size_t max_bytes) override {
    std::size_t bytes = 0;
    Stmt s(prepare("SELECT seq, id, queue, payload, priority, delay, max_attempts, grp, "
                   "max_runtime, created_at FROM fenceq_outbox ORDER BY seq LIMIT " + n(max)));
    std::vector<OutboxRow> rows;
    int rc = SQLITE_DONE;
    while (bytes < max_bytes && (rc = sqlite3_step(s.get())) == SQLITE_ROW) {
      OutboxRow row;
      row.seq = sqlite3_column_int64(s.get(), 0);
      const auto blob = [&](int col, const char* name) {
        if (sqlite3_column_type(s.get(), col) != SQLITE_BLOB) return;
        row.blobs += row.blobs.empty() ? name : std::string(", ") + name;
      };
      blob(1, "id");
      blob(2, "queue");
      blob(7, "grp");
      row.id = text(s.get(), 1);
      row.queue = text(s.get(), 2);
      const int t = sqlite3_column_type(s.get(), 3);
      if (t == SQLITE_BLOB) {
        const auto* p = static_cast<const char*>(sqlite3_column_blob(s.get(), 3));
        row.payload = Payload{std::string(p ? p : "", static_cast<std::size_t>(sqlite3_column_bytes(s.get(), 3))), true};
      } else if (t != SQLITE_NULL) {
        row.payload = Payload{text(s.get(), 3), false};
      }
      row.priority = sqlite3_column_int64(s.get(), 4);
      row.delay = sqlite3_column_double(s.get(), 5);
      row.max_attempts = sqlite3_column_int64(s.get(), 6);
      if (sqlite3_column_type(s.get(), 7) != SQLITE_NULL) row.group = text(s.get(), 7);
      row.max_runtime = sqlite3_column_double(s.get(), 8);
      row.created = sqlite3_column_double(s.get(), 9);
      bytes += row.payload ? row.payload->bytes.size() : 0;
      rows.push_back(std::move(row));
    }
    if (bytes < max_bytes && rc != SQLITE_DONE) fail("read");
    return rows;
  }

  void remove(const std::vector<std::int64_t>& seqs) override {
    exec("BEGIN IMMEDIATE");
    try {
      Stmt s(prepare("DELETE FROM fenceq_outbox WHERE seq = ?"));
      for (auto seq : seqs) {
        sqlite3_bind_int64(s.get(), 1, seq);
        if (sqlite3_step(s.get()) != SQLITE_DONE) fail("delete");
        sqlite3_reset(s.get());
      }
      exec("COMMIT");
    } catch (...) {
      sqlite3_exec(db_.get(), "ROLLBACK", nullptr, nullptr, nullptr);
      throw;
    }
  }

  std::vector<std::int64_t> present(const std::vector<std::int64_t>& seqs) override {
    Stmt s(prepare("SELECT 1 FROM fenceq_outbox WHERE seq = ?"));
    std::vector<std::int64_t> out;
    for (auto seq : seqs) {
      sqlite3_bind_int64(s.get(), 1, seq);
      const int rc = sqlite3_step(s.get());
      if (rc == SQLITE_ROW) out.push_back(seq);
      else if (rc != SQLITE_DONE) fail("read");
      sqlite3_reset(s.get());
    }
    return out;
  }

  std::pair<std::int64_t, double> backlog() override {
    Stmt s(prepare("SELECT count(*), COALESCE((julianday('now') - 2440587.5) * 86400.0 - "
                   "min(created_at), 0) FROM fenceq_outbox"));
    if (sqlite3_step(s.get()) != SQLITE_ROW) fail("count");
    return {sqlite3_column_int64(s.get(), 0), std::max(0.0, sqlite3_column_double(s.get(), 1))};
  }

  bool wait(std::chrono::milliseconds timeout, int stop_fd) override {
    pollfd p{stop_fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(timeout.count())) > 0) return false;
    const auto v = data_version();
    if (v == version_) return false;
    version_ = v;
    return true;
  }

  std::string describe() const override { return path_; }

 private:
  struct StmtCloser {
    void operator()(sqlite3_stmt* s) const { sqlite3_finalize(s); }
  };
  using Stmt = std::unique_ptr<sqlite3_stmt, StmtCloser>;

  static std::string text(sqlite3_stmt* s, int i) {
    const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(s, i));
    return std::string(p ? p : "", static_cast<std::size_t>(sqlite3_column_bytes(s, i)));
  }
  [[noreturn]] void fail(const char* what) {
    throw std::runtime_error(std::string(what) + ": " + sqlite3_errmsg(db_.get()));
  }
  sqlite3_stmt* prepare(const std::string& sql) {
    if (!db_) throw std::runtime_error("not open");
    sqlite3_stmt* s = nullptr;
    if (sqlite3_prepare_v2(db_.get(), sql.c_str(), -1, &s, nullptr) != SQLITE_OK) fail("prepare");
    return s;
  }
  void exec(const std::string& sql) {
    if (!db_) throw std::runtime_error("not open");
    char* err = nullptr;
    if (sqlite3_exec(db_.get(), sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
      std::string why = err ? err : sqlite3_errmsg(db_.get());
      sqlite3_free(err);
      throw std::runtime_error(why);
    }
  }
  std::int64_t data_version() {
    Stmt s(prepare("PRAGMA data_version"));
    if (sqlite3_step(s.get()) != SQLITE_ROW) fail("PRAGMA data_version");
    return sqlite3_column_int64(s.get(), 0);
  }

  std::string path_;
  std::unique_ptr<sqlite3, SqliteCloser> db_;
  std::int64_t version_ = 0;
};

}  // namespace

std::unique_ptr<OutboxSource> make_pg_outbox(const std::string& uri) {
  return std::make_unique<PgOutbox>(uri);
}
std::unique_ptr<OutboxSource> make_sqlite_outbox(const std::string& path) {
  return std::make_unique<SqliteOutbox>(path);
}

std::optional<std::string> outbox_schema(const std::string& kind) {
  if (kind == "postgresql" || kind == "postgres") return pg_schema();
  if (kind == "sqlite") return sqlite_schema();
  return std::nullopt;
}

}  // namespace fenceq::daemon
