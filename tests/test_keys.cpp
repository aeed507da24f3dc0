// Unique keys (issue 31, docs/contract.md C3.10) against the real fenceqd, on
// SQLite and (the "pg keys: " variants) on PostgreSQL: enqueue's key,
// unique_for and on_conflict, enqueue_many's per-entry answers, retry of a
// keyed job, list's key filter, the fenceq tool's --key, bad input, and 16
// enqueuers racing on 50 keys checked from the history of their replies.
#include <catch2/catch.hpp>

#include <fenceq/client.hpp>
#include <nlohmann/json.hpp>

#include <csignal>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "daemon.hpp"
#include "keys.hpp"
#include "vectors.hpp"

using fenceq::Client;
using fenceq::EnqueueOptions;
using fenceq::Enqueued;
using fenceq::JobSpec;
using fenceq::JobStatus;
using fenceq::ListOptions;
using fenceq::test::Daemon;
using fenceq::test::TempDir;
using fenceq::test::listed;
using fenceq::test::error_code;
using fenceq::test::raw;
using fenceq::test::tool;
using json = nlohmann::json;
using namespace std::chrono_literals;

namespace {

const std::vector<std::string> kClientClock{"--clock", "client"};

EnqueueOptions keyed(const std::string& queue, const std::string& key, double now,
                     const std::string& payload = "") {
  EnqueueOptions o;
  o.queue = queue;
  o.key = key;
  o.now = now;
  if (!payload.empty()) o.payload = fenceq::Payload{payload, false};
  return o;
}

}  // namespace

TEST_CASE("keys: while a job of the key is unfinished no other is created and the answer names "
          "it and once it is done the key is free again") {
  TempDir dir;
  Daemon d(dir, kClientClock);
  Client c(d.endpoint());
  CHECK(c.enqueue_unique("a", keyed("q", "user-1", 100)) == Enqueued{"a", true, true});
  CHECK(c.enqueue_unique("b", keyed("q", "user-1", 101)) == Enqueued{"a", false, true});
  CHECK_FALSE(c.state("b"));  // nothing created
  // Another queue, another key: their own.
  CHECK(c.enqueue_unique("c", keyed("other", "user-1", 101)) == Enqueued{"c", true, true});
  CHECK(c.enqueue_unique("d", keyed("q", "user-2", 101)) == Enqueued{"d", true, true});
  // The id is taken (C3.1): nothing changes, the answer is that id.
  CHECK(c.enqueue_unique("d", keyed("q", "user-3", 101)) == Enqueued{"d", false, true});
  CHECK(listed(c, "d").key == "user-2");
  // Leased is unfinished too.
  auto job = c.claim_next("q", "w", 30, 0, 102);
  REQUIRE(job);
  REQUIRE(job->id == "a");
  CHECK(c.enqueue_unique("e", keyed("q", "user-1", 103)) == Enqueued{"a", false, true});
  REQUIRE(c.complete("a", "w", job->fence, std::string("ok"), 104));
  CHECK(c.enqueue_unique("e", keyed("q", "user-1", 105)) == Enqueued{"e", true, true});
  // A failed job waiting for its retry holds the key; a dead one does not.
  EnqueueOptions once = keyed("q", "user-4", 106);
  once.max_attempts = 1;
  REQUIRE(c.enqueue_unique("f", once).created);
  job = c.claim_next("q", "w", 30, 0, 107);
  while (job && job->id != "f") job = c.claim_next("q", "w", 30, 0, 107);
  REQUIRE(job);
  REQUIRE(c.fail("f", "w", job->fence, "bad", std::nullopt, 108));  // dead: its one attempt
  CHECK(listed(c, "f").status == JobStatus::dead);
  CHECK(c.enqueue_unique("g", keyed("q", "user-4", 109)) == Enqueued{"g", true, true});
  // Cancelled frees it too.
  REQUIRE(c.cancel("g"));
  CHECK(c.enqueue_unique("h", keyed("q", "user-4", 110)) == Enqueued{"h", true, true});
  // The plain enqueue with a key answers only whether it created.
  CHECK_FALSE(c.enqueue("i", keyed("q", "user-4", 111)));
  CHECK_FALSE(c.state("i"));
}

