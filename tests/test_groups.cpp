// Groups (issue 31, docs/contract.md C3.11) against the real fenceqd, on
// SQLite and (the "pg groups: " variants) on PostgreSQL: fair turns in
// claim_next, group_max_leased and group_rate on every claim path, list's
// group filter and rows, stats, and bad input. Requests with a group go raw
// (the wire as every client sends it); the rest through the C++ client.
#include <catch2/catch.hpp>

#include <fenceq/client.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "daemon.hpp"
#include "policy.hpp"
#include "vectors.hpp"

using fenceq::Client;
using fenceq::ClientOptions;
using fenceq::QueueSettings;
using fenceq::test::Daemon;
using fenceq::test::TempDir;
using fenceq::test::error_code;
using fenceq::test::raw;
using json = nlohmann::json;
using namespace std::chrono_literals;

namespace {

const std::vector<std::string> kServerClock{"--clock", "server"};

// Enqueues `n` jobs `<prefix><i>` of `queue` and `group` (none when empty),
// in batches of 1000.
void enqueue_group(const Daemon& d, const std::string& queue, const std::string& group,
                   const std::string& prefix, int n, int priority = 0) {
  for (int from = 0; from < n; from += 1000) {
    json jobs = json::array();
    for (int i = from; i < std::min(n, from + 1000); ++i) {
      json j{{"id", prefix + std::to_string(i)}, {"queue", queue}};
      if (priority != 0) j["priority"] = priority;
      if (!group.empty()) j["group"] = group;
      jobs.push_back(j);
    }
    auto r = raw(d, {{"op", "enqueue_many"}, {"jobs", jobs}});
    REQUIRE(r.value("ok", false));
  }
}

json configure(const Daemon& d, json settings) {
  settings["op"] = "queue_config";
  return raw(d, settings);
}

// The group a job id of these tests names: its text before the first '-'.
std::string group_of(const std::string& id) { return id.substr(0, id.find('-')); }

}  // namespace

TEST_CASE("groups: claim_next serves the groups of a priority in turn so one group with 5000 jobs "
          "does not delay 20 groups of 5 behind it (4 workers: all 100 within the first 130 "
          "claims)") {
  TempDir dir;
  Daemon d(dir, kServerClock);
  enqueue_group(d, "fair", "heavy", "heavy-", 5000);
  for (int g = 0; g < 20; ++g) {
    enqueue_group(d, "fair", "light" + std::to_string(g), "light" + std::to_string(g) + "-", 5);
  }
  // Claims numbered in the order the daemon made them: each worker claims
  // and records under one lock, completes outside it. (Numbered as their
  // replies were read, a claim could be recorded up to 3 places early: past
  // claim 105 only the heavy group is left, so 7 of the first 105 were
  // heavy once in a clean clone's make test.)
  std::mutex mu;
  std::vector<std::string> order;
  std::atomic<int> errors{0};
  std::vector<std::thread> workers;
  for (int w = 0; w < 4; ++w) {
    workers.emplace_back([&, w] {
      try {
        Client c(d.endpoint(), ClientOptions{std::chrono::seconds(10)});
        const std::string owner = "w" + std::to_string(w);
        for (int i = 0; i < 60; ++i) {
          std::optional<fenceq::ClaimedJob> job;
          {
            std::lock_guard lock(mu);
            job = c.claim_next("fair", owner, 60);
            if (job) order.push_back(job->id);
          }
          if (!job) break;
          if (!c.complete(job->id, owner, job->fence, std::string("ok"))) errors.fetch_add(1);
        }
      } catch (const std::exception&) {
        errors.fetch_add(1);
      }
    });
  }
  for (auto& t : workers) t.join();
  CHECK(errors.load() == 0);
  REQUIRE(order.size() == 240);
  int light = 0;
  for (std::size_t i = 0; i < 130; ++i) light += order[i].starts_with("light") ? 1 : 0;
  CHECK(light == 100);
  // And the heavy group was not starved either: about one claim in 21.
  int heavy = 0;
  for (std::size_t i = 0; i < 105; ++i) heavy += order[i].starts_with("heavy") ? 1 : 0;
  CHECK(heavy >= 4);
  CHECK(heavy <= 6);
}

