// The work queue (payloads, queues, priorities, delays, retries, dead jobs,
// long-poll, operator ops, metrics) against the real fenceqd; `fenceq work`
// is tested with the tool (test_tool_work.cpp).
// Every path that changes a job keeps the contract: owner + fence + lease are
// checked, and a fence never goes back (C1.2).
#include <catch2/catch.hpp>

#include <signal.h>
#include <sqlite3.h>

#include <fenceq/client.hpp>
#include <nlohmann/json.hpp>
#include <zmq.hpp>

#include <chrono>
#include <optional>
#include <set>
#include <thread>

#include "daemon.hpp"
#include "store_calls.hpp"
#include "probe.hpp"
#include "storage/sqlite/sqlite_store.hpp"

using fenceq::Client;
using fenceq::ClientOptions;
using fenceq::EnqueueOptions;
using fenceq::JobStatus;
using fenceq::Payload;
using fenceq::test::Daemon;
using fenceq::test::in_queue;
using fenceq::test::listed;
using fenceq::test::TempDir;
using namespace std::chrono_literals;

TEST_CASE("queue: claim_next takes the highest priority first, enqueue order within one") {
  TempDir dir;
  Daemon d(dir);
  Client c(d.endpoint());
  // Enqueued out of priority order, across two queues.
  REQUIRE(c.enqueue("low-1", in_queue("mail", "l1", -5)));
  REQUIRE(c.enqueue("mid-1", in_queue("mail", "m1", 3)));
  REQUIRE(c.enqueue("other", in_queue("sms", "o", 100)));
  REQUIRE(c.enqueue("mid-2", in_queue("mail", "m2", 3)));
  REQUIRE(c.enqueue("top", in_queue("mail", "t", 9)));
  REQUIRE(c.enqueue("mid-3", in_queue("mail", "m3", 3)));
  std::vector<std::string> order;
  while (auto job = c.claim_next("mail", "w", 60, 0, 10.0)) {
    CHECK(job->fence == 1);
    CHECK(job->attempts == 1);
    order.push_back(job->id);
  }
  CHECK(order == std::vector<std::string>{"top", "mid-1", "mid-2", "mid-3", "low-1"});
  CHECK(c.claim_next("sms", "w", 60, 0, 10.0)->id == "other");
  CHECK_FALSE(c.claim_next("empty-queue", "w", 60, 0, 10.0));
  // C3.1: a repeated enqueue (even with other options) changes nothing.
  CHECK_FALSE(c.enqueue("top", in_queue("sms", "changed", -1)));
  CHECK(listed(c, "top").queue == "mail");
}

TEST_CASE("queue: payloads come back as sent, str as text and bin as bytes") {
  TempDir dir;
  Daemon d(dir);
  Client c(d.endpoint());
  std::string bytes("\x00\xff\x10 binary\x80", 11);
  EnqueueOptions bin = in_queue("p");
  bin.payload = Payload{bytes, true};
  REQUIRE(c.enqueue("b", bin));
  REQUIRE(c.enqueue("t", in_queue("p", "héllo ✓")));
  REQUIRE(c.enqueue("n", in_queue("p")));
  auto b = c.claim_next("p", "w", 5, 0, 1.0);
  REQUIRE(b);
  REQUIRE(b->payload);
  CHECK(b->payload->binary);
  CHECK(b->payload->bytes == bytes);
  auto t = c.claim_next("p", "w", 5, 0, 1.0);
  REQUIRE(t->payload);
  CHECK_FALSE(t->payload->binary);
  CHECK(t->payload->bytes == "héllo ✓");
  CHECK_FALSE(c.claim_next("p", "w", 5, 0, 1.0)->payload);
  // Bounded: a payload over 256 KiB is refused and nothing is created.
  try {
    c.enqueue("big", in_queue("p", std::string(256 * 1024 + 1, 'x')));
    FAIL("an oversized payload was accepted");
  } catch (const fenceq::Error& e) {
    CHECK(e.code() == "invalid_argument");
  }
  CHECK_FALSE(c.state("big"));
}

TEST_CASE("queue: a delayed job cannot be claimed, by id or next, before its delay ends") {
  TempDir dir;
  Daemon d(dir);
  Client c(d.endpoint());
  EnqueueOptions o = in_queue("later");
  o.delay = 30;
  o.now = 1000.0;
  REQUIRE(c.enqueue("d", o));
  CHECK(listed(c, "d").status == JobStatus::delayed);
  CHECK_FALSE(c.claim_next("later", "w", 5, 0, 1029.9));
  CHECK_FALSE(c.claim("d", "w", 5, 1029.9));
  CHECK(c.claim_next("later", "w", 5, 0, 1030.0)->id == "d");
}