TEST_CASE("keys: unique_for counts the jobs of the key enqueued within its window finished or not") {
  TempDir dir;
  Daemon d(dir, kClientClock);
  Client c(d.endpoint());
  auto o = keyed("q", "digest", 1000);
  o.unique_for = 60;
  REQUIRE(c.enqueue_unique("d1", o).created);
  auto job = c.claim_next("q", "w", 30, 0, 1001);
  REQUIRE(job);
  REQUIRE(c.complete("d1", "w", job->fence, std::string("sent"), 1002));
  o.now = 1030;  // done, but enqueued 30 s ago: within the window
  CHECK(c.enqueue_unique("d2", o) == Enqueued{"d1", false, true});
  o.now = 1059.5;
  CHECK(c.enqueue_unique("d2", o) == Enqueued{"d1", false, true});
  o.now = 1060.5;  // 60.5 s after d1 was enqueued
  CHECK(c.enqueue_unique("d2", o) == Enqueued{"d2", true, true});
  // Without unique_for a finished job never counts, however recent.
  auto plain = keyed("q", "digest", 1061);
  job = c.claim_next("q", "w", 30, 0, 1061);
  REQUIRE(job);
  REQUIRE(c.complete("d2", "w", job->fence, std::string("sent"), 1061));
  CHECK(c.enqueue_unique("d3", plain) == Enqueued{"d3", true, true});
  // An unfinished job counts whatever the window.
  o.now = 5000;
  CHECK(c.enqueue_unique("d4", o) == Enqueued{"d3", false, true});
}

TEST_CASE("keys: on_conflict replace gives a waiting job of the key the new payload priority "
          "max_attempts and delay and never touches a leased one") {
  TempDir dir;
  Daemon d(dir, kClientClock);
  Client c(d.endpoint());
  auto first = keyed("q", "search-index", 100, "v1");
  first.delay = 50;
  REQUIRE(c.enqueue_unique("s1", first).created);
  auto again = keyed("q", "search-index", 110, "v2");
  again.replace = true;
  again.priority = 7;
  again.max_attempts = 3;
  again.delay = 5;  // from now: claimable at 115
  CHECK(c.enqueue_unique("s2", again) == Enqueued{"s1", false, true});
  CHECK_FALSE(c.state("s2"));
  auto d1 = c.job("s1");
  REQUIRE(d1);
  CHECK(d1->payload == fenceq::Payload{"v2", false});
  CHECK(d1->info.priority == 7);
  CHECK(d1->info.max_attempts == 3);
  CHECK(d1->info.not_before == Approx(115));
  CHECK(d1->info.fence == 0);
  CHECK(d1->info.attempts == 0);
  CHECK(d1->info.created == Approx(100));  // still the first enqueue's
  CHECK_FALSE(c.claim_next("q", "w", 30, 0, 114));
  // Replace with no delay: claimable at once.
  again.payload = fenceq::Payload{"v3", false};
  again.delay = 0;
  again.now = 114.5;
  CHECK(c.enqueue_unique("s3", again) == Enqueued{"s1", false, true});
  auto job = c.claim_next("q", "w", 30, 0, 114.5);
  REQUIRE(job);
  CHECK(job->id == "s1");
  CHECK(job->payload == fenceq::Payload{"v3", false});
  // Leased: answered as skip, nothing changed.
  again.payload = fenceq::Payload{"v4", false};
  again.now = 116;
  CHECK(c.enqueue_unique("s4", again) == Enqueued{"s1", false, true});
  CHECK(c.job("s1")->payload == fenceq::Payload{"v3", false});
  // Its lease ran out: waiting again, so replaced.
  again.now = 150;
  CHECK(c.enqueue_unique("s4", again) == Enqueued{"s1", false, true});
  CHECK(c.job("s1")->payload == fenceq::Payload{"v4", false});
  // Finished within unique_for: answered as skip, never revived.
  job = c.claim_next("q", "w", 30, 0, 151);
  REQUIRE(job);
  REQUIRE(c.complete("s1", "w", job->fence, std::string("indexed"), 152));
  again.unique_for = 100;
  again.now = 160;
  CHECK(c.enqueue_unique("s5", again) == Enqueued{"s1", false, true});
  CHECK(listed(c, "s1").status == JobStatus::done);
  CHECK(c.job("s1")->payload == fenceq::Payload{"v4", false});
}

TEST_CASE("keys: retry of a dead job with a key is refused while another job holds the key") {
  TempDir dir;
  Daemon d(dir, kClientClock);
  Client c(d.endpoint());
  auto o = keyed("q", "k", 100);
  o.max_attempts = 1;
  REQUIRE(c.enqueue_unique("r1", o).created);
  auto job = c.claim_next("q", "w", 30, 0, 101);
  REQUIRE(job);
  REQUIRE(c.fail("r1", "w", job->fence, "bad", std::nullopt, 102));
  REQUIRE(c.enqueue_unique("r2", o).created);
  CHECK_FALSE(c.retry("r1"));
  CHECK(listed(c, "r1").status == JobStatus::dead);
  REQUIRE(c.cancel("r2"));
  CHECK(c.retry("r1"));  // the key is free again
  CHECK(listed(c, "r1").status == JobStatus::ready);
  CHECK(c.enqueue_unique("r3", o) == Enqueued{"r1", false, true});
}

