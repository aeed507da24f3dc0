#include "restore.hpp"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <random>
#include <sstream>
#include <stdexcept>

namespace fenceq::history {
namespace {

namespace fs = std::filesystem;

// The raise's log line (SQLite and PostgreSQL alike).
constexpr const char* kRaised = "every fence raised to";

std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// `name` found on PATH (the Command runner execs a path, not a name).
std::string on_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "/usr/bin");
  for (std::string d; std::getline(dirs, d, ':');) {
    const std::string p = d + "/" + name;
    if (!d.empty() && ::access(p.c_str(), X_OK) == 0) return p;
  }
  throw std::runtime_error(name + " not found on PATH");
}

// `uri` (postgresql:///DB?params) naming database `db` instead.
std::string with_database(const std::string& uri, const std::string& db) {
  const auto q = uri.find('?');
  const std::string path = uri.substr(0, q);
  const auto slash = path.rfind('/');
  if (slash == std::string::npos) throw std::runtime_error("no database in " + uri);
  return path.substr(0, slash + 1) + db + (q == std::string::npos ? "" : uri.substr(q));
}

void must(const test::RunResult& r, const std::string& what) {
  if (r.status != 0)
    throw std::runtime_error(what + " failed (" + std::to_string(r.status) + "): " + r.out);
}

}  // namespace

Restorer::Restorer(std::vector<std::unique_ptr<test::Daemon>>& daemons, test::PgSchema* schema,
                   bool flag_restored)
    : daemons_(daemons), schema_(schema), flag_restored_(flag_restored) {
  if (schema_) pg_base_ = schema_->base();
}

Restorer::~Restorer() {
  if (databases_.empty()) return;
  // The sidecars on them are stopped by now (they are destroyed first).
  try {
    test::PgConn admin(schema_->base());
    for (const auto& db : databases_) admin.exec("DROP DATABASE IF EXISTS " + db + " WITH (FORCE)");
  } catch (const std::exception&) {
    // A leftover database of the throw-away cluster: nothing to report.
  }
}

void Restorer::backup() {
  const std::string copy = dir_.file("backup");
  if (schema_) {
    must(test::run({on_path("pg_dump"), "-Fc", "-n", schema_->name(), "-f", copy, "-d", pg_base_}),
         "pg_dump");
  } else {
    must(test::run(
             {test::fenceq_tool_path(), "backup", "--force", "--db", daemons_.front()->db(), copy}),
         "fenceq backup");
  }
  have_backup_ = true;
}

void Restorer::restore(const std::function<void()>& down) {
  if (!have_backup_) throw std::runtime_error("restore without a backup");
  test::Daemon& first = *daemons_.front();
  for (auto& d : daemons_) d->kill9();
  down();
  const std::size_t raised_before = count(first.log(), kRaised);
  if (schema_) {
    const std::string uri = put_back_pg();
    for (std::size_t i = 0; i < daemons_.size(); ++i) {
      // The first with --restored, alone until it serves; then the others.
      std::vector<std::string> once;
      if (i == 0 && flag_restored_) once.push_back("--restored");
      daemons_[i]->start_on(uri, once);
    }
  } else {
    put_back_sqlite();
    first.restart();
  }
  ++restores_;
  have_backup_ = false;
  if (count(first.log(), kRaised) <= raised_before) {
    failures_.push_back("restore " + std::to_string(restores_) +
                        ": the daemon started on the copy did not log \"" + kRaised + "\"");
  }
}

void Restorer::put_back_sqlite() {
  const std::string db = daemons_.front()->db();
  for (const char* suffix : {"", "-wal", "-shm"}) fs::remove(db + suffix);
  // Every second restore without the state file: then only the copy's mark
  // tells it is a copy.
  if (restores_ % 2 == 1) fs::remove(db + ".fenceq-state");
  fs::copy_file(dir_.file("backup"), db);
}

std::string Restorer::put_back_pg() {
  std::random_device rd;
  const std::string db =
      "fqh_restore_" + std::to_string(rd() % 1000000) + "_" + std::to_string(restores_ + 1);
  test::PgConn admin(schema_->base());
  admin.exec("CREATE DATABASE " + db);
  databases_.push_back(db);
  const std::string base = with_database(schema_->base(), db);
  must(test::run({on_path("pg_restore"), "--no-owner", "-d", base, dir_.file("backup")}),
       "pg_restore");
  // The database the sidecars left is no longer used: dropped now (the
  // schema of the first one, with the PgSchema).
  if (databases_.size() > 1) {
    admin.exec("DROP DATABASE IF EXISTS " + databases_[databases_.size() - 2] + " WITH (FORCE)");
  }
  pg_base_ = base;
  return test::with_param(base, "options=-csearch_path%3D" + schema_->name());
}

}  // namespace fenceq::history