TEST_CASE("queue: fail keeps the error, ends the lease, and reopens the job after retry_in") {
  TempDir dir;
  Daemon d(dir);
  Client c(d.endpoint());
  REQUIRE(c.enqueue("f", in_queue("q")));
  auto job = c.claim_next("q", "a", 10, 0, 100.0);
  REQUIRE(job);
  // Refusals: wrong owner, wrong fence, an expired lease.
  CHECK_FALSE(c.fail("f", "b", job->fence, "x", 1.0, 101.0));
  CHECK_FALSE(c.fail("f", "a", job->fence + 1, "x", 1.0, 101.0));
  CHECK_FALSE(c.fail("f", "a", job->fence, "x", 1.0, 110.0));  // now == until
  // The lease is current at 105.
  CHECK(c.fail("f", "a", job->fence, "disk full", 7.5, 105.0));
  auto st = listed(c, "f");
  CHECK(st.error == "disk full");
  CHECK(!st.owner);
  CHECK(st.not_before == Approx(112.5));
  // The old lease can no longer do anything.
  CHECK_FALSE(c.complete("f", "a", job->fence, "late", 106.0));
  CHECK_FALSE(c.claim_next("q", "b", 10, 0, 112.4));
  auto again = c.claim_next("q", "b", 10, 0, 112.5);
  REQUIRE(again);
  CHECK(again->fence == job->fence + 1);
  CHECK(again->attempts == 2);
  // Default backoff: 2^(attempts-1) seconds, here 2 s after the second attempt.
  CHECK(c.fail("f", "b", again->fence, "again", std::nullopt, 113.0));
  CHECK(listed(c, "f").not_before == Approx(115.0));
}

TEST_CASE("queue: max_attempts left out is 25 (the job then dead), 0 sent as no limit") {
  // issue 30: a job that failed every time was retried without end by default.
  TempDir dir;
  Daemon d(dir);
  Client c(d.endpoint());
  REQUIRE(c.enqueue("dflt", in_queue("ma")));
  auto forever = in_queue("mb");
  forever.max_attempts = 0;
  REQUIRE(c.enqueue("forever", forever));
  CHECK(listed(c, "dflt").max_attempts == fenceq::kDefaultMaxAttempts);
  CHECK(listed(c, "forever").max_attempts == 0);
  double t = 100;
  for (int attempt = 1; attempt <= 26; ++attempt) {
    for (const char* q : {"ma", "mb"}) {
      auto job = c.claim_next(q, "w", 10, 0, t);
      if (std::string(q) == "ma" && attempt > fenceq::kDefaultMaxAttempts) {
        CHECK_FALSE(job);  // its 25 attempts are used up: dead
        continue;
      }
      REQUIRE(job);
      CHECK(job->attempts == attempt);
      REQUIRE(c.fail(job->id, "w", job->fence, "always fails", 0.0, t + 1));
    }
    t += 2;
  }
  CHECK(listed(c, "dflt").status == JobStatus::dead);
  CHECK(listed(c, "forever").status == JobStatus::ready);
}

TEST_CASE("queue: a job claimed again and again without max_attempts is logged from its 10th attempt") {
  // issue 30: one bad payload retried at once was claimed 59,856 times in 10
  // minutes and the daemon said nothing.
  TempDir dir;
  Daemon d(dir);
  Client c(d.endpoint());
  REQUIRE(c.enqueue("bad-payload", in_queue("rq")));
  const std::string said = "claim(s) of jobs on their 10th attempt or later";
  double t = 100;
  for (int attempt = 1; attempt <= 12; ++attempt) {
    auto job = c.claim_next("rq", "w", 10, 0, t);
    REQUIRE(job);
    CHECK(job->attempts == attempt);
    if (attempt == 9) CHECK(d.log().find(said) == std::string::npos);
    REQUIRE(c.fail("bad-payload", "w", job->fence, "cannot decode", 0.0, t + 1));
    t += 2;
  }
  // The first such claim is logged at once, the next ones counted for the
  // next line (at most one a minute).
  const auto log = d.log();
  CHECK(log.find("1 " + said) != std::string::npos);
  CHECK(log.find("job 'bad-payload' of queue 'rq' (attempt 10)") != std::string::npos);
  CHECK(log.find("max_attempts") != std::string::npos);
  CHECK(log.find("(attempt 11)") == std::string::npos);
}

TEST_CASE("queue: max_attempts used up makes a job dead, retry revives it with a larger fence") {
  TempDir dir;
  Daemon d(dir);
  Client c(d.endpoint());
  EnqueueOptions o = in_queue("q");
  o.max_attempts = 2;
  REQUIRE(c.enqueue("m", o));
  auto a1 = c.claim_next("q", "w", 10, 0, 0.0);
  REQUIRE(c.fail("m", "w", a1->fence, "first", 0.0, 1.0));
  auto a2 = c.claim_next("q", "w", 10, 0, 2.0);
  REQUIRE(a2);
  CHECK(a2->attempts == 2);
  REQUIRE(c.fail("m", "w", a2->fence, "second", 0.0, 3.0));
  CHECK(listed(c, "m").status == JobStatus::dead);
  CHECK(listed(c, "m").error == "second");
  CHECK_FALSE(c.claim_next("q", "w", 10, 0, 100.0));
  CHECK_FALSE(c.claim("m", "w", 10, 100.0));
  CHECK(c.stats().queues.at(0).dead == 1);

  CHECK(c.retry("m"));
  CHECK_FALSE(c.retry("m"));  // not dead any more
  auto a3 = c.claim_next("q", "w", 10, 0, 101.0);
  REQUIRE(a3);
  CHECK(a3->fence == 3);  // the fence continued through death and retry
  CHECK(a3->attempts == 1);

  // A last attempt whose lease expires without a complete makes the job dead too.
  EnqueueOptions once = in_queue("q");
  once.max_attempts = 1;
  REQUIRE(c.enqueue("x", once));
  auto x = c.claim("x", "w", 5, 200.0);
  REQUIRE(x == 1);
  CHECK(listed(c, "x").status == JobStatus::leased);
  CHECK_FALSE(c.claim("x", "v", 5, 205.0));  // lease ended, but no attempt left
  CHECK(listed(c, "x").status == JobStatus::dead);
  CHECK(c.retry("x"));
  CHECK(c.claim("x", "v", 5, 206.0) == 2);
}

