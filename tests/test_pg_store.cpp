// The PostgreSQL store in-process against the throw-away cluster
// ctest starts (the `pg` fixture, scripts/pg_cluster.sh; FENCEQ_TEST_PG_URI
// overrides it): the store contract suite shared with SQLite
// (store_contract.hpp), then what only a database shared by several sidecars
// has: claims racing between stores, LISTEN/NOTIFY, the shared clock mark,
// connection loss and failover, configuration errors. Each test case works in
// a schema of its own, dropped at its end. Without a cluster every test fails.
#include <catch2/catch.hpp>

#include <libpq-fe.h>
#include <poll.h>

#include <atomic>
#include <cstring>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "daemon.hpp"
#include "store_calls.hpp"
#include "pg.hpp"
#include "storage/job_rules.hpp"
#include "storage/pg/pg_statements.hpp"
#include "storage/pg/pg_store.hpp"

using fenceq::daemon::PgStore;
using fenceq::daemon::PgSweeper;
using fenceq::daemon::StoreError;
using namespace std::chrono_literals;

namespace {

using fenceq::test::PgConn;
using fenceq::test::PgSchema;
using fenceq::test::pg_cluster;
using fenceq::test::with_param;

// The shared suite's database: a schema of its own.
class Backend : public PgSchema {
 public:
  std::unique_ptr<fenceq::daemon::Store> open() { return std::make_unique<PgStore>(uri()); }
  std::unique_ptr<PgStore> open_pg() { return std::make_unique<PgStore>(uri()); }
  void sql(const std::string& q) { exec(q); }
};

// What a call threw: "none", or the StoreError's kind.
template <typename F>
std::string kind_of(F f) {
  try {
    f();
  } catch (const StoreError& e) {
    switch (e.kind) {
      case StoreError::Kind::internal: return "internal";
      case StoreError::Kind::unavailable: return "unavailable";
      case StoreError::Kind::retry: return "retry";
      case StoreError::Kind::outcome_unknown: return "outcome_unknown";
      case StoreError::Kind::fatal: return "fatal";
      case StoreError::Kind::refused: return "refused";
    }
  }
  return "none";
}

// Opens a transaction and runs its first statement (the BEGIN goes out with
// it): what reaches the database first. Rolls back and rethrows when that
// fails; leaves the transaction open otherwise.
template <typename S>
void open_tx(S& s) {
  s.begin();
  try {
    s.state("probe");
  } catch (...) {
    s.rollback();
    throw;
  }
}

bool readable(int fd, int timeout_ms) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, timeout_ms) == 1;
}

void terminate_backend(PgSchema& b, PgStore& s) {
  REQUIRE(s.raw());
  int pid = PQbackendPID(s.raw());
  CHECK(b.exec("SELECT pg_terminate_backend(" + std::to_string(pid) + ", 5000)") == "t");
}

}  // namespace

#include "store_contract.hpp"

namespace {
// The schema's versions (rules::kSchemaVersion): the latest, and 1 to it.
std::string latest_version() { return std::to_string(fenceq::daemon::rules::kSchemaVersion); }
std::string every_version() {
  std::string out;
  for (int v = 1; v <= fenceq::daemon::rules::kSchemaVersion; ++v) {
    out += (v > 1 ? "," : "") + std::to_string(v);
  }
  return out;
}
}  // namespace

TEST_CASE("pg: the jobs table has the contract's columns in PostgreSQL's types, schema versions "
          "1 and 2") {
  Backend b;
  auto s = b.open();
  struct Col {
    std::string name, type, nullable, dflt;
  };
  std::vector<Col> cols;
  PGresult* r = PQexec(b.admin(),
                       ("SELECT column_name, data_type, is_nullable, COALESCE(column_default, "
                        "'<null>') FROM information_schema.columns WHERE table_schema = '" +
                        b.name() + "' AND table_name = 'jobs' ORDER BY ordinal_position")
                           .c_str());
  REQUIRE(PQresultStatus(r) == PGRES_TUPLES_OK);
  for (int i = 0; i < PQntuples(r); ++i) {
    cols.push_back({PQgetvalue(r, i, 0), PQgetvalue(r, i, 1), PQgetvalue(r, i, 2),
                    PQgetvalue(r, i, 3)});
  }
  PQclear(r);
  REQUIRE(cols.size() >= 6);
  CHECK((cols[0].name == "id" && cols[0].type == "text" && cols[0].nullable == "NO"));
  CHECK((cols[1].name == "owner" && cols[1].type == "text" && cols[1].nullable == "YES" &&
         cols[1].dflt == "<null>"));
  CHECK((cols[2].name == "until" && cols[2].type == "double precision" &&
         cols[2].nullable == "NO" && cols[2].dflt == "0"));
  CHECK((cols[3].name == "fence" && cols[3].type == "bigint" && cols[3].nullable == "NO" &&
         cols[3].dflt == "0"));
  CHECK((cols[4].name == "result" && cols[4].type == "text" && cols[4].nullable == "YES"));
  CHECK((cols[5].name == "done" && cols[5].type == "integer" && cols[5].nullable == "NO" &&
         cols[5].dflt == "0"));
  for (std::size_t i = 6; i < cols.size(); ++i) {
    INFO(cols[i].name);
    CHECK((cols[i].dflt != "<null>" || cols[i].nullable == "YES"));
  }
  CHECK(b.exec("SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = "
               "i.indrelid AND a.attnum = ANY(i.indkey) WHERE i.indrelid = 'jobs'::regclass "
               "AND i.indisprimary") == "id");
  // One version sequence for both stores (daemon/storage/job_rules.hpp).
  CHECK(b.exec("SELECT string_agg(version::text, ',' ORDER BY version) FROM "
               "fenceq_schema_version") == every_version());
  CHECK(b.exec("SELECT count(*) FROM pg_indexes WHERE schemaname = '" + b.name() +
               "' AND indexname IN ('jobs_next', 'jobs_last_attempt', 'jobs_finished')") == "3");
  CHECK(b.exec("SELECT count(*) FROM information_schema.tables WHERE table_schema = '" +
               b.name() + "' AND table_name IN ('purged_fences', 'fenceq_meta')") == "2");
}

