// fenceq/fenced.hpp: writes to the application's own table fenced by the
// job's fence, in a real SQLite file and a real PostgreSQL database (ctest's
// throw-away cluster, the `pg` fixture; tagged [postgres]), with a real
// fenceqd (issue 34, contract C2.4).
//
// The stale-worker story: worker A claims and stalls, its lease ends, B claims
// (a higher fence), writes the row and completes; A wakes and writes: the
// application's database refuses A's write and the row keeps B's, with
// fenceqd running and with fenceqd stopped before A writes.
#include <sqlite3.h>
#include <libpq-fe.h>
#include <fenceq/fenced.hpp>

#include <catch2/catch.hpp>

#include <csignal>
#include <memory>
#include <stdexcept>
#include <string>

#include "daemon.hpp"
#include "pg.hpp"

using fenceq::Client;
using fenceq::FencedKind;
using fenceq::FencedWrite;
using fenceq::RowMissing;
using fenceq::SqlDialect;
using fenceq::test::Daemon;
using fenceq::test::TempDir;

namespace {

const std::string kJob = "invoice-42";

// One connection to the application's database.
class AppDb {
 public:
  virtual ~AppDb() = default;
  virtual void exec(const std::string& sql) = 0;
  // The first column of the first row; "" when there is none.
  virtual std::string value(const std::string& sql) = 0;
  virtual bool upsert(const FencedWrite& w) = 0;
  virtual bool update(const FencedWrite& w) = 0;
};

class SqliteDb : public AppDb {
 public:
  explicit SqliteDb(const std::string& file) {
    if (sqlite3_open(file.c_str(), &db_) != SQLITE_OK) throw std::runtime_error(sqlite3_errmsg(db_));
    sqlite3_busy_timeout(db_, 10000);
  }
  ~SqliteDb() override { sqlite3_close(db_); }
  void exec(const std::string& sql) override {
    char* err = nullptr;
    if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
      std::string msg = sql + ": " + (err ? err : "?");
      sqlite3_free(err);
      throw std::runtime_error(msg);
    }
  }
  std::string value(const std::string& sql) override {
    std::string out;
    auto first = [](void* o, int, char** v, char**) {
      auto* s = static_cast<std::string*>(o);
      if (s->empty() && v[0]) *s = v[0];
      return 0;
    };
    char* err = nullptr;
    if (sqlite3_exec(db_, sql.c_str(), first, &out, &err) != SQLITE_OK) {
      std::string msg = sql + ": " + (err ? err : "?");
      sqlite3_free(err);
      throw std::runtime_error(msg);
    }
    return out;
  }
  bool upsert(const FencedWrite& w) override { return fenceq::fenced_upsert(db_, w); }
  bool update(const FencedWrite& w) override { return fenceq::fenced_update(db_, w); }

 private:
  sqlite3* db_ = nullptr;
};

class PgDb : public AppDb {
 public:
  explicit PgDb(const std::string& uri) : conn_(uri) {}
  void exec(const std::string& sql) override { conn_.exec(sql); }
  std::string value(const std::string& sql) override { return conn_.exec(sql); }
  bool upsert(const FencedWrite& w) override { return fenceq::fenced_upsert(conn_.get(), w); }
  bool update(const FencedWrite& w) override { return fenceq::fenced_update(conn_.get(), w); }

 private:
  fenceq::test::PgConn conn_;
};

// The application's database: a SQLite file, or a fresh PostgreSQL schema.
class App {
 public:
  virtual ~App() = default;
  virtual std::unique_ptr<AppDb> connect() = 0;
  // The committed row "customer|status|paid_by|fence" (NULL as "NULL"), read
  // on a fresh connection; "" when there is none.
  std::string row(const std::string& id = kJob) {
    return connect()->value(
        "SELECT customer || '|' || status || '|' || coalesce(paid_by, 'NULL') || '|' || "
        "coalesce(CAST(fence AS TEXT), 'NULL') FROM invoices WHERE id = '" + id + "'");
  }
};

class SqliteApp : public App {
 public:
  std::unique_ptr<AppDb> connect() override { return std::make_unique<SqliteDb>(dir_.file("app.db")); }
  const TempDir& dir() const { return dir_; }

 private:
  TempDir dir_;
};

class PgApp : public App {
 public:
  std::unique_ptr<AppDb> connect() override { return std::make_unique<PgDb>(schema_.uri()); }
  fenceq::test::PgSchema& schema() { return schema_; }

 private:
  fenceq::test::PgSchema schema_;
};

// The application's table: a NOT NULL column the worker does not write, and
// the fence column, NULL until a fenced write.
void create_table(AppDb& db) {
  db.exec("CREATE TABLE invoices (id TEXT PRIMARY KEY, customer TEXT NOT NULL, "
          "status TEXT NOT NULL, paid_by TEXT, fence BIGINT)");
}