TEST_CASE("queue: check answers whether a lease is current and changes nothing") {
  TempDir dir;
  Daemon d(dir);
  Client c(d.endpoint());
  REQUIRE(c.enqueue("k"));
  auto f = c.claim("k", "o", 10, 50.0);
  CHECK(c.check("k", "o", *f, 55.0));
  CHECK_FALSE(c.check("k", "o", *f + 1, 55.0));
  CHECK_FALSE(c.check("k", "p", *f, 55.0));
  CHECK_FALSE(c.check("k", "o", *f, 60.0));  // now == until: expired
  CHECK_FALSE(c.check("missing", "o", 1, 55.0));
  CHECK(c.state("k")->until == 60.0);
  REQUIRE(c.complete("k", "o", *f, "r", 59.0));
  CHECK_FALSE(c.check("k", "o", *f, 59.5));  // done: no lease is current
}

TEST_CASE("queue: purge removes finished jobs, a purged id enqueued again keeps its fence") {
  TempDir dir;
  Daemon d(dir);
  Client c(d.endpoint());
  REQUIRE(c.enqueue("old", in_queue("q")));
  REQUIRE(c.enqueue("open", in_queue("q")));
  for (int i = 0; i < 3; ++i) {  // fence 3 through fails
    auto j = c.claim("old", "w", 10, 10.0 * i);
    REQUIRE(j == i + 1);
    if (i < 2) REQUIRE(c.fail("old", "w", *j, "e", 0.0, 10.0 * i + 1));
  }
  REQUIRE(c.complete("old", "w", 3, "done", 25.0));
  CHECK(c.purge(100, std::string("q")) == 0);  // finished at 25: not old enough at 25
  EnqueueOptions later = in_queue("q");
  later.now = 200.0;
  REQUIRE(c.enqueue("tick", later));  // moves the client clock to 200
  CHECK(c.purge(100, std::string("other-queue")) == 0);
  CHECK(c.purge(100, std::string("q")) == 1);
  CHECK_FALSE(c.state("old"));
  CHECK(c.state("open"));  // not finished: kept
  // C1.2: the id comes back with its fence, never from 0.
  REQUIRE(c.enqueue("old", in_queue("q")));
  CHECK(c.state("old")->fence == 3);
  CHECK(c.claim("old", "w", 10, 300.0) == 4);
}

TEST_CASE("queue: list filters by queue and state and pages by id, stats counts them") {
  TempDir dir;
  Daemon d(dir);
  Client c(d.endpoint());
  for (int i = 0; i < 25; ++i) {
    char id[16];
    std::snprintf(id, sizeof id, "j%02d", i);
    REQUIRE(c.enqueue(id, in_queue(i % 2 ? "odd" : "even")));
  }
  REQUIRE(c.claim("j00", "w", 100, 1.0));
  REQUIRE(c.complete("j00", "w", 1, "r", 2.0));
  REQUIRE(c.claim("j02", "w", 100, 2.0));
  fenceq::ListOptions lo;
  lo.queue = "even";
  lo.limit = 5;
  std::vector<std::string> seen;
  for (int page = 0; page < 10; ++page) {
    auto jobs = c.list(lo);
    if (jobs.empty()) break;
    CHECK(jobs.size() <= 5);
    for (const auto& j : jobs) {
      CHECK(j.queue == "even");
      seen.push_back(j.id);
    }
    lo.after = jobs.back().id;
  }
  CHECK(seen.size() == 13);
  CHECK(std::is_sorted(seen.begin(), seen.end()));
  fenceq::ListOptions leased;
  leased.status = JobStatus::leased;
  auto l = c.list(leased);
  REQUIRE(l.size() == 1);
  CHECK(l[0].id == "j02");
  CHECK(l[0].owner == "w");

  auto st = c.stats();
  REQUIRE(st.queues.size() == 2);
  const auto& even = st.queues[0].queue == "even" ? st.queues[0] : st.queues[1];
  const auto& odd = st.queues[0].queue == "odd" ? st.queues[0] : st.queues[1];
  CHECK(even.done == 1);
  CHECK(even.leased == 1);
  CHECK(even.ready == 11);
  CHECK(odd.ready == 12);
  CHECK(st.requests > 25);
  CHECK(st.commits > 0);
  CHECK(st.mean_batch >= 1.0);
  CHECK(st.uptime > 0);
}