TEST_CASE("groups: turns are by priority first and jobs of no group take theirs as one group and "
          "a new group comes before those already served") {
  TempDir dir;
  Daemon d(dir, kServerClock);
  Client c(d.endpoint());
  enqueue_group(d, "q", "a", "a-", 3);
  enqueue_group(d, "q", "b", "b-", 3);
  enqueue_group(d, "q", "", "none-", 3);
  enqueue_group(d, "q", "c", "c-", 1, 5);  // the top priority: first
  std::vector<std::string> ids;
  for (int i = 0; i < 4; ++i) {
    auto job = c.claim_next("q", "w", 60);
    REQUIRE(job);
    ids.push_back(job->id);
  }
  CHECK(ids[0] == "c-0");
  // Then one of each of the three groups of priority 0 (never served: in
  // group name order, '' for no group first), then round again.
  CHECK(ids[1] == "none-0");
  CHECK(ids[2] == "a-0");
  CHECK(ids[3] == "b-0");
  // A group new to the queue has never been served: it comes first.
  enqueue_group(d, "q", "z", "z-", 2);
  auto batch = c.claim_next_many("q", "w", 60, 4);
  REQUIRE(batch.size() == 4);
  CHECK(batch[0].id == "z-0");
  CHECK(batch[1].id == "none-1");
  CHECK(batch[2].id == "a-1");
  CHECK(batch[3].id == "b-1");
}

TEST_CASE("groups: a claim by id takes no turn") {
  TempDir dir;
  Daemon d(dir, kServerClock);
  Client c(d.endpoint());
  enqueue_group(d, "q", "a", "a-", 2);
  enqueue_group(d, "q", "b", "b-", 2);
  REQUIRE(c.claim("a-0", "w", 60));
  // a is still never served by claim_next: before b by name.
  auto job = c.claim_next("q", "w", 60);
  REQUIRE(job);
  CHECK(job->id == "a-1");
  job = c.claim_next("q", "w", 60);
  REQUIRE(job);
  CHECK(job->id == "b-0");
}

TEST_CASE("groups: group_max_leased holds on claim_next with max and claim by id and complete_next "
          "and stats shows the settings and the groups waiting") {
  TempDir dir;
  Daemon d(dir, kServerClock);
  Client c(d.endpoint());
  for (int g = 0; g < 3; ++g) enqueue_group(d, "m", "g" + std::to_string(g), "g" + std::to_string(g) + "-", 5);
  enqueue_group(d, "m", "", "free-", 4);
  REQUIRE(configure(d, {{"queue", "m"}, {"group_max_leased", 2}}).value("ok", false));
  auto jobs = c.claim_next_many("m", "w", 60, 20);
  // Two of each group, and every job of no group (no group setting limits them).
  std::map<std::string, int> by_group;
  for (const auto& j : jobs) by_group[group_of(j.id)]++;
  CHECK(by_group == std::map<std::string, int>{{"free", 4}, {"g0", 2}, {"g1", 2}, {"g2", 2}});
  CHECK(c.claim_next_many("m", "w", 60, 20).empty());
  CHECK_FALSE(c.claim("g0-4", "w", 60));  // by id: held back too
  const auto stats = raw(d, {{"op", "stats"}});
  const auto& q = stats["result"]["queues"]["m"];
  CHECK(q["group_max_leased"] == 2);
  CHECK(q["group_rate"] == 0);
  CHECK(q["groups_waiting"] == 3);
  // A complete frees one lease of its group: complete_next's next is of that group.
  const auto g0 = std::find_if(jobs.begin(), jobs.end(), [](auto& j) { return j.id.starts_with("g0"); });
  REQUIRE(g0 != jobs.end());
  auto next = c.complete_and_claim_next(g0->id, "w", g0->fence, std::string("ok"), "m", 60);
  CHECK(next.completed);
  REQUIRE(next.next);
  CHECK(group_of(next.next->id) == "g0");
  // Raising the limit lets each group take one more.
  REQUIRE(configure(d, {{"queue", "m"}, {"group_max_leased", 3}}).value("ok", false));
  CHECK(c.claim_next_many("m", "w", 60, 20).size() == 3);
  // Without group settings the stats keep their shape.
  REQUIRE(configure(d, {{"queue", "m"}, {"group_max_leased", 0}}).value("ok", false));
  const auto after = raw(d, {{"op", "stats"}})["result"]["queues"]["m"];
  CHECK_FALSE(after.contains("group_max_leased"));
  CHECK_FALSE(after.contains("paused"));
}

