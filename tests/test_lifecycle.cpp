// Issue 33's lifecycle ops against the real fenceqd (docs/contract.md
// C3.14), on SQLite and (the "pg lifecycle: " variants) on PostgreSQL:
// snooze gives a current lease back with its attempt and makes the job
// claimable after a delay; a stale snooze changes nothing.
#include <catch2/catch.hpp>

#include <fenceq/client.hpp>
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "daemon.hpp"
#include "vectors.hpp"

using fenceq::Client;
using fenceq::EnqueueOptions;
using fenceq::JobStatus;
using fenceq::test::Daemon;
using fenceq::test::TempDir;
using fenceq::test::listed;
using fenceq::test::raw;
using fenceq::test::tool;
using json = nlohmann::json;

namespace {

const std::vector<std::string> kClientClock{"--clock", "client"};

EnqueueOptions at(double now) {
  EnqueueOptions o;
  o.now = now;
  return o;
}

std::string code_of(const json& reply) {
  if (!reply.is_object() || reply.value("ok", true)) return "";
  return reply["error"]["code"].get<std::string>();
}

}  // namespace

TEST_CASE("lifecycle: snooze gives the attempt back and keeps the fence and the job is claimable "
          "after its delay and not before") {
  TempDir dir;
  Daemon d(dir, kClientClock);
  Client c(d.endpoint());
  EnqueueOptions two = at(1);
  two.max_attempts = 2;
  REQUIRE(c.enqueue("j", two));
  auto j = c.claim_next("default", "A", 30, 0, 2);
  REQUIRE(j);
  CHECK(j->attempts == 1);
  REQUIRE(c.snooze("j", "A", j->fence, 5, 3.0));
  auto row = listed(c, "j");
  CHECK(row.status == JobStatus::delayed);
  CHECK(row.attempts == 0);  // given back
  CHECK(row.fence == 1);     // kept, as on release
  CHECK_FALSE(row.owner);
  CHECK(row.not_before == 8.0);
  // A's lease is over: its complete is refused, and so is a second snooze.
  CHECK_FALSE(c.complete("j", "A", 1, "late", 4.0));
  CHECK_FALSE(c.snooze("j", "A", 1, 0, 4.0));
  CHECK_FALSE(c.claim_next("default", "B", 30, 0, 7.9));
  // Snoozed more times than max_attempts, the job is still not dead: each
  // snooze gave its attempt back.
  for (int round = 0; round < 3; ++round) {
    const double t = 8 + 10 * round;
    auto again = c.claim_next("default", "B", 30, 0, t);
    REQUIRE(again);
    CHECK(again->fence == 2 + round);
    CHECK(again->attempts == 1);
    REQUIRE(c.snooze("j", "B", again->fence, 0, t + 1));
    CHECK(listed(c, "j").status == JobStatus::ready);
  }
  auto last = c.claim_next("default", "B", 30, 0, 50);
  REQUIRE(last);
  REQUIRE(c.complete("j", "B", last->fence, "done", 51.0));
  CHECK_FALSE(c.snooze("j", "B", last->fence, 0, 52.0));  // done: nothing to give back
  CHECK(listed(c, "j").status == JobStatus::done);
}

TEST_CASE("lifecycle: a stale snooze is refused and changes nothing and bad input gets a coded "
          "error") {
  TempDir dir;
  Daemon d(dir, kClientClock);
  Client c(d.endpoint());
  REQUIRE(c.enqueue("j", at(1)));
  auto a = c.claim_next("default", "A", 5, 0, 2);  // until 7
  REQUIRE(a);
  auto b = c.claim_next("default", "B", 5, 0, 0);
  CHECK_FALSE(b);
  // A's lease ran out; B took the job over (fence 2).
  REQUIRE(c.claim("j", "B", 30, 8.0) == 2);
  CHECK_FALSE(c.snooze("j", "A", a->fence, 0, 9.0));
  auto row = listed(c, "j");
  CHECK(row.status == JobStatus::leased);
  CHECK(row.owner == "B");
  CHECK(row.attempts == 2);
  CHECK(row.fence == 2);
  const json lease{{"op", "snooze"}, {"id", "j"}, {"owner", "B"}, {"fence", 2}, {"now", 10}};
  auto with = [&](json extra) {
    json r = lease;
    for (auto& [k, v] : extra.items()) r[k] = v;
    return r;
  };
  CHECK(code_of(raw(d, lease)) == "bad_request");  // no delay
  CHECK(code_of(raw(d, with({{"delay", "soon"}}))) == "bad_request");
  CHECK(code_of(raw(d, with({{"delay", -1}}))) == "invalid_argument");
  CHECK(code_of(raw(d, with({{"delay", 2e9}}))) == "invalid_argument");
  CHECK(code_of(raw(d, with({{"delay", 1}, {"fence", 2.0}}))) == "bad_request");
  CHECK(listed(c, "j").owner == "B");  // none of them changed anything
  // The tool: `fenceq snooze ID OWNER FENCE DELAY`.
  auto t = tool(d, {"--now", "11", "snooze", "j", "B", "2", "30"});
  CHECK(t.status == 0);
  CHECK(t.out == "true\n");
  CHECK(listed(c, "j").not_before == 41.0);
  t = tool(d, {"--now", "12", "snooze", "j", "B", "2", "30"});
  CHECK(t.status == 1);
  CHECK(t.out == "false\n");
  CHECK(tool(d, {"snooze", "j", "B", "2", "-1"}).status == 2);
}