TEST_CASE("long-poll: a waiting claim_next is answered by another client's enqueue") {
  TempDir dir;
  Daemon d(dir, {"--clock", "server"});
  Client waiter(d.endpoint()), producer(d.endpoint());
  std::optional<fenceq::ClaimedJob> got;
  auto t0 = std::chrono::steady_clock::now();
  std::thread t([&] { got = waiter.claim_next("lp", "w", 30, 10); });
  std::this_thread::sleep_for(300ms);
  CHECK(producer.stats().waiting_claims == 1);
  REQUIRE(producer.enqueue("hello", in_queue("lp", "payload")));
  t.join();
  auto took = std::chrono::steady_clock::now() - t0;
  REQUIRE(got);
  CHECK(got->id == "hello");
  CHECK(got->payload->bytes == "payload");
  CHECK(took < 3s);  // answered by the enqueue, not by the end of the 10 s wait
  CHECK(producer.state("hello")->owner == "w");
}

TEST_CASE("long-poll: answered when a lease expires, and with nil when the wait ends") {
  TempDir dir;
  Daemon d(dir, {"--clock", "server"});
  Client a(d.endpoint()), b(d.endpoint());
  REQUIRE(a.enqueue("e", in_queue("lp")));
  auto first = a.claim_next("lp", "a", 0.5);  // a stalls; its lease ends in 0.5 s
  REQUIRE(first);
  auto t0 = std::chrono::steady_clock::now();
  auto second = b.claim_next("lp", "b", 30, 5);
  auto took = std::chrono::steady_clock::now() - t0;
  REQUIRE(second);
  CHECK(second->id == "e");
  CHECK(second->fence == first->fence + 1);
  CHECK(took >= 300ms);
  CHECK(took < 3s);
  CHECK_FALSE(a.complete("e", "a", first->fence, "late"));

  t0 = std::chrono::steady_clock::now();
  CHECK_FALSE(b.claim_next("nothing-here", "b", 30, 0.4));
  took = std::chrono::steady_clock::now() - t0;
  CHECK(took >= 350ms);
  CHECK(took < 3s);
}

TEST_CASE("long-poll: 100 parked waiters get exactly one job each, first come first served") {
  TempDir dir;
  Daemon d(dir, {"--clock", "server"});
  constexpr int kWaiters = 100;
  std::vector<std::optional<fenceq::ClaimedJob>> got(kWaiters);
  std::vector<std::thread> threads;
  for (int i = 0; i < kWaiters; ++i) {
    threads.emplace_back([&, i] {
      Client c(d.endpoint(), ClientOptions{20s});
      got[i] = c.claim_next("many", "w" + std::to_string(i), 60, 15);
    });
  }
  Client producer(d.endpoint());
  for (int tries = 0; tries < 100 && producer.stats().waiting_claims < kWaiters; ++tries) {
    std::this_thread::sleep_for(50ms);
  }
  REQUIRE(producer.stats().waiting_claims == kWaiters);
  for (int i = 0; i < kWaiters; ++i) {
    REQUIRE(producer.enqueue("job-" + std::to_string(i), in_queue("many")));
  }
  for (auto& t : threads) t.join();
  std::set<std::string> ids;
  for (int i = 0; i < kWaiters; ++i) {
    REQUIRE(got[i]);
    CHECK(got[i]->fence == 1);
    ids.insert(got[i]->id);
    CHECK(producer.state(got[i]->id)->owner == "w" + std::to_string(i));
  }
  CHECK(ids.size() == kWaiters);
  CHECK(producer.stats().waiting_claims == 0);
}

TEST_CASE("long-poll: parked claims are answered unavailable when the daemon stops") {
  TempDir dir;
  Daemon d(dir, {"--clock", "server"});
  std::string code;
  std::thread t([&] {
    Client c(d.endpoint(), ClientOptions{10s});
    try {
      c.claim_next("q", "w", 30, 20);
      code = "answered";
    } catch (const fenceq::Error& e) {
      code = e.code();
    }
  });
  std::this_thread::sleep_for(300ms);
  CHECK(d.stop(SIGTERM) == 0);
  t.join();
  CHECK(code == "unavailable");
}

TEST_CASE("queue: claim_next finds the next job through the jobs_next index, never a scan",
          "[sqlite]") {
  TempDir dir;
  fenceq::daemon::SqliteStore s(dir.file("plan.db"), fenceq::daemon::SyncMode::off);
  s.begin();
  REQUIRE(sqlite3_exec(s.raw(),
                       "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n "
                       "WHERE i < 20000) INSERT INTO jobs(id, queue, seq) "
                       "SELECT 'j' || i, 'q' || (i % 4), i FROM n",
                       nullptr, nullptr, nullptr) == SQLITE_OK);
  s.commit();
  REQUIRE(sqlite3_exec(s.raw(), "ANALYZE", nullptr, nullptr, nullptr) == SQLITE_OK);
  auto plan = s.claim_next_plan();
  INFO(plan);
  CHECK(plan.find("USING INDEX jobs_next") != std::string::npos);
  CHECK(plan.find("SCAN jobs") == std::string::npos);
  CHECK(plan.find("TEMP B-TREE") == std::string::npos);  // no sort: the index is in order
  // Past the queue's blocked jobs by a seek (schema 17), not one by one.
  CHECK(plan.find("jobs_next (queue=? AND <expr>=?)") != std::string::npos);
  // A claim_next of one job picks it the same way, with no temporary table.
  const auto pick = s.pick_next_plan();
  INFO(pick);
  CHECK(pick.find("USING INDEX jobs_next") != std::string::npos);
  CHECK(pick.find("SCAN jobs") == std::string::npos);
  CHECK(pick.find("TEMP B-TREE") == std::string::npos);
  CHECK(pick.find("jobs_next (queue=? AND <expr>=?)") != std::string::npos);
  s.begin();
  auto job = claim_next(s, "q2", "w", 1.0, 5.0);
  s.commit();
  REQUIRE(job);
  CHECK(job->id == "j2");
}