// retry_many revives job after job (each a retry): the first of a key to
// come back holds it against the rest of the same page (C3.10).
TEST_CASE("keys: retry_many revives one cancelled job of a key and leaves the others while it "
          "holds the key") {
  TempDir dir;
  Daemon d(dir, kClientClock);
  Client c(d.endpoint());
  for (const auto& [id, key] : std::vector<std::pair<std::string, std::string>>{
           {"a", "k"}, {"b", "k"}, {"x", "k2"}}) {
    REQUIRE(c.enqueue_unique(id, keyed("q", key, 100)).created);
    REQUIRE(c.cancel(id));
  }
  fenceq::BulkFilter f;
  f.state = JobStatus::cancelled;
  const auto r = c.retry_many("q", f);
  CHECK(r.count == 2);
  const bool a_back = listed(c, "a").status == JobStatus::ready;
  const bool b_back = listed(c, "b").status == JobStatus::ready;
  CHECK(a_back != b_back);  // one of k's, never both
  CHECK(listed(c, a_back ? "b" : "a").status == JobStatus::cancelled);
  CHECK(listed(c, "x").status == JobStatus::ready);
  CHECK(c.enqueue_unique("y", keyed("q", "k", 101)) ==
        Enqueued{a_back ? "a" : "b", false, true});
}

// SQLite finds a key's unfinished job as its newest by kseq (schema v7): a
// revival takes the next seq, so a job enqueued after it, even after a
// restart, is newer still.
TEST_CASE("keys: after two revivals in a row and a restart a new job of the key still holds it",
          "[sqlite]") {
  TempDir dir;
  auto o = keyed("q", "k", 100);
  {
    Daemon d(dir, kClientClock);
    Client c(d.endpoint());
    REQUIRE(c.enqueue_unique("a", o).created);
    REQUIRE(c.cancel("a"));
    REQUIRE(c.enqueue_unique("b", o).created);
    REQUIRE(c.cancel("b"));
    REQUIRE(c.retry("a"));
    REQUIRE(c.cancel("a"));
    REQUIRE(c.retry("b"));
    CHECK(c.enqueue_unique("x", o) == Enqueued{"b", false, true});
    REQUIRE(c.cancel("b"));
    d.stop(SIGTERM);
  }
  Daemon d(dir, kClientClock);
  Client c(d.endpoint());
  REQUIRE(c.enqueue_unique("c", o).created);
  CHECK(c.enqueue_unique("d", o) == Enqueued{"c", false, true});
  CHECK_FALSE(c.state("d"));
  REQUIRE(c.cancel("c"));
  CHECK(c.enqueue_unique("e", o).created);
}

TEST_CASE("keys: unique_for sees a job of its window below a revived job enqueued before it") {
  TempDir dir;
  Daemon d(dir, kClientClock);
  Client c(d.endpoint());
  auto at = [](double now) {
    auto o = keyed("q", "k", now);
    o.unique_for = 60;
    return o;
  };
  REQUIRE(c.enqueue_unique("a", at(100)).created);
  REQUIRE(c.cancel("a"));
  REQUIRE(c.enqueue_unique("b", at(200)).created);  // a's window (to 160) is over
  REQUIRE(c.cancel("b"));
  REQUIRE(c.retry("a"));  // revived: the key's newest, enqueued at 100
  REQUIRE(c.cancel("a"));
  // The window from 170 holds b (enqueued at 200), found past the revived a.
  CHECK(c.enqueue_unique("c", at(230)) == Enqueued{"b", false, true});
  CHECK_FALSE(c.state("c"));
  CHECK(c.enqueue_unique("e", at(261)).created);  // b's window is over too
}

