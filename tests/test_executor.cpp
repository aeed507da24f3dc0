// Decode + validate + apply in-process: the shared vectors, group-commit
// semantics (C1.4), arrival order (C3.7) and validation first (C3.8).
#include <catch2/catch.hpp>

#include <chrono>
#include <map>
#include <set>
#include <thread>

#include "execution/clock.hpp"
#include "daemon.hpp"
#include "execution/executor.hpp"
#include "storage/sqlite/sqlite_store.hpp"
#include "vectors.hpp"

namespace proto = fenceq::protocol;
using fenceq::daemon::Clock;
using fenceq::daemon::Executor;
using fenceq::daemon::SqliteStore;
using fenceq::daemon::SyncMode;
using fenceq::test::pack;

namespace {

proto::Decoded decode(const std::string& bytes,
                      proto::ClockMode mode = proto::ClockMode::client) {
  return proto::decode_request(bytes, mode);
}

nlohmann::json as_json(const std::string& reply) { return nlohmann::json::from_msgpack(reply); }

}  // namespace

TEST_CASE("vectors: every suite through decode + executor on a fresh in-memory store") {
  for (const auto& suite : fenceq::test::load_vector_suites()) {
    SqliteStore store(":memory:", SyncMode::off);
    auto mode = suite.clock == "server" ? proto::ClockMode::server : proto::ClockMode::client;
    Clock clock(mode, 0);
    Executor ex(store, clock);
    for (const auto& step : suite.steps) {
      INFO(suite.name << " / " << step.name);
      auto replies = ex.run({proto::decode_request(step.request, mode)});
      REQUIRE(replies.size() == 1);
      CHECK(fenceq::test::vector_mismatch(step, replies[0]) == "");
    }
  }
}

TEST_CASE("C3.7 requests in one batch apply in arrival order: the first claim wins") {
  SqliteStore store(":memory:", SyncMode::off);
  Clock clock(proto::ClockMode::client, 0);
  Executor ex(store, clock);
  std::vector<proto::Decoded> batch;
  batch.push_back(decode(pack({{"op", "enqueue"}, {"id", "a"}})));
  for (const char* owner : {"w3", "w1", "w2"}) {
    batch.push_back(decode(pack({{"op", "claim"}, {"id", "a"},
                                 {"owner", owner}, {"ttl", 5.0}, {"now", 1.0}})));
  }
  batch.push_back(decode(pack({{"op", "state"}, {"id", "a"}})));
  auto r = ex.run(batch);
  CHECK(as_json(r[0])["result"] == true);
  CHECK(as_json(r[1])["result"] == 1);
  CHECK(as_json(r[2])["result"].is_null());
  CHECK(as_json(r[3])["result"].is_null());
  CHECK(as_json(r[4])["result"]["owner"] == "w3");
  CHECK(ex.counters().stats().commits == 1);  // one transaction for the whole batch
}

TEST_CASE("C3.8 a refused request in a batch changes nothing and does not disturb the others") {
  SqliteStore store(":memory:", SyncMode::off);
  Clock clock(proto::ClockMode::client, 0);
  Executor ex(store, clock);
  std::vector<proto::Decoded> batch;
  batch.push_back(decode(pack({{"op", "enqueue"}, {"id", "b"}})));
  batch.push_back(decode(pack({{"op", "claim"}, {"id", "b"},
                               {"owner", "x"}, {"ttl", -1.0}, {"now", 1.0}})));
  batch.push_back(decode(pack({{"op", "claim"}, {"id", "b"},
                               {"owner", "x"}, {"ttl", 1e308}, {"now", 1e308}})));
  batch.push_back(decode(std::string("\xc1")));
  batch.push_back(decode(pack({{"op", "state"}, {"id", "b"}})));
  auto r = ex.run(batch);
  CHECK(as_json(r[1])["error"]["code"] == "invalid_argument");
  CHECK(as_json(r[2])["error"]["code"] == "invalid_argument");  // now + ttl overflows
  CHECK(as_json(r[3])["error"]["code"] == "bad_request");
  auto row = as_json(r[4])["result"];
  CHECK(row["fence"] == 0);
  CHECK(row["owner"].is_null());
}