TEST_CASE("queue: a database of the first schema is upgraded in place, rows and fences kept",
          "[sqlite]") {
  TempDir dir;
  const auto path = dir.file("fenceq.db");  // where Daemon puts its database
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
  REQUIRE(sqlite3_exec(db,
                       "CREATE TABLE jobs(id TEXT PRIMARY KEY, owner TEXT, until REAL NOT NULL "
                       "DEFAULT 0, fence INTEGER NOT NULL DEFAULT 0, result TEXT, done INTEGER "
                       "NOT NULL DEFAULT 0);"
                       "INSERT INTO jobs VALUES('seed', 'w', 50.0, 4, NULL, 0);"
                       "INSERT INTO jobs VALUES('fin', 'w', 9.0, 2, 'ok', 1);",
                       nullptr, nullptr, nullptr) == SQLITE_OK);
  sqlite3_close(db);
  Daemon d(dir);
  Client c(d.endpoint());
  auto seed = c.state("seed");
  REQUIRE(seed);
  CHECK(seed->fence == 4);
  CHECK(seed->owner == "w");
  CHECK(c.claim("seed", "v", 5, 50.0) == 5);
  CHECK(c.state("fin")->result == "ok");
  CHECK(listed(c, "seed").queue == "default");
}

TEST_CASE("metrics: the Prometheus text from the op and scraped over HTTP") {
  TempDir dir;
  // Port 0: the kernel's choice, read back from the daemon's log (a port
  // picked free before the daemon binds it can be taken by then).
  Daemon d(dir, {"--clock", "server", "--metrics-listen", "127.0.0.1:0"});
  const int port = fenceq::test::http_port(d);
  REQUIRE(port > 0);
  Client c(d.endpoint());
  REQUIRE(c.enqueue("m1", in_queue("mq")));
  REQUIRE(c.enqueue("m2", in_queue("mq")));
  REQUIRE(c.claim_next("mq", "w", 30));
  auto text = c.metrics();
  CHECK(text.find("fenceq_jobs{queue=\"mq\",state=\"ready\"} 1\n") != std::string::npos);
  CHECK(text.find("fenceq_jobs{queue=\"mq\",state=\"leased\"} 1\n") != std::string::npos);
  CHECK(text.find("# TYPE fenceq_requests_total counter") != std::string::npos);

  std::string body, head;
  CHECK(fenceq::test::http_request(port, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", 5000ms,
                                   &body, &head) == 200);
  CHECK(head.find("Content-Type: text/plain") != std::string::npos);
  CHECK(body.find("fenceq_jobs{queue=\"mq\",state=\"leased\"} 1\n") != std::string::npos);
  CHECK(body.find("fenceq_uptime_seconds") != std::string::npos);
  CHECK(fenceq::test::http_request(port, "GET /nothing HTTP/1.1\r\nHost: x\r\n\r\n", 5000ms) ==
        404);
}

