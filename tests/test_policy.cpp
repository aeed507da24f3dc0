// Queue settings, await and periodic jobs (issue 18) against the real
// fenceqd, on SQLite and (the "pg policy: " variants) on PostgreSQL:
// queue_config (pause, max_leased, rate), await, schedule_set/delete/list,
// and the fenceq tool's pause, resume, limit, await and schedule.
#include <catch2/catch.hpp>

#include <fenceq/client.hpp>
#include <fenceq_protocol/codec.hpp>
#include <nlohmann/json.hpp>
#include <zmq.hpp>

#include <atomic>
#include <csignal>
#include <ctime>
#include <functional>
#include <chrono>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "daemon.hpp"
#include "policy.hpp"
#include "probe.hpp"
#include "vectors.hpp"

using fenceq::Client;
using fenceq::EnqueueOptions;
using fenceq::JobStatus;
using fenceq::QueueSettings;
using fenceq::test::Daemon;
using fenceq::test::TempDir;
using fenceq::test::ids_at;
using fenceq::test::in_queue;
using fenceq::test::pack;
using fenceq::test::error_code;
using fenceq::test::raw;
using fenceq::test::tool;
using fenceq::test::utc;
using json = nlohmann::json;
using namespace std::chrono_literals;

namespace {

const std::vector<std::string> kServerClock{"--clock", "server"};

std::optional<fenceq::QueueConfig> config_of(Client& c, const std::string& q) {
  for (const auto& s : c.stats().queues) {
    if (s.queue == q) return s.config;
  }
  return std::nullopt;
}

}  // namespace

// --- queue_config ----------------------------------------------------------

TEST_CASE("queue_config: a paused queue hands out nothing, by claim_next or by id, resume wakes "
          "a parked claim, the settings are stored and shown in stats") {
  TempDir dir;
  Daemon d(dir, kServerClock);
  Client c(d.endpoint());
  REQUIRE(c.enqueue("p1", in_queue("q")));
  REQUIRE(c.enqueue("p2", in_queue("q")));
  CHECK_FALSE(config_of(c, "q"));  // no settings: no keys in stats
  REQUIRE(c.pause("q"));
  auto cfg = config_of(c, "q");
  REQUIRE(cfg);
  CHECK(cfg->paused);
  CHECK(cfg->max_leased == 0);
  CHECK_FALSE(c.claim_next("q", "w", 30));
  CHECK_FALSE(c.claim("p1", "w", 30));
  CHECK(c.claim_next("other", "w", 30) == std::nullopt);  // other queues are not affected

  // A claim parked on the paused queue is served once it resumes.
  std::optional<fenceq::ClaimedJob> got;
  std::thread waiter([&] {
    Client w(d.endpoint(), fenceq::ClientOptions{10s});
    got = w.claim_next("q", "parked", 30, 5);
  });
  std::this_thread::sleep_for(300ms);
  CHECK(c.stats().waiting_claims == 1);
  const auto resumed = fenceq::test::steady_seconds();
  REQUIRE(c.resume("q"));
  waiter.join();
  REQUIRE(got);
  CHECK(got->id == "p1");
  CHECK(fenceq::test::steady_seconds() - resumed < 2.0);
  CHECK(c.claim("p2", "w", 30) == 1);

  // Stored: a restart keeps a pause.
  REQUIRE(c.pause("q"));
  REQUIRE(c.enqueue("p3", in_queue("q")));
  d.stop(SIGTERM);
  d.restart();
  Client c2(d.endpoint());
  REQUIRE(config_of(c2, "q"));
  CHECK(config_of(c2, "q")->paused);
  CHECK_FALSE(c2.claim_next("q", "w", 30));
  // Back to the defaults: the settings go (stats shows no keys again).
  REQUIRE(c2.queue_config("q", QueueSettings{.paused = false}));
  CHECK_FALSE(config_of(c2, "q"));
  CHECK(c2.claim_next("q", "w", 30));
}

