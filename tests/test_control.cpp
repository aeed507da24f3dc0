// Queue control (issue 18) against the real fenceqd, on SQLite and (the "pg
// control: " variants) on PostgreSQL: the fenced cancel.
#include <catch2/catch.hpp>

#include <fenceq/client.hpp>
#include <nlohmann/json.hpp>
#include <zmq.hpp>

#include <chrono>
#include <optional>
#include <thread>
#include <string>
#include <vector>

#include "daemon.hpp"
#include "probe.hpp"
#include "vectors.hpp"

using fenceq::Client;
using fenceq::EnqueueOptions;
using fenceq::JobStatus;
using fenceq::test::Daemon;
using fenceq::test::TempDir;
using fenceq::test::in_queue;
using fenceq::test::pack;
using fenceq::test::raw;
using fenceq::test::tool;
using namespace std::chrono_literals;

namespace {

fenceq::JobInfo info(Client& c, const std::string& id) { return fenceq::test::listed(c, id); }

const fenceq::QueueStats& queue_of(const fenceq::Stats& st, const std::string& q) {
  for (const auto& s : st.queues) {
    if (s.queue == q) return s;
  }
  FAIL("queue " << q << " not in stats");
  return st.queues.front();
}



}  // namespace

TEST_CASE("cancel: the holder's renew, complete, fail and check are refused from then on, the "
          "result never stored, and retry revives it with a higher fence") {
  TempDir dir;
  Daemon d(dir);
  Client c(d.endpoint());
  REQUIRE(c.enqueue("j", in_queue("q")));
  auto job = c.claim_next("q", "w", 100, 0, 10.0);
  REQUIRE(job);
  REQUIRE(job->fence == 1);
  REQUIRE(c.check("j", "w", 1, 11.0));

  CHECK(c.cancel("j"));
  CHECK_FALSE(c.cancel("j"));  // cancelled already

  // Every fenced write of the holder, well inside its lease, is refused.
  CHECK_FALSE(c.check("j", "w", 1, 12.0));
  CHECK_FALSE(c.renew("j", "w", 1, 100, 12.0));
  CHECK_FALSE(c.complete("j", "w", 1, std::string("late result"), 13.0));
  CHECK_FALSE(c.fail("j", "w", 1, "late failure", 0.0, 14.0));
  CHECK_FALSE(c.release("j", "w", 1));

  auto st = c.state("j");
  REQUIRE(st);
  CHECK_FALSE(st->done);
  CHECK_FALSE(st->result);   // never stored
  CHECK(st->fence == 2);     // bumped by the cancel
  CHECK_FALSE(st->owner);    // the lease ended
  auto row = info(c, "j");
  CHECK(row.status == JobStatus::cancelled);
  CHECK_FALSE(row.error);    // the refused fail stored nothing

  // Final: no claim takes it, by id or next.
  CHECK_FALSE(c.claim_next("q", "v", 10, 0, 200.0));
  CHECK_FALSE(c.claim("j", "v", 10, 200.0));

  // Listable as cancelled, counted per queue (not as dead).
  fenceq::ListOptions lo;
  lo.status = JobStatus::cancelled;
  auto cancelled = c.list(lo);
  REQUIRE(cancelled.size() == 1);
  CHECK(cancelled[0].id == "j");
  lo.status = JobStatus::dead;
  CHECK(c.list(lo).empty());
  const auto q = queue_of(c.stats(), "q");
  CHECK(q.cancelled == 1);
  CHECK(q.dead == 0);
  CHECK(q.ready == 0);
  CHECK(c.metrics().find("fenceq_jobs{queue=\"q\",state=\"cancelled\"} 1") != std::string::npos);

  // retry revives it: claimable at once, with a fence above every earlier one.
  CHECK(c.retry("j"));
  CHECK_FALSE(c.retry("j"));
  auto again = c.claim_next("q", "v", 10, 0, 300.0);
  REQUIRE(again);
  CHECK(again->fence == 3);
  CHECK(again->attempts == 1);
  CHECK_FALSE(c.complete("j", "w", 1, std::string("late"), 301.0));  // the old holder: still no
  REQUIRE(c.complete("j", "v", 3, std::string("ok"), 301.0));
  CHECK(c.state("j")->result == "ok");
  CHECK_FALSE(c.cancel("j"));  // done: not cancellable
  CHECK(c.state("j")->done);
  CHECK_FALSE(c.cancel("missing"));
}