TEST_CASE("C1.4 a failed transaction fails every request of the batch and applies none") {
  fenceq::test::TempDir dir;
  SqliteStore store(dir.file("full.db"), SyncMode::full);
  Clock clock(proto::ClockMode::client, 0);
  Executor ex(store, clock);
  // A committed job first, to check that reads after the failure still work.
  ex.run({decode(pack({{"op", "enqueue"}, {"id", "kept"}}))});
  // Cap the file at its current size: the next batch that grows it fails.
  sqlite3_stmt* s = nullptr;
  sqlite3_prepare_v2(store.raw(), "PRAGMA page_count", -1, &s, nullptr);
  REQUIRE(sqlite3_step(s) == SQLITE_ROW);
  auto pages = sqlite3_column_int64(s, 0);
  sqlite3_finalize(s);
  REQUIRE(sqlite3_exec(store.raw(),
                       ("PRAGMA max_page_count=" + std::to_string(pages)).c_str(), nullptr,
                       nullptr, nullptr) == SQLITE_OK);
  std::vector<proto::Decoded> batch;
  for (int i = 0; i < 200; ++i) {
    batch.push_back(decode(pack({{"op", "enqueue"},
                                 {"id", std::string(1000, 'a' + i % 26) + std::to_string(i)}})));
  }
  batch.push_back(decode("not msgpack"));
  auto r = ex.run(batch);
  for (int i = 0; i < 200; ++i) {
    INFO(i);
    REQUIRE(as_json(r[i])["error"]["code"] == "internal");
  }
  CHECK(as_json(r[200])["error"]["code"] == "bad_request");  // its own answer, unchanged
  CHECK(ex.counters().stats().failed_commits == 1);
  // Nothing of the batch is there, not even the enqueues before the one that failed.
  auto first = ex.run({decode(pack({{"op", "state"},
                                    {"id", std::string(1000, 'a') + "0"}}))});
  CHECK(as_json(first[0])["result"].is_null());
  // Reads keep working, and writes resume once space returns.
  auto kept = ex.run({decode(pack({{"op", "state"}, {"id", "kept"}}))});
  CHECK(as_json(kept[0])["result"]["id"] == "kept");
  REQUIRE(sqlite3_exec(store.raw(), "PRAGMA max_page_count=1000000", nullptr, nullptr, nullptr) ==
          SQLITE_OK);
  auto again = ex.run(batch);
  CHECK(as_json(again[0])["result"] == true);
  CHECK(as_json(again[199])["result"] == true);
}

namespace {

using fenceq::daemon::StoreError;
using Kind = StoreError::Kind;

// A SQLite store whose next begin() or commit() fails with a chosen kind of
// StoreError, as a shared database's would (a deadlock, a lost connection, a
// connection cut during COMMIT). Everything else is the real store.
class FailingStore final : public fenceq::daemon::Store {
 public:
  SqliteStore real{":memory:", SyncMode::off};
  std::optional<Kind> fail_begin, fail_commit;
  int commit_failures_left = 0;

  void begin() override {
    if (auto k = std::exchange(fail_begin, std::nullopt)) throw StoreError("begin fails", *k);
    real.begin();
  }
  void commit() override {
    if (fail_commit && commit_failures_left-- > 0) throw StoreError("commit fails", *fail_commit);
    real.commit();
  }
  void rollback() noexcept override { real.rollback(); }
  bool run(const std::vector<fenceq::daemon::Call>& calls,
           std::vector<fenceq::daemon::CallResult>& out, bool commit_after) override {
    return real.run(calls, out, commit_after);
  }
  std::optional<fenceq::JobState> state(std::string_view id) override { return real.state(id); }
  std::vector<fenceq::JobInfo> list(const fenceq::daemon::ListFilter& f, double now) override {
    return real.list(f, now);
  }
  std::optional<fenceq::Payload> payload(std::string_view id) override {
    return real.payload(id);
  }
  fenceq::JobResults results(const std::vector<std::string>& ids, double now) override {
    return real.results(ids, now);
  }
  Links links(std::string_view id) override { return real.links(id); }
  std::vector<proto::QueueStats> queue_stats(double now) override {
    return real.queue_stats(now);
  }
  std::optional<fenceq::QueueConfig> queue_config(std::string_view q) override {
    return real.queue_config(q);
  }
  std::vector<std::pair<std::string, fenceq::QueueConfig>> queue_configs() override {
    return real.queue_configs();
  }
  std::vector<std::pair<std::string, fenceq::Retention>> retentions() override {
    return real.retentions();
  }
  std::vector<std::tuple<std::string, std::string, fenceq::GroupOverride>> group_configs() override {
    return real.group_configs();
  }
  std::vector<StoredSchedule> schedules() override { return real.schedules(); }
  fenceq::daemon::SharedDatabase* shared() override { return nullptr; }
  QueueChanges take_queue_changes() override { return real.take_queue_changes(); }
  fenceq::daemon::QueueTally::Entries take_queue_totals() override {
    return real.take_queue_totals();
  }
  std::optional<double> next_claimable_at(std::string_view q, double now) override {
    return real.next_claimable_at(q, now);
  }
  std::unique_ptr<fenceq::daemon::StoreReads> open_reader() const override { return nullptr; }
  std::int64_t total_changes() override { return real.total_changes(); }
  double clock_high_water() override { return real.clock_high_water(); }
  std::string describe() const override { return "failing"; }
};

std::string enqueue_req(const std::string& id, int rid) {
  return pack({{"op", "enqueue"}, {"id", id}, {"rid", rid}});
}

}  // namespace

