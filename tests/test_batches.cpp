// Batches against the real fenceqd: enqueue_many, claim_next with max,
// complete_many (with next) and renew_many. The shared vectors
// (protocol/vectors/batches.json, run by test_integration) check each op's
// answers; these check what a sequence of requests cannot: a batch is one
// transaction (whole or nothing, through a kill -9), a stale job inside a
// batch fails alone while its neighbours commit (C3.5), and long-polling
// claims of many jobs.
#include <catch2/catch.hpp>

#include <fenceq/client.hpp>
#include <nlohmann/json.hpp>
#include <zmq.hpp>

#include <chrono>
#include <future>
#include <iostream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "daemon.hpp"
#include "probe.hpp"

using fenceq::Client;
using fenceq::ClientOptions;
using fenceq::JobSpec;
using fenceq::LeaseItem;
using fenceq::test::Daemon;
using fenceq::test::TempDir;
using json = nlohmann::json;
using namespace std::chrono_literals;

namespace {

std::vector<JobSpec> jobs(const std::string& prefix, int n, const std::string& queue = "bq") {
  std::vector<JobSpec> out;
  for (int i = 0; i < n; ++i) {
    JobSpec j;
    j.id = prefix + std::to_string(i);
    j.queue = queue;
    j.priority = i % 3;
    out.push_back(std::move(j));
  }
  return out;
}

std::vector<LeaseItem> items(const std::vector<fenceq::ClaimedJob>& claimed,
                             const std::string& owner) {
  std::vector<LeaseItem> out;
  for (const auto& j : claimed) out.push_back({j.id, owner, j.fence, "done " + j.id});
  return out;
}

}  // namespace

TEST_CASE("batches: C3.5 a stale job inside complete_many fails alone, its neighbours commit") {
  TempDir dir;
  Daemon d(dir);
  Client c(d.endpoint());
  REQUIRE(c.enqueue_many(jobs("s", 10), 1.0) == std::vector<bool>(10, true));
  auto held = c.claim_next_many("bq", "w", 10, 10, 0, 2.0);
  REQUIRE(held.size() == 10);
  // Job s3's lease expires and another worker takes it over: fence 2.
  auto s3 = std::find_if(held.begin(), held.end(), [](auto& j) { return j.id == "s3"; });
  REQUIRE(s3 != held.end());
  REQUIRE(c.claim("s3", "v", 10, 13.0) == 2);
  // The first worker renews all ten at once, as a prefetching worker does:
  // nine leases are extended, s3's is no longer its own.
  std::vector<LeaseItem> mine = items(held, "w");
  auto renewed = c.renew_many(mine, 30, 11.0);
  for (std::size_t i = 0; i < held.size(); ++i) CHECK(renewed[i] == (held[i].id != "s3"));
  auto done = c.complete_many(mine, 14.0);
  for (std::size_t i = 0; i < held.size(); ++i) {
    INFO(held[i].id);
    CHECK(done[i] == (held[i].id != "s3"));
  }
  // s3 keeps the new holder's lease and no result; the others are done.
  auto st = c.state("s3");
  REQUIRE(st);
  CHECK(st->fence == 2);
  CHECK(st->owner == "v");
  CHECK_FALSE(st->done);
  CHECK_FALSE(st->result);
  CHECK(c.state("s0")->result == "done s0");
  CHECK(c.complete("s3", "v", 2, std::string("v's"), 15.0));
}

TEST_CASE("batches: C1.4 a batch is applied whole or not at all, through a kill -9") {
  TempDir dir;
  Daemon d(dir);
  zmq::context_t ctx;
  auto s = fenceq::test::dealer(ctx, d.endpoint());
  constexpr int kRequests = 40, kJobs = 500;
  for (int r = 0; r < kRequests; ++r) {
    json req = {{"op", "enqueue_many"}, {"rid", r}, {"now", 1.0}, {"jobs", json::array()}};
    for (int j = 0; j < kJobs; ++j) {
      req["jobs"].push_back({{"id", "r" + std::to_string(r) + "-" + std::to_string(j)},
                             {"payload", std::string(64, 'p')}});
    }
    auto bytes = json::to_msgpack(req);
    s.send(zmq::buffer(bytes.data(), bytes.size()));
  }
  // Kill it while the batches are being committed: after the first replies.
  std::set<int> acknowledged;
  zmq::message_t m;
  zmq_pollitem_t item{s.handle(), 0, ZMQ_POLLIN, 0};
  while (acknowledged.size() < 5 && zmq::poll(&item, 1, 10000ms) > 0) {
    REQUIRE(s.recv(m));
    auto rep = json::from_msgpack(std::string(m.to_string_view()));
    REQUIRE(rep["ok"] == true);
    acknowledged.insert(rep["rid"].get<int>());
  }
  d.kill9();
  while (s.recv(m, zmq::recv_flags::dontwait)) {
    auto rep = json::from_msgpack(std::string(m.to_string_view()));
    if (rep["ok"] == true) acknowledged.insert(rep["rid"].get<int>());
  }
  d.restart();
  Client c(d.endpoint(), ClientOptions{10000ms});
  int whole = 0, none = 0;
  for (int r = 0; r < kRequests; ++r) {
    int present = 0;
    for (int j = 0; j < kJobs; j += 1) {
      if (c.state("r" + std::to_string(r) + "-" + std::to_string(j))) ++present;
    }
    INFO("request " << r << ": " << present << " of " << kJobs << " jobs present");
    CHECK((present == 0 || present == kJobs));
    if (acknowledged.count(r)) CHECK(present == kJobs);
    (present == kJobs ? whole : none)++;
  }
  std::cout << "batches: kill -9 after " << acknowledged.size() << " acknowledged: " << whole
            << " batches whole, " << none << " absent" << std::endl;
  CHECK(whole >= 5);
}