TEST_CASE("cancel: ready, delayed and dead jobs become cancelled, and purge removes them and keeps "
          "their fence") {
  TempDir dir;
  Daemon d(dir);
  Client c(d.endpoint());
  REQUIRE(c.enqueue("ready", in_queue("q")));
  EnqueueOptions later = in_queue("q");
  later.delay = 1000;
  later.now = 1.0;
  REQUIRE(c.enqueue("delayed", later));
  EnqueueOptions once = in_queue("q");
  once.max_attempts = 1;
  REQUIRE(c.enqueue("dead", once));
  auto f = c.claim("dead", "w", 10, 2.0);
  REQUIRE(f);
  REQUIRE(c.fail("dead", "w", *f, "boom", 0.0, 3.0));
  REQUIRE(info(c, "dead").status == JobStatus::dead);

  CHECK(c.cancel("ready"));
  CHECK(c.cancel("delayed"));
  CHECK(c.cancel("dead"));
  for (const char* id : {"ready", "delayed", "dead"}) {
    CHECK(info(c, id).status == JobStatus::cancelled);
  }
  CHECK(c.state("ready")->fence == 1);
  CHECK(c.state("dead")->fence == 2);
  CHECK(info(c, "dead").error == "boom");  // the dead job's last error kept
  const auto q = queue_of(c.stats(), "q");
  CHECK(q.cancelled == 3);
  CHECK(q.dead == 0);
  CHECK(q.delayed == 0);
  CHECK_FALSE(c.claim_next("q", "w", 10, 0, 5000.0));

  // Finished: purge takes them, and an id enqueued again continues its fence.
  EnqueueOptions tick = in_queue("other");
  tick.now = 10000.0;
  REQUIRE(c.enqueue("tick", tick));
  CHECK(c.purge(100, std::string("q")) == 3);
  CHECK_FALSE(c.state("dead"));
  REQUIRE(c.enqueue("dead", in_queue("q")));
  CHECK(c.claim("dead", "w", 10, 10001.0) == 3);
}

TEST_CASE("cancel: bad input gets a coded error and changes nothing") {
  TempDir dir;
  Daemon d(dir);
  Client c(d.endpoint());
  REQUIRE(c.enqueue("j"));
  auto f = c.claim("j", "w", 100, 1.0);
  REQUIRE(f);
  for (const auto& request : {nlohmann::json{{"op", "cancel"}},
                              nlohmann::json{{"op", "cancel"}, {"id", 7}},
                              nlohmann::json{{"op", "cancel"}, {"id", nullptr}},
                              nlohmann::json{{"op", "cancel"}, {"id", std::string(1025, 'x')}},
                              nlohmann::json{{"op", "cancel"}, {"id", "j"}, {"now", "soon"}}}) {
    INFO(request.dump().substr(0, 80));
    auto rep = raw(d, request);
    REQUIRE_FALSE(rep.is_null());
    CHECK(rep["ok"] == false);
    const auto code = rep["error"]["code"].get<std::string>();
    CHECK((code == "invalid_argument" || code == "bad_request"));
  }
  // Nothing changed: the lease is still current, the fence not bumped.
  CHECK(c.check("j", "w", *f, 2.0));
  CHECK(c.state("j")->fence == 1);
  CHECK(info(c, "j").status == JobStatus::leased);
}

TEST_CASE("cancel: a worker racing the cancel either completes first or is refused, never both") {
  TempDir dir;
  Daemon d(dir);
  Client c(d.endpoint());
  Client w(d.endpoint());
  // Pipelined from two connections: each pair ends one way or the other, and
  // the job's record always agrees with the answers.
  for (int i = 0; i < 50; ++i) {
    const std::string id = "race-" + std::to_string(i);
    REQUIRE(c.enqueue(id));
    auto f = w.claim(id, "w", 100, 1.0);
    REQUIRE(f);
    bool completed = false;
    std::thread worker([&] { completed = w.complete(id, "w", *f, std::string("r"), 2.0); });
    const bool cancelled = c.cancel(id);
    worker.join();
    CHECK(completed != cancelled);  // exactly one of them won
    auto st = c.state(id);
    REQUIRE(st);
    CHECK(st->done == completed);
    CHECK((st->result == std::optional<std::string>("r")) == completed);
    CHECK(info(c, id).status == (completed ? JobStatus::done : JobStatus::cancelled));
  }
}

