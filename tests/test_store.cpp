// The SQLite store in-process on a temporary file: the store contract suite
// (store_contract.hpp, shared with the PostgreSQL store) and what is SQLite's
// own (column types as SQLite spells them, WAL, the single-writer lock).
#include <catch2/catch.hpp>

#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <random>
#include <memory>
#include <stdexcept>

#include "daemon.hpp"
#include "store_calls.hpp"
#include "storage/sqlite/db_lock.hpp"
#include "base/memory_policy.hpp"
#include "storage/sqlite/sqlite_store.hpp"

using fenceq::daemon::DbLock;
using fenceq::daemon::SqliteStore;
using fenceq::daemon::SyncMode;
using fenceq::test::TempDir;

namespace {

// A fresh database for each test of the shared suite: a file in a temporary
// directory.
class Backend {
 public:
  std::unique_ptr<fenceq::daemon::Store> open() {
    return std::make_unique<SqliteStore>(path_, SyncMode::full);
  }
  void sql(const std::string& q) {
    sqlite3* db = nullptr;
    REQUIRE(sqlite3_open(path_.c_str(), &db) == SQLITE_OK);
    char* err = nullptr;
    int rc = sqlite3_exec(db, q.c_str(), nullptr, nullptr, &err);
    std::string msg = err ? err : "";
    sqlite3_free(err);
    sqlite3_close(db);
    INFO(msg);
    REQUIRE(rc == SQLITE_OK);
  }

 private:
  TempDir dir_;
  std::string path_ = dir_.file("a.db");
};

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

TEST_CASE("C1.3 the write-ahead log stays bounded under steady commits in every --sync mode and "
          "a clean stop leaves none", "[sqlite]") {
  // With --sync normal and off a thread of its own checkpoints
  // (sqlite_checkpointer.hpp), which alone never lets SQLite start the log over
  // while commits go on; with full the commit that takes the log past 1,000
  // pages does. 15,000 commits of ~3 pages each would make a 180 MB log; the
  // bound: kInlineWait pages and the commit that went past them (past kInline
  // a commit copies when the thread is not copying; past kInlineWait it waits
  // for the thread's copy: under ASan the log grew to 44 MB when no commit
  // ever waited).
  for (auto sync : {SyncMode::full, SyncMode::normal, SyncMode::off}) {
    TempDir dir;
    const auto path = dir.file("a.db");
    {
      SqliteStore s(path, sync);
      for (int i = 0; i < 15000; ++i) {
        const auto sql = "INSERT INTO jobs(id, payload) VALUES('job-" + std::to_string(i) +
                         "', zeroblob(200))";
        REQUIRE(sqlite3_exec(s.raw(), sql.c_str(), nullptr, nullptr, nullptr) == SQLITE_OK);
      }
      INFO("sync " << static_cast<int>(sync));
      const std::uintmax_t frame = 4096 + 24;
      CHECK(std::filesystem::file_size(path + "-wal") <
            frame * (fenceq::daemon::SqliteCheckpointer::kInlineWait + 1000));
      // The rows reached the database file itself, not only the log.
      CHECK(std::filesystem::file_size(path) > 1u << 20);
    }
    CHECK_FALSE(std::filesystem::exists(path + "-wal"));
  }
}

#include "storage/job_rules.hpp"
#include "store_contract.hpp"

TEST_CASE("C1.2 schema versions: a new file is the current version, as on PostgreSQL, and a newer one is refused") {
  TempDir dir;
  const auto path = dir.file("v.db");
  { SqliteStore s(path, SyncMode::full); }
  auto user_version = [&] {
    sqlite3* db = nullptr;
    REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
    sqlite3_stmt* st = nullptr;
    REQUIRE(sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &st, nullptr) == SQLITE_OK);
    REQUIRE(sqlite3_step(st) == SQLITE_ROW);
    int v = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
    sqlite3_close(db);
    return v;
  };
  CHECK(user_version() == fenceq::daemon::rules::kSchemaVersion);
  { SqliteStore again(path, SyncMode::full); }  // reopening changes nothing
  CHECK(user_version() == fenceq::daemon::rules::kSchemaVersion);
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
  const std::string newer = "PRAGMA user_version = " +
                            std::to_string(fenceq::daemon::rules::kSchemaVersion + 1);
  REQUIRE(sqlite3_exec(db, newer.c_str(), nullptr, nullptr, nullptr) == SQLITE_OK);
  sqlite3_close(db);
  try {
    SqliteStore newer(path, SyncMode::full);
    FAIL("a schema newer than this fenceqd was opened");
  } catch (const fenceq::daemon::StoreError& e) {
    CHECK(std::string(e.what()).find("newer than this fenceqd knows") != std::string::npos);
  }
}

// What schema version 9 added, dropped: a file of version 8 (no job waits
// for another).
// What schema version 16 added, dropped: a file of version 15 (version
// 15's settle_pending is made IF NOT EXISTS, so older files may keep it).
// What schema versions 17 and 19 changed, undone: a file of version 16
// (jobs_next by (queue, priority DESC, seq), the blocked jobs among the
// rest; no jobs_wake).
// What schema version 24 changed, undone (a file of version 23): steps in
// their job's row; jobs_steps_gone back.
const std::string kDropV24 =
    "ALTER TABLE jobs DROP COLUMN steps; CREATE TRIGGER jobs_steps_gone AFTER DELETE ON jobs WHEN "
    "OLD.fence > 0 BEGIN DELETE FROM job_steps WHERE id = OLD.id; END; ";
// What schema version 23 added, dropped (a file of version 22): the groups'
// own settings (C3.25).
const std::string kDropV23 = kDropV24 +
    "DROP TABLE group_config; ALTER TABLE queue_config DROP COLUMN group_overrides; ";
// What schema version 22 added, dropped (a file of version 21): suspends
// and deadlines.
const std::string kDropV22 = kDropV23 +
    "DROP TRIGGER jobs_deadline_gone; DROP TRIGGER jobs_steps_gone; DROP TABLE job_deadlines; "
    "ALTER TABLE jobs DROP COLUMN "
    "expires; DROP TRIGGER "
    "jobs_extras_gone; DROP TABLE job_suspends; CREATE TRIGGER jobs_extras_gone AFTER DELETE ON "
    "jobs WHEN (OLD.kids & 188) <> 0 BEGIN DELETE FROM job_headers WHERE id = OLD.id; DELETE FROM "
    "job_runtimes WHERE id = OLD.id; DELETE FROM job_payloads WHERE id = OLD.id; DELETE FROM "
    "job_results WHERE id = OLD.id; DELETE FROM job_steps WHERE id = OLD.id; END; ";