TEST_CASE("queue_config: 16 workers on a queue with max_leased 3 never hold more than 3 leases at "
          "once (a history of claims and completes), and parked claims are woken as leases end") {
  TempDir dir;
  Daemon d(dir, kServerClock);
  Client c(d.endpoint());
  REQUIRE(c.queue_config("lim", QueueSettings{.max_leased = 3}));
  constexpr int kJobs = 96;
  for (int i = 0; i < kJobs; ++i) REQUIRE(c.enqueue("m" + std::to_string(i), in_queue("lim")));
  std::atomic<int> errors{0};
  auto leases =
      fenceq::test::race_workers({d.endpoint()}, "lim", 16, kJobs, 10ms, 60s, errors);
  CHECK(errors.load() == 0);
  REQUIRE(leases.size() == kJobs);
  const int most = fenceq::test::most_at_once(leases);
  INFO("most leases at once " << most);
  CHECK(most <= 3);
  CHECK(most >= 2);  // the workers did press against the limit
  // Claim by id is held back too.
  REQUIRE(c.queue_config("lim", QueueSettings{.max_leased = 1}));
  REQUIRE(c.enqueue("x1", in_queue("lim")));
  REQUIRE(c.enqueue("x2", in_queue("lim")));
  REQUIRE(c.claim("x1", "w", 30));
  CHECK_FALSE(c.claim("x2", "w", 30));
  CHECK_FALSE(c.claim_next("lim", "w", 30));
  REQUIRE(c.complete("x1", "w", 1, std::string("ok")));
  CHECK(c.claim("x2", "w", 30) == 1);
}

TEST_CASE("queue_config: a rate of 50 per second is never exceeded in any one-second window of "
          "claims (as the daemon timed them)") {
  TempDir dir;
  Daemon d(dir, kServerClock);
  Client c(d.endpoint());
  REQUIRE(c.queue_config("r", QueueSettings{.rate = 50, .per = 1.0}));
  constexpr int kJobs = 130;
  std::vector<std::string> ids;
  for (int i = 0; i < kJobs; ++i) {
    ids.push_back("r" + std::to_string(i));
    REQUIRE(c.enqueue(ids.back(), in_queue("r")));
  }
  std::atomic<int> errors{0};
  const auto start = fenceq::test::steady_seconds();
  auto leases = fenceq::test::race_workers({d.endpoint()}, "r", 8, kJobs, 0ms, 60s, errors);
  const double took = fenceq::test::steady_seconds() - start;
  CHECK(errors.load() == 0);
  REQUIRE(leases.size() == kJobs);
  const auto times = fenceq::test::claim_times(c, ids, 60);
  REQUIRE(times.size() == kJobs);
  const int most = fenceq::test::most_in_window(times, 1.0);
  INFO("most claims in one second " << most << "; all claimed in " << took << " s");
  CHECK(most <= 50);
  CHECK(most >= 40);  // the limit was reached, not merely never approached
  CHECK(took >= 2.0);  // 130 claims at 50 per second need more than two windows
}

// Issue 26: a claim's `now` can be behind a claim logged before it (on
// PostgreSQL a sidecar reads the clock when its transaction begins, then
// waits for the queue's lock; in client clock mode each request carries its
// own). Such a claim still counts every claim of its window: the claims of
// the window were once pruned by the later claim, and let through.
TEST_CASE("queue_config: a claim whose time is behind a claim logged before it still counts "
          "every claim of its own rate window (client clock)") {
  TempDir dir;
  Daemon d(dir);  // client clock: each claim's `now` is its time
  Client c(d.endpoint());
  REQUIRE(c.queue_config("late", QueueSettings{.rate = 3, .per = 1.0}));
  for (int i = 0; i < 6; ++i) REQUIRE(c.enqueue("l" + std::to_string(i), in_queue("late")));
  auto claim_at = [&](double now) { return c.claim_next("late", "w", 60, 0, now); };
  for (int i = 0; i < 3; ++i) REQUIRE(claim_at(100.0));
  CHECK_FALSE(claim_at(100.5));  // (99.5, 100.5] holds 3
  REQUIRE(claim_at(101.5));      // (100.5, 101.5] holds none
  // (99.9, 100.9] holds the three claims at 100.0: refused, though the
  // claim at 101.5 came first.
  CHECK_FALSE(claim_at(100.9));
  // (100.0, 101.0] holds none of them.
  CHECK(claim_at(101.0));
}

