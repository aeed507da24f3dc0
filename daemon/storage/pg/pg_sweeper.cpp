#include "storage/pg/pg_sweeper.hpp"

#include "storage/pg/pg_connection.hpp"

#include <libpq-fe.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <cstring>
#include <utility>

namespace fenceq::daemon {
namespace {

constexpr const char* kSweep = "VACUUM (INDEX_CLEANUP ON, SKIP_LOCKED) jobs";
// Before PostgreSQL 12 VACUUM has neither option: it always cleans the
// indexes of what it removes, and waits for another VACUUM of the table.
constexpr const char* kSweepBefore12 = "VACUUM jobs";

// Whether this role may VACUUM the table (PostgreSQL 15's rule: the table's
// owner or the database's, a member of either, or a superuser). Without it
// VACUUM only warns (SQLSTATE 01000, as any warning): asked first instead.
constexpr const char* kMayVacuum =
    "SELECT pg_has_role(c.relowner, 'USAGE') OR pg_has_role(d.datdba, 'USAGE') "
    "FROM pg_class c, pg_database d "
    "WHERE c.oid = 'jobs'::regclass AND d.datname = current_database()";

// False only on a clear "no": a question that failed (the connection lost,
// say) refuses nothing; it is asked again on the next connection.
bool may_vacuum(PGconn* conn) {
  PGresult* r = PQexec(conn, kMayVacuum);
  const bool no = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1 &&
                  std::strcmp(PQgetvalue(r, 0, 0), "f") == 0;
  PQclear(r);
  return !no;
}

}  // namespace

PgSweeper::PgSweeper(std::string uri) : uri_(std::move(uri)), thread_([this] { run(); }) {}

PgSweeper::~PgSweeper() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
    if (cancel_) {
      char why[256];
      PQcancel(static_cast<PGcancel*>(cancel_), why, sizeof why);
    }
  }
  wake_.notify_one();
  thread_.join();
}

void PgSweeper::changed(std::int64_t rows) {
  if (rows <= 0) return;
  bool wake = false;
  {
    std::lock_guard lock(mu_);
    since_ += rows;
    if (since_ >= kEvery && !due_ && !refused_) due_ = wake = true;
  }
  if (wake) wake_.notify_one();
}

std::uint64_t PgSweeper::sweeps() const {
  std::lock_guard lock(mu_);
  return sweeps_;
}

bool PgSweeper::refused() const {
  std::lock_guard lock(mu_);
  return refused_;
}

void PgSweeper::run() {
  PGconn* conn = nullptr;
  for (;;) {
    {
      std::unique_lock lock(mu_);
      wake_.wait(lock, [this] { return stop_ || due_; });
      if (stop_) break;
      since_ = 0;
    }
    if (!conn || PQstatus(conn) != CONNECTION_OK) {
      if (conn) PQfinish(conn);
      conn = PQconnectdb(uri_.c_str());
      PQsetNoticeProcessor(conn, &log_notice, nullptr);
      if (PQstatus(conn) == CONNECTION_OK && !may_vacuum(conn)) {
        spdlog::warn("postgresql: this role may not VACUUM the jobs table (it owns neither the "
                     "table nor the database): the sidecar leaves it to autovacuum, and claims "
                     "slow down as finished jobs accumulate between its runs (docs/operating.md, "
                     "\"Many hosts\")");
        std::lock_guard lock(mu_);
        refused_ = true;
        due_ = false;
        continue;
      }
    }
    PGcancel* cancel = PQstatus(conn) == CONNECTION_OK ? PQgetCancel(conn) : nullptr;
    {
      std::lock_guard lock(mu_);
      cancel_ = cancel;
      if (stop_) break;
    }
    const auto began = std::chrono::steady_clock::now();
    PGresult* r =
        cancel ? PQexec(conn, PQserverVersion(conn) >= 120000 ? kSweep : kSweepBefore12) : nullptr;
    const std::chrono::duration<double, std::milli> took = std::chrono::steady_clock::now() - began;
    const double ms = took.count();
    const bool ok = r && PQresultStatus(r) == PGRES_COMMAND_OK;
    if (ok) {
      spdlog::debug("postgresql: vacuumed the jobs table in {:.1f} ms", ms);
    } else {
      spdlog::warn("postgresql: VACUUM of the jobs table failed: {}",
                   trim(PQerrorMessage(conn)));
    }
    PQclear(r);
    if (cancel) {
      std::lock_guard lock(mu_);
      PQfreeCancel(cancel);
      cancel_ = nullptr;
    }
    // At most a tenth of the time in VACUUM: on a large table (its indexes
    // are read whole) the next one waits longer than kEvery rows.
    std::unique_lock lock(mu_);
    if (ok) ++sweeps_;
    wake_.wait_for(lock, std::chrono::duration<double, std::milli>(kRestShare * ms),
                   [this] { return stop_; });
    if (stop_) break;
    due_ = since_ >= kEvery && !refused_;
  }
  {
    std::lock_guard lock(mu_);
    if (cancel_) PQfreeCancel(static_cast<PGcancel*>(cancel_));
    cancel_ = nullptr;
  }
  if (conn) PQfinish(conn);
}

}  // namespace fenceq::daemon