TEST_CASE("keys: enqueue_many answers a map for each entry with a key and a bool for the others "
          "and a key repeated in the batch creates one job") {
  TempDir dir;
  Daemon d(dir, kClientClock);
  Client c(d.endpoint());
  std::vector<JobSpec> jobs(4);
  jobs[0].id = "m1";
  jobs[0].queue = "q";
  jobs[0].key = "x";
  jobs[1].id = "m2";
  jobs[1].queue = "q";
  jobs[2].id = "m3";
  jobs[2].queue = "q";
  jobs[2].key = "x";
  jobs[3].id = "m4";
  jobs[3].queue = "q";
  jobs[3].key = "y";
  CHECK(c.enqueue_many_unique(jobs, 100) ==
        std::vector<Enqueued>{{"m1", true, true}, {"", true, false}, {"m1", false, true},
                              {"m4", true, true}});
  CHECK_FALSE(c.state("m3"));
  // On the wire: a map per keyed entry, a bool for the other.
  const json many{{"op", "enqueue_many"},
                  {"now", 101},
                  {"jobs", {{{"id", "m5"}, {"queue", "q"}, {"key", "y"}}, {{"id", "m6"}}}}};
  const auto r = raw(d, many);
  REQUIRE(r.value("ok", false));
  CHECK(r["result"] == json::array({{{"id", "m4"}, {"created", false}}, true}));
  // Without a key anywhere, bools as before.
  JobSpec plain;
  plain.id = "m7";
  CHECK(c.enqueue_many({plain}, 102) == std::vector<bool>{true});
}

TEST_CASE("keys: list filters by key and rows carry key only when the job has one") {
  TempDir dir;
  Daemon d(dir, kClientClock);
  Client c(d.endpoint());
  REQUIRE(c.enqueue_unique("k1", keyed("q", "alpha", 100)).created);
  REQUIRE(c.enqueue_unique("k2", keyed("p", "alpha", 100)).created);
  REQUIRE(c.enqueue_unique("k3", keyed("q", "beta", 100)).created);
  EnqueueOptions plain;
  plain.queue = "q";
  plain.now = 100;
  REQUIRE(c.enqueue("k4", plain));
  ListOptions alpha;
  alpha.key = "alpha";
  std::vector<std::string> ids;
  for (const auto& j : c.list(alpha)) ids.push_back(j.id);
  CHECK(ids == std::vector<std::string>{"k1", "k2"});
  alpha.queue = "q";
  REQUIRE(c.list(alpha).size() == 1);
  CHECK(c.list(alpha)[0].key == "alpha");
  const auto rows = raw(d, json{{"op", "list"}, {"queue", "q"}, {"now", 100}});
  REQUIRE(rows.value("ok", false));
  std::map<std::string, json> by_id;
  for (const auto& row : rows["result"]) by_id[row["id"].get<std::string>()] = row;
  CHECK(by_id["k1"]["key"] == "alpha");
  CHECK_FALSE(by_id["k4"].contains("key"));
  const auto detail = raw(d, json{{"op", "job"}, {"id", "k3"}, {"now", 100}});
  CHECK(detail["result"]["key"] == "beta");
}

TEST_CASE("keys: the fenceq tool enqueues with --key --unique-for and --on-conflict and lists by "
          "--key") {
  TempDir dir;
  Daemon d(dir, {"--clock", "server"});
  auto r = tool(d, {"enqueue", "t1", "--queue", "q", "--key", "nightly", "--payload", "a"});
  CHECK(r.status == 0);
  CHECK(json::parse(r.out) == json{{"id", "t1"}, {"created", true}});
  r = tool(d, {"enqueue", "t2", "--queue", "q", "--key", "nightly", "--on-conflict", "replace",
               "--payload", "b", "--unique-for", "60"});
  CHECK(r.status == 1);  // nothing created, as for an id that exists
  CHECK(json::parse(r.out) == json{{"id", "t1"}, {"created", false}});
  Client c(d.endpoint());
  CHECK(c.job("t1")->payload == fenceq::Payload{"b", false});
  r = tool(d, {"--json", "list", "--key", "nightly"});
  CHECK(r.status == 0);
  CHECK(r.out.find("\"key\":\"nightly\"") != std::string::npos);
  r = tool(d, {"enqueue", "t3", "--on-conflict", "replace"});
  CHECK(r.status == 2);
  CHECK(r.out.find("need --key") != std::string::npos);
}