TEST_CASE("batches: a parked claim_next with max takes up to max when jobs arrive, most urgent "
          "first") {
  TempDir dir;
  Daemon d(dir, {"--clock", "server"});
  auto waiter = std::async(std::launch::async, [&] {
    Client c(d.endpoint(), ClientOptions{20000ms});
    return c.claim_next_many("bq", "w", 30, 5, 10);
  });
  Client c(d.endpoint());
  for (auto until = std::chrono::steady_clock::now() + 5s;
       c.stats().waiting_claims < 1 && std::chrono::steady_clock::now() < until;) {
    std::this_thread::sleep_for(10ms);
  }
  REQUIRE(c.stats().waiting_claims == 1);
  REQUIRE(c.enqueue_many(jobs("p", 8)) == std::vector<bool>(8, true));
  auto got = waiter.get();
  REQUIRE(got.size() == 5);
  // Priorities 2, 1, 0 repeating: the two of priority 2, then the three of 1.
  CHECK(got[0].id == "p2");
  CHECK(got[1].id == "p5");
  CHECK(got[2].id == "p1");
  CHECK(got[3].id == "p4");
  CHECK(got[4].id == "p7");
  for (const auto& j : got) CHECK(j.fence == 1);
  // The other three are still there for the next claim.
  CHECK(c.claim_next_many("bq", "v", 30, 10).size() == 3);
}

TEST_CASE("batches: a parked claim of many whose client is gone gives every job back") {
  TempDir dir;
  Daemon d(dir, {"--clock", "server"});
  {
    zmq::context_t ctx;
    auto s = fenceq::test::dealer(ctx, d.endpoint());
    auto req = json::to_msgpack({{"op", "claim_next"}, {"queue", "gone"}, {"owner", "w"},
                                 {"ttl", 60}, {"max", 4}, {"wait", 30}});
    s.send(zmq::buffer(req.data(), req.size()));
    Client c(d.endpoint());
    for (auto until = std::chrono::steady_clock::now() + 5s;
         c.stats().waiting_claims < 1 && std::chrono::steady_clock::now() < until;) {
      std::this_thread::sleep_for(10ms);
    }
    REQUIRE(c.stats().waiting_claims == 1);
  }  // the client goes away while it waits
  std::this_thread::sleep_for(200ms);
  Client c(d.endpoint());
  REQUIRE(c.enqueue_many(jobs("g", 3, "gone")) == std::vector<bool>(3, true));
  // Its claim was served, could not be delivered, and was undone: the three
  // are claimable, with the fence each would have had (C1.2: kept).
  auto again = c.claim_next_many("gone", "v", 30, 10);
  REQUIRE(again.size() == 3);
  for (const auto& j : again) CHECK(j.fence == 2);
  CHECK(c.stats().waiting_claims == 0);
}

TEST_CASE("batches: complete_many with next claims for the items' owner, renew_many keeps "
          "held leases") {
  TempDir dir;
  Daemon d(dir);
  Client c(d.endpoint());
  REQUIRE(c.enqueue_many(jobs("n", 6), 1.0).size() == 6);
  auto first = c.claim_next_many("bq", "w", 10, 2, 0, 2.0);
  REQUIRE(first.size() == 2);
  auto out = c.complete_many_and_claim(items(first, "w"), "bq", 10, 3, 3.0);
  CHECK(out.completed == std::vector<bool>{true, true});
  REQUIRE(out.next.size() == 3);
  for (const auto& j : out.next) CHECK(c.state(j.id)->owner == "w");
  // Past their first TTL only through renew_many.
  CHECK(c.renew_many(items(out.next, "w"), 10, 12.0) == std::vector<bool>{true, true, true});
  CHECK(c.complete_many(items(out.next, "w"), 20.0) == std::vector<bool>{true, true, true});
  // One left; a batch of claims finds it alone.
  CHECK(c.claim_next_many("bq", "w", 10, 5, 0, 21.0).size() == 1);
}

TEST_CASE("batches: claim_next_many with max below 1 or above 1000 is invalid_argument and "
          "claims nothing") {
  TempDir dir;
  Daemon d(dir);
  Client c(d.endpoint());
  REQUIRE(c.enqueue_many(jobs("m", 2), 1.0).size() == 2);
  // A max below 1 used to be left out of the request: the daemon then
  // claimed one job and the client threw std::bad_variant_access on its answer.
  for (std::int64_t max : {std::int64_t{0}, std::int64_t{-1}, std::int64_t{1001}}) {
    INFO("max " << max);
    try {
      c.claim_next_many("bq", "w", 10, max, 0, 2.0);
      FAIL("claim_next_many accepted max " << max);
    } catch (const fenceq::Error& e) {
      CHECK(e.code() == "invalid_argument");
      CHECK(std::string(e.what()).find("max") != std::string::npos);
    }
  }
  // Nothing was claimed: both jobs are still there, at fence 0.
  for (const auto& id : {"m0", "m1"}) {
    auto st = c.state(id);
    REQUIRE(st);
    CHECK(st->fence == 0);
    CHECK_FALSE(st->owner);
  }
  CHECK(c.claim_next_many("bq", "w", 10, 1000, 0, 2.0).size() == 2);
}