TEST_CASE("metrics: C3.5 fenced writes are counted per op, applied or refused, in stats and "
          "/metrics") {
  TempDir dir;
  // Port 0: the kernel's choice, read back from the daemon's log (a port
  // picked free before the daemon binds it can be taken by then).
  Daemon d(dir, {"--clock", "server", "--metrics-listen", "127.0.0.1:0"});
  const int port = fenceq::test::http_port(d);
  REQUIRE(port > 0);
  Client c(d.endpoint());
  for (const char* id : {"w1", "w2", "w3", "w4"}) REQUIRE(c.enqueue(id, in_queue("wq")));
  const auto f1 = c.claim("w1", "a", 30);
  REQUIRE(f1);
  CHECK_FALSE(c.renew("w1", "b", *f1, 30));                    // another owner: refused
  CHECK(c.renew("w1", "a", *f1, 30));                          // applied
  CHECK_FALSE(c.complete("w1", "a", *f1 + 1, "x"));            // a fence never handed out
  CHECK(c.complete("w1", "a", *f1, "x"));                      // applied
  CHECK_FALSE(c.complete("w1", "a", *f1, "again"));            // done already
  CHECK_FALSE(c.release("w1", "a", *f1));                      // done: refused
  CHECK_FALSE(c.fail("w1", "a", *f1, "late"));                 // refused
  const auto f2 = c.claim("w2", "a", 30);
  const auto f3 = c.claim("w3", "a", 30);
  REQUIRE((f2 && f3));
  // A batch: one stale item among two fresh ones, counted one by one.
  auto done = c.complete_many({{"w2", "a", *f2, "r2"}, {"w4", "a", 1, "never claimed"},
                               {"w3", "a", *f3, "r3"}});
  CHECK(done == std::vector<bool>{true, false, true});
  auto st = c.stats();
  CHECK(st.renew == fenceq::WriteCounts{1, 1});
  CHECK(st.complete == fenceq::WriteCounts{3, 3});
  CHECK(st.release == fenceq::WriteCounts{0, 1});
  CHECK(st.fail == fenceq::WriteCounts{0, 1});
  // The tool prints them; /metrics serves them as counters.
  auto r = fenceq::test::run({fenceq::test::fenceq_tool_path(), "--endpoint", d.endpoint(),
                              "stats"});
  REQUIRE(r.status == 0);
  auto j = nlohmann::json::parse(r.out);
  CHECK(j["writes"]["complete"]["refused"] == 3);
  std::string body;
  REQUIRE(fenceq::test::http_request(port, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", 5000ms,
                                     &body) == 200);
  CHECK(body.find("# TYPE fenceq_fenced_writes_total counter") != std::string::npos);
  CHECK(body.find("fenceq_fenced_writes_total{op=\"complete\",outcome=\"refused\"} 3\n") !=
        std::string::npos);
  CHECK(body.find("fenceq_fenced_writes_total{op=\"renew\",outcome=\"applied\"} 1\n") !=
        std::string::npos);
}

namespace {

// One /metrics line per queue counter, as fenceqd writes them (label values escaped).
std::vector<std::string> counter_lines(const std::string& label, const fenceq::QueueTotals& t) {
  std::vector<std::string> out;
  for (auto [name, n] : {std::pair<const char*, std::uint64_t>{"fenceq_jobs_claimed_total", t.claimed},
                         {"fenceq_jobs_completed_total", t.completed},
                         {"fenceq_jobs_failed_total", t.failed},
                         {"fenceq_jobs_retried_total", t.retried},
                         {"fenceq_jobs_dead_total", t.dead},
                         {"fenceq_leases_expired_total", t.expired}}) {
    out.push_back(std::string(name) + "{queue=\"" + label + "\"} " + std::to_string(n) + "\n");
  }
  for (auto [op, n] : {std::pair<const char*, std::uint64_t>{"renew", t.refused.renew},
                       {"complete", t.refused.complete},
                       {"release", t.refused.release},
                       {"fail", t.refused.fail}}) {
    out.push_back("fenceq_stale_writes_refused_total{queue=\"" + label + "\",op=\"" + op + "\"} " +
                  std::to_string(n) + "\n");
  }
  return out;
}

}  // namespace

