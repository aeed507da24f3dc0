// Test support for the PostgreSQL store: the throw-away cluster
// ctest starts (the `pg` fixture, scripts/pg_cluster.sh, its URI in
// FENCEQ_TEST_PG_DIR/uri; FENCEQ_TEST_PG_URI points elsewhere instead), and a
// fresh schema per test so tests never see each other's jobs.
//
// FENCEQ_TEST_STORE=postgres runs the daemon-level suites against PostgreSQL:
// TempDir::db() then names a fresh schema instead of a SQLite file.
#pragma once

#include <libpq-fe.h>

#include <string>

namespace fenceq::test {

// True when FENCEQ_TEST_STORE=postgres: daemons get a PostgreSQL database.
bool pg_mode();
// The test database's URI; throws when there is no cluster.
std::string pg_base_uri();
// The cluster's directory (for scripts/pg_cluster.sh stop/start/restart).
std::string pg_cluster_dir();
// The directory of the cluster's Unix socket (the `host` of its URI): the
// cluster's directory, or the one under /tmp that pg_cluster.sh chose.
std::string pg_socket_dir();
// Runs scripts/pg_cluster.sh COMMAND on the cluster; throws when it fails.
void pg_cluster(const std::string& command);
// `uri` with one more query parameter `kv`.
std::string with_param(const std::string& uri, const std::string& kv);

// A connection of the test's own (not a store's). Throws when it cannot connect.
class PgConn {
 public:
  explicit PgConn(const std::string& uri);
  ~PgConn();
  PgConn(const PgConn&) = delete;
  PgConn& operator=(const PgConn&) = delete;
  // Runs `sql`; the first column of the first row ("" when none). Throws
  // std::runtime_error naming the statement when it fails.
  std::string exec(const std::string& sql);
  // Reconnects (after the server was restarted).
  void reset();
  PGconn* get() { return c_; }

 private:
  PGconn* c_;
};

// A fresh schema in the test database, dropped on destruction; stores and
// daemons opened on uri() work in it.
class PgSchema {
 public:
  PgSchema();
  ~PgSchema();
  PgSchema(const PgSchema&) = delete;
  PgSchema& operator=(const PgSchema&) = delete;
  const std::string& base() const { return base_; }
  const std::string& name() const { return name_; }
  const std::string& uri() const { return uri_; }
  std::string exec(const std::string& sql) { return admin_.exec(sql); }
  PGconn* admin() { return admin_.get(); }

 private:
  std::string base_, name_, uri_;
  PgConn admin_;
};

}  // namespace fenceq::test