const std::string kDropV17 = kDropV22 +
    "DROP INDEX jobs_wake; DROP INDEX jobs_next; CREATE INDEX jobs_next ON jobs(queue, priority DESC, seq) WHERE "
    "done = 0 AND dead = 0 AND grp IS NULL; ";
const std::string kDropV16 = kDropV17 + "ALTER TABLE purged_fences DROP COLUMN ended; ";
// What schema version 14 dropped, back: a file of version 13 (jobs_ukey
// by the key's hash).
const std::string kDropV14 = kDropV16 +
    "CREATE INDEX jobs_ukey ON jobs(khash, kseq) WHERE khash IS NOT NULL; ";
// What schema version 13 added, dropped: a file of version 12.
const std::string kDropV13 = kDropV14 + "DROP INDEX jobs_dead; ";
// What schema version 12 added, dropped: a file of version 11.
const std::string kDropV12 = kDropV13 +
    "DROP TRIGGER jobs_extras_gone; DROP TABLE job_headers; DROP TABLE queue_retention; ";
// What schema version 11 added, dropped: a file of version 10.
const std::string kDropV11 = kDropV12 + "DROP TABLE job_runtimes; ";
const std::string kDropV9 = kDropV11 +
    "DROP TABLE job_after; DROP TABLE job_waits; ALTER TABLE jobs DROP COLUMN kids; ";
// What schema version 8 changed, undone: a file of version 7 (jobs_ukey
// by queue and key).
const std::string kDropV8 = kDropV9 +
    "DROP INDEX jobs_ukey; ALTER TABLE jobs DROP COLUMN khash; CREATE INDEX jobs_ukey ON "
    "jobs(queue, ukey, kseq) WHERE ukey IS NOT NULL; ";
// What schema versions 7 and 8 changed, undone: a file of version 6 (the
// key indexes as they were).
const std::string kDropV7 = kDropV8 +
    "DROP INDEX jobs_ukey; CREATE INDEX jobs_ukey ON jobs(queue, ukey, created) WHERE ukey IS NOT "
    "NULL; CREATE UNIQUE INDEX jobs_ukey_open ON jobs(queue, ukey) WHERE ukey IS NOT NULL AND "
    "done = 0 AND dead = 0; ALTER TABLE jobs DROP COLUMN kseq; DROP INDEX jobs_held; CREATE INDEX "
    "jobs_held ON jobs(queue, until) WHERE held = 1 AND done = 0 AND dead = 0; CREATE INDEX "
    "jobs_group_leased ON jobs(queue, grp) WHERE held = 1 AND done = 0 AND dead = 0 AND grp IS "
    "NOT NULL; ";
// What schema versions 6 and 7 added, dropped: a file of version 5 (jobs_next
// as it was, over every open job).
const std::string kDropV6 = kDropV7 +
    "DROP TABLE group_claims; DROP INDEX jobs_group; DROP INDEX "
    "jobs_group_top; DROP INDEX jobs_group_leased; DROP INDEX jobs_next; CREATE INDEX jobs_next "
    "ON jobs(queue, priority DESC, seq) WHERE done = 0 AND dead = 0; ALTER TABLE jobs DROP "
    "COLUMN grp; ALTER TABLE queue_config DROP COLUMN group_max_leased; ALTER TABLE "
    "queue_config DROP COLUMN group_rate; ALTER TABLE queue_config DROP COLUMN group_per; ";
// What schema versions 5 and 6 added, dropped: a file of version 4.
const std::string kDropV5 = kDropV6 +
    "DROP INDEX jobs_ukey; DROP INDEX jobs_ukey_open; ALTER TABLE jobs DROP COLUMN ukey; ";
// What schema versions 4 to 6 added, dropped: a file of version 3.
const std::string kDropV4 = kDropV5 +
    "DROP TABLE queue_config; DROP TABLE queue_claims; DROP TABLE schedules; "
    "DROP INDEX jobs_held; ALTER TABLE jobs DROP COLUMN held; ";

// A file at `path` with one job, "old", made to look like a file of schema
// `version`: `drop` takes out what the versions after it added.
void file_of_version(const std::string& path, const std::string& drop, int version) {
  {
    SqliteStore s(path, SyncMode::full);
    s.begin();
    REQUIRE(s.enqueue(NewJob{"old"}, 1.0));
    s.commit();
  }
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
  REQUIRE(sqlite3_exec(db, (drop + "PRAGMA user_version = " + std::to_string(version)).c_str(),
                       nullptr, nullptr, nullptr) == SQLITE_OK);
  sqlite3_close(db);
}

// Runs `sql` on the file at `path` with a connection of its own (rows
// written as an older fenceqd or another key would have left them).
void exec_on(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
  REQUIRE(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr) == SQLITE_OK);
  sqlite3_close(db);
}

TEST_CASE("C1.2 schema versions: a version 9 file is upgraded to 14 in place: a job that "
          "waits for others is marked so and its claim names its parents") {
  TempDir dir;
  const auto path = dir.file("v9.db");
  {
    SqliteStore s(path, SyncMode::full);
    s.begin();
    REQUIRE(s.enqueue(NewJob{"p"}, 1.0));
    NewJob child{"c"};
    const std::vector<std::string> parents{"p"};
    child.parents = &parents;
    REQUIRE(s.enqueue(child, 1.0));
    s.commit();
  }
  // Version 9 marked parents only (kids 1).
  exec_on(path, kDropV11 + "UPDATE jobs SET kids = kids & 1; PRAGMA user_version = 9");
  SqliteStore s(path, SyncMode::full);
  s.begin();
  auto p = claim_next(s, "default", "w", 2.0, 30);
  REQUIRE(p);
  CHECK(p->after.empty());
  REQUIRE(complete(s, "p", "w", p->fence, "r", 3.0));
  auto c = claim_next(s, "default", "w", 4.0, 30);
  REQUIRE(c);
  CHECK(c->id == "c");
  CHECK(c->after == std::vector<std::string>{"p"});
  s.commit();
}

// A store where parent "p" was cancelled and its child "c" retried (blocked
// on it again), and parent "d" done and purged; written by this fenceqd.
void failed_parent_and_retried_child(Store& s) {
  const std::vector<std::string> p{"p"}, d{"d"};
  tx(s, [&] {
    REQUIRE(s.enqueue(NewJob{"p"}, 1.0));
    NewJob done{"d"};
    done.queue = "dq";
    REQUIRE(s.enqueue(done, 1.0));
    NewJob c{"c"};
    c.parents = &p;
    REQUIRE(s.enqueue(c, 1.0));
    REQUIRE(cancel(s, "p", 2.0));
    REQUIRE(retry(s, "c", 3.0));
    const auto f = claim(s, "d", "w", 3.0, 10.0);
    REQUIRE(f);
    REQUIRE(complete(s, "d", "w", *f, std::nullopt, 3.0));
    CHECK(purge(s, std::string("dq"), 0.0, 3.0) == 1);
  });
  CHECK(info(s, "c", 4.0).status == JobStatus::blocked);
}