TEST_CASE("metrics: per-queue counters: claims, completes, fails, retries, deaths, expired leases "
          "and C3.5 stale writes refused per op, in stats and /metrics") {
  TempDir dir;
  // Port 0: the kernel's choice, read back from the daemon's log (a port
  // picked free before the daemon binds it can be taken by then).
  Daemon d(dir, {"--clock", "client", "--metrics-listen", "127.0.0.1:0"});
  const int port = fenceq::test::http_port(d);
  REQUIRE(port > 0);
  Client c(d.endpoint());
  // A queue name that needs escaping as a label value.
  const std::string beta = "be\"t\\a";
  const std::string beta_label = "be\\\"t\\\\a";
  EnqueueOptions two_attempts = in_queue("alpha"), one_attempt = in_queue(beta);
  two_attempts.max_attempts = 2;
  one_attempt.max_attempts = 1;
  for (const char* id : {"a1", "a2"}) REQUIRE(c.enqueue(id, in_queue("alpha")));
  REQUIRE(c.enqueue("a3", two_attempts));
  REQUIRE(c.enqueue("b1", one_attempt));
  for (const char* id : {"b2", "b4"}) REQUIRE(c.enqueue(id, in_queue(beta)));
  for (const char* id : {"g1", "g2", "g3"}) REQUIRE(c.enqueue(id, in_queue("gamma")));

  // alpha: claims, a completion, stale writes, a lease taken over after it
  // expired, a fail with an attempt left, a fail on the last one, a retry.
  REQUIRE(c.claim("a1", "A", 10, 10.0) == 1);
  auto a2 = c.claim_next("alpha", "B", 10, 0, 10.0);
  REQUIRE((a2 && a2->id == "a2"));
  CHECK_FALSE(c.renew("a1", "A", 2, 10, 11.0));           // a fence never handed out
  CHECK(c.complete("a1", "A", 1, "r", 11.0));
  CHECK_FALSE(c.complete("a1", "A", 1, "again", 12.0));   // done already
  auto taken = c.claim_next("alpha", "C", 10, 0, 25.0);   // B's lease ended at 20
  REQUIRE((taken && taken->id == "a2" && taken->fence == 2));
  CHECK_FALSE(c.complete("a2", "B", 1, "late", 26.0));    // B woke up: refused
  CHECK_FALSE(c.renew("a2", "B", 1, 10, 26.0));
  CHECK(c.complete("a2", "C", 2, "ok", 27.0));
  REQUIRE(c.claim("a3", "D", 10, 30.0) == 1);
  CHECK(c.fail("a3", "D", 1, "e1", 0.0, 31.0));           // an attempt left: retried
  REQUIRE(c.claim("a3", "D", 10, 32.0) == 2);
  CHECK(c.fail("a3", "D", 2, "e2", 0.0, 33.0));           // the last one: dead
  CHECK(c.retry("a3"));                                   // revived: retried
  CHECK_FALSE(c.fail("a3", "D", 2, "late", std::nullopt, 34.0));

  // beta: a last attempt's lease that runs out (reaped: dead and expired), a
  // lease taken over by id, a release (no expiry), stale release and fail, a
  // batch with one stale item.
  REQUIRE(c.claim("b1", "X", 5, 40.0) == 1);
  REQUIRE(c.claim("b4", "X", 5, 40.0) == 1);
  CHECK(c.claim("b4", "Y", 5, 50.0) == 2);                // X's lease ended at 45
  CHECK_FALSE(c.claim("b1", "Y", 5, 50.0));               // its only attempt is used
  REQUIRE(c.claim("b2", "X", 30, 50.0) == 1);
  CHECK(c.release("b2", "X", 1));
  CHECK_FALSE(c.release("b2", "X", 1));                   // released already
  REQUIRE(c.claim("b2", "Y", 30, 51.0) == 2);             // after a release: not an expiry
  CHECK_FALSE(c.fail("b2", "X", 1, "stale", std::nullopt, 52.0));
  CHECK(c.complete_many({{"b2", "Y", 2, "r"}, {"b4", "X", 1, "stale"}}, 53.0) ==
        std::vector<bool>{true, false});
  CHECK(c.renew_many({{"b4", "Y", 2, std::nullopt}, {"b4", "X", 1, std::nullopt}}, 5, 54.0) ==
        std::vector<bool>{true, false});
  CHECK_FALSE(c.complete("nope", "X", 1, "x", 54.0));     // no such job: no queue to count in

  // gamma: claims of many, complete_next's and complete_many's next; then
  // purged: its counters stay.
  auto g = c.claim_next_many("gamma", "G", 10, 2, 0, 60.0);
  REQUIRE(g.size() == 2);
  auto cn = c.complete_and_claim_next(g[0].id, "G", g[0].fence, "r", "gamma", 10, 61.0);
  REQUIRE((cn.completed && cn.next && cn.next->id == "g3"));
  auto cm = c.complete_many_and_claim({{g[1].id, "G", g[1].fence, "r"}, {"g3", "G", cn.next->fence, "r"}},
                                      "gamma", 10, 5, 62.0);
  CHECK(cm.completed == std::vector<bool>{true, true});
  CHECK(cm.next.empty());
  CHECK(c.purge(0, std::string("gamma")) == 3);

  // b1's lease ended at 45 on its last attempt: written down dead by the
  // next reaping (every batch on SQLite, every 250 ms on PostgreSQL).
  std::this_thread::sleep_for(300ms);
  CHECK(listed(c, "b1").status == JobStatus::dead);

  using fenceq::QueueTotals;
  QueueTotals alpha{}, b{}, gamma{};
  alpha.claimed = 5, alpha.completed = 2, alpha.failed = 2, alpha.retried = 2, alpha.dead = 1,
  alpha.expired = 1;
  alpha.refused = {2, 2, 0, 1};  // renew, complete, release, fail
  b.claimed = 5, b.completed = 1, b.dead = 1, b.expired = 2;
  b.refused = {1, 1, 1, 1};
  gamma.claimed = 3, gamma.completed = 3;

  auto st = c.stats();
  REQUIRE(st.queues.size() == 3);
  CHECK(st.queues[0].queue == "alpha");
  CHECK(st.queues[0].totals == alpha);
  CHECK(st.queues[1].queue == beta);
  CHECK(st.queues[1].totals == b);
  CHECK(st.queues[1].dead == 1);
  // Purged, and listed for its counters: zero gauges.
  CHECK(st.queues[2].queue == "gamma");
  CHECK(st.queues[2].totals == gamma);
  CHECK(st.queues[2].ready + st.queues[2].leased + st.queues[2].done == 0);
  // The refused complete on a missing id counts only in the global writes.
  CHECK(st.complete.refused == alpha.refused.complete + b.refused.complete + 1);
  CHECK(st.renew.refused == alpha.refused.renew + b.refused.renew);

  std::string body;
  REQUIRE(fenceq::test::http_request(port, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", 5000ms,
                                     &body) == 200);
  INFO(body);
  for (const char* family : {"fenceq_jobs_claimed_total", "fenceq_jobs_completed_total",
                             "fenceq_jobs_failed_total", "fenceq_jobs_retried_total",
                             "fenceq_jobs_dead_total", "fenceq_leases_expired_total",
                             "fenceq_jobs_deadline_passed_total",
                             "fenceq_stale_writes_refused_total"}) {
    CHECK(body.find(std::string("# TYPE ") + family + " counter\n") != std::string::npos);
    CHECK(body.find(std::string("# HELP ") + family + " ") != std::string::npos);
  }
  for (const auto& [label, totals] : {std::pair<std::string, QueueTotals>{"alpha", alpha},
                                      {beta_label, b},
                                      {"gamma", gamma}}) {
    for (const auto& line : counter_lines(label, totals)) {
      CHECK(body.find("\n" + line) != std::string::npos);
    }
  }
  CHECK(body.find("fenceq_jobs{queue=\"gamma\",state=\"done\"} 0\n") != std::string::npos);
  // The op answers the same text.
  CHECK(c.metrics().find("\nfenceq_stale_writes_refused_total{queue=\"alpha\",op=\"complete\"} 2\n") !=
        std::string::npos);
}