// The worker's side effect, through the helper (one statement: autocommit).
bool pay(AppDb& db, bool upsert, const std::string& worker, std::int64_t fence) {
  FencedWrite w{.table = "invoices", .key = {{"id", kJob}},
                .values = {{"status", "paid"}, {"paid_by", worker}}, .fence = fence};
  if (!upsert) return db.update(w);
  w.values.insert(w.values.begin(), {"customer", "acme"});
  return db.upsert(w);
}

void story(App& app, bool upsert, bool daemon_up) {
  INFO((upsert ? "upsert" : "update") << (daemon_up ? ", fenceqd running" : ", fenceqd stopped"));
  TempDir dir;
  Daemon d(dir);
  auto setup = app.connect();
  create_table(*setup);
  if (!upsert) setup->exec("INSERT INTO invoices (id, customer, status) VALUES ('" + kJob + "', 'acme', 'open')");
  auto db_a = app.connect();
  auto db_b = app.connect();
  Client a(d.endpoint()), b(d.endpoint());
  REQUIRE(a.enqueue(kJob));
  auto fence_a = a.claim(kJob, "worker-a", 30, 100);
  REQUIRE(fence_a);                                      // A stalls here
  REQUIRE_FALSE(b.claim(kJob, "worker-b", 30, 120));     // A's lease still holds
  auto fence_b = b.claim(kJob, "worker-b", 30, 131);     // A's lease ended at 130
  REQUIRE(fence_b);
  REQUIRE(*fence_b > *fence_a);
  CHECK(pay(*db_b, upsert, "worker-b", *fence_b));
  CHECK(b.complete(kJob, "worker-b", *fence_b, "paid by worker-b", 132));
  if (!daemon_up) {
    d.stop(SIGTERM);
    Client probe(d.endpoint(), std::chrono::milliseconds(500));
    CHECK_THROWS_AS(probe.ping(), fenceq::Error);
  }
  // A wakes up and writes anyway: the application's database refuses it.
  CHECK_FALSE(pay(*db_a, upsert, "worker-a", *fence_a));
  if (daemon_up) {
    CHECK_FALSE(a.complete(kJob, "worker-a", *fence_a, "paid by worker-a", 133));
    CHECK(a.state(kJob)->result == "paid by worker-b");
  }
  CHECK(app.row() == "acme|paid|worker-b|" + std::to_string(*fence_b));
  setup->exec("DROP TABLE invoices");
}

void stories(App& app) {
  for (bool upsert : {true, false}) {
    for (bool daemon_up : {true, false}) story(app, upsert, daemon_up);
  }
}

// A NULL fence applies; a lower fence is refused; the same fence writes again.
void fence_rule(App& app) {
  auto db = app.connect();
  create_table(*db);
  db->exec("INSERT INTO invoices (id, customer, status) VALUES ('" + kJob + "', 'acme', 'open')");
  struct Step {
    std::int64_t fence;
    const char* worker;
    bool applied;
  };
  for (const Step& s : {Step{5, "w5", true}, Step{4, "w4", false}, Step{5, "w5-again", true},
                        Step{7, "w7", true}, Step{6, "w6", false}}) {
    INFO("fence " << s.fence);
    CHECK(db->update({.table = "invoices", .key = {{"id", kJob}}, .values = {{"paid_by", s.worker}},
                      .fence = s.fence}) == s.applied);
  }
  CHECK(app.row() == "acme|open|w7|7");
  FencedWrite w{.table = "invoices", .key = {{"id", kJob}},
                .values = {{"customer", "acme"}, {"status", "paid"}, {"paid_by", "w6"}}, .fence = 6};
  CHECK_FALSE(db->upsert(w));
  w.values[2].second = "w8";
  w.fence = 8;
  CHECK(db->upsert(w));
  CHECK(app.row() == "acme|paid|w8|8");
}

void row_missing(App& app) {
  auto db = app.connect();
  create_table(*db);
  CHECK_THROWS_AS(db->update({.table = "invoices", .key = {{"id", "nope"}},
                              .values = {{"status", "paid"}}, .fence = 3}),
                  RowMissing);
  CHECK(app.row("nope").empty());
}

// A schema-qualified table and identifiers with quotes, spaces and %; text
// with quotes, a double and a NULL as parameters.
void odd_names(AppDb& db, const std::string& schema) {
  const std::string t = fenceq::quote_identifier(schema) + "." + fenceq::quote_identifier("in\"v%oice");
  db.exec("CREATE TABLE " + t + " (\"the id\" TEXT, \"k2\" INTEGER, \"100% paid\" TEXT, "
           "\"amount\" DOUBLE PRECISION, \"note\" TEXT, \"my fence\" BIGINT, PRIMARY KEY (\"the id\", \"k2\"))");
  const std::string nasty = "x'); DROP TABLE t; --";
  FencedWrite w{.table = "in\"v%oice", .schema = schema, .key = {{"the id", kJob}, {"k2", 7}},
                .values = {{"100% paid", nasty}, {"amount", 12.25}, {"note", nullptr}}, .fence = 3,
                .fence_column = "my fence"};
  CHECK(db.upsert(w));
  w.fence = 2;
  w.values[0].second = "stale";
  CHECK_FALSE(db.upsert(w));
  CHECK_FALSE(db.update(w));
  w.fence = 3;
  w.values[0].second = nasty + "!";
  CHECK(db.update(w));
  CHECK(db.value("SELECT \"100% paid\" || '|' || CAST(\"amount\" AS TEXT) || '|' || "
                  "coalesce(\"note\", 'NULL') || '|' || CAST(\"my fence\" AS TEXT) FROM " + t) ==
        nasty + "!|12.25|NULL|3");
}

}  // namespace