TEST_CASE("cancel: the fenceq tool cancels (exit 0), a second cancel is refused (exit 1), list "
          "--state cancelled shows it") {
  TempDir dir;
  Daemon d(dir);
  Client c(d.endpoint());
  REQUIRE(c.enqueue("t"));
  REQUIRE(c.claim("t", "w", 100, 1.0));
  auto r = tool(d, {"cancel", "t"});
  CHECK(r.status == 0);
  CHECK(r.out == "true\n");
  r = tool(d, {"cancel", "t"});
  CHECK(r.status == 1);
  CHECK(r.out == "false\n");
  r = tool(d, {"--now", "2", "renew", "t", "w", "1", "10"});
  CHECK(r.status == 1);
  r = tool(d, {"list", "--state", "cancelled"});
  CHECK(r.status == 0);
  CHECK(r.out.find("\"t\"") != std::string::npos);
  CHECK(r.out.find("\"cancelled\"") != std::string::npos);
  r = tool(d, {"stats"});
  CHECK(r.status == 0);
  CHECK(nlohmann::json::parse(r.out)["queues"]["default"]["cancelled"] == 1);
}

TEST_CASE("progress: renew stores it with the lease, state and list show it, a stale or expired "
          "renew stores nothing, a new claim clears it") {
  TempDir dir;
  Daemon d(dir);
  Client c(d.endpoint());
  REQUIRE(c.enqueue("p", in_queue("q")));
  auto f = c.claim("p", "w", 10, 1.0);
  REQUIRE(f);
  CHECK_FALSE(c.state("p")->progress);  // none reported yet: the key is absent
  CHECK_FALSE(info(c, "p").progress);

  REQUIRE(c.renew("p", "w", *f, 10, 2.0, std::string_view("10% (1 of 10 files)")));
  CHECK(c.state("p")->progress == "10% (1 of 10 files)");
  CHECK(info(c, "p").progress == "10% (1 of 10 files)");
  REQUIRE(c.renew("p", "w", *f, 10, 3.0));  // no progress: the last one is kept
  CHECK(c.state("p")->progress == "10% (1 of 10 files)");
  CHECK(c.state("p")->until == 13.0);

  // Refused renews store nothing: a wrong fence, another owner, after the lease ended.
  CHECK_FALSE(c.renew("p", "w", *f + 1, 10, 4.0, std::string_view("stale fence")));
  CHECK_FALSE(c.renew("p", "x", *f, 10, 4.0, std::string_view("stranger")));
  CHECK_FALSE(c.renew("p", "w", *f, 10, 13.0, std::string_view("too late")));
  CHECK(c.state("p")->progress == "10% (1 of 10 files)");

  // The next lease starts without one; the old holder cannot set it.
  auto g = c.claim("p", "v", 10, 20.0);
  REQUIRE(g == *f + 1);
  CHECK_FALSE(c.state("p")->progress);
  CHECK_FALSE(c.renew("p", "w", *f, 10, 21.0, std::string_view("old holder")));
  CHECK_FALSE(c.state("p")->progress);
  REQUIRE(c.renew("p", "v", *g, 10, 21.0, std::string_view("")));  // empty is a value
  CHECK(c.state("p")->progress == "");
  // Kept when the job completes: the last report of the lease that finished it.
  REQUIRE(c.renew("p", "v", *g, 10, 22.0, std::string_view("100%")));
  REQUIRE(c.complete("p", "v", *g, std::string("r"), 23.0));
  CHECK(c.state("p")->progress == "100%");
  // And after a cancel the holder's renew stores nothing.
  REQUIRE(c.enqueue("c", in_queue("q")));
  auto h = c.claim("c", "w", 10, 30.0);
  REQUIRE(c.cancel("c"));
  CHECK_FALSE(c.renew("c", "w", *h, 10, 31.0, std::string_view("after cancel")));
  CHECK_FALSE(c.state("c")->progress);
}

TEST_CASE("progress: renew_many stores each item's own progress, stale items store nothing") {
  TempDir dir;
  Daemon d(dir);
  Client c(d.endpoint());
  REQUIRE(c.enqueue("a"));
  REQUIRE(c.enqueue("b"));
  REQUIRE(c.enqueue("n"));
  auto fa = c.claim("a", "w", 10, 1.0);
  auto fb = c.claim("b", "w", 10, 1.0);
  auto fn = c.claim("n", "w", 10, 1.0);
  fenceq::LeaseItem a{"a", "w", *fa, {}};
  a.progress = "a: half";
  fenceq::LeaseItem b{"b", "w", *fb + 5, {}};  // stale
  b.progress = "b: never";
  fenceq::LeaseItem n{"n", "w", *fn, {}};      // no progress
  auto ok = c.renew_many({a, b, n}, 10, 2.0);
  REQUIRE(ok.size() == 3);
  CHECK(ok[0]);
  CHECK_FALSE(ok[1]);
  CHECK(ok[2]);
  CHECK(c.state("a")->progress == "a: half");
  CHECK_FALSE(c.state("b")->progress);
  CHECK_FALSE(c.state("n")->progress);
  CHECK(c.state("n")->until == 12.0);
}