TEST_CASE("queue_config: bad input gets a coded error and changes nothing") {
  TempDir dir;
  Daemon d(dir);
  Client c(d.endpoint());
  REQUIRE(c.queue_config("q", QueueSettings{.max_leased = 2}));
  const json bad[] = {
      {{"op", "queue_config"}},                                      // no queue
      {{"op", "queue_config"}, {"queue", ""}},                       // empty queue
      {{"op", "queue_config"}, {"queue", "q"}, {"paused", 1}},       // not a bool
      {{"op", "queue_config"}, {"queue", "q"}, {"max_leased", -1}},  // negative
      {{"op", "queue_config"}, {"queue", "q"}, {"max_leased", 1.5}},
      {{"op", "queue_config"}, {"queue", "q"}, {"rate", 100001}},  // over kMaxRate
      {{"op", "queue_config"}, {"queue", "q"}, {"rate", 5}, {"per", 0}},
      {{"op", "queue_config"}, {"queue", "q"}, {"rate", 5}, {"per", -1}},
      {{"op", "queue_config"}, {"queue", "q"}, {"rate", 5}, {"per", 86401}},
      {{"op", "queue_config"}, {"queue", "q"}, {"rate", 5}, {"per", "1"}},
  };
  for (const auto& req : bad) {
    INFO(req.dump());
    auto r = raw(d, req);
    const auto code = error_code(r);
    CHECK((code == "bad_request" || code == "invalid_argument"));
  }
  auto cfg = config_of(c, "q");
  REQUIRE(cfg);
  CHECK(cfg->max_leased == 2);
  CHECK(cfg->rate == 0);
  CHECK_FALSE(cfg->paused);
}

// --- await -------------------------------------------------------------------

TEST_CASE("await: woken by complete, by a fail that leaves the job dead, and by cancel, nil when "
          "the wait passes, an unknown id is invalid_argument") {
  TempDir dir;
  Daemon d(dir, kServerClock);
  Client c(d.endpoint());
  EnqueueOptions once = in_queue("a");
  once.max_attempts = 1;
  for (const char* id : {"done", "dead", "gone", "slow"}) REQUIRE(c.enqueue(id, once));

  struct Case {
    std::string id;
    std::function<void(Client&)> finish;
    std::string state;
  };
  const std::vector<Case> cases{
      {"done", [](Client& w) { REQUIRE(w.complete("done", "w", 1, std::string("42"))); }, "done"},
      {"dead", [](Client& w) { REQUIRE(w.fail("dead", "w", 1, "boom")); }, "dead"},
      {"gone", [](Client& w) { REQUIRE(w.cancel("gone")); }, "cancelled"},
  };
  for (const auto& k : cases) {
    INFO(k.id);
    REQUIRE(c.claim(k.id, "w", 60) == 1);
    std::optional<fenceq::JobDetail> got;
    double answered = 0;
    std::thread waiter([&] {
      Client a(d.endpoint(), fenceq::ClientOptions{10s});
      got = a.await_job(k.id, 5);
      answered = fenceq::test::steady_seconds();
    });
    std::this_thread::sleep_for(300ms);
    const double finishing = fenceq::test::steady_seconds();
    k.finish(c);
    const double finished = fenceq::test::steady_seconds();
    waiter.join();
    REQUIRE(got);
    CHECK(fenceq::protocol::status_name(got->info.status) == k.state);
    // Answered once the write was made (times from this process's clock;
    // the waiter's own start can lag on a busy machine, so it is not one).
    CHECK(answered >= finishing);
    CHECK(answered - finished < 2.0);  // woken by the write, not by a sweep or the wait's end
    if (k.id == "done") CHECK(got->result == "42");
    if (k.id == "dead") CHECK(got->info.error == "boom");
  }
  // Finished already: answered at once, also with no wait.
  auto now = c.await_job("done", 0);
  REQUIRE(now);
  CHECK(now->result == "42");
  // Not finished: nil once the wait passes.
  const auto t0 = fenceq::test::steady_seconds();
  CHECK_FALSE(c.await_job("slow", 0.5));
  const auto waited = fenceq::test::steady_seconds() - t0;
  CHECK(waited >= 0.45);
  CHECK(waited < 3.0);
  CHECK_FALSE(c.await_job("slow", 0));
  try {
    c.await_job("never-enqueued", 1);
    FAIL("await of an unknown id did not throw");
  } catch (const fenceq::Error& e) {
    CHECK(e.code() == "invalid_argument");
  }
  // enqueue_and_wait: enqueue, then await (nil here: nobody works the queue).
  CHECK_FALSE(c.enqueue_and_wait("ew", in_queue("a"), 0.2));
  CHECK(c.job("ew"));
}