TEST_CASE("fenced: SQLite: the stalled worker's write is refused and the row keeps B's "
          "whether fenceqd runs or not") {
  SqliteApp app;
  stories(app);
}

TEST_CASE("fenced: PostgreSQL: the stalled worker's write is refused and the row keeps B's "
          "whether fenceqd runs or not", "[postgres]") {
  PgApp app;
  stories(app);
}

TEST_CASE("fenced: SQLite: a NULL fence applies and a lower fence is refused") {
  SqliteApp app;
  fence_rule(app);
}

TEST_CASE("fenced: PostgreSQL: a NULL fence applies and a lower fence is refused", "[postgres]") {
  PgApp app;
  fence_rule(app);
}

TEST_CASE("fenced: SQLite: fenced_update of a missing row throws RowMissing and writes nothing") {
  SqliteApp app;
  row_missing(app);
}

TEST_CASE("fenced: PostgreSQL: fenced_update of a missing row throws RowMissing and writes nothing",
          "[postgres]") {
  PgApp app;
  row_missing(app);
}

TEST_CASE("fenced: SQLite: a qualified table and odd identifiers are quoted and values stay parameters") {
  SqliteApp app;
  SqliteDb db(app.dir().file("app.db"));
  // An attached database is the schema of the connection that attached it.
  db.exec("ATTACH DATABASE '" + app.dir().file("billing.db") + "' AS \"bill ing\"");
  odd_names(db, "bill ing");
}

TEST_CASE("fenced: PostgreSQL: a qualified table and odd identifiers are quoted and values stay "
          "parameters", "[postgres]") {
  PgApp app;
  const std::string schema = app.schema().name() + " b\"il%";
  app.schema().exec("CREATE SCHEMA " + fenceq::quote_identifier(schema));
  auto db = app.connect();
  try {
    odd_names(*db, schema);
  } catch (...) {
    app.schema().exec("DROP SCHEMA " + fenceq::quote_identifier(schema) + " CASCADE");
    throw;
  }
  app.schema().exec("DROP SCHEMA " + fenceq::quote_identifier(schema) + " CASCADE");
}

TEST_CASE("fenced: the statements' text and parameters per dialect and the refusals of bad writes") {
  FencedWrite w{.table = "invoices", .key = {{"id", "k"}}, .values = {{"status", "paid"}}, .fence = 2};
  auto up = fenceq::fenced_statement(FencedKind::upsert, SqlDialect::sqlite, w);
  CHECK(up.text ==
        "INSERT INTO \"invoices\" (\"id\", \"status\", \"fence\") VALUES (?, ?, ?) ON CONFLICT "
        "(\"id\") DO UPDATE SET \"status\" = excluded.\"status\", \"fence\" = excluded.\"fence\" "
        "WHERE \"invoices\".\"fence\" IS NULL OR \"invoices\".\"fence\" <= excluded.\"fence\"");
  CHECK(up.params == std::vector<fenceq::SqlValue>{"k", "paid", std::int64_t{2}});
  auto upd = fenceq::fenced_statement(FencedKind::update, SqlDialect::postgresql, w);
  CHECK(upd.text ==
        "UPDATE \"invoices\" SET \"status\" = $1, \"fence\" = $2 WHERE \"id\" = $3 AND "
        "(\"fence\" IS NULL OR \"fence\" <= $4)");
  CHECK(upd.params == std::vector<fenceq::SqlValue>{"paid", std::int64_t{2}, "k", std::int64_t{2}});
  CHECK(fenceq::fenced_statement(FencedKind::exists, SqlDialect::postgresql, w).text ==
        "SELECT 1 FROM \"invoices\" WHERE \"id\" = $1");
  CHECK(fenceq::quote_identifier("we\"ird") == "\"we\"\"ird\"");

  auto refused = [&](FencedWrite bad) {
    CHECK_THROWS_AS(fenceq::fenced_statement(FencedKind::upsert, SqlDialect::sqlite, bad),
                    std::invalid_argument);
  };
  FencedWrite bad = w;
  bad.key.clear();
  refused(bad);
  bad = w;
  bad.key[0].second = nullptr;
  refused(bad);
  bad = w;
  bad.values.push_back({"id", 1});
  refused(bad);
  bad = w;
  bad.values.push_back({"fence", 1});
  refused(bad);
  bad = w;
  bad.fence = -1;
  refused(bad);
  bad = w;
  bad.table.clear();
  refused(bad);
  bad = w;
  bad.key[0].first = std::string("i\0d", 3);
  refused(bad);
}