TEST_CASE("C1.2 schema versions: a version 15 file is upgraded to 16 in place: a parent purged "
          "after it failed, whose child a retry left blocked for good, now cancels it (issue 56, "
          "row 9), and one purged done still counts as done") {
  TempDir dir;
  const auto path = dir.file("v15.db");
  {
    SqliteStore s(path, SyncMode::full);
    failed_parent_and_retried_child(s);
  }
  // Version 15's purge of p: its row gone, its fence kept, nothing settled.
  exec_on(path, "INSERT INTO purged_fences(id, fence) SELECT id, fence FROM jobs WHERE id = 'p'; "
                "DELETE FROM jobs WHERE id = 'p'; " + kDropV16 + "PRAGMA user_version = 15");
  SqliteStore s(path, SyncMode::full);
  settle_all(s, 5.0);
  CHECK(info(s, "c", 5.0).status == JobStatus::cancelled);
  CHECK(info(s, "c", 5.0).error == "parent p cancelled");
  CHECK_FALSE(tx(s, [&] { return retry(s, "c", 6.0); }));
  const std::vector<std::string> d{"d"};
  NewJob after_d{"after-d"};
  after_d.parents = &d;
  REQUIRE(tx(s, [&] { return s.enqueue(after_d, 7.0); }));
  CHECK(info(s, "after-d", 7.0).status == JobStatus::ready);
}

TEST_CASE("C1.2 schema versions: a version 16 file is upgraded to 17 in place: jobs_next seeks "
          "past a queue's blocked jobs, and claims take the rest in their order (issue 56)") {
  TempDir dir;
  const auto path = dir.file("v16.db");
  {
    SqliteStore s(path, SyncMode::full);
    const std::vector<std::string> p{"p"};
    tx(s, [&] {
      NewJob parent{"p"};
      parent.queue = "other";
      REQUIRE(s.enqueue(parent, 1.0));
      for (const char* id : {"b1", "b2"}) {
        NewJob blocked{id};
        blocked.parents = &p;
        blocked.priority = 5;
        REQUIRE(s.enqueue(blocked, 1.0));
      }
      REQUIRE(s.enqueue(NewJob{"r"}, 1.0));
    });
  }
  exec_on(path, kDropV17 + "PRAGMA user_version = 16");
  SqliteStore s(path, SyncMode::full);
  const auto plan = s.claim_next_plan();
  INFO(plan);
  CHECK(plan.find("jobs_next (queue=? AND <expr>=?)") != std::string::npos);
  auto r = tx(s, [&] { return claim_next(s, "default", "w", 2.0, 30); });
  REQUIRE(r);
  CHECK(r->id == "r");  // the blocked ones, of higher priority, passed over
  CHECK_FALSE(tx(s, [&] { return claim_next(s, "default", "w", 2.0, 30); }));
  auto p = tx(s, [&] { return claim_next(s, "other", "w", 3.0, 30); });
  REQUIRE(p);
  REQUIRE(tx(s, [&] { return complete(s, "p", "w", p->fence, std::nullopt, 4.0); }));
  settle_all(s, 4.0);
  auto b = tx(s, [&] { return s.claim_next("default", "w", 5.0, 30, 5); });
  REQUIRE(b.size() == 2);  // unblocked: back in the claims' reach, in enqueue order
  CHECK(b[0].id == "b1");
  CHECK(b[1].id == "b2");
}

TEST_CASE("C1.2 schema versions: a version 4 file is upgraded to 14 in place: a keyed enqueue "
          "works beside its rows") {
  TempDir dir;
  const auto path = dir.file("v4.db");
  file_of_version(path, kDropV5, 4);
  SqliteStore s(path, SyncMode::full);
  s.begin();
  NewJob j{"new"};
  j.key = "k";
  CHECK(s.enqueue(j, 2.0));
  NewJob again{"again"};
  again.key = "k";
  CHECK_FALSE(s.enqueue(again, 3.0));
  CHECK(s.state("old"));
  s.commit();
}

TEST_CASE("C1.2 schema versions: a version 6 file is upgraded to 14 in place: a key's job revived "
          "after a newer one finished still holds the key") {
  TempDir dir;
  const auto path = dir.file("v6.db");
  file_of_version(path, kDropV7, 6);
  // "a" enqueued first and revived after "b" (newer) finished: in version 6
  // jobs_ukey_open knew "a" as the key's unfinished job.
  exec_on(path,
          "INSERT INTO jobs(id, queue, ukey, seq, created) VALUES('a', 'q', 'k', 2, 1.0); "
          "INSERT INTO jobs(id, queue, ukey, seq, created, done, finished) VALUES('b', 'q', "
          "'k', 3, 2.0, 1, 2.5)");
  SqliteStore s(path, SyncMode::full);
  s.begin();
  NewJob c{"c"};
  c.queue = "q";
  c.key = "k";
  CHECK_FALSE(s.enqueue(c, 3.0));  // "a" holds k
  CHECK_FALSE(s.state("c"));
  NewJob other{"d"};
  other.queue = "q";
  other.key = "k2";
  CHECK(s.enqueue(other, 3.0));
  s.commit();
}

TEST_CASE("C1.2 schema versions: a version 7 file is upgraded to 14 in place: its keys still hold "
          "and its unique_for windows still count") {
  TempDir dir;
  const auto path = dir.file("v7.db");
  file_of_version(path, kDropV8, 7);
  // "a" holds k (open); "b" of k2 is done, enqueued at 2.0.
  exec_on(path,
          "INSERT INTO jobs(id, queue, ukey, seq, kseq, created) VALUES('a', 'q', 'k', 2, 2, "
          "1.0); INSERT INTO jobs(id, queue, ukey, seq, kseq, created, done, finished) "
          "VALUES('b', 'q', 'k2', 3, 3, 2.0, 1, 2.5)");
  SqliteStore s(path, SyncMode::full);
  s.begin();
  NewJob c{"c"};
  c.queue = "q";
  c.key = "k";
  CHECK_FALSE(s.enqueue(c, 3.0));  // "a" holds k
  NewJob d{"d"};
  d.queue = "q";
  d.key = "k2";
  d.unique_for = 5.0;
  CHECK_FALSE(s.enqueue(d, 3.0));  // "b" enqueued within the last 5 s
  d.unique_for = 0.5;
  CHECK(s.enqueue(d, 3.0));
  s.commit();
}