TEST_CASE("enqueue_and_wait: one request enqueues the job and answers its record once a worker "
          "completed it, and a job finished already at once") {
  TempDir dir;
  Daemon d(dir, kServerClock);
  Client c(d.endpoint());
  std::optional<fenceq::JobDetail> got;
  std::thread producer([&] {
    Client p(d.endpoint(), fenceq::ClientOptions{10s});
    EnqueueOptions o = in_queue("rpc", "question");
    got = p.enqueue_and_wait("ask-1", o, 10);
  });
  // The worker takes it as any job, and completes it.
  std::optional<fenceq::ClaimedJob> job;
  for (int i = 0; i < 100 && !job; ++i) job = c.claim_next("rpc", "w", 30, 0.1);
  REQUIRE(job);
  CHECK(job->id == "ask-1");
  REQUIRE(c.complete("ask-1", "w", job->fence, std::string("answer")));
  producer.join();
  REQUIRE(got);
  CHECK(got->result == "answer");
  CHECK(fenceq::protocol::status_name(got->info.status) == "done");
  // Finished already: answered at once, the enqueue changing nothing.
  auto again = c.enqueue_and_wait("ask-1", in_queue("rpc", "other"), 0);
  REQUIRE(again);
  CHECK(again->result == "answer");
  CHECK(again->payload->bytes == "question");
  // Refused as enqueue refuses: nothing enqueued.
  CHECK(error_code(raw(d, {{"op", "enqueue_and_wait"}, {"id", "x"}, {"queue", ""}})) ==
        "invalid_argument");
  CHECK_FALSE(c.job("x"));
}

TEST_CASE("await: bad input gets a coded error") {
  TempDir dir;
  Daemon d(dir);
  Client c(d.endpoint());
  REQUIRE(c.enqueue("j", in_queue("q")));
  const json bad[] = {
      {{"op", "await"}},
      {{"op", "await"}, {"id", 5}},
      {{"op", "await"}, {"id", "j"}, {"wait", -1}},
      {{"op", "await"}, {"id", "j"}, {"wait", 3601}},
      {{"op", "await"}, {"id", "j"}, {"wait", "1"}},
  };
  for (const auto& req : bad) {
    INFO(req.dump());
    const auto code = error_code(raw(d, req));
    CHECK((code == "bad_request" || code == "invalid_argument"));
  }
}

// --- periodic jobs -------------------------------------------------------------