TEST_CASE("pg: C1.2 eight sidecars creating the schema at once all succeed, reopening changes nothing") {
  Backend b;
  constexpr int kStores = 8;
  std::vector<std::unique_ptr<PgStore>> stores(kStores);
  std::vector<std::string> errors(kStores);
  std::vector<std::thread> threads;
  for (int i = 0; i < kStores; ++i) {
    threads.emplace_back([&, i] {
      try {
        stores[i] = b.open_pg();
      } catch (const std::exception& e) {
        errors[i] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int i = 0; i < kStores; ++i) {
    INFO(errors[i]);
    REQUIRE(stores[i]);
    CHECK(stores[i]->connected());
    CHECK(stores[i]->connection_epoch() == 1);
  }
  CHECK(b.exec("SELECT count(*) FROM fenceq_schema_version") == latest_version());
  REQUIRE(enqueue(*stores[0], "kept"));
  REQUIRE(tx(*stores[3], [&] { return claim(*stores[3], "kept", "w", 10.0, 5.0); }) == 1);
  stores.clear();
  auto again = b.open();
  auto row = tx(*again, [&] { return again->state("kept"); });
  REQUIRE(row);
  CHECK(row->fence == 1);
  CHECK(row->owner == "w");
  CHECK(b.exec("SELECT count(*) FROM fenceq_schema_version") == latest_version());
}

// What schema version 6 added (groups), dropped, with the triggers that
// wake groups (pg_groups.cpp, made by every start); jobs_next as it was.
constexpr const char* kDropV6 =
    "DROP TRIGGER fenceq_group_sooner ON jobs; DROP TRIGGER fenceq_group_freed ON jobs; "
    "DROP TRIGGER fenceq_groups_joined ON jobs; DROP TRIGGER fenceq_groups_settings ON "
    "queue_config; DROP TABLE queue_groups, group_claims; DROP SEQUENCE queue_groups_turn_seq; "
    "DROP INDEX jobs_group, jobs_group_top, jobs_group_leased, jobs_next; CREATE INDEX jobs_next "
    "ON jobs(queue, priority DESC, seq) WHERE done = 0 AND dead = 0 AND queue IS NOT NULL; ALTER "
    "TABLE jobs DROP COLUMN grp; ALTER TABLE queue_config DROP COLUMN group_max_leased, DROP "
    "COLUMN group_rate, DROP COLUMN group_per";
// What schema versions 5 (unique keys) and 6 added, dropped.
const std::string kDropV5 = std::string(kDropV6) +
    "; DROP INDEX jobs_ukey, jobs_ukey_open; ALTER TABLE jobs DROP COLUMN ukey";

TEST_CASE("pg: a database a former fenceqd marked version 1 gets versions 2 to 20, rows kept, and a "
          "newer version is refused") {
  Backend b;
  {
    auto s = b.open();
    REQUIRE(enqueue(*s, "kept"));
  }
  // Former fenceqd numbered the whole schema 1.
  b.exec("DELETE FROM fenceq_schema_version WHERE version = 2");
  {
    auto s = b.open();
    CHECK(tx(*s, [&] { return s->state("kept"); }));
  }
  CHECK(b.exec("SELECT max(version) FROM fenceq_schema_version") ==
        std::to_string(fenceq::daemon::rules::kSchemaVersion));
  b.exec("INSERT INTO fenceq_schema_version(version) VALUES (" +
         std::to_string(fenceq::daemon::rules::kSchemaVersion + 1) + ")");
  try {
    b.open();
    FAIL("a schema newer than this fenceqd was opened");
  } catch (const StoreError& e) {
    CHECK(std::string(e.what()).find("newer than this fenceqd knows") != std::string::npos);
  }
}

TEST_CASE("pg: a version 2 database (before queue control) gets versions 3 to 7, rows and "
          "fences kept, its jobs cancellable") {
  Backend b;
  {
    auto s = b.open();
    REQUIRE(enqueue(*s, "old"));
    REQUIRE(tx(*s, [&] { return claim(*s, "old", "w", 1.0, 100.0); }) == 1);
  }
  b.exec(kDropV5);
  b.exec("ALTER TABLE jobs DROP COLUMN cancelled, DROP COLUMN progress");
  b.exec("DROP TABLE queue_config, queue_claims, schedules; DROP INDEX jobs_held; ALTER TABLE "
         "jobs DROP COLUMN held");
  b.exec("DELETE FROM fenceq_schema_version WHERE version >= 3");
  auto s = b.open();
  CHECK(b.exec("SELECT max(version) FROM fenceq_schema_version") == latest_version());
  auto row = tx(*s, [&] { return s->state("old"); });
  REQUIRE(row);
  CHECK(row->fence == 1);
  CHECK(tx(*s, [&] { return renew(*s, "old", "w", 1, 2.0, 100.0, std::string_view("half")); }));
  CHECK(tx(*s, [&] { return s->state("old"); })->progress == "half");
  CHECK(tx(*s, [&] { return cancel(*s, "old", 3.0); }));
  CHECK(tx(*s, [&] { return s->state("old"); })->fence == 2);
  CHECK_FALSE(tx(*s, [&] { return check(*s, "old", "w", 1, 4.0); }));
}

TEST_CASE("pg: a version 4 database gets versions 5 to 7: a keyed enqueue works beside its rows") {
  Backend b;
  {
    auto s = b.open();
    REQUIRE(enqueue(*s, "old"));
  }
  b.exec(kDropV5);
  b.exec("DELETE FROM fenceq_schema_version WHERE version >= 5");
  auto s = b.open();
  CHECK(b.exec("SELECT max(version) FROM fenceq_schema_version") == latest_version());
  NewJob j{"new"};
  const std::string key = "k";
  j.key = key;
  CHECK(tx(*s, [&] { return s->enqueue(j, 2.0); }));
  NewJob again{"again"};
  again.key = key;
  CHECK_FALSE(tx(*s, [&] { return s->enqueue(again, 3.0); }));
  CHECK(tx(*s, [&] { return s->state("old"); }));
}

TEST_CASE("pg: a version 5 database gets versions 6 and 7: its open jobs are claimed as before and a "
          "grouped job takes its turn beside them") {
  Backend b;
  {
    auto s = b.open();
    REQUIRE(enqueue(*s, "old"));
  }
  b.exec(kDropV6);
  b.exec("DELETE FROM fenceq_schema_version WHERE version >= 6");
  auto s = b.open();
  CHECK(b.exec("SELECT max(version) FROM fenceq_schema_version") == latest_version());
  NewJob j{"new"};
  const std::string group = "acme";
  j.group = group;
  CHECK(tx(*s, [&] { return s->enqueue(j, 2.0); }));
  auto jobs = tx(*s, [&] { return s->claim_next("default", "w", 3.0, 10.0, 5); });
  REQUIRE(jobs.size() == 2);
  CHECK(jobs[0].id == "old");
  CHECK(jobs[1].id == "new");
}

TEST_CASE("pg: a version 3 database gets versions 4 to 7: queue settings and schedules work on its "
          "rows") {
  Backend b;
  {
    auto s = b.open();
    REQUIRE(enqueue(*s, "old"));
  }
  b.exec(kDropV5);
  b.exec("DROP TABLE queue_config, queue_claims, schedules; DROP INDEX jobs_held; ALTER TABLE "
         "jobs DROP COLUMN held");
  b.exec("DELETE FROM fenceq_schema_version WHERE version >= 4");
  auto s = b.open();
  CHECK(b.exec("SELECT max(version) FROM fenceq_schema_version") == latest_version());
  CHECK(b.exec("SELECT count(*) FROM pg_indexes WHERE schemaname = '" + b.name() +
               "' AND indexname = 'jobs_held'") == "1");
  fenceq::QueueConfig paused;
  paused.paused = true;
  tx(*s, [&] {
    s->set_queue_config("default", paused);
    return true;
  });
  CHECK_FALSE(tx(*s, [&] { return claim(*s, "old", "w", 1.0, 10.0); }));
  tx(*s, [&] {
    s->set_queue_config("default", {});
    return true;
  });
  CHECK(tx(*s, [&] { return claim(*s, "old", "w", 1.0, 10.0); }) == 1);
}

TEST_CASE("pg: a version 15 database gets version 16: a parent purged after it failed, whose child "
          "a retry left blocked for good, now cancels it (issue 56, row 9), and one purged done "
          "still counts as done") {
  Backend b;
  const std::vector<std::string> p{"p"}, d{"d"};
  {
    auto s = b.open();
    tx(*s, [&] {
      REQUIRE(s->enqueue(NewJob{"p"}, 1.0));
      NewJob done{"d"};
      done.queue = "dq";
      REQUIRE(s->enqueue(done, 1.0));
      NewJob c{"c"};
      c.parents = &p;
      REQUIRE(s->enqueue(c, 1.0));
    });
    REQUIRE(tx(*s, [&] { return cancel(*s, "p", 2.0); }));
    REQUIRE(tx(*s, [&] { return retry(*s, "c", 3.0); }));
    const auto f = tx(*s, [&] { return claim(*s, "d", "w", 3.0, 10.0); });
    REQUIRE(f);
    REQUIRE(tx(*s, [&] { return complete(*s, "d", "w", *f, std::nullopt, 3.0); }));
    CHECK(tx(*s, [&] { return purge(*s, std::string("dq"), 0.0, 3.0); }) == 1);
    CHECK(info(*s, "c", 4.0).status == JobStatus::blocked);
  }
  // Version 15's purge of p: its row gone, its fence kept, nothing settled.
  b.exec("INSERT INTO purged_fences(id, fence) SELECT id, fence FROM jobs WHERE id = 'p'");
  b.exec("DELETE FROM jobs WHERE id = 'p'");
  b.exec("ALTER TABLE purged_fences DROP COLUMN ended");
  b.exec("DELETE FROM fenceq_schema_version WHERE version >= 16");
  auto s = b.open();
  CHECK(b.exec("SELECT max(version) FROM fenceq_schema_version") == latest_version());
  settle_all(*s, 5.0);
  CHECK(info(*s, "c", 5.0).status == JobStatus::cancelled);
  CHECK(info(*s, "c", 5.0).error == "parent p cancelled");
  CHECK_FALSE(tx(*s, [&] { return retry(*s, "c", 6.0); }));
  NewJob after_d{"after-d"};
  after_d.parents = &d;
  REQUIRE(tx(*s, [&] { return s->enqueue(after_d, 7.0); }));
  CHECK(info(*s, "after-d", 7.0).status == JobStatus::ready);
}

TEST_CASE("pg: a jobs table of the contract's six columns is upgraded in place, fences kept") {
  Backend b;
  b.exec("CREATE TABLE jobs(id text PRIMARY KEY, owner text, until double precision NOT NULL "
         "DEFAULT 0, fence bigint NOT NULL DEFAULT 0, result text, done integer NOT NULL "
         "DEFAULT 0)");
  b.exec("INSERT INTO jobs VALUES('seed', 'w', 50.0, 4, NULL, 0), ('fin', 'w', 9.0, 2, 'ok', 1)");
  auto s = b.open();
  auto seed = tx(*s, [&] { return s->state("seed"); });
  REQUIRE(seed);
  CHECK(seed->fence == 4);
  CHECK(seed->owner == "w");
  CHECK(tx(*s, [&] { return claim(*s, "seed", "v", 50.0, 5.0); }) == 5);
  CHECK(tx(*s, [&] { return s->state("fin"); })->result == "ok");
  CHECK(info(*s, "seed", 50.0).queue == "default");
}

TEST_CASE("pg: C3.7 two sidecars claim one job: the second waits for the first's commit, then gets nil") {
  Backend b;
  auto a = b.open();
  auto c = b.open();
  REQUIRE(enqueue(*a, "race"));
  REQUIRE(enqueue(*a, "race-2"));
  for (bool first_commits : {true, false}) {
    const std::string id = first_commits ? "race" : "race-2";
    a->begin();
    REQUIRE(claim(*a, id, "A", 100.0, 30.0) == 1);
    std::atomic<bool> done{false};
    std::optional<std::int64_t> got;
    std::string err;
    std::thread t([&] {
      try {
        c->begin();
        got = claim(*c, id, "C", 100.0, 30.0);
        c->commit();
      } catch (const std::exception& e) {
        err = e.what();
        c->rollback();
      }
      done = true;
    });
    std::this_thread::sleep_for(300ms);
    CHECK_FALSE(done);  // waiting for A's row
    if (first_commits) {
      a->commit();
    } else {
      a->rollback();
    }
    t.join();
    INFO(err);
    CHECK(err.empty());
    auto row = tx(*a, [&] { return a->state(id); });
    if (first_commits) {
      CHECK_FALSE(got);  // leased by A meanwhile
      CHECK(row->owner == "A");
    } else {
      CHECK(got == 1);  // A's claim never happened
      CHECK(row->owner == "C");
    }
    CHECK(row->fence == 1);
  }

  // Many sidecars at once on one new job: exactly one fence is handed out.
  constexpr int kStores = 6;
  std::vector<std::unique_ptr<fenceq::daemon::Store>> stores;
  for (int i = 0; i < kStores; ++i) stores.push_back(b.open());
  REQUIRE(enqueue(*a, "hot"));
  std::vector<std::optional<std::int64_t>> got(kStores);
  std::vector<std::thread> threads;
  for (int i = 0; i < kStores; ++i) {
    threads.emplace_back([&, i] {
      try {
        got[i] = tx(*stores[i], [&] { return claim(*stores[i], "hot", "o" + std::to_string(i), 5.0, 60.0); });
      } catch (const std::exception&) {
        got[i] = -1;
      }
    });
  }
  for (auto& t : threads) t.join();
  int winners = 0;
  for (const auto& g : got) {
    CHECK(g != -1);
    if (g) {
      ++winners;
      CHECK(*g == 1);
    }
  }
  CHECK(winners == 1);
}

TEST_CASE("pg: C1.2 an enqueue racing another sidecar's purge of the same id keeps the fence") {
  Backend b;
  auto a = b.open();
  auto c = b.open();
  REQUIRE(enqueue(*a, "p"));
  for (int i = 0; i < 5; ++i) {
    auto f = tx(*a, [&] { return claim(*a, "p", "w", 10.0 * i, 5.0); });
    REQUIRE(f == i + 1);
    if (i == 4) REQUIRE(tx(*a, [&] { return complete(*a, "p", "w", 5, std::nullopt, 41.0); }));
  }
  // a purges p (fence 5 kept) but has not committed when c enqueues p again:
  // c's INSERT reads the kept fences before a's commit, then waits for a's
  // delete of p. It must still continue from fence 5, not from 0.
  a->begin();
  REQUIRE(purge(*a, std::nullopt, 0.0, 100.0) == 1);
  std::atomic<bool> done{false};
  std::string err;
  bool inserted = false;
  std::thread t([&] {
    try {
      inserted = tx(*c, [&] { return c->enqueue(enqueue_request("p"), 100.0); });
    } catch (const std::exception& e) {
      err = e.what();
    }
    done = true;
  });
  std::this_thread::sleep_for(300ms);
  CHECK_FALSE(done);  // waiting for a's delete
  a->commit();
  t.join();
  INFO(err);
  REQUIRE(err.empty());
  CHECK(inserted);
  CHECK(tx(*c, [&] { return c->state("p"); })->fence == 5);
  CHECK(tx(*c, [&] { return claim(*c, "p", "v", 200.0, 5.0); }) == 6);
  CHECK(b.exec("SELECT count(*) FROM purged_fences") == "0");
}

TEST_CASE("pg: claim_next from several sidecars never hands out one job twice") {
  Backend b;
  auto s = b.open();
  constexpr int kJobs = 300, kStores = 4;
  s->begin();
  for (int i = 0; i < kJobs; ++i) {
    Enq o;
    o.queue = "shared";
    o.priority = i % 3;
    REQUIRE(s->enqueue(enqueue_request("job-" + std::to_string(i), o), 1.0));
  }
  s->commit();
  std::vector<std::unique_ptr<fenceq::daemon::Store>> stores;
  for (int i = 0; i < kStores; ++i) stores.push_back(b.open());
  std::vector<std::vector<std::string>> taken(kStores);
  std::vector<std::string> errors(kStores);
  std::vector<std::thread> threads;
  for (int i = 0; i < kStores; ++i) {
    threads.emplace_back([&, i] {
      try {
        auto& st = *stores[i];
        while (auto job = tx(st, [&] { return claim_next(st, "shared", "w" + std::to_string(i), 2.0, 600.0); })) {
          if (job->fence != 1) errors[i] = "fence " + std::to_string(job->fence);
          taken[i].push_back(job->id);
        }
      } catch (const std::exception& e) {
        errors[i] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  std::set<std::string> all;
  std::size_t total = 0;
  for (int i = 0; i < kStores; ++i) {
    INFO(errors[i]);
    CHECK(errors[i].empty());
    total += taken[i].size();
    all.insert(taken[i].begin(), taken[i].end());
  }
  CHECK(total == kJobs);
  CHECK(all.size() == kJobs);
}

TEST_CASE("pg: a commit that may make a job claimable wakes the other sidecars (LISTEN/NOTIFY)") {
  Backend b;
  auto a = b.open_pg();
  auto c = b.open_pg();
  const int fd = c->wakeup_fd();
  REQUIRE(fd >= 0);
  CHECK(c->channel() == a->channel());
  CHECK_FALSE(c->take_wakeups().any());

  // An enqueue committed by a: c's socket becomes readable.
  REQUIRE(enqueue(*a, "n1"));
  REQUIRE(readable(fd, 5000));
  CHECK(c->take_wakeups().any());
  CHECK_FALSE(c->take_wakeups().any());
  CHECK_FALSE(a->take_wakeups().any());  // its own notification does not count

  // Reads, claims and rolled-back writes wake nobody.
  tx(*a, [&] { return a->state("n1"); });
  auto f = tx(*a, [&] { return claim(*a, "n1", "w", 10.0, 60.0); });
  REQUIRE(f == 1);
  a->begin();
  a->enqueue(enqueue_request("rolled-back"), 10.0);
  a->rollback();
  CHECK_FALSE(readable(fd, 300));
  CHECK_FALSE(c->take_wakeups().any());

  // A release does.
  REQUIRE(tx(*a, [&] { return release(*a, "n1", "w", 1); }));
  REQUIRE(readable(fd, 5000));
  CHECK(c->take_wakeups().any());

  // Another schema is another channel.
  Backend other;
  auto o = other.open_pg();
  CHECK(o->channel() != c->channel());
  REQUIRE(enqueue(*o, "elsewhere"));
  CHECK_FALSE(readable(fd, 300));
  CHECK_FALSE(c->take_wakeups().any());
}

TEST_CASE("pg: the clock mark never goes back, clock_offset is measured by begin") {
  Backend b;
  auto a = b.open();
  auto c = b.open();
  tx(*a, [&] { a->set_clock_high_water(2.0e9); });
  tx(*c, [&] { c->set_clock_high_water(1.5e9); });  // another sidecar, behind
  CHECK(tx(*a, [&] { return a->clock_high_water(); }) == 2.0e9);
  CHECK(tx(*c, [&] { return c->clock_high_water(); }) == 2.0e9);
  tx(*c, [&] { c->set_clock_high_water(2.5e9 + 0.125); });
  CHECK(tx(*a, [&] { return a->clock_high_water(); }) == 2.5e9 + 0.125);

  a->begin();
  REQUIRE(a->shared());
  auto offset = a->shared()->clock_offset();
  a->commit();
  REQUIRE(offset);
  CHECK(std::abs(*offset) < 5.0);  // one machine: the same clock, give or take a round trip
  CHECK(a->shared());
}

TEST_CASE("pg: describe() hides the password, a malformed URI or a missing database stops at once") {
  Backend b;
  const std::string base = b.base();
  REQUIRE(base.starts_with("postgresql://"));
  // Trust authentication: the password is ignored, but must never be shown.
  PgStore with_user(std::string("postgresql://postgres:s3cret@") + base.substr(13));
  CHECK(with_user.connected());
  CHECK(with_user.describe().find("s3cret") == std::string::npos);
  CHECK(with_user.describe().find("postgres:***@") != std::string::npos);
  PgStore with_param_pw(with_param(base, "password=s3cret"));
  CHECK(with_param_pw.describe().find("s3cret") == std::string::npos);
  CHECK(with_param_pw.describe().find("password=***") != std::string::npos);

  // A key=value connection string (--pg-dsn) works too, its password hidden.
  std::string host;
  {
    char* err = nullptr;
    PQconninfoOption* opts = PQconninfoParse(base.c_str(), &err);
    REQUIRE(opts);
    for (auto* o = opts; o->keyword; ++o) {
      if (std::string(o->keyword) == "host" && o->val) host = o->val;
    }
    PQconninfoFree(opts);
  }
  PgStore kv("host=" + host + " dbname=fenceq_test user=postgres password='s3 cr\\'et' " +
             "options='-csearch_path=" + b.name() + "'");
  CHECK(kv.connected());
  CHECK(kv.describe().find("s3") == std::string::npos);
  CHECK(kv.describe().find("password=*** options") != std::string::npos);

  CHECK(kind_of([] { PgStore bad("postgresql://localhost/db?no_such_option=1"); }) == "internal");
  try {
    std::string no_role = base;
    REQUIRE(no_role.find("user=postgres") != std::string::npos);
    no_role.replace(no_role.find("user=postgres"), 13, "user=fenceq_no_such_role");
    PgStore bad(no_role);
    FAIL("an unknown role was accepted");
  } catch (const StoreError& e) {
    CHECK(e.kind == StoreError::Kind::internal);
    CHECK(std::string(e.what()).find("does not exist") != std::string::npos);
  }
  CHECK(kind_of([] { PgStore bad("postgresql://[::1"); }) == "internal");
  std::string missing = base;
  auto at = missing.find("/fenceq_test");
  REQUIRE(at != std::string::npos);
  missing.replace(at, 12, "/fenceq_no_such_db");
  try {
    PgStore bad(missing);
    FAIL("a missing database was accepted");
  } catch (const StoreError& e) {
    CHECK(e.kind == StoreError::Kind::internal);
    CHECK(std::string(e.what()).find("does not exist") != std::string::npos);
  }
}

TEST_CASE("pg: an unreachable server is not fatal: unavailable at once until it is back") {
  PgStore s("postgresql:///fenceq_test?host=/nonexistent-fenceq-dir&user=postgres");
  CHECK_FALSE(s.connected());
  CHECK(s.connection_epoch() == 0);
  CHECK(s.wakeup_fd() == -1);
  CHECK_FALSE(s.take_wakeups().any());
  CHECK_FALSE(s.clock_offset());
  CHECK(s.describe() == "postgresql:///fenceq_test?host=/nonexistent-fenceq-dir&user=postgres");
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 20; ++i) CHECK(kind_of([&] { open_tx(s); }) == "unavailable");
  CHECK(kind_of([&] { s.state("x"); }) == "unavailable");
  CHECK(kind_of([&] { s.claim_next_plan(); }) == "unavailable");
  CHECK(std::chrono::steady_clock::now() - t0 < 2s);
  s.rollback();  // harmless
}

TEST_CASE("pg: U+0000 in a stored string is refused with a clear error, reads find nothing") {
  Backend b;
  auto s = b.open();
  const std::string nul("a\0b", 3);
  s->begin();
  try {
    s->enqueue(enqueue_request(nul), 1.0);
    FAIL("an id with U+0000 was accepted");
  } catch (const StoreError& e) {
    CHECK(e.kind == StoreError::Kind::refused);
    CHECK(std::string(e.what()).find("U+0000") != std::string::npos);
    CHECK(std::string(e.what()).find("'id'") != std::string::npos);
  }
  // Refused before anything was sent: the transaction goes on.
  CHECK(s->enqueue(enqueue_request("ok"), 1.0));
  s->commit();
  CHECK(tx(*s, [&] { return s->state("ok"); }));
  CHECK_FALSE(tx(*s, [&] { return s->state(nul); }));
  CHECK_FALSE(tx(*s, [&] { return claim(*s, nul, "w", 1.0, 5.0); }));
  CHECK_FALSE(tx(*s, [&] { return claim_next(*s, nul, "w", 1.0, 5.0); }));
  CHECK(kind_of([&] { tx(*s, [&] { return claim(*s, "ok", nul, 1.0, 5.0); }); }) == "refused");
  auto f = tx(*s, [&] { return claim(*s, "ok", "w", 1.0, 5.0); });
  REQUIRE(f == 1);
  CHECK_FALSE(tx(*s, [&] { return renew(*s, "ok", nul, 1, 2.0, 5.0); }));
  CHECK_FALSE(tx(*s, [&] { return check(*s, nul, "w", 1, 2.0); }));
  CHECK(kind_of([&] { tx(*s, [&] { return complete(*s, "ok", "w", 1, nul, 2.0); }); }) ==
        "refused");
  CHECK(kind_of([&] { tx(*s, [&] { return fail(*s, "ok", "w", 1, nul, 1.0, 2.0); }); }) ==
        "refused");
  CHECK(tx(*s, [&] { return complete(*s, "ok", "w", 1, std::string("fine"), 2.0); }));
  fenceq::daemon::ListFilter r;
  const std::string past_ok("ok\0zzz", 6), past_o("o\0", 2);
  r.after = past_ok;  // no id holds U+0000: "after ok\0..." is "after ok"
  CHECK(tx(*s, [&] { return s->list(r, 3.0); }).empty());
  r.after = past_o;
  CHECK(tx(*s, [&] { return s->list(r, 3.0); }).size() == 1);
  CHECK(tx(*s, [&] { return purge(*s, nul, 0.0, 10.0); }) == 0);
}

TEST_CASE("pg: claim_next finds the next job through the jobs_next index, never a scan") {
  Backend b;
  auto s = b.open_pg();
  b.exec("INSERT INTO jobs(id, queue, seq) SELECT 'j' || i, 'q' || (i % 4), i "
         "FROM generate_series(1, 20000) i");
  b.exec("ANALYZE jobs");
  auto plan = s->claim_next_plan();
  INFO(plan);
  // The unparked jobs through jobs_next, the parked ones through jobs_wake
  // (schema 20), each walk in its index's order.
  CHECK(plan.find("Index Scan using jobs_next") != std::string::npos);
  CHECK(plan.find("Index Scan using jobs_wake") != std::string::npos);
  // (queue_groups, empty and without statistics, may be read whole.)
  CHECK(plan.find("Seq Scan on jobs") == std::string::npos);
  // The one sort by urgency: of the two walks' candidates (at most a page
  // each), never of the queue's jobs.
  const auto sort = plan.find("priority DESC");
  CHECK(sort != std::string::npos);
  CHECK(plan.find("priority DESC", sort + 1) == std::string::npos);
  CHECK(plan.find("CTE Scan on fresh", sort) != std::string::npos);
  CHECK(plan.find("Index Scan using jobs_wake", sort) != std::string::npos);
  auto job = tx(*s, [&] { return claim_next(*s, "q2", "w", 1.0, 5.0); });
  REQUIRE(job);
  CHECK(job->id == "j2");
}

// The buffers (shared hits and reads) one claim_next of `queue` at `now`
// takes: its statement, EXPLAIN ANALYZE'd in a transaction rolled back.
template <typename Db>
int claim_next_buffers(Db& b, const std::string& queue, double now) {
  b.exec("BEGIN");
  b.exec("PREPARE probe_claim(text, text, float8, float8, int8) AS " +
         fenceq::daemon::pg::claim_next_statement().sql);
  const std::string plan = b.exec("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) EXECUTE probe_claim('" +
                                  queue + "', 'probe', " + std::to_string(now + 60) + ", " +
                                  std::to_string(now) + ", 1)");
  b.exec("ROLLBACK");
  b.exec("DEALLOCATE probe_claim");  // a session's, whatever the transaction did
  INFO(plan);
  int blocks = 0;
  for (const char* field : {"\"Shared Hit Blocks\": ", "\"Shared Read Blocks\": "}) {
    const auto at = plan.find(field);  // the top node's: its children come after it
    REQUIRE(at != std::string::npos);
    blocks += std::stoi(plan.substr(at + std::strlen(field)));
  }
  return blocks;
}

TEST_CASE("pg: claim_next steps over no leased or delayed job (schema 20, issue 56): the parked "
          "ones come back when their lease or delay ends") {
  Backend b;
  auto s = b.open_pg();
  constexpr int kLeased = 20000, kDelayed = 20000;
  b.exec("INSERT INTO jobs(id, queue, seq) SELECT 'l' || i, 'q', i FROM generate_series(1, " +
         std::to_string(kLeased) + ") i");
  int leased = 0;
  while (leased < kLeased) {
    const auto got = tx(*s, [&] { return s->claim_next("q", "w", 1.0, 1e6, 1000); });
    leased += static_cast<int>(got.size());
  }
  // Delayed as an enqueue with a delay writes them (parked), the first
  // three through the store.
  for (int i = 0; i < 3; ++i) {
    Enq delayed;
    delayed.queue = "q";
    delayed.delay = 1.5e6;
    const auto id = "d" + std::to_string(i);
    REQUIRE(tx(*s, [&] { return s->enqueue(enqueue_request(id, delayed), 1.0); }));
  }
  Enq plain;
  plain.queue = "other";
  REQUIRE(tx(*s, [&] { return s->enqueue(enqueue_request("plain", plain), 1.0); }));
  CHECK(b.exec("SELECT string_agg(id || ':' || (kids & 64), ',' ORDER BY id) FROM jobs WHERE id "
               "IN ('d0', 'd1', 'd2', 'plain', 'l1')") == "d0:64,d1:64,d2:64,l1:64,plain:0");
  b.exec("INSERT INTO jobs(id, queue, seq, not_before, kids) SELECT 'd' || i, 'q', 100000 + i, "
         "1.5e6, 64 FROM generate_series(3, " + std::to_string(kDelayed) + ") i");
  b.exec("INSERT INTO jobs(id, queue, seq) VALUES ('ready', 'q', 999999)");
  // The claims' old row versions gone, as the sweeper's VACUUM takes them
  // (PgSweeper): else the walk reads their index entries, as many as are left.
  b.exec("VACUUM (ANALYZE) jobs");
  // Before, the walk of jobs_next read every one of the 40,000 ahead of
  // "ready" (thousands of buffers); now a few pages of each index.
  CHECK(claim_next_buffers(b, "q", 10.0) <= 64);
  auto job = tx(*s, [&] { return claim_next(*s, "q", "w2", 10.0, 60.0); });
  REQUIRE(job);
  CHECK(job->id == "ready");
  CHECK_FALSE(tx(*s, [&] { return claim_next(*s, "q", "w2", 10.0, 60.0); }));
  // A release brings its job back at once.
  const auto l7 = tx(*s, [&] { return s->state("l7"); });
  REQUIRE(l7);
  REQUIRE(tx(*s, [&] { return release(*s, "l7", "w", l7->fence); }));
  job = tx(*s, [&] { return claim_next(*s, "q", "w2", 11.0, 60.0); });
  REQUIRE(job);
  CHECK(job->id == "l7");
  // Past every lease and delay: the jobs whose time came first (the leases,
  // a page of kWakePagePg of their 20,000 looked at a call) are claimed,
  // each once.
  std::set<std::string> seen;
  for (int round = 0; round < 3; ++round) {
    const auto later = tx(*s, [&] { return s->claim_next("q", "w3", 2e6, 60.0, 5); });
    REQUIRE(later.size() == 5);
    for (const auto& j : later) {
      CHECK(j.id.starts_with("l"));
      CHECK(seen.insert(j.id).second);
      CHECK(j.attempts == (j.id == "l7" ? 3 : 2));  // l7: claimed again above
    }
  }
  // 40,000 parked jobs due: a page of them read (kWakePagePg), not all.
  CHECK(claim_next_buffers(b, "q", 2e6) <= 4 * fenceq::daemon::rules::kWakePagePg);
}

TEST_CASE("pg: a connection lost mid-transaction is unavailable, begin reconnects") {
  Backend b;
  auto s = b.open_pg();
  const auto epoch = s->connection_epoch();
  REQUIRE(epoch == 1);

  // The connection breaks as COMMIT is sent: the store cannot tell whether
  // PostgreSQL committed (here it had not: the session was already gone).
  s->begin();
  REQUIRE(s->enqueue(enqueue_request("lost"), 1.0));
  terminate_backend(b, *s);
  CHECK(kind_of([&] { s->commit(); }) == "outcome_unknown");
  CHECK_FALSE(s->connected());
  CHECK(s->wakeup_fd() == -1);
  s->begin();  // connects again with its first statement
  CHECK_FALSE(s->state("lost"));
  CHECK(s->connection_epoch() == epoch + 1);
  s->commit();

  // Lost between two statements: every later one is unavailable until rollback.
  s->begin();
  REQUIRE(s->enqueue(enqueue_request("also-lost"), 1.0));
  terminate_backend(b, *s);
  CHECK(kind_of([&] { claim(*s, "also-lost", "w", 1.0, 5.0); }) == "unavailable");
  CHECK(kind_of([&] { s->state("also-lost"); }) == "unavailable");
  s->rollback();
  s->begin();
  CHECK_FALSE(s->state("also-lost"));
  CHECK(s->connection_epoch() == epoch + 2);
  s->commit();

  // Lost while idle: the next begin connects again by itself.
  terminate_backend(b, *s);
  s->begin();
  CHECK(s->enqueue(enqueue_request("after"), 1.0));
  s->commit();
  CHECK(s->connection_epoch() == epoch + 3);

  // Lost while idle and noticed by the wake-up socket.
  const int fd = s->wakeup_fd();
  terminate_backend(b, *s);
  REQUIRE(readable(fd, 5000));
  CHECK(s->take_wakeups().any());
  CHECK(s->wakeup_fd() == -1);
  CHECK(tx(*s, [&] { return s->state("after"); }));
  CHECK(s->connection_epoch() == epoch + 4);
}

// Issue 55: two sidecars' transactions that each held a row the other
// wanted deadlocked, and PostgreSQL broke the tie only after
// deadlock_timeout (1 s). Every transaction that writes now takes the
// schema's write lock first (kWriteLock), so the second one waits for the
// first's commit before it takes any row, and then reads what it left.
TEST_CASE("pg: two sidecars' writing transactions cannot deadlock: the second waits for the first") {
  Backend b;
  auto a = b.open();
  auto c = b.open();
  REQUIRE(enqueue(*a, "x"));
  REQUIRE(enqueue(*a, "y"));
  a->begin();
  REQUIRE(claim(*a, "x", "A", 1.0, 60.0));
  std::string c_kinds;
  std::optional<std::int64_t> c_y, c_x;
  std::atomic<bool> c_done{false};
  std::thread t([&] {
    c->begin();
    c_kinds += kind_of([&] { c_y = claim(*c, "y", "C", 1.0, 60.0); });  // waits for a's commit
    c_kinds += kind_of([&] { c_x = claim(*c, "x", "C", 1.0, 60.0); });
    c_done = true;
    c->commit();
  });
  std::this_thread::sleep_for(300ms);
  CHECK_FALSE(c_done);  // c waits: a holds the write lock
  std::optional<std::int64_t> a_y;
  CHECK(kind_of([&] { a_y = claim(*a, "y", "A", 1.0, 60.0); }) == "none");  // no deadlock
  CHECK(a_y);
  a->commit();
  t.join();
  CHECK(c_kinds == "nonenone");
  CHECK_FALSE(c_y);  // a's claims committed first: both jobs are leased
  CHECK_FALSE(c_x);
}

TEST_CASE("pg: on a read-only server (a standby after failover) writes are unavailable, reconnects") {
  Backend b;
  auto s = b.open_pg();
  PQclear(PQexec(s->raw(), "SET default_transaction_read_only = on"));  // as a standby
  s->begin();
  CHECK(kind_of([&] { s->enqueue(enqueue_request("w"), 1.0); }) == "unavailable");
  s->rollback();
  CHECK_FALSE(s->connected());
  s->begin();  // a new session: read-write again
  CHECK(s->enqueue(enqueue_request("w"), 1.0));
  s->commit();
  CHECK(s->connection_epoch() == 2);
}

TEST_CASE("pg: PostgreSQL stopped and restarted: unavailable, then served again", "[restart]") {
  Backend b;
  auto s = b.open_pg();
  auto idle = b.open_pg();
  REQUIRE(enqueue(*s, "before"));
  const auto epoch = s->connection_epoch();

  // A restart under an open transaction: its next statement is unavailable.
  s->begin();
  REQUIRE(s->enqueue(enqueue_request("in-flight"), 1.0));
  pg_cluster("restart");
  CHECK(kind_of([&] { claim(*s, "before", "w", 1.0, 5.0); }) == "unavailable");
  CHECK(kind_of([&] { s->commit(); }) == "unavailable");
  bool back = false;
  auto deadline = std::chrono::steady_clock::now() + 15s;
  while (!back && std::chrono::steady_clock::now() < deadline) {
    try {
      open_tx(*s);
      back = true;
    } catch (const StoreError& e) {
      INFO(e.what());
      REQUIRE(e.kind == StoreError::Kind::unavailable);
      std::this_thread::sleep_for(50ms);
    }
  }
  REQUIRE(back);
  CHECK(s->connection_epoch() > epoch);
  CHECK(s->state("before"));
  CHECK_FALSE(s->state("in-flight"));
  s->commit();
  // An idle store reconnects in its next begin.
  CHECK(tx(*idle, [&] { return idle->state("before"); }));
  CHECK(idle->connection_epoch() == 2);

  // Stopped: unavailable at once (no waiting on a dead server), then back.
  struct StartAgain {  // whatever happens below, the cluster runs again after
    ~StartAgain() {
      try {
        pg_cluster("start");
      } catch (const std::exception&) {
      }
    }
  } start_again;
  pg_cluster("stop");
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 10; ++i) CHECK(kind_of([&] { open_tx(*s); }) == "unavailable");
  CHECK(std::chrono::steady_clock::now() - t0 < 3s);
  CHECK(s->wakeup_fd() == -1);
  pg_cluster("start");
  const auto epoch2 = s->connection_epoch();
  back = false;
  deadline = std::chrono::steady_clock::now() + 15s;
  while (!back && std::chrono::steady_clock::now() < deadline) {
    try {
      open_tx(*s);
      back = true;
    } catch (const StoreError& e) {
      INFO(e.what());
      REQUIRE(e.kind == StoreError::Kind::unavailable);
      std::this_thread::sleep_for(50ms);
    }
  }
  REQUIRE(back);
  CHECK(s->connection_epoch() == epoch2 + 1);
  CHECK(claim(*s, "before", "w", 1.0, 5.0) == 1);
  s->commit();
}

TEST_CASE("pg: C1.4 with synchronous_commit off for the database or role, the store's sessions "
          "commit with on, and a durable setting is kept") {
  Backend b;
  auto show = [](PgStore& s) {
    PGresult* r = PQexec(s.raw(), "SHOW synchronous_commit");
    std::string v = PQresultStatus(r) == PGRES_TUPLES_OK ? PQgetvalue(r, 0, 0) : "?";
    PQclear(r);
    return v;
  };
  // As if ALTER DATABASE/ROLE ... SET synchronous_commit had been given.
  PgStore off(b.uri() + "%20-csynchronous_commit%3Doff");
  REQUIRE(off.connected());
  CHECK(show(off) == "on");
  PgStore local(b.uri() + "%20-csynchronous_commit%3Dlocal");
  REQUIRE(local.connected());
  CHECK(show(local) == "local");
}

namespace {

// What reading the first claimable job of queue `q` through jobs_next cost:
// the buffers the scan touched (shared hit + read, the plan's top node).
template <typename Db>
int claim_scan_buffers(Db& b, const std::string& q) {
  b.exec("ANALYZE jobs");
  const std::string plan = b.exec(
      "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) SELECT id FROM jobs WHERE queue = '" + q +
      "' AND grp IS NULL AND done = 0 AND dead = 0 AND " + fenceq::daemon::rules::kJobsNextPg +
      " AND " + fenceq::daemon::rules::kNextKeyPg +
      " = 0 ORDER BY priority DESC, seq LIMIT 1");  // claim_next's walk of jobs_next
  INFO(plan);
  REQUIRE(plan.find("jobs_next") != std::string::npos);
  int blocks = 0;
  for (const char* field : {"\"Shared Hit Blocks\": ", "\"Shared Read Blocks\": "}) {
    const auto at = plan.find(field);  // the top node's: its children come after it
    REQUIRE(at != std::string::npos);
    blocks += std::stoi(plan.substr(at + std::strlen(field)));
  }
  return blocks;
}

template <typename F>
bool within_seconds(double seconds, F done) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (!done()) {
    if (std::chrono::steady_clock::now() >= until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

}  // namespace

// A database of its own, dropped at the end: a VACUUM removes only the row
// versions no transaction of the same database may still see, and other
// tests (and the app's tests) hold transactions in the shared one.
class OwnDatabase {
 public:
  OwnDatabase() : admin_(fenceq::test::pg_base_uri()) {
    std::random_device rd;
    name_ = "fq_sweep_" + std::to_string(rd()) + std::to_string(rd());
    admin_.exec("CREATE DATABASE " + name_ + " ENCODING 'UTF8' TEMPLATE template0");
    uri_ = fenceq::test::with_param(fenceq::test::pg_base_uri(), "dbname=" + name_);
    conn_ = std::make_unique<PgConn>(uri_);
  }
  ~OwnDatabase() {
    conn_.reset();
    try {
      admin_.exec("DROP DATABASE IF EXISTS " + name_ + " WITH (FORCE)");
    } catch (const std::exception&) {  // the cluster is dropped at the suite's end anyway
    }
  }
  OwnDatabase(const OwnDatabase&) = delete;
  OwnDatabase& operator=(const OwnDatabase&) = delete;
  const std::string& uri() const { return uri_; }
  std::string exec(const std::string& sql) { return conn_->exec(sql); }

 private:
  PgConn admin_;
  std::string name_, uri_;
  std::unique_ptr<PgConn> conn_;
};

TEST_CASE("pg: the writer vacuums the jobs table once its transactions changed enough rows: a "
          "claim no longer steps over the index entries of finished jobs") {
  OwnDatabase b;
  auto s = std::make_unique<PgStore>(b.uri());
  // 12,000 jobs of queue q finished (by hand, so that the store does not
  // count them): their old versions' entries stay at the front of jobs_next.
  b.exec("INSERT INTO jobs(id, queue, seq) SELECT 'g' || i, 'q', i FROM generate_series(1, 12010) i");
  b.exec("UPDATE jobs SET done = 1 WHERE queue = 'q' AND seq <= 12000");
  // The store's own changes: PgSweeper::kEvery claims in another queue.
  b.exec("INSERT INTO jobs(id, queue, seq) SELECT 'o' || i, 'other', 20000 + i "
         "FROM generate_series(1, " + std::to_string(PgSweeper::kEvery) + ") i");
  CHECK(s->sweeps() == 0);
  std::int64_t claimed = 0;
  while (claimed < PgSweeper::kEvery) {
    claimed += static_cast<std::int64_t>(
        tx(*s, [&] { return s->claim_next("other", "w", 1.0, 60.0, 1000); }).size());
  }
  REQUIRE(within_seconds(30, [&] { return s->sweeps() >= 1; }));
  // The front of q's index holds live entries only: a few pages, where the
  // dead entries took ~40 (12,000 of them).
  CHECK(claim_scan_buffers(b, "q") <= 8);
  auto job = tx(*s, [&] { return claim_next(*s, "q", "w", 1.0, 60.0); });
  REQUIRE(job);
  CHECK(job->id == "g12001");
}

TEST_CASE("pg: a role that may not vacuum the jobs table is not asked to again: the sweeper stops") {
  Backend b;
  { auto s = b.open_pg(); }  // the schema, owned by the test's role
  const std::string role = "fq_nonowner_" + b.name();
  b.exec("DROP ROLE IF EXISTS " + role);
  b.exec("CREATE ROLE " + role + " LOGIN");
  b.exec("GRANT USAGE ON SCHEMA " + b.name() + " TO " + role);
  b.exec("GRANT ALL ON ALL TABLES IN SCHEMA " + b.name() + " TO " + role);
  {
    PgSweeper sweeper(b.uri() + "&user=" + role);
    sweeper.changed(PgSweeper::kEvery);
    CHECK(within_seconds(10, [&] { return sweeper.refused(); }));
    sweeper.changed(PgSweeper::kEvery);  // not tried again
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    CHECK(sweeper.sweeps() == 0);
  }
  // With the table's owner it sweeps.
  {
    PgSweeper sweeper(b.uri());
    sweeper.changed(PgSweeper::kEvery);
    CHECK(within_seconds(10, [&] { return sweeper.sweeps() == 1; }));
    CHECK_FALSE(sweeper.refused());
  }
  b.exec("DROP OWNED BY " + role);
  b.exec("DROP ROLE " + role);
}