namespace {
NewJob keyed_job(const char* id, const char* key, double unique_for = 0) {
  NewJob j{id};
  j.queue = "q";
  j.key = key;
  j.unique_for = unique_for;
  return j;
}
}  // namespace

// Schema v14: the keys live in the store's memory (key_map.hpp), read from
// the table at open.
TEST_CASE("C3.10 keys in memory: a reopened store reads them from the table: an open job "
          "holds its key and a finished one its unique_for window") {
  TempDir dir;
  const auto path = dir.file("keys.db");
  {
    SqliteStore s(path, SyncMode::full);
    s.begin();
    REQUIRE(s.enqueue(keyed_job("a", "k"), 1.0));
    REQUIRE(s.enqueue(keyed_job("b", "k2"), 2.0));
    REQUIRE(cancel(s, "b", 3.0));
    s.commit();
  }
  SqliteStore s(path, SyncMode::full);
  int indexes = -1;
  REQUIRE(sqlite3_exec(s.raw(), "SELECT count(*) FROM sqlite_master WHERE name = 'jobs_ukey'",
                       [](void* n, int, char** v, char**) {
                         *static_cast<int*>(n) = std::atoi(v[0]);
                         return 0;
                       }, &indexes, nullptr) == SQLITE_OK);
  CHECK(indexes == 0);  // v14: no index by key
  s.begin();
  CHECK_FALSE(s.enqueue(keyed_job("c", "k"), 4.0));             // "a" holds k
  CHECK_FALSE(s.enqueue(keyed_job("d", "k2", 5.0), 4.0));       // "b" enqueued at 2.0
  CHECK(s.enqueue(keyed_job("e", "k2", 1.5), 4.0));             // its window ended at 2.5
  CHECK_FALSE(s.state("c"));
  CHECK_FALSE(s.state("d"));
  s.commit();
}

// The rowid of a job rolled back is the next insert's: a key left behind
// would name another job.
TEST_CASE("C3.10 keys in memory: a rolled-back keyed enqueue leaves no key behind, by ROLLBACK "
          "and by a refused request's savepoint") {
  TempDir dir;
  SqliteStore s(dir.file("undo.db"), SyncMode::full);
  s.begin();
  REQUIRE(s.enqueue(keyed_job("a", "k"), 1.0));
  s.rollback();
  s.begin();
  REQUIRE(s.enqueue(NewJob{"plain"}, 2.0));  // a's rowid, open
  CHECK(s.enqueue(keyed_job("b", "k"), 3.0));
  // A request refused as a whole (an unknown parent) after a keyed entry.
  const std::vector<std::string> parents{"nope"};
  NewJob child{"child"};
  child.parents = &parents;
  using fenceq::daemon::Call;
  using fenceq::daemon::CallResult;
  using fenceq::daemon::EnqueueParams;
  std::vector<Call> calls{{EnqueueParams{keyed_job("c", "k9"), 4.0}, 1},
                          {EnqueueParams{child, 4.0}, 1}};
  std::vector<CallResult> out;
  s.run(calls, out, false);
  REQUIRE(out.size() == 2);
  CHECK(out[0].refused);
  CHECK_FALSE(s.state("c"));
  REQUIRE(s.enqueue(NewJob{"plain2"}, 5.0));  // c's rowid, open
  CHECK(s.enqueue(keyed_job("d", "k9"), 6.0));
  s.commit();
  // And a key freed by a rolled-back purge is held again.
  s.begin();
  REQUIRE(cancel(s, "d", 7.0));
  s.commit();
  s.begin();
  CHECK(purge(s, std::nullopt, 0, 8.0) >= 1);
  s.rollback();
  s.begin();
  CHECK_FALSE(s.enqueue(keyed_job("e", "k9", 100), 9.0));  // d, enqueued at 6.0
  s.commit();
}

// The key's job enqueued last purged while an older one is kept: unique_for
// then reads the table for the one enqueued last now.
TEST_CASE("C3.10 keys in memory: with the job enqueued last purged unique_for still counts an "
          "older job of the key that is kept") {
  TempDir dir;
  SqliteStore s(dir.file("purged.db"), SyncMode::full);
  s.begin();
  REQUIRE(s.enqueue(keyed_job("a", "k"), 1.0));
  REQUIRE(cancel(s, "a", 2.0));
  REQUIRE(s.enqueue(keyed_job("b", "k"), 3.0));
  auto b = claim_next(s, "q", "w", 3.5, 30);
  REQUIRE(b);
  REQUIRE(complete(s, "b", "w", b->fence, "r", 4.0));
  REQUIRE(retry(s, "a", 5.0));  // the key's newest again, enqueued at 1.0
  REQUIRE(cancel(s, "a", 6.0));
  CHECK(purge(s, std::nullopt, 5.0, 10.0) == 1);  // b, finished at 4.0
  CHECK_FALSE(s.state("b"));
  CHECK_FALSE(s.enqueue(keyed_job("c", "k", 100), 10.0));  // a, enqueued at 1.0
  CHECK_FALSE(s.state("c"));
  CHECK(s.enqueue(keyed_job("d", "k", 8.5), 10.0));  // from 1.5: a is older
  CHECK_FALSE(s.enqueue(keyed_job("e", "k"), 11.0));  // d holds k
  s.commit();
}