TEST_CASE("schedule: each tick is enqueued once, through a kill -9 and a restart, after downtime "
          "only the latest missed tick") {
  TempDir dir;
  Daemon d(dir);  // client clock: the test moves time with each request's `now`
  Client c(d.endpoint());
  const double t0 = utc(2026, 6, 1, 10, 2);
  REQUIRE(raw(d, {{"op", "schedule_set"}, {"name", "five"}, {"cron", "*/5 * * * *"},
                  {"queue", "s"}, {"payload", "tick"}, {"now", t0}})["ok"] == true);
  CHECK(ids_at(d, "s", t0 + 60).empty());  // 10:03: no tick yet
  // 10:05:30: the 10:05 tick.
  auto ids = ids_at(d, "s", utc(2026, 6, 1, 10, 5) + 30);
  REQUIRE(ids == std::vector<std::string>{"five@2026-06-01T10:05Z"});
  auto job = c.job("five@2026-06-01T10:05Z");
  REQUIRE(job);
  CHECK(job->payload->bytes == "tick");
  // kill -9, and the same time again: nothing new.
  d.kill9();
  d.restart();
  CHECK(ids_at(d, "s", utc(2026, 6, 1, 10, 6)).size() == 1);
  // Down from 10:06 to 11:01 (11 ticks missed): only 11:00 is enqueued.
  d.stop(SIGTERM);
  d.restart();
  ids = ids_at(d, "s", utc(2026, 6, 1, 11, 1));
  CHECK(ids == std::vector<std::string>{"five@2026-06-01T10:05Z", "five@2026-06-01T11:00Z"});
  // A purged tick's job is not enqueued again: the schedule remembers its last tick.
  Client c2(d.endpoint());
  auto list = c2.schedule_list();
  REQUIRE(list.size() == 1);
  CHECK(list[0].name == "five");
  REQUIRE(list[0].last);
  CHECK(*list[0].last == utc(2026, 6, 1, 11, 0));
  CHECK(list[0].next == utc(2026, 6, 1, 11, 5));
  CHECK(c2.schedule_delete("five"));
  CHECK_FALSE(c2.schedule_delete("five"));
  CHECK(ids_at(d, "s", utc(2026, 6, 1, 12, 0)).size() == 2);
}

TEST_CASE("schedule: a daily tick in Europe/Berlin across both DST changes of 2026: skipped "
          "where the local time does not exist, once where it occurs twice") {
  TempDir dir;
  Daemon d(dir);
  // 02:30 local every day. 2026-03-29 02:00 CET -> 03:00 CEST: no 02:30.
  // 2026-10-25 03:00 CEST -> 02:00 CET: 02:30 twice, at 00:30 and 01:30 UTC.
  REQUIRE(raw(d, {{"op", "schedule_set"}, {"name", "b"}, {"cron", "30 2 * * *"},
                  {"tz", "Europe/Berlin"}, {"queue", "dst"}, {"now", utc(2026, 3, 27, 12, 0)}})
              ["ok"] == true);
  // Hour by hour through three days around each change.
  std::vector<std::string> ids;
  for (double t = utc(2026, 3, 27, 12, 0); t <= utc(2026, 3, 30, 12, 0); t += 3600) {
    ids = ids_at(d, "dst", t);
  }
  CHECK(ids == std::vector<std::string>{"b@2026-03-28T01:30Z", "b@2026-03-30T00:30Z"});
  for (double t = utc(2026, 10, 23, 12, 0); t <= utc(2026, 10, 26, 12, 0); t += 1800) {
    ids = ids_at(d, "dst", t);
  }
  // The jump from March to 2026-10-23 12:00 UTC enqueued that morning's tick
  // alone (the latest one missed).
  CHECK(ids == std::vector<std::string>{"b@2026-03-28T01:30Z", "b@2026-03-30T00:30Z",
                                        "b@2026-10-23T00:30Z", "b@2026-10-24T00:30Z",
                                        "b@2026-10-25T00:30Z", "b@2026-10-26T01:30Z"});
}