TEST_CASE("long-poll: a parked claim whose client has gone claims nothing for good") {
  TempDir dir;
  Daemon d(dir, {"--clock", "server"});
  Client c(d.endpoint());
  {
    // A raw client parks a claim_next, then goes away without its answer.
    zmq::context_t ctx;
    zmq::socket_t gone(ctx, zmq::socket_type::dealer);
    gone.set(zmq::sockopt::linger, 0);
    gone.connect(d.endpoint());
    auto req = nlohmann::json::to_msgpack(
        {{"op", "claim_next"}, {"queue", "q"}, {"owner", "gone"}, {"ttl", 30}, {"wait", 10}});
    gone.send(zmq::buffer(req.data(), req.size()));
    for (int i = 0; i < 50 && c.stats().waiting_claims == 0; ++i) std::this_thread::sleep_for(20ms);
    REQUIRE(c.stats().waiting_claims == 1);
  }
  std::this_thread::sleep_for(300ms);  // the daemon sees the disconnect
  EnqueueOptions once = in_queue("q");
  once.max_attempts = 1;
  REQUIRE(c.enqueue("j", once));
  // The parked claim took the job, could not deliver it, and gave it back.
  auto job = c.claim_next("q", "here", 30);
  REQUIRE(job);
  CHECK(job->id == "j");
  CHECK(job->attempts == 1);  // the undelivered claim did not use the only attempt
  CHECK(job->fence == 2);     // but the fence never goes back (C1.2)
  CHECK(c.stats().waiting_claims == 0);
}

TEST_CASE("queue: complete_next completes under the same checks and claims the next job") {
  TempDir dir;
  Daemon d(dir);
  Client c(d.endpoint());
  REQUIRE(c.enqueue("a", in_queue("cn", "pa")));
  REQUIRE(c.enqueue("b", in_queue("cn", "pb")));
  auto a = c.claim_next("cn", "w", 10, 0, 1.0);
  REQUIRE(a);
  // A stale fence: not completed, but the next job is still claimed.
  auto r = c.complete_and_claim_next("a", "w", a->fence + 1, "x", "cn", 10, 2.0);
  CHECK_FALSE(r.completed);
  REQUIRE(r.next);
  CHECK(r.next->id == "b");
  CHECK(r.next->payload->bytes == "pb");
  CHECK_FALSE(c.state("a")->done);
  // The current lease: completed, and the queue is empty now.
  r = c.complete_and_claim_next("a", "w", a->fence, "ra", "cn", 10, 3.0);
  CHECK(r.completed);
  CHECK_FALSE(r.next);
  CHECK(c.state("a")->result == "ra");
  r = c.complete_and_claim_next("b", "w", 1, "rb", "cn", 10, 30.0);  // expired at 12
  CHECK_FALSE(r.completed);
  REQUIRE(r.next);  // b's lease ended: claimable again, by this same call
  CHECK(r.next->id == "b");
  CHECK(r.next->fence == 2);
}

TEST_CASE("queue: a list page of many long errors stays bounded, its errors cut with a note, "
          "never at the default page size") {
  TempDir dir;
  Daemon d(dir);
  Client c(d.endpoint());
  constexpr int kJobs = 300;
  const std::string long_error(64 * 1024, 'e');  // the most `fail` takes
  for (int i = 0; i < kJobs; ++i) {
    const std::string id = "err-" + std::to_string(1000 + i);
    REQUIRE(c.enqueue(id, in_queue("errs")));
    auto f = c.claim(id, "w", 30, 10.0);
    REQUIRE(f);
    REQUIRE(c.fail(id, "w", *f, long_error, 3600, 10.0));
  }
  fenceq::ListOptions all;
  all.queue = "errs";
  all.limit = 1000;
  auto jobs = c.list(all);
  REQUIRE(jobs.size() == kJobs);
  std::size_t total = 0;
  for (const auto& j : jobs) {
    REQUIRE(j.error);
    total += j.error->size();
    CHECK(j.error->size() < long_error.size());
    CHECK(j.error->find("cut by fenceqd: 65536 bytes in all") != std::string::npos);
    CHECK(j.error->rfind(std::string(1000, 'e'), 0) == 0);  // it starts as it was
  }
  CHECK(total <= 8u * 1024 * 1024);
  // The default page (100): every error whole.
  fenceq::ListOptions page;
  page.queue = "errs";
  for (const auto& j : c.list(page)) CHECK(j.error == long_error);
}