// KeyMap against a model (a std::map, copied at each transaction's begin and
// savepoint): random adds, revivals, removals and lookups of keys long
// enough that erased ones' bytes get compacted, with ROLLBACK and ROLLBACK
// TO. Every key and every entry is compared after each transaction.
TEST_CASE("C3.10 keys in memory: KeyMap agrees with a model through adds revivals removals "
          "rollbacks savepoints and compaction") {
  using fenceq::daemon::KeyMap;
  using Model = std::map<std::string, KeyMap::Entry>;
  KeyMap keys;
  Model model;
  std::mt19937_64 rng(31);
  auto name = [](std::uint64_t n) { return "key-" + std::to_string(n) + std::string(500, 'x'); };
  std::map<std::string, std::vector<std::int64_t>> rows;  // the model table: a key's rowids
  std::int64_t next_row = 1;
  auto same = [&](const Model& m) {
    std::string differs;  // the first key whose entry differs
    for (std::uint64_t n = 0; n < 2000 && differs.empty(); ++n) {
      const auto k = name(n);
      const auto got = keys.find("q", k);
      const auto it = m.find(k);
      const bool agree =
          got.has_value() == (it != m.end()) &&
          (!got || (got->newest == it->second.newest && got->latest == it->second.latest &&
                    got->latest_created == it->second.latest_created &&
                    got->jobs == it->second.jobs));
      if (!agree) differs = k.substr(0, 12);
    }
    CHECK(differs == "");
    CHECK(keys.size() == m.size());
  };
#ifdef FENCEQ_SANITIZED_ALLOCATOR
  // Sanitized (-O0, every access checked) 3,000 took 86 s of the ASan
  // smoke's 147 (2026-12-07): 600 there, every operation and both ends of a
  // transaction still met hundreds of times; the plain build runs 3,000.
  constexpr int kTransactions = 600;
#else
  constexpr int kTransactions = 3000;
#endif
  for (int tx = 0; tx < kTransactions; ++tx) {
    keys.settle();
    const auto end = rng() % 4;  // 0: ROLLBACK; 1: ROLLBACK TO, COMMIT; else COMMIT
    const Model at_begin = end == 0 ? model : Model{};
    const auto rows_at_begin = end == 0 ? rows : decltype(rows){};
    Model at_mark;
    std::size_t mark = 0;
    decltype(rows) rows_at_mark;
    const int ops = 1 + static_cast<int>(rng() % 60);
    for (int i = 0; i < ops; ++i) {
      if (i == ops / 2 && end == 1) {
        mark = keys.mark();
        at_mark = model;
        rows_at_mark = rows;
      }
      const auto k = name(rng() % 2000);
      const double created = static_cast<double>(rng() % 1000);
      auto& kept = rows[k];
      switch (rng() % 4) {
        case 0:
        case 1: {  // a job of the key inserted
          const std::int64_t row = next_row++;
          keys.added("q", k, row, created);
          auto& e = model[k];
          e.newest = row;
          if (e.jobs == 0 || created >= e.latest_created) {
            e.latest = row;
            e.latest_created = created;
          }
          ++e.jobs;
          kept.push_back(row);
          break;
        }
        case 2:  // one of its jobs revived
          if (!kept.empty()) {
            const auto row = kept[rng() % kept.size()];
            keys.revived("q", k, row);
            model[k].newest = row;
          }
          break;
        default:  // one of its jobs deleted
          if (!kept.empty()) {
            const auto at = rng() % kept.size();
            const auto row = kept[at];
            kept.erase(kept.begin() + static_cast<std::ptrdiff_t>(at));
            keys.removed("q", k, row);
            auto& e = model[k];
            if (e.newest == row) e.newest = 0;
            if (e.latest == row) e.latest = 0;
            if (--e.jobs == 0) model.erase(k);
          }
      }
    }
    switch (end) {
      case 0:  // ROLLBACK
        keys.undo_to(0);
        model = at_begin;
        rows = rows_at_begin;
        break;
      case 1:  // ROLLBACK TO the savepoint, then COMMIT
        keys.undo_to(mark);
        model = at_mark;
        rows = rows_at_mark;
        break;
      default:  // COMMIT
        break;
    }
    if (tx % 100 == 0 || tx == kTransactions - 1) same(model);
  }
}

TEST_CASE("C1.2 schema versions: a version 5 file is upgraded to 14 in place: its open jobs are "
          "claimed as before and a grouped job takes its turn beside them") {
  TempDir dir;
  const auto path = dir.file("v5.db");
  file_of_version(path, kDropV6, 5);
  SqliteStore s(path, SyncMode::full);
  s.begin();
  NewJob j{"new"};
  j.group = "acme";
  CHECK(s.enqueue(j, 2.0));
  auto jobs = s.claim_next("default", "w", 3.0, 10.0, 5);
  REQUIRE(jobs.size() == 2);
  CHECK(jobs[0].id == "old");  // jobs of no group ('') before acme, by name
  CHECK(jobs[1].id == "new");
  s.commit();
  CHECK(s.claim_next_plan().find("jobs_next") != std::string::npos);
}

TEST_CASE("C1.2 schema versions: a version 2 file (before queue control) is upgraded to 14 in "
          "place, rows and fences kept, and its jobs can be cancelled") {
  TempDir dir;
  const auto path = dir.file("v2.db");
  {
    SqliteStore s(path, SyncMode::full);
    s.begin();
    REQUIRE(s.enqueue(NewJob{"old"}, 1.0));
    REQUIRE(claim(s, "old", "w", 1.0, 100.0) == 1);
    s.commit();
  }
  // What a version 2 fenceqd left: no cancelled or progress column.
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
  REQUIRE(sqlite3_exec(db,
                       (kDropV4 +
                        "ALTER TABLE jobs DROP COLUMN cancelled; ALTER TABLE jobs DROP COLUMN "
                        "progress; PRAGMA user_version = 2")
                           .c_str(),
                       nullptr, nullptr, nullptr) == SQLITE_OK);
  sqlite3_close(db);
  SqliteStore s(path, SyncMode::full);
  s.begin();
  auto row = s.state("old");
  REQUIRE(row);
  CHECK(row->fence == 1);
  CHECK(row->owner == "w");
  CHECK(renew(s, "old", "w", 1, 2.0, 100.0, std::string_view("half")));
  CHECK(s.state("old")->progress == "half");
  CHECK(cancel(s, "old", 3.0));
  CHECK(s.state("old")->fence == 2);
  CHECK_FALSE(check(s, "old", "w", 1, 4.0));
  s.commit();
}

TEST_CASE("C1.2 schema versions: a version 3 file is upgraded to 14 in place: queue settings and "
          "schedules work on its rows") {
  TempDir dir;
  const auto path = dir.file("v3.db");
  file_of_version(path, kDropV4, 3);
  SqliteStore s(path, SyncMode::full);
  s.begin();
  fenceq::QueueConfig paused;
  paused.paused = true;
  s.set_queue_config("default", paused);
  CHECK_FALSE(claim(s, "old", "w", 2.0, 10.0));
  CHECK(s.claim_next("default", "w", 2.0, 10.0, 5).empty());
  s.set_queue_config("default", {});
  CHECK(claim(s, "old", "w", 2.0, 10.0) == 1);
  fenceq::Schedule sc;
  sc.name = "nightly";
  sc.cron = "0 3 * * *";
  CHECK(s.schedule_set(sc, 2.0));
  CHECK(s.schedules().size() == 1);
  s.commit();
  CHECK(s.claim_next_plan().find("jobs_next") != std::string::npos);
}