TEST_CASE("C1.4 a store's conflict reruns the whole batch, unreachable and cut-off commits get "
          "their own codes") {
  FailingStore store;
  Clock clock(proto::ClockMode::client, 0);
  Executor ex(store, clock);

  SECTION("a deadlock at COMMIT (Kind::retry): the batch runs again and is applied once") {
    store.fail_commit = Kind::retry;
    store.commit_failures_left = 2;  // kMaxAttempts is 3: the third attempt commits
    auto r = ex.run({decode(enqueue_req("a", 1)), decode(enqueue_req("b", 2))});
    CHECK(as_json(r[0])["result"] == true);
    CHECK(as_json(r[1])["result"] == true);
    CHECK(ex.counters().stats().failed_commits == 2);
    CHECK(ex.counters().stats().commits == 1);
    CHECK(store.real.state("a"));
    CHECK(store.real.state("b"));
  }
  SECTION("conflicting every time: unavailable after three attempts, nothing applied") {
    store.fail_commit = Kind::retry;
    store.commit_failures_left = 3;
    auto r = ex.run({decode(enqueue_req("a", 1))});
    CHECK(as_json(r[0])["error"]["code"] == "unavailable");
    CHECK_FALSE(store.real.state("a"));
  }
  SECTION("the database out of reach at BEGIN: unavailable, nothing applied") {
    store.fail_begin = Kind::unavailable;
    auto r = ex.run({decode(enqueue_req("a", 1))});
    CHECK(as_json(r[0])["error"]["code"] == "unavailable");
    CHECK_FALSE(store.real.state("a"));
    // and the next batch is served
    CHECK(as_json(ex.run({decode(enqueue_req("a", 2))})[0])["result"] == true);
  }
  SECTION("the connection cut during COMMIT: outcome_unknown, never `unavailable`") {
    store.fail_commit = Kind::outcome_unknown;
    store.commit_failures_left = 1;
    auto r = ex.run({decode(enqueue_req("a", 1))});
    CHECK(as_json(r[0])["error"]["code"] == "outcome_unknown");
    CHECK(as_json(r[0])["rid"] == 1);
  }
  SECTION("a failed fsync at COMMIT (Kind::fatal): outcome_unknown, and the store is never "
          "used again") {
    store.fail_commit = Kind::fatal;
    store.commit_failures_left = 1;
    CHECK(ex.fatal().empty());
    auto r = ex.run({decode(enqueue_req("a", 1))});
    CHECK(as_json(r[0])["error"]["code"] == "outcome_unknown");
    CHECK_FALSE(ex.fatal().empty());
    CHECK(ex.counters().stats().commits == 0);
    // Not retried, and what follows is refused without touching the store.
    auto next = ex.run({decode(enqueue_req("b", 2))});
    CHECK(as_json(next[0])["error"]["code"] == "unavailable");
    CHECK_FALSE(store.real.state("b"));
  }
  SECTION("a store failure (Kind::internal): internal") {
    store.fail_commit = Kind::internal;
    store.commit_failures_left = 1;
    auto r = ex.run({decode(enqueue_req("a", 1))});
    CHECK(as_json(r[0])["error"]["code"] == "internal");
    CHECK_FALSE(store.real.state("a"));
  }
}