TEST_CASE("keys: bad input gets a coded error and changes nothing") {
  TempDir dir;
  Daemon d(dir, kClientClock);
  const std::vector<std::pair<json, std::string>> bad = {
      {{{"op", "enqueue"}, {"id", "b1"}, {"key", ""}, {"now", 1}}, "must not be empty"},
      {{{"op", "enqueue"}, {"id", "b1"}, {"key", std::string(1025, 'k')}, {"now", 1}}, "key"},
      {{{"op", "enqueue"}, {"id", "b1"}, {"key", 7}, {"now", 1}}, "key"},
      {{{"op", "enqueue"}, {"id", "b1"}, {"unique_for", 5}, {"now", 1}}, "needs a 'key'"},
      {{{"op", "enqueue"}, {"id", "b1"}, {"on_conflict", "replace"}, {"now", 1}}, "needs a 'key'"},
      {{{"op", "enqueue"}, {"id", "b1"}, {"key", "k"}, {"unique_for", 0}, {"now", 1}}, "> 0"},
      {{{"op", "enqueue"}, {"id", "b1"}, {"key", "k"}, {"unique_for", -1}, {"now", 1}},
       "unique_for"},
      {{{"op", "enqueue"}, {"id", "b1"}, {"key", "k"}, {"unique_for", 2e9}, {"now", 1}},
       "unique_for"},
      {{{"op", "enqueue"}, {"id", "b1"}, {"key", "k"}, {"on_conflict", "merge"}, {"now", 1}},
       "skip"},
      {{{"op", "enqueue"}, {"id", "b1"}, {"key", "k"}, {"on_conflict", true}, {"now", 1}},
       "on_conflict"},
      {{{"op", "enqueue_many"},
        {"jobs", {{{"id", "b1"}, {"key", "k"}}, {{"id", "b2"}, {"on_conflict", "skip"}}}},
        {"now", 1}},
       "jobs[1]"},
      {{{"op", "enqueue_and_wait"}, {"id", "b1"}, {"key", "k"}, {"now", 1}}, "no 'key'"},
      {{{"op", "list"}, {"key", ""}, {"now", 1}}, "must not be empty"},
  };
  for (const auto& [request, says] : bad) {
    INFO(request.dump());
    const auto r = raw(d, request);
    CHECK(error_code(r) != "");
    CHECK(r["error"]["message"].get<std::string>().find(says) != std::string::npos);
  }
  Client c(d.endpoint());
  CHECK_FALSE(c.state("b1"));
  CHECK_FALSE(c.state("b2"));
  CHECK(c.list().empty());
}

TEST_CASE("keys: 16 enqueuers racing on 50 keys while 4 workers drain the queue never have two "
          "unfinished jobs of one key at once (a history of replies)") {
  TempDir dir;
  Daemon d(dir, {"--clock", "server"});
  const auto h = fenceq::test::race_keys({d.endpoint()}, "race", 16, 50, 60, 4, 90s);
  CHECK(h.errors == 0);
  INFO("created " << h.created.size() << ", skipped " << h.skipped.size());
  CHECK(h.created.size() + h.skipped.size() == 16 * 60);
  const auto overlaps = fenceq::test::key_overlaps(h);
  INFO((overlaps.empty() ? std::string() : overlaps.front()));
  CHECK(overlaps.empty());
  // Some enqueues did meet a job of their key, and some keys were reused.
  CHECK(h.skipped.size() > 0);
  CHECK(h.created.size() > 50);
  // Every skipped answer named a job of its own key.
  Client c(d.endpoint());
  std::map<std::string, std::string> key_of;
  ListOptions all;
  all.queue = "race";
  all.limit = 1000;
  for (;;) {
    auto page = c.list(all);
    for (const auto& j : page) key_of[j.id] = j.key.value_or("");
    if (page.size() < 1000) break;
    all.after = page.back().id;
  }
  for (const auto& [key, id] : h.skipped) {
    INFO(key << " answered " << id);
    CHECK(key_of[id] == key);
  }
}

TEST_CASE("keys: the history check finds two unfinished jobs of a key and ignores a job whose "
          "reply was read after its complete was sent") {
  fenceq::test::KeyedHistory h;
  h.created = {{"a", "k", 1.0, 5.0}, {"b", "k", 3.0, 6.0}};  // b made while a unfinished
  CHECK(fenceq::test::key_overlaps(h) == std::vector<std::string>{"k: a & b"});
  // c's reply read at 8, after its complete went at 7: it proves nothing, and
  // d (made at 9, after a and b) overlaps none.
  h.created = {{"a", "k", 1.0, 2.0}, {"c", "k", 8.0, 7.0}, {"d", "k", 9.0, 10.0}};
  CHECK(fenceq::test::key_overlaps(h).empty());
  // An overlap with a job earlier than the one just before is found too.
  h.created = {{"a", "k", 1.0, 20.0}, {"b", "k", 2.0, 3.0}, {"c", "k", 4.0, 5.0}};
  CHECK(fenceq::test::key_overlaps(h).size() == 2);
}