TEST_CASE("list: a prefix's end is the least string above every id that starts with it, by "
          "code point, past the surrogates and over U+10FFFF") {
  using fenceq::daemon::rules::id_prefix_end;
  CHECK(id_prefix_end("") == std::nullopt);
  CHECK(id_prefix_end("b-") == "b.");
  CHECK(id_prefix_end("a\x7f") == "a\xc2\x80");              // U+007F -> U+0080
  CHECK(id_prefix_end("\xc3\xa9") == "\xc3\xaa");           // é -> ê
  CHECK(id_prefix_end("x\xed\x9f\xbf") == "x\xee\x80\x80");  // U+D7FF -> U+E000
  CHECK(id_prefix_end("x\xef\xbf\xbf") == "x\xf0\x90\x80\x80");  // U+FFFF -> U+10000
  CHECK(id_prefix_end("x\xf4\x8f\xbf\xbf") == "y");  // U+10FFFF dropped, x stepped up
  CHECK(id_prefix_end("\xf4\x8f\xbf\xbf\xf4\x8f\xbf\xbf") == std::nullopt);
  // Every id with the prefix sorts below it, and the next id without it not.
  TempDir dir;
  SqliteStore s(dir.file("prefix.db"), SyncMode::full);
  s.begin();
  for (const char* id : {"\xc3\xa9t\xc3\xa9", "\xc3\xa9", "\xc3\xa9\xf4\x8f\xbf\xbf",
                         "\xc3\xaa", "\xc3\xa8z"}) {
    REQUIRE(s.enqueue(NewJob{id}, 1.0));
  }
  fenceq::daemon::ListFilter f;
  f.prefix = "\xc3\xa9";
  std::vector<std::string> ids;
  for (const auto& j : s.list(f, 2.0)) ids.push_back(j.id);
  CHECK(ids == std::vector<std::string>{"\xc3\xa9", "\xc3\xa9t\xc3\xa9",
                                        "\xc3\xa9\xf4\x8f\xbf\xbf"});
  s.commit();
}

TEST_CASE("list: a page by id walks the primary key from the later of its cursor and prefix to "
          "the prefix's end, and by age the ids with a prefix are found by it") {
  TempDir dir;
  SqliteStore s(dir.file("plan.db"), SyncMode::full);
  using fenceq::ListOrder;
  CHECK(s.list_plan(ListOrder::id, false).find("sqlite_autoindex_jobs_1 (id>?)") !=
        std::string::npos);
  CHECK(s.list_plan(ListOrder::id, true).find("sqlite_autoindex_jobs_1 (id>? AND id<?)") !=
        std::string::npos);
  for (auto order : {ListOrder::id, ListOrder::created, ListOrder::created_desc}) {
    const auto plan = s.list_plan(order, true);
    INFO(plan);
    CHECK(plan.find("sqlite_autoindex_jobs_1 (id>? AND id<?)") != std::string::npos);
  }
  // A page of one queue's dead or cancelled jobs (a bulk action's) walks
  // jobs_dead, which holds those alone.
  CHECK(s.dead_list_plan(false).find("jobs_dead (queue=? AND cancelled=? AND id>?)") !=
        std::string::npos);
  CHECK(s.dead_list_plan(true).find("jobs_dead (queue=? AND cancelled=? AND id>? AND id<?)") !=
        std::string::npos);
  // What the pages give: by id from the prefix; by age with the prefix.
  s.begin();
  for (auto [id, at] : {std::pair{"b-2", 1.0}, {"a-1", 2.0}, {"b-1", 3.0}, {"c-1", 0.5}}) {
    REQUIRE(s.enqueue(NewJob{id}, at));
  }
  auto ids = [&](fenceq::daemon::ListFilter f) {
    std::vector<std::string> out;
    for (const auto& j : s.list(f, 10.0)) out.push_back(j.id);
    return out;
  };
  using V = std::vector<std::string>;
  fenceq::daemon::ListFilter f;
  f.prefix = "b-";
  CHECK(ids(f) == V{"b-1", "b-2"});
  f.after = "b-1";
  CHECK(ids(f) == V{"b-2"});
  f.after = "a-9";  // a cursor before the prefix
  CHECK(ids(f) == V{"b-1", "b-2"});
  f.after = "";
  f.order = ListOrder::created_desc;
  CHECK(ids(f) == V{"b-1", "b-2"});
  f.prefix = "";
  CHECK(ids(f) == V{"b-1", "a-1", "b-2", "c-1"});
  s.commit();
}

namespace {

// Opens the store in a child process, runs `f` on it, and ends the child
// without a clean stop (as kill -9 or a power cut would): no destructor runs.
template <typename F>
void unclean_run(const std::string& path, SyncMode sync, F f) {
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    int rc = 0;
    try {
      auto* s = new SqliteStore(path, sync);
      f(*s);
    } catch (...) {
      rc = 1;
    }
    ::_exit(rc);
  }
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
}

}  // namespace

TEST_CASE("C1.2 after an unclean stop of a --sync normal run, no fence it handed out is handed out "
          "again") {
  TempDir dir;
  const auto path = dir.file("p.db");
  constexpr std::int64_t kFloor = std::int64_t{1} << 32;
  SECTION("normal, unclean: every fence, purged ones too, and every new job start above it") {
    unclean_run(path, SyncMode::normal, [](SqliteStore& s) {
      enqueue(s, "a");
      enqueue(s, "gone");
      tx(s, [&] { return claim(s, "a", "w", 1.0, 5.0); });
      tx(s, [&] { return claim(s, "gone", "w", 1.0, 5.0); });
      tx(s, [&] { return complete(s, "gone", "w", 1, std::nullopt, 2.0); });
      tx(s, [&] { return purge(s, std::nullopt, 0.0, 3.0); });
    });
    SqliteStore s(path, SyncMode::normal);
    CHECK(s.recovered_fences());
    CHECK(s.fence_floor() == kFloor);
    CHECK(tx(s, [&] { return s.state("a"); })->fence == kFloor);
    CHECK(tx(s, [&] { return claim(s, "a", "v", 100.0, 5.0); }) == kFloor + 1);
    REQUIRE(enqueue(s, "gone"));  // purged before the stop: continues above the floor
    CHECK(tx(s, [&] { return claim(s, "gone", "v", 100.0, 5.0); }) == kFloor + 1);
    REQUIRE(enqueue(s, "new"));
    CHECK(tx(s, [&] { return claim(s, "new", "v", 100.0, 5.0); }) == kFloor + 1);
  }
  SECTION("normal, clean stop: nothing to raise") {
    {
      SqliteStore s(path, SyncMode::normal);
      enqueue(s, "a");
      tx(s, [&] { return claim(s, "a", "w", 1.0, 5.0); });
    }
    SqliteStore s(path, SyncMode::normal);
    CHECK_FALSE(s.recovered_fences());
    CHECK(tx(s, [&] { return claim(s, "a", "v", 100.0, 5.0); }) == 2);
  }
  SECTION("full, unclean: every acknowledged commit is on disk, nothing to raise") {
    unclean_run(path, SyncMode::full, [](SqliteStore& s) {
      enqueue(s, "a");
      tx(s, [&] { return claim(s, "a", "w", 1.0, 5.0); });
    });
    SqliteStore s(path, SyncMode::full);
    CHECK_FALSE(s.recovered_fences());
    CHECK(tx(s, [&] { return claim(s, "a", "v", 100.0, 5.0); }) == 2);
  }
  SECTION("a lossy run's unclean stop is remembered by a full one, and epochs add up") {
    unclean_run(path, SyncMode::normal, [](SqliteStore& s) {
      enqueue(s, "a");
      tx(s, [&] { return claim(s, "a", "w", 1.0, 5.0); });
    });
    unclean_run(path, SyncMode::normal, [](SqliteStore& s) {
      tx(s, [&] { return claim(s, "a", "w", 100.0, 5.0); });
    });
    SqliteStore s(path, SyncMode::full);
    CHECK(s.recovered_fences());
    CHECK(s.fence_floor() == 2 * kFloor);
    CHECK(tx(s, [&] { return claim(s, "a", "v", 200.0, 5.0); }) == 2 * kFloor + 1);
  }
}