TEST_CASE("C1.4 per-queue counters count a batch once it commits: a rerun batch once, a "
          "rolled-back one not at all") {
  FailingStore store;
  Clock clock(proto::ClockMode::client, 0);
  Executor ex(store, clock);
  auto req = [](const nlohmann::json& j) { return decode(pack(j)); };
  auto lease = [&](const char* op, const char* id, const char* owner, int fence, double now) {
    nlohmann::json j{{"op", op}, {"id", id}, {"owner", owner}, {"fence", fence}, {"now", now}};
    if (std::string(op) == "complete") j["result"] = "r";
    if (std::string(op) == "renew") j["ttl"] = 10;
    return req(j);
  };
  ex.run({req({{"op", "enqueue"}, {"id", "a"}, {"queue", "q"}}),
          req({{"op", "enqueue"}, {"id", "b"}, {"queue", "q"}}),
          req({{"op", "claim"}, {"id", "a"}, {"owner", "w"}, {"ttl", 10}, {"now", 1.0}})});
  fenceq::QueueTotals claimed_one{};
  claimed_one.claimed = 1;
  REQUIRE(ex.counters().queue_totals().at("q") == claimed_one);
  // An applied complete, a stale renew, and a claim: in one batch.
  const std::vector<proto::Decoded> batch{
      lease("complete", "a", "w", 1, 2.0), lease("renew", "a", "w", 1, 2.0),
      req({{"op", "claim"}, {"id", "b"}, {"owner", "w"}, {"ttl", 10}, {"now", 2.0}})};

  SECTION("a batch that conflicts twice, then commits: counted once") {
    store.fail_commit = Kind::retry;
    store.commit_failures_left = 2;
    auto r = ex.run(batch);
    CHECK(as_json(r[0])["result"] == true);
    CHECK(as_json(r[1])["result"] == false);
    CHECK(ex.counters().stats().failed_commits == 2);
    fenceq::QueueTotals want{};
    want.claimed = 2;
    want.completed = 1;
    want.refused.renew = 1;
    CHECK(ex.counters().queue_totals().at("q") == want);
    // And so in stats' reply.
    auto st = as_json(ex.run({req({{"op", "stats"}})})[0])["result"]["queues"]["q"]["totals"];
    CHECK(st == nlohmann::json::parse(R"({"claimed": 2, "completed": 1, "failed": 0,
      "retried": 0, "dead": 0, "expired": 0, "removed": 0,
      "refused": {"renew": 1, "complete": 0, "release": 0, "fail": 0}})"));
  }
  SECTION("a batch whose COMMIT fails (internal): rolled back, nothing counted") {
    store.fail_commit = Kind::internal;
    store.commit_failures_left = 1;
    auto r = ex.run(batch);
    CHECK(as_json(r[0])["error"]["code"] == "internal");
    CHECK(ex.counters().queue_totals().at("q") == claimed_one);
    CHECK(ex.counters().stats().complete == fenceq::WriteCounts{});
    // The same batch again, committed this time: counted then.
    ex.run(batch);
    CHECK(ex.counters().queue_totals().at("q").completed == 1);
  }
}

TEST_CASE("C3.8 a request that would wait (enqueue_and_wait, await, claim_next with wait) answers "
          "in its own shape when run alone: nil, or an empty array for claim_next with max") {
  // The fuzzer's seed: enqueue_and_wait with a wait, run through the
  // executor without a server to park it, once read as a claim_next.
  SqliteStore store(":memory:", SyncMode::off);
  Clock clock(proto::ClockMode::client, 0);
  Executor ex(store, clock);
  std::vector<proto::Decoded> batch;
  batch.push_back(decode(pack({{"op", "enqueue_and_wait"}, {"id", "q1"}, {"queue", "pol"},
                               {"wait", 5}, {"rid", 4}, {"now", 1.0}})));
  batch.push_back(decode(pack({{"op", "await"}, {"id", "q1"}, {"wait", 5}, {"now", 1.0}})));
  batch.push_back(decode(pack({{"op", "claim_next"}, {"queue", "empty"}, {"owner", "w"},
                               {"ttl", 5.0}, {"wait", 5}, {"now", 1.0}})));
  batch.push_back(decode(pack({{"op", "claim_next"}, {"queue", "empty"}, {"owner", "w"},
                               {"ttl", 5.0}, {"wait", 5}, {"max", 3}, {"now", 1.0}})));
  auto r = ex.run(batch);
  REQUIRE(r.size() == 4);
  CHECK(as_json(r[0])["ok"] == true);
  CHECK(as_json(r[0])["result"].is_null());
  CHECK(as_json(r[0])["rid"] == 4);
  CHECK(as_json(r[1])["result"].is_null());
  CHECK(as_json(r[2])["result"].is_null());
  CHECK(as_json(r[3])["result"] == nlohmann::json::array());
}