TEST_CASE("progress: bad input gets a coded error and changes nothing") {
  TempDir dir;
  Daemon d(dir);
  Client c(d.endpoint());
  REQUIRE(c.enqueue("j"));
  auto f = c.claim("j", "w", 10, 1.0);
  REQUIRE(f);
  REQUIRE(c.renew("j", "w", *f, 10, 2.0, std::string_view("kept")));
  const auto renew = [&](const nlohmann::json& progress) {
    return nlohmann::json{{"op", "renew"}, {"id", "j"}, {"owner", "w"}, {"fence", *f},
                          {"ttl", 100}, {"now", 3.0}, {"progress", progress}};
  };
  const auto renew_many = [&](const nlohmann::json& progress) {
    return nlohmann::json{
        {"op", "renew_many"},
        {"items", {{{"id", "j"}, {"owner", "w"}, {"fence", *f}, {"progress", progress}}}},
        {"ttl", 100},
        {"now", 3.0}};
  };
  struct Bad {
    nlohmann::json request;
    const char* code;
  };
  const std::vector<Bad> bad{
      {renew(std::string(4097, 'x')), "invalid_argument"},
      {renew(42), "bad_request"},
      {renew(nullptr), "bad_request"},
      {renew(nlohmann::json::array({"a"})), "bad_request"},
      {renew_many(std::string(4097, 'x')), "invalid_argument"},
      {renew_many(false), "bad_request"},
  };
  for (const auto& [request, code] : bad) {
    INFO(request.dump().substr(0, 120));
    auto rep = raw(d, request);
    REQUIRE_FALSE(rep.is_null());
    CHECK(rep["ok"] == false);
    CHECK(rep["error"]["code"] == code);
  }
  // Invalid UTF-8 is refused too (msgpack str, not JSON: sent as raw bytes).
  {
    auto bytes = pack(renew("ok"));
    const auto at = bytes.rfind("ok");
    REQUIRE(at != std::string::npos);
    bytes[at] = '\xff';
    zmq::context_t ctx;
    auto s = fenceq::test::dealer(ctx, d.endpoint());
    s.send(zmq::buffer(bytes));
    zmq_pollitem_t item{s.handle(), 0, ZMQ_POLLIN, 0};
    REQUIRE(zmq::poll(&item, 1, 5s) == 1);
    zmq::message_t m;
    REQUIRE(s.recv(m));
    auto rep = nlohmann::json::from_msgpack(std::string(static_cast<const char*>(m.data()), m.size()));
    CHECK(rep["ok"] == false);
    CHECK(rep["error"]["code"] == "invalid_argument");
  }
  // Nothing changed: neither the lease's end nor its progress.
  auto st = c.state("j");
  CHECK(st->until == 12.0);
  CHECK(st->progress == "kept");
  // Exactly 4 KiB is accepted.
  CHECK(c.renew("j", "w", *f, 10, 4.0, std::string(4096, 'y')));
  CHECK(c.state("j")->progress == std::string(4096, 'y'));
}

TEST_CASE("progress: the fenceq tool's renew --progress, state and list show it") {
  TempDir dir;
  Daemon d(dir);
  Client c(d.endpoint());
  REQUIRE(c.enqueue("t"));
  REQUIRE(c.claim("t", "w", 100, 1.0));
  auto r = tool(d, {"--now", "2", "renew", "t", "w", "1", "100", "--progress", "3/7 done"});
  CHECK(r.status == 0);
  r = tool(d, {"state", "t"});
  CHECK(r.status == 0);
  CHECK(nlohmann::json::parse(r.out)["progress"] == "3/7 done");
  r = tool(d, {"list"});
  CHECK(r.status == 0);
  CHECK(nlohmann::json::parse(r.out)["progress"] == "3/7 done");
  REQUIRE(c.enqueue("u"));
  r = tool(d, {"state", "u"});
  CHECK_FALSE(nlohmann::json::parse(r.out).contains("progress"));
}