// Issue 26: the heap churned on every claim. Each claim_next statement took
// three blocks of 85 KiB (the page-cache bulk of each ephemeral table: its
// IN list, its RETURNING rows) and one of 64 KiB (the statement journal, for
// pages an earlier statement of the batch changed), freed as it ended: glibc
// handed them back to the kernel and faulted them in again for the next
// (docs/operating.md, "Limits"). Under the daemon's memory policy
// (memory_policy.hpp) no write of a batch allocates 64 KiB at once.
TEST_CASE("memory: no store write allocates a block of 64 KiB or more (no statement journal, "
          "no page-cache bulk)") {
  REQUIRE(sqlite3_shutdown() == SQLITE_OK);  // a case run before in this process
  REQUIRE(fenceq::daemon::apply_memory_policy());
  TempDir dir;
  SqliteStore s(dir.file("m.db"), SyncMode::normal);
  s.begin();
  std::vector<std::string> ids;
  for (int i = 0; i < 300; ++i) ids.push_back("m" + std::to_string(i));
  for (const auto& id : ids) REQUIRE(s.enqueue(fenceq::daemon::NewJob{.id = id}, 1.0));
  s.commit();
  // The largest single allocation SQLite asked for while `f` ran. Every
  // call below runs in one transaction, as a batch's requests do, so each
  // statement changes pages the ones before it changed (what a statement
  // journal keeps).
  auto largest = [&](auto&& f) {
    sqlite3_int64 cur = 0, high = 0;
    REQUIRE(sqlite3_status64(SQLITE_STATUS_MALLOC_SIZE, &cur, &high, 1) == SQLITE_OK);
    f();
    REQUIRE(sqlite3_status64(SQLITE_STATUS_MALLOC_SIZE, &cur, &high, 0) == SQLITE_OK);
    return high;
  };
  // SQLite keeps these figures (SQLITE_DEFAULT_MEMSTATUS): a check of 0 would pass for nothing.
  sqlite3_int64 used = 0, used_high = 0;
  REQUIRE(sqlite3_status64(SQLITE_STATUS_MEMORY_USED, &used, &used_high, 0) == SQLITE_OK);
  REQUIRE(used > 0);
  constexpr sqlite3_int64 kBlock = 64 * 1024;
  s.begin();
  std::vector<fenceq::ClaimedJob> jobs;
  CHECK(largest([&] { jobs = s.claim_next("default", "w", 2.0, 30.0, 1); }) < kBlock);
  CHECK(largest([&] {
          auto more = s.claim_next("default", "w", 2.0, 30.0, 32);
          jobs.insert(jobs.end(), more.begin(), more.end());
        }) < kBlock);
  REQUIRE(jobs.size() == 33);
  CHECK(largest([&] { CHECK(renew(s, jobs[0].id, "w", jobs[0].fence, 3.0, 30.0)); }) < kBlock);
  CHECK(largest([&] { CHECK(complete(s, jobs[0].id, "w", jobs[0].fence, "r", 3.0)); }) < kBlock);
  CHECK(largest([&] { CHECK(fail(s, jobs[1].id, "w", jobs[1].fence, "e", 5.0, 3.0)); }) < kBlock);
  CHECK(largest([&] { CHECK(release(s, jobs[2].id, "w", jobs[2].fence)); }) < kBlock);
  CHECK(largest([&] { CHECK(claim(s, ids.back(), "w", 3.0, 30.0)); }) < kBlock);
  CHECK(largest([&] { jobs = s.claim_next("default", "w", 3.0, 30.0, 1); }) < kBlock);
  s.commit();
  // The measure sees a large block when there is one.
  CHECK(largest([] { sqlite3_free(sqlite3_malloc(100000)); }) >= 100000);
}

