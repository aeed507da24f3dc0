// The store in-process on a temporary file: every clause of C1-C3 that the
// store alone decides. Values differ from the spec's examples on purpose.
#include <catch2/catch.hpp>

#include <sqlite3.h>

#include <cmath>
#include <stdexcept>

#include "clock.hpp"
#include "daemon.hpp"
#include "db_lock.hpp"
#include "sqlite_store.hpp"

using fenceq::daemon::Clock;
using fenceq::daemon::DbLock;
using fenceq::daemon::SqliteStore;
using fenceq::daemon::SyncMode;
using fenceq::test::TempDir;

namespace {

bool enqueue(SqliteStore& s, std::string id) {
  fenceq::protocol::Request r;
  r.op = fenceq::protocol::Op::enqueue;
  r.id = std::move(id);
  return s.enqueue(r, 0.0);
}

// Runs one committed operation, as a batch of one.
template <typename F>
auto tx(SqliteStore& s, F f) {
  s.begin();
  auto r = f();
  s.commit();
  return r;
}

struct Column {
  std::string name, type;
  int notnull;
  std::string dflt;
  int pk;
};

std::vector<Column> table_info(sqlite3* db, const char* table) {
  std::vector<Column> out;
  sqlite3_stmt* s = nullptr;
  std::string sql = std::string("PRAGMA table_info(") + table + ")";
  REQUIRE(sqlite3_prepare_v2(db, sql.c_str(), -1, &s, nullptr) == SQLITE_OK);
  while (sqlite3_step(s) == SQLITE_ROW) {
    auto text = [&](int i) {
      auto* p = sqlite3_column_text(s, i);
      return p ? std::string(reinterpret_cast<const char*>(p)) : std::string("<null>");
    };
    out.push_back({text(1), text(2), sqlite3_column_int(s, 3), text(4), sqlite3_column_int(s, 5)});
  }
  sqlite3_finalize(s);
  return out;
}

std::string scalar(sqlite3* db, const char* sql) {
  sqlite3_stmt* s = nullptr;
  REQUIRE(sqlite3_prepare_v2(db, sql, -1, &s, nullptr) == SQLITE_OK);
  std::string v;
  if (sqlite3_step(s) == SQLITE_ROW && sqlite3_column_text(s, 0)) {
    v = reinterpret_cast<const char*>(sqlite3_column_text(s, 0));
  }
  sqlite3_finalize(s);
  return v;
}

}  // namespace

TEST_CASE("C1.1 jobs table has exactly the specified columns, types, constraints and defaults") {
  TempDir dir;
  SqliteStore s(dir.file("a.db"), SyncMode::full);
  auto cols = table_info(s.raw(), "jobs");
  REQUIRE(cols.size() >= 6);
  // Columns added later (the work queue's) must have defaults, or be nullable,
  // so that a plain INSERT INTO jobs(id) still works.
  for (std::size_t i = 6; i < cols.size(); ++i) {
    INFO(cols[i].name);
    CHECK((cols[i].dflt != "<null>" || cols[i].notnull == 0));
    CHECK(cols[i].pk == 0);
  }
  CHECK((cols[0].name == "id" && cols[0].type == "TEXT" && cols[0].pk == 1));
  CHECK((cols[1].name == "owner" && cols[1].type == "TEXT" && cols[1].notnull == 0 &&
         cols[1].dflt == "<null>"));
  CHECK((cols[2].name == "until" && cols[2].type == "REAL" && cols[2].notnull == 1 &&
         cols[2].dflt == "0"));
  CHECK((cols[3].name == "fence" && cols[3].type == "INTEGER" && cols[3].notnull == 1 &&
         cols[3].dflt == "0"));
  CHECK((cols[4].name == "result" && cols[4].type == "TEXT" && cols[4].notnull == 0));
  CHECK((cols[5].name == "done" && cols[5].type == "INTEGER" && cols[5].notnull == 1 &&
         cols[5].dflt == "0"));
}

TEST_CASE("C1.1 a plain INSERT INTO jobs(id) works and yields the default row") {
  TempDir dir;
  SqliteStore s(dir.file("a.db"), SyncMode::full);
  REQUIRE(sqlite3_exec(s.raw(), "INSERT INTO jobs(id) VALUES('plain')", nullptr, nullptr,
                       nullptr) == SQLITE_OK);
  auto row = tx(s, [&] { return s.state("plain"); });
  REQUIRE(row);
  CHECK(!row->owner);
  CHECK(row->until == 0);
  CHECK(row->fence == 0);
  CHECK(!row->result);
  CHECK(!row->done);
}

