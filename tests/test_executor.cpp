// Decode + validate + apply in-process: the shared vectors, group-commit
// semantics (C1.4), arrival order (C3.7) and validation first (C3.8).
#include <catch2/catch.hpp>

#include "clock.hpp"
#include "daemon.hpp"
#include "executor.hpp"
#include "sqlite_store.hpp"
#include "vectors.hpp"

namespace proto = fenceq::protocol;
using fenceq::daemon::Clock;
using fenceq::daemon::Executor;
using fenceq::daemon::SqliteStore;
using fenceq::daemon::SyncMode;

namespace {

std::string pack(const nlohmann::json& j) {
  auto v = nlohmann::json::to_msgpack(j);
  return std::string(v.begin(), v.end());
}

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
  CHECK(ex.stats().commits == 1);  // one transaction for the whole batch
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
  CHECK(ex.stats().failed_commits == 1);
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