namespace {

// What the serving loop does between batches (Server::run), without one:
// every source whose time has come runs; its replies are returned.
std::vector<fenceq::daemon::Delivery> run_due(Executor& ex) {
  std::vector<fenceq::daemon::Delivery> out;
  const auto now = fenceq::daemon::Source::SteadyClock::now();
  for (auto* s : ex.sources()) {
    if (auto t = s->due(); t && *t <= now) s->run(out);
  }
  return out;
}

}  // namespace

TEST_CASE("sources: parked requests end through the executor's sources, each a side channel") {
  SqliteStore store(":memory:", SyncMode::off);
  Clock clock(proto::ClockMode::client, 0);
  Executor ex(store, clock);
  std::set<std::string> names;
  for (const auto* s : ex.sources()) {
    names.insert(s->name());
    CHECK(s->fd() == -1);  // no shared database, no stats reader, no outbox
    CHECK_FALSE(s->pending());
  }
  CHECK(names.size() == ex.sources().size());
  CHECK(run_due(ex).empty());  // nothing parked: nothing due

  std::vector<proto::Decoded> batch;
  batch.push_back(decode(pack({{"op", "claim_next"}, {"queue", "empty"}, {"owner", "w"},
                               {"ttl", 5.0}, {"wait", 0.05}, {"now", 1.0}})));
  batch.push_back(decode(pack({{"op", "enqueue"}, {"id", "a"}, {"queue", "other"}, {"now", 1.0}})));
  batch.push_back(decode(pack({{"op", "await"}, {"id", "a"}, {"wait", 0.05}, {"now", 1.0}})));
  const std::vector<fenceq::daemon::Token> tokens{7, 9, 8};
  auto parked = ex.run(batch, tokens);
  REQUIRE(parked.replies.size() == 3);
  CHECK_FALSE(parked.replies[0]);  // both wait for their time
  CHECK(parked.replies[1]);
  CHECK_FALSE(parked.replies[2]);

  std::map<fenceq::daemon::Token, std::string> answered;
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (answered.size() < 2 && std::chrono::steady_clock::now() < give_up) {
    for (auto& d : run_due(ex)) answered[d.token] = d.reply;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  REQUIRE(answered.size() == 2);
  CHECK(as_json(answered[7])["result"].is_null());
  CHECK(as_json(answered[8])["result"].is_null());
  CHECK(run_due(ex).empty());
}

TEST_CASE("sources: a source with something to do at once is due (a schedule's tick the client "
          "clock passed)") {
  SqliteStore store(":memory:", SyncMode::off);
  Clock clock(proto::ClockMode::client, 0);
  Executor ex(store, clock);
  const double t0 = 1780308120;  // 2026-06-01 10:02 UTC
  auto r = ex.run({decode(pack({{"op", "schedule_set"}, {"name", "five"}, {"cron", "*/5 * * * *"},
                                {"queue", "s"}, {"now", t0}}))});
  REQUIRE(as_json(r[0])["ok"] == true);
  run_due(ex);
  auto state = [&] {
    return as_json(ex.run({decode(pack({{"op", "job"}, {"id", "five@2026-06-01T10:05Z"},
                                        {"now", t0 + 240}}))})[0]);
  };
  CHECK(state()["result"].is_null());  // 10:06 now, by the client's clock: not enqueued yet
  run_due(ex);                         // one pass: the schedules' source says now, and runs
  CHECK_FALSE(state()["result"].is_null());
}