TEST_CASE("C1.2 a purged job takes its rows of job_headers and job_runtimes along and its fence "
          "stays") {
  TempDir dir;
  const auto path = dir.file("p.db");
  const fenceq::Headers h{{"traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}};
  {
    SqliteStore s(path, SyncMode::full);
    NewJob j{"x"};
    j.headers = &h;
    j.max_runtime = 60;
    s.begin();
    REQUIRE(s.enqueue(j, 1.0));
    auto f = claim(s, "x", "w", 2.0, 30);
    REQUIRE(f == 1);
    REQUIRE(complete(s, "x", "w", 1, std::nullopt, 3.0));
    REQUIRE(purge(s, std::nullopt, 0, 4.0) == 1);
    s.commit();
  }
  auto count = [&](const char* table) {
    sqlite3* db = nullptr;
    REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
    sqlite3_stmt* st = nullptr;
    const std::string sql = std::string("SELECT count(*) FROM ") + table;
    REQUIRE(sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr) == SQLITE_OK);
    REQUIRE(sqlite3_step(st) == SQLITE_ROW);
    const auto n = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    sqlite3_close(db);
    return n;
  };
  CHECK(count("job_headers") == 0);
  CHECK(count("job_runtimes") == 0);
  CHECK(count("purged_fences") == 1);
}

TEST_CASE(
    "C1.2 every lease-ending write is one transition: the lease cleared, the fence "
    "raised only by cancel and the overrun, the target's columns set") {
  using fenceq::daemon::rules::end_lease_set;
  using fenceq::daemon::rules::LeaseEnd;
  namespace rules = fenceq::daemon::rules;
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(":memory:", &db) == SQLITE_OK);
  std::unique_ptr<sqlite3, int (*)(sqlite3*)> own(db, sqlite3_close);
  auto exec = [&](const std::string& sql) {
    char* err = nullptr;
    const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err);
    INFO(sql << ": " << (err ? err : ""));
    sqlite3_free(err);
    REQUIRE(rc == SQLITE_OK);
  };
  auto row = [&]() {
    sqlite3_stmt* st = nullptr;
    REQUIRE(sqlite3_prepare_v2(db,
                               "SELECT owner IS NULL, until, fence, attempts, not_before, dead, "
                               "cancelled, finished, error FROM jobs",
                               -1, &st, nullptr) == SQLITE_OK);
    REQUIRE(sqlite3_step(st) == SQLITE_ROW);
    std::vector<std::string> out;
    for (int i = 0; i < 9; i++) {
      const auto* t = sqlite3_column_text(st, i);
      out.emplace_back(t ? reinterpret_cast<const char*>(t) : "NULL");
    }
    sqlite3_finalize(st);
    return out;
  };
  const rules::LeaseEndArgs args{
      .now = "100.0", .at = "250.0", .error = "'boom'", .retry_in = "5.0"};
  struct Want {
    LeaseEnd to;
    std::vector<std::string> after;  // as row() reads them
  };
  // A job leased by "w" with fence 7 until 130, its 2nd of 3 attempts.
  for (const auto& w : std::vector<Want>{
           {LeaseEnd::released, {"1", "0.0", "7", "2", "0.0", "0", "0", "0.0", "NULL"}},
           {LeaseEnd::unclaimed, {"1", "0.0", "7", "1", "0.0", "0", "0", "0.0", "NULL"}},
           {LeaseEnd::snoozed, {"1", "0.0", "7", "1", "250.0", "0", "0", "0.0", "NULL"}},
           {LeaseEnd::failed, {"1", "0.0", "7", "2", "105.0", "0", "0", "0.0", "boom"}},
           {LeaseEnd::overrun,
            {"1", "0.0", "8", "2", "102.0", "0", "0", "0.0", "max_runtime exceeded"}},
           {LeaseEnd::cancelled, {"1", "0.0", "8", "2", "0.0", "1", "1", "100.0", "NULL"}}}) {
    exec("DROP TABLE IF EXISTS jobs");
    exec(
        "CREATE TABLE jobs (owner TEXT, until REAL, fence INTEGER, attempts INTEGER, "
        "max_attempts INTEGER, not_before REAL, dead INTEGER, cancelled INTEGER, finished REAL, "
        "error TEXT)");
    exec("INSERT INTO jobs VALUES ('w', 130.0, 7, 2, 3, 0.0, 0, 0, 0.0, NULL)");
    const std::string set = end_lease_set(rules::kSqlite, w.to, args);
    exec("UPDATE jobs SET " + set);
    INFO(set);
    CHECK(row() == w.after);
    // The same transition in PostgreSQL's dialect: the lease cleared first,
    // the fence raised exactly where SQLite raises it.
    const std::string pg = end_lease_set(rules::kPostgres, w.to, args);
    CHECK(pg.rfind("owner = NULL, until = 0", 0) == 0);
    CHECK((pg.find("fence = ") != std::string::npos) == (w.after[2] == "8"));
  }
  // The last attempt failed: dead and finished at `now`.
  exec("UPDATE jobs SET attempts = 3, dead = 0, cancelled = 0, finished = 0, owner = 'w'");
  exec("UPDATE jobs SET " + end_lease_set(rules::kSqlite, LeaseEnd::failed, args));
  CHECK(row()[5] == "1");
  CHECK(row()[7] == "100.0");
}

namespace {
// `sql`'s one value, read on a connection of its own (the store's file).
std::string read_on(const std::string& path, const char* sql) {
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK);
  auto v = scalar(db, sql);
  sqlite3_close(db);
  return v;
}
}  // namespace

TEST_CASE("C3.22 schema 24: a job's first steps are kept in its row, the save past the row's bound "
          "moves them all to job_steps, and a version 23 file's unmarked steps are marked and read") {
  TempDir dir;
  const auto path = dir.file("steps.db");
  {
    SqliteStore s(path, SyncMode::full);
    REQUIRE(tx(s, [&] { return s.enqueue(NewJob{"a"}, 1.0); }));
    auto a = tx(s, [&] { return claim(s, "a", "w", 2.0, 600); });
    REQUIRE(a);
    const std::optional<Payload> one = Payload{"1", false};
    CHECK(tx(s, [&] { return step_save(s, "a", "w", *a, "one", one, 3.0); }));
    CHECK(read_on(path, "SELECT steps FROM jobs WHERE id = 'a'") == "3:oneS1:1;");
    CHECK(read_on(path, "SELECT count(*) FROM job_steps") == "0");
    CHECK(read_on(path, "SELECT kids & 128 FROM jobs WHERE id = 'a'") == "0");
    // Past rules::kInlineStepsBytes.
    const std::optional<Payload> big = Payload{std::string(1100, 'b'), true};
    CHECK(tx(s, [&] { return step_save(s, "a", "w", *a, "big", big, 3.0); }));
    CHECK(read_on(path, "SELECT steps IS NULL AND kids & 128 <> 0 FROM jobs WHERE id = 'a'") == "1");
    CHECK(read_on(path, "SELECT count(*) FROM job_steps WHERE id = 'a'") == "2");
    CHECK(tx(s, [&] { return s.links("a"); }).steps == fenceq::Steps{{"big", big}, {"one", one}});
    CHECK(tx(s, [&] { return release(s, "a", "w", *a); }));
  }
  // Version 23 kept steps in job_steps, their job unmarked; 24 marks it.
  exec_on(path, kDropV24 + "UPDATE jobs SET kids = kids & ~128; PRAGMA user_version = 23");
  SqliteStore s(path, SyncMode::full);
  CHECK(read_on(path, "SELECT kids & 128 FROM jobs WHERE id = 'a'") == "128");
  auto again = tx(s, [&] { return claim_next(s, "default", "w2", 4.0, 30); });
  REQUIRE(again);
  CHECK(again->steps.size() == 2);
  CHECK(tx(s, [&] { return complete(s, "a", "w2", again->fence, std::nullopt, 5.0); }));
  CHECK(tx(s, [&] { return purge(s, std::nullopt, 0, 100); }) == 1);
  CHECK(read_on(path, "SELECT count(*) FROM job_steps") == "0");  // jobs_extras_gone
}