TEST_CASE("C1.2 reopening changes no row and the fence continues from where it was") {
  TempDir dir;
  const auto path = dir.file("a.db");
  {
    SqliteStore s(path, SyncMode::full);
    tx(s, [&] { return enqueue(s, "r1"); });
    for (int i = 0; i < 7; ++i) {
      // Each claim starts after the previous lease ended.
      REQUIRE(tx(s, [&] { return s.claim("r1", "w", 1000.0 + 10 * i, 3.0); }) == i + 1);
    }
    REQUIRE(tx(s, [&] { return s.release("r1", "w", 7); }));
  }
  SqliteStore again(path, SyncMode::full);
  auto row = tx(again, [&] { return again.state("r1"); });
  REQUIRE(row);
  CHECK(row->fence == 7);
  CHECK(!row->owner);
  CHECK(tx(again, [&] { return again.claim("r1", "v", 5000.0, 1.0); }) == 8);
  // A repeated enqueue after reopen does not reset the fence either.
  CHECK_FALSE(tx(again, [&] { return enqueue(again, "r1"); }));
  CHECK(tx(again, [&] { return again.state("r1"); })->fence == 8);
}

TEST_CASE("C1.3 the file uses WAL journaling and a second owner is refused") {
  TempDir dir;
  const auto path = dir.file("a.db");
  DbLock lock(path);
  SqliteStore s(path, SyncMode::full);
  sqlite3* reader = nullptr;
  REQUIRE(sqlite3_open_v2(path.c_str(), &reader, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK);
  CHECK(scalar(reader, "PRAGMA journal_mode") == "wal");
  sqlite3_close(reader);
  try {
    DbLock second(path);
    FAIL("a second lock on the same database was granted");
  } catch (const std::runtime_error& e) {
    CHECK(std::string(e.what()).find("already owned by another fenceqd") != std::string::npos);
  }
}

TEST_CASE("C3.1 enqueue inserts once; a repeat during a lease changes nothing") {
  TempDir dir;
  SqliteStore s(dir.file("a.db"), SyncMode::off);
  CHECK(tx(s, [&] { return enqueue(s, "q-17"); }));
  CHECK_FALSE(tx(s, [&] { return enqueue(s, "q-17"); }));
  REQUIRE(tx(s, [&] { return s.claim("q-17", "holder", 77.25, 8.5); }) == 1);
  CHECK_FALSE(tx(s, [&] { return enqueue(s, "q-17"); }));
  auto row = tx(s, [&] { return s.state("q-17"); });
  CHECK(row->owner == "holder");
  CHECK(row->until == Approx(85.75));
  CHECK(row->fence == 1);
}

TEST_CASE("C3.2 state returns the stored row, nothing for a missing id") {
  TempDir dir;
  SqliteStore s(dir.file("a.db"), SyncMode::off);
  CHECK_FALSE(tx(s, [&] { return s.state("ghost"); }));
  tx(s, [&] { return enqueue(s, "ünïcode ✓"); });
  auto row = tx(s, [&] { return s.state("ünïcode ✓"); });
  REQUIRE(row);
  CHECK(row->id == "ünïcode ✓");
}

TEST_CASE("C3.3 claim: nil for missing, done or leased; boundary now == until is claimable") {
  TempDir dir;
  SqliteStore s(dir.file("a.db"), SyncMode::off);
  CHECK_FALSE(tx(s, [&] { return s.claim("absent", "o", 1.0, 1.0); }));
  tx(s, [&] { return enqueue(s, "c"); });
  REQUIRE(tx(s, [&] { return s.claim("c", "a", 500.0, 0.75); }) == 1);  // until 500.75
  CHECK_FALSE(tx(s, [&] { return s.claim("c", "b", 500.5, 10.0); }));
  CHECK_FALSE(tx(s, [&] { return s.claim("c", "a", 500.7499, 10.0); }));  // not even the holder
  CHECK(tx(s, [&] { return s.claim("c", "b", 500.75, 2.0); }) == 2);  // now == until
  auto row = tx(s, [&] { return s.state("c"); });
  CHECK(row->owner == "b");
  CHECK(row->until == Approx(502.75));
  REQUIRE(tx(s, [&] { return s.complete("c", "b", 2, std::string("x"), 501.0); }));
  CHECK_FALSE(tx(s, [&] { return s.claim("c", "z", 1e9, 1.0); }));  // done: never again
  CHECK(tx(s, [&] { return s.state("c"); })->fence == 2);
}

TEST_CASE("C3.4 renew: only owner + fence of a current lease; now == until is expired") {
  TempDir dir;
  SqliteStore s(dir.file("a.db"), SyncMode::off);
  tx(s, [&] { return enqueue(s, "r"); });
  REQUIRE(tx(s, [&] { return s.claim("r", "own", 40.0, 6.0); }) == 1);  // until 46
  CHECK_FALSE(tx(s, [&] { return s.renew("r", "other", 1, 6.0, 41.0); }));
  CHECK_FALSE(tx(s, [&] { return s.renew("r", "own", 2, 6.0, 41.0); }));
  CHECK_FALSE(tx(s, [&] { return s.renew("missing", "own", 1, 6.0, 41.0); }));
  CHECK(tx(s, [&] { return s.renew("r", "own", 1, 9.0, 45.5); }));  // until 54.5
  CHECK(tx(s, [&] { return s.state("r"); })->until == Approx(54.5));
  CHECK_FALSE(tx(s, [&] { return s.renew("r", "own", 1, 9.0, 54.5); }));  // boundary: expired
  CHECK_FALSE(tx(s, [&] { return s.renew("r", "own", 1, 9.0, 60.0); }));  // never revived
  CHECK(tx(s, [&] { return s.state("r"); })->until == Approx(54.5));
}

TEST_CASE("C3.5 complete: only the current lease; a stale complete keeps the stored result") {
  TempDir dir;
  SqliteStore s(dir.file("a.db"), SyncMode::off);
  tx(s, [&] { return enqueue(s, "k"); });
  REQUIRE(tx(s, [&] { return s.claim("k", "old", 10.0, 4.0); }) == 1);   // until 14
  CHECK_FALSE(tx(s, [&] { return s.complete("k", "old", 1, std::string("late"), 14.0); }));
  REQUIRE(tx(s, [&] { return s.claim("k", "new", 14.0, 4.0); }) == 2);   // until 18
  CHECK_FALSE(tx(s, [&] { return s.complete("k", "old", 1, std::string("stale"), 15.0); }));
  CHECK_FALSE(tx(s, [&] { return s.complete("k", "new", 1, std::string("old fence"), 15.0); }));
  CHECK(tx(s, [&] { return s.complete("k", "new", 2, std::string("fresh"), 17.9); }));
  CHECK_FALSE(tx(s, [&] { return s.complete("k", "new", 2, std::string("twice"), 17.95); }));
  CHECK_FALSE(tx(s, [&] { return s.complete("k", "old", 1, std::string("stale"), 16.0); }));
  auto row = tx(s, [&] { return s.state("k"); });
  CHECK(row->result == "fresh");
  CHECK(row->done);
}

TEST_CASE("C3.6 release: owner + fence on a job not done; keeps the fence; not after done") {
  TempDir dir;
  SqliteStore s(dir.file("a.db"), SyncMode::off);
  tx(s, [&] { return enqueue(s, "l"); });
  REQUIRE(tx(s, [&] { return s.claim("l", "p", 3.0, 100.0); }) == 1);
  CHECK_FALSE(tx(s, [&] { return s.release("l", "q", 1); }));
  CHECK_FALSE(tx(s, [&] { return s.release("l", "p", 0); }));
  CHECK(tx(s, [&] { return s.release("l", "p", 1); }));
  auto row = tx(s, [&] { return s.state("l"); });
  CHECK(!row->owner);
  CHECK(row->until == 0);
  CHECK(row->fence == 1);
  // Claimable at once after a release, with the next fence.
  REQUIRE(tx(s, [&] { return s.claim("l", "q", 4.0, 100.0); }) == 2);
  REQUIRE(tx(s, [&] { return s.complete("l", "q", 2, std::nullopt, 5.0); }));
  CHECK_FALSE(tx(s, [&] { return s.release("l", "q", 2); }));  // release after done
  row = tx(s, [&] { return s.state("l"); });
  CHECK(row->owner == "q");
  CHECK(row->done);
  CHECK(!row->result);
}

TEST_CASE("C2.3 the server clock never decreases and its high-water mark survives reopening") {
  TempDir dir;
  const auto path = dir.file("a.db");
  const double future = 4.0e9;  // year 2096: ahead of any wall clock running this test
  {
    SqliteStore s(path, SyncMode::full);
    CHECK(tx(s, [&] { return s.clock_high_water(); }) == 0);
    s.begin();
    s.set_clock_high_water(future);
    s.commit();
  }
  SqliteStore s(path, SyncMode::full);
  Clock clock(fenceq::protocol::ClockMode::server, tx(s, [&] { return s.clock_high_water(); }));
  double prev = clock.now();
  CHECK(prev >= future);
  for (int i = 0; i < 1000; ++i) {
    double t = clock.now();
    REQUIRE(t >= prev);
    prev = t;
  }
  Clock fresh(fenceq::protocol::ClockMode::server, 0);
  double a = fresh.now();
  CHECK(a > 1.7e9);  // seconds since the epoch, C2.1
  CHECK(fresh.now() >= a);
}