TEST_CASE("groups: 16 workers on 20 groups with group_max_leased 2 never hold more than 2 leases "
          "of one group at once and some group reaches 2") {
  TempDir dir;
  Daemon d(dir, kServerClock);
  // 18 groups of 2 jobs and 2 of 20: turns spread the claims over every
  // group, and once the small ones are done the 16 workers press on the two
  // big ones' limit.
  constexpr int kGroups = 20, kJobs = 18 * 2 + 2 * 20;
  for (int g = 0; g < kGroups; ++g) {
    enqueue_group(d, "lim", "g" + std::to_string(g), "g" + std::to_string(g) + "-", g < 18 ? 2 : 20);
  }
  REQUIRE(configure(d, {{"queue", "lim"}, {"group_max_leased", 2}}).value("ok", false));
  std::atomic<int> errors{0};
  auto leases = fenceq::test::race_workers({d.endpoint()}, "lim", 16, kJobs, 20ms, 90s, errors);
  CHECK(errors.load() == 0);
  REQUIRE(leases.size() == kJobs);
  std::map<std::string, std::vector<fenceq::test::SeenLease>> by_group;
  for (const auto& l : leases) by_group[group_of(l.id)].push_back(l);
  int most = 0;
  for (const auto& [g, ls] : by_group) most = std::max(most, fenceq::test::most_at_once(ls));
  INFO("most leases of one group at once " << most);
  CHECK(most <= 2);
  CHECK(most == 2);
}

TEST_CASE("groups: group_rate 10 per second holds for each group and the busiest group reaches "
          "at least 80% of it") {
  TempDir dir;
  Daemon d(dir, kServerClock);
  Client c(d.endpoint());
  constexpr int kEach = 25;
  std::vector<std::string> ids;
  for (const std::string g : {"ra", "rb", "rc"}) {
    enqueue_group(d, "rate", g, g + "-", kEach);
    for (int i = 0; i < kEach; ++i) ids.push_back(g + "-" + std::to_string(i));
  }
  REQUIRE(configure(d, {{"queue", "rate"}, {"group_rate", 10}, {"group_per", 1.0}})
              .value("ok", false));
  std::atomic<int> errors{0};
  auto leases = fenceq::test::race_workers({d.endpoint()}, "rate", 6, 3 * kEach, 0ms, 60s, errors);
  CHECK(errors.load() == 0);
  REQUIRE(leases.size() == 3 * kEach);
  std::map<std::string, std::vector<std::string>> by_group;
  for (const auto& id : ids) by_group[group_of(id)].push_back(id);
  int busiest = 0;
  for (const auto& [g, gids] : by_group) {
    const auto times = fenceq::test::claim_times(c, gids, 60);
    REQUIRE(times.size() == kEach);
    const int most = fenceq::test::most_in_window(times, 1.0);
    INFO("group " << g << ": most claims in one second " << most);
    CHECK(most <= 10);
    busiest = std::max(busiest, most);
  }
  CHECK(busiest >= 8);
}

