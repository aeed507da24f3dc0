#include "pg.hpp"

#include <cstdlib>
#include <fstream>
#include <random>
#include <stdexcept>

#include "daemon.hpp"

namespace fenceq::test {

bool pg_mode() {
  const char* e = std::getenv("FENCEQ_TEST_STORE");
  return e && std::string(e) == "postgres";
}

std::string pg_base_uri() {
  if (const char* e = std::getenv("FENCEQ_TEST_PG_URI"); e && *e) return e;
  const std::string file = pg_cluster_dir() + "/uri";
  std::ifstream in(file);
  std::string uri;
  std::getline(in, uri);
  if (uri.empty()) {
    throw std::runtime_error("no PostgreSQL test cluster: " + file +
                             " is missing (ctest starts the cluster with the `pg: start "
                             "cluster` fixture; or set FENCEQ_TEST_PG_URI)");
  }
  return uri;
}

std::string pg_cluster_dir() {
  if (const char* e = std::getenv("FENCEQ_TEST_PG_DIR"); e && *e) return e;
  if (const char* e = std::getenv("FENCEQ_TEST_PG_URI"); e && *e) {
    throw std::runtime_error(
        "FENCEQ_TEST_PG_URI is set: set FENCEQ_TEST_PG_DIR to its scripts/pg_cluster.sh directory");
  }
  return FENCEQ_TEST_PG_DIR;
}

std::string pg_socket_dir() {
  std::ifstream in(pg_cluster_dir() + "/server");
  std::string srv;
  std::getline(in, srv);
  return srv.empty() ? pg_cluster_dir() : srv;
}

void pg_cluster(const std::string& command) {
  auto r = run({source_dir() + "/scripts/pg_cluster.sh", command, pg_cluster_dir()});
  if (r.status != 0) {
    throw std::runtime_error("scripts/pg_cluster.sh " + command + " failed: " + r.out);
  }
}

std::string with_param(const std::string& uri, const std::string& kv) {
  return uri + (uri.find('?') == std::string::npos ? "?" : "&") + kv;
}

namespace {
std::string random_suffix() {
  std::random_device rd;
  std::mt19937_64 gen(rd());
  const char* hex = "0123456789abcdef";
  std::string s;
  for (int i = 0; i < 12; ++i) s += hex[gen() % 16];
  return s;
}
}  // namespace

PgConn::PgConn(const std::string& uri) : c_(PQconnectdb(uri.c_str())) {
  if (PQstatus(c_) != CONNECTION_OK) {
    std::string msg = PQerrorMessage(c_);
    PQfinish(c_);
    c_ = nullptr;
    throw std::runtime_error("cannot connect to the PostgreSQL test cluster (" + uri +
                             "): " + msg);
  }
  PQsetNoticeProcessor(c_, [](void*, const char*) {}, nullptr);
}

PgConn::~PgConn() {
  if (c_) PQfinish(c_);
}

void PgConn::reset() { PQreset(c_); }

std::string PgConn::exec(const std::string& sql) {
  PGresult* r = PQexec(c_, sql.c_str());
  auto st = PQresultStatus(r);
  std::string msg = PQresultErrorMessage(r);
  std::string v = st == PGRES_TUPLES_OK && PQntuples(r) > 0 ? PQgetvalue(r, 0, 0) : "";
  PQclear(r);
  if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
    throw std::runtime_error(sql + ": " + msg);
  }
  return v;
}

PgSchema::PgSchema()
    : base_(pg_base_uri()),
      name_("t_" + random_suffix()),
      uri_(with_param(base_, "options=-csearch_path%3D" + name_)),
      admin_(base_) {
  admin_.exec("CREATE SCHEMA " + name_);
  admin_.exec("SET search_path TO " + name_);
}

PgSchema::~PgSchema() {
  const std::string drop = "DROP SCHEMA IF EXISTS " + name_ + " CASCADE";
  PGresult* r = PQexec(admin_.get(), drop.c_str());
  if (PQresultStatus(r) != PGRES_COMMAND_OK) {  // the server was restarted meanwhile
    PQreset(admin_.get());
    PQclear(PQexec(admin_.get(), drop.c_str()));
  }
  PQclear(r);
}

}  // namespace fenceq::test