TEST_CASE("schedule: bad input gets a coded error and changes nothing") {
  TempDir dir;
  Daemon d(dir);
  Client c(d.endpoint());
  const json bad[] = {
      {{"op", "schedule_set"}, {"cron", "* * * * *"}},                 // no name
      {{"op", "schedule_set"}, {"name", ""}, {"cron", "* * * * *"}},   // empty name
      {{"op", "schedule_set"}, {"name", std::string(201, 'n')}, {"cron", "* * * * *"}},
      {{"op", "schedule_set"}, {"name", "n"}},                          // no cron
      {{"op", "schedule_set"}, {"name", "n"}, {"cron", "* * * *"}},     // 4 fields
      {{"op", "schedule_set"}, {"name", "n"}, {"cron", "61 * * * *"}},  // out of range
      {{"op", "schedule_set"}, {"name", "n"}, {"cron", "*/0 * * * *"}},
      {{"op", "schedule_set"}, {"name", "n"}, {"cron", "@reboot"}},
      {{"op", "schedule_set"}, {"name", "n"}, {"cron", "* * * * *"}, {"tz", "Mars/Base"}},
      {{"op", "schedule_set"}, {"name", "n"}, {"cron", "* * * * *"}, {"tz", ""}},  // leave it out
      {{"op", "schedule_set"}, {"name", "n"}, {"cron", "* * * * *"}, {"queue", ""}},
      {{"op", "schedule_set"}, {"name", "n"}, {"cron", "* * * * *"}, {"priority", "high"}},
      {{"op", "schedule_set"}, {"name", "n"}, {"cron", std::string(300, '*')}},
      {{"op", "schedule_delete"}},
      {{"op", "schedule_delete"}, {"name", 3}},
  };
  for (const auto& req : bad) {
    INFO(req.dump().substr(0, 200));
    const auto code = error_code(raw(d, req));
    CHECK((code == "bad_request" || code == "invalid_argument"));
  }
  CHECK(c.schedule_list().empty());
  auto r = raw(d, {{"op", "schedule_set"}, {"name", "n"}, {"cron", "61 * * * *"}});
  CHECK(r["error"]["message"].get<std::string>().find("minute") != std::string::npos);
}

// --- the tool ------------------------------------------------------------------

TEST_CASE("tool: pause, resume, limit, await and schedule set|list|delete") {
  TempDir dir;
  Daemon d(dir, kServerClock);
  Client c(d.endpoint());
  REQUIRE(c.enqueue("t1", in_queue("tq")));
  CHECK(tool(d, {"pause", "tq"}).status == 0);
  CHECK(tool(d, {"claim-next", "tq", "w", "30"}).status == 1);
  CHECK(tool(d, {"resume", "tq"}).status == 0);
  CHECK(tool(d, {"limit", "tq", "--max-leased", "1", "--rate", "10", "--per", "2"}).status == 0);
  auto cfg = config_of(c, "tq");
  REQUIRE(cfg);
  CHECK(cfg->max_leased == 1);
  CHECK(cfg->rate == 10);
  CHECK(cfg->per == 2.0);
  auto stats = json::parse(tool(d, {"stats"}).out);
  CHECK(stats["queues"]["tq"]["max_leased"] == 1);
  CHECK(tool(d, {"limit", "tq"}).status == 2);  // nothing to set: a usage error

  auto claimed = tool(d, {"claim-next", "tq", "w", "30"});
  REQUIRE(claimed.status == 0);
  CHECK(tool(d, {"await", "t1", "--wait", "0.2"}).status == 1);  // null: not finished
  REQUIRE(c.complete("t1", "w", 1, std::string("r1")));
  auto awaited = tool(d, {"await", "t1"});
  CHECK(awaited.status == 0);
  CHECK(json::parse(awaited.out)["result"] == "r1");

  CHECK(tool(d, {"schedule", "set", "nightly", "0 3 * * *", "--tz", "Europe/Berlin", "-q", "tq",
                 "--payload", "p"})
            .status == 0);
  auto bad = tool(d, {"schedule", "set", "broken", "0 25 * * *"});
  CHECK(bad.status == 2);
  CHECK(bad.out.find("hour") != std::string::npos);
  auto listed = tool(d, {"schedule", "list"});
  REQUIRE(listed.status == 0);
  auto row = json::parse(listed.out);
  CHECK(row["name"] == "nightly");
  CHECK(row["tz"] == "Europe/Berlin");
  CHECK(row["queue"] == "tq");
  CHECK(row["payload"] == "p");
  CHECK(row["last"].is_null());
  CHECK(row["next"].get<double>() > 0);
  CHECK(tool(d, {"schedule", "delete", "nightly"}).status == 0);
  CHECK(tool(d, {"schedule", "delete", "nightly"}).status == 1);
  CHECK(tool(d, {"schedule", "list"}).out.empty());
}