TEST_CASE("groups: list filters by group and rows carry group only when the job has one") {
  TempDir dir;
  Daemon d(dir, kServerClock);
  enqueue_group(d, "l", "acme", "acme-", 2);
  enqueue_group(d, "l", "", "plain-", 1);
  auto rows = raw(d, {{"op", "list"}, {"queue", "l"}, {"group", "acme"}});
  REQUIRE(rows["result"].size() == 2);
  for (const auto& r : rows["result"]) CHECK(r["group"] == "acme");
  auto plain = raw(d, {{"op", "list"}, {"queue", "l"}, {"prefix", "plain-"}});
  REQUIRE(plain["result"].size() == 1);
  CHECK_FALSE(plain["result"][0].contains("group"));
  auto job = raw(d, {{"op", "job"}, {"id", "acme-0"}});
  CHECK(job["result"]["group"] == "acme");
  CHECK(raw(d, {{"op", "list"}, {"group", "nobody"}})["result"].empty());
}

TEST_CASE("groups: a retried dead job of a group takes turns again") {
  TempDir dir;
  Daemon d(dir, kServerClock);
  Client c(d.endpoint());
  REQUIRE(raw(d, {{"op", "enqueue"}, {"id", "solo-1"}, {"queue", "rt"}, {"group", "solo"},
                  {"max_attempts", 1}})
              .value("ok", false));
  auto job = c.claim_next("rt", "w", 60);
  REQUIRE(job);
  REQUIRE(c.fail(job->id, "w", job->fence, "boom"));
  CHECK_FALSE(c.claim_next("rt", "w", 60));  // dead; the group has no open job and leaves
  REQUIRE(c.retry("solo-1"));
  auto again = c.claim_next("rt", "w", 60);
  REQUIRE(again);
  CHECK(again->id == "solo-1");
}

TEST_CASE("groups: bad input gets a coded error and changes nothing") {
  TempDir dir;
  Daemon d(dir, kServerClock);
  const std::string long_group(257, 'g');
  const std::vector<json> bad{
      {{"op", "enqueue"}, {"id", "b1"}, {"group", ""}},
      {{"op", "enqueue"}, {"id", "b1"}, {"group", long_group}},
      {{"op", "enqueue_many"}, {"jobs", {{{"id", "b1"}}, {{"id", "b2"}, {"group", ""}}}}},
      {{"op", "list"}, {"group", ""}},
      {{"op", "queue_config"}, {"queue", "q"}, {"group_max_leased", -1}},
      {{"op", "queue_config"}, {"queue", "q"}, {"group_rate", -1}},
      {{"op", "queue_config"}, {"queue", "q"}, {"group_rate", 100001}},
      {{"op", "queue_config"}, {"queue", "q"}, {"group_rate", 5}, {"group_per", 0}},
      {{"op", "queue_config"}, {"queue", "q"}, {"group_rate", 5}, {"group_per", -1}},
      {{"op", "queue_config"}, {"queue", "q"}, {"group_rate", 5}, {"group_per", 86401}},
  };
  for (const auto& r : bad) {
    INFO(r.dump());
    CHECK(error_code(raw(d, r)) == "invalid_argument");
  }
  // A field of the wrong type: bad_request, as for every other field.
  CHECK(error_code(raw(d, {{"op", "enqueue"}, {"id", "b1"}, {"group", 7}})) == "bad_request");
  CHECK(error_code(raw(d, {{"op", "queue_config"}, {"queue", "q"}, {"group_max_leased", "2"}})) ==
        "bad_request");
  Client c(d.endpoint());
  CHECK_FALSE(c.state("b1"));
  CHECK_FALSE(c.state("b2"));
  const auto stats = raw(d, {{"op", "stats"}});
  CHECK_FALSE(stats["result"]["queues"].contains("q"));
  // A group of 256 bytes is fine.
  CHECK(raw(d, {{"op", "enqueue"}, {"id", "ok1"}, {"group", std::string(256, 'g')}})
            .value("ok", false));
}
