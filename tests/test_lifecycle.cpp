// Issue 33's lifecycle ops against the real fenceqd (docs/contract.md
// C3.14), on SQLite and (the "pg lifecycle: " variants) on PostgreSQL:
// snooze gives a current lease back with its attempt and makes the job
// claimable after a delay, a stale snooze changes nothing (C3.14);
// max_runtime caps an attempt on every claim path and through renewals, and
// ends it as a failure with the fence raised, also after a kill -9 (C3.15);
// headers come back with every claim and in the job's record (C3.18);
// steps (C3.22); suspend and signal (C3.23) and deadlines (C3.24), through
// the client and the fenceq tool.
#include <catch2/catch.hpp>

#include <fenceq/client.hpp>
#include <nlohmann/json.hpp>

#include <sys/stat.h>

#include <algorithm>
#include <fstream>
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
using fenceq::test::error_code;
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
  CHECK(error_code(raw(d, lease)) == "bad_request");  // no delay
  CHECK(error_code(raw(d, with({{"delay", "soon"}}))) == "bad_request");
  CHECK(error_code(raw(d, with({{"delay", -1}}))) == "invalid_argument");
  CHECK(error_code(raw(d, with({{"delay", 2e9}}))) == "invalid_argument");
  CHECK(error_code(raw(d, with({{"delay", 1}, {"fence", 2.0}}))) == "bad_request");
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

namespace {

EnqueueOptions capped(double max_runtime, double now, std::int64_t max_attempts = 25) {
  EnqueueOptions o = at(now);
  o.max_runtime = max_runtime;
  o.max_attempts = max_attempts;
  return o;
}

// `id` once its overrun attempt is written down (error set), at `now`.
fenceq::JobInfo until_written_down(Client& c, const std::string& id, double now) {
  CHECK(fenceq::test::until_reaped(c, now, [&] { return listed(c, id).error.has_value(); }));
  return listed(c, id);
}

}  // namespace

TEST_CASE("lifecycle: max_runtime cuts a worker that keeps renewing off at the cap and its "
          "complete is refused and the retry gets a higher fence") {
  TempDir dir;
  Daemon d(dir, kClientClock);
  Client c(d.endpoint());
  REQUIRE(c.enqueue("j", capped(10, 1)));
  auto j = c.claim_next("default", "A", 30, 0, 2);  // deadline 12
  REQUIRE(j);
  CHECK(listed(c, "j").until == 12.0);  // the ttl would give 32
  REQUIRE(c.renew("j", "A", j->fence, 30, 5.0));
  CHECK(listed(c, "j").until == 12.0);  // renewed, not past the cap
  REQUIRE(c.renew("j", "A", j->fence, 3, 6.0));
  CHECK(listed(c, "j").until == 9.0);  // a shorter renew is as asked
  REQUIRE(c.renew("j", "A", j->fence, 30, 8.0));
  CHECK_FALSE(c.renew("j", "A", j->fence, 30, 12.0));  // at the deadline the lease is over
  auto row = until_written_down(c, "j", 13);
  CHECK(row.error == "max_runtime exceeded");
  CHECK(row.fence == 2);  // raised, as on cancel
  CHECK_FALSE(row.owner);
  CHECK(row.attempts == 1);
  // Retried after the backoff (1 s) from when it was written down: the
  // deadline or later.
  CHECK(row.status != JobStatus::leased);
  CHECK(row.not_before >= 13.0);
  CHECK(row.not_before <= 14.0);
  CHECK_FALSE(c.complete("j", "A", j->fence, "late", 13.0));
  CHECK_FALSE(c.state("j")->result);  // nothing stored
  auto again = c.claim_next("default", "B", 30, 0, 14);
  REQUIRE(again);
  CHECK(again->fence == 3);
  CHECK(again->attempts == 2);
  REQUIRE(c.complete("j", "B", again->fence, "in time", 15.0));
  CHECK(c.state("j")->result == "in time");
  const auto st = c.stats();
  const auto q = std::find_if(st.queues.begin(), st.queues.end(),
                              [](const auto& x) { return x.queue == "default"; });
  REQUIRE(q != st.queues.end());
  const auto& totals = q->totals;
  CHECK(totals.failed == 1);
  CHECK(totals.retried == 1);
}

TEST_CASE("lifecycle: max_runtime on the last attempt makes the job dead of it and every claim "
          "path caps the lease") {
  TempDir dir;
  Daemon d(dir, kClientClock);
  Client c(d.endpoint());
  REQUIRE(c.enqueue("once", capped(5, 1, 1)));
  REQUIRE(c.claim("once", "A", 60, 2.0) == 1);  // claim by id: until 7
  CHECK(listed(c, "once").until == 7.0);
  auto row = until_written_down(c, "once", 8);
  CHECK(row.status == JobStatus::dead);
  CHECK(row.error == "max_runtime exceeded");
  CHECK(row.fence == 2);
  // claim_next with max, complete_next's next, a grouped queue's turn.
  for (const char* id : {"m1", "m2"}) REQUIRE(c.enqueue(id, capped(4, 10)));
  auto many = c.claim_next_many("default", "W", 60, 2, 0, 11);
  REQUIRE(many.size() == 2);
  for (const auto& j : many) CHECK(listed(c, j.id).until == 15.0);
  REQUIRE(c.enqueue("m3", capped(4, 10)));
  auto next = c.complete_and_claim_next("m1", "W", many[0].id == "m1" ? many[0].fence : many[1].fence,
                                        "r", "default", 60, 12.0);
  REQUIRE(next.next);
  CHECK(next.next->id == "m3");
  CHECK(listed(c, "m3").until == 16.0);
  auto grouped = capped(3, 12);
  grouped.queue = "g";
  grouped.group = "t";
  REQUIRE(c.enqueue("g1", grouped));
  REQUIRE(c.claim_next("g", "W", 60, 0, 13));
  CHECK(listed(c, "g1").until == 16.0);
  // Without max_runtime nothing changes.
  REQUIRE(c.enqueue("free", at(20)));
  REQUIRE(c.claim("free", "W", 60, 21.0) == 1);
  CHECK(listed(c, "free").until == 81.0);
}

TEST_CASE("lifecycle: an overrun attempt is written down after a kill -9 and bad max_runtime "
          "gets a coded error", "[sqlite]") {
  TempDir dir;
  Daemon d(dir, kClientClock);
  {
    Client c(d.endpoint());
    REQUIRE(c.enqueue("j", capped(10, 1)));
    REQUIRE(c.claim("j", "A", 60, 2.0) == 1);  // deadline 12
  }
  d.kill9();
  d.restart();
  Client c(d.endpoint());
  auto row = until_written_down(c, "j", 20);
  CHECK(row.error == "max_runtime exceeded");
  CHECK(row.fence == 2);
  CHECK_FALSE(c.complete("j", "A", 1, "late", 21.0));
  for (const json& bad : {json(0), json(-1), json(2e9)}) {
    CHECK(error_code(raw(d, {{"op", "enqueue"}, {"id", "x"}, {"max_runtime", bad}, {"now", 22}})) ==
          "invalid_argument");
  }
  CHECK(error_code(raw(d, {{"op", "enqueue"}, {"id", "x"}, {"max_runtime", "1"}, {"now", 22}})) ==
        "bad_request");
  CHECK_FALSE(c.state("x"));
  // The tool: --max-runtime.
  auto t = tool(d, {"--now", "23", "enqueue", "y", "--max-runtime", "5"});
  CHECK(t.status == 0);
  REQUIRE(c.claim("y", "W", 60, 24.0) == 1);
  CHECK(listed(c, "y").until == 29.0);
  CHECK(tool(d, {"enqueue", "z", "--max-runtime", "0"}).status == 2);
}

namespace {

const fenceq::Headers kTrace{
    {"traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
    {"tracestate", "vendor=1"}};

EnqueueOptions headed(double now, fenceq::Headers h) {
  EnqueueOptions o = at(now);
  o.queue = "h";
  o.headers = std::move(h);
  return o;
}

}  // namespace

TEST_CASE("lifecycle: headers come back with every claim path and in the job's record and a job "
          "without has none") {
  TempDir dir;
  Daemon d(dir, kClientClock);
  Client c(d.endpoint());
  REQUIRE(c.enqueue("a", headed(1, kTrace)));
  REQUIRE(c.enqueue("b", headed(1, {})));
  std::vector<fenceq::JobSpec> batch(2);
  batch[0].id = "c";
  batch[0].queue = "h";
  batch[0].headers = {{"k", "v:1:2"}, {"empty", ""}};
  batch[1].id = "d";
  batch[1].queue = "h";
  batch[1].headers = {{"x", std::string(4000, 'y')}};
  REQUIRE(c.enqueue_many(batch, 1.0) == std::vector<bool>{true, true});
  // claim_next, one job.
  auto a = c.claim_next("h", "W", 30, 0, 2);
  REQUIRE(a);
  CHECK(a->id == "a");
  CHECK(a->headers == kTrace);
  // complete_next's next.
  auto n = c.complete_and_claim_next("a", "W", a->fence, "done", "h", 30, 3.0);
  CHECK(n.completed);
  REQUIRE(n.next);
  CHECK(n.next->id == "b");
  CHECK(n.next->headers.empty());
  // complete_many's next jobs.
  auto m = c.complete_many_and_claim({{"b", "W", n.next->fence, std::nullopt}}, "h", 30, 2, 4.0);
  REQUIRE(m.next.size() == 2);
  CHECK(m.next[0].headers == batch[0].headers);
  CHECK(m.next[1].headers == batch[1].headers);
  // The job's record, finished or not.
  auto ja = c.job("a");
  REQUIRE(ja);
  CHECK(ja->headers == kTrace);
  CHECK(c.job("b")->headers.empty());
  // claim_next with max, after the leases ended.
  REQUIRE(c.enqueue("e", headed(5, {{"only", "e"}})));
  auto many = c.claim_next_many("h", "V", 30, 10, 0, 100);
  REQUIRE(many.size() == 3);  // c, d (their leases ended at 34), e
  for (const auto& j : many) {
    if (j.id == "e") CHECK(j.headers == fenceq::Headers{{"only", "e"}});
    if (j.id == "c") CHECK(j.headers == batch[0].headers);
  }
}

TEST_CASE("lifecycle: bad headers get a coded error and enqueue nothing and a purged job's "
          "headers do not come back with its id") {
  TempDir dir;
  Daemon d(dir, kClientClock);
  Client c(d.endpoint());
  const json base{{"op", "enqueue"}, {"id", "x"}, {"now", 1}};
  auto with = [&](json h) {
    json r = base;
    r["headers"] = std::move(h);
    return r;
  };
  CHECK(error_code(raw(d, with(json::array({"a"})))) == "bad_request");
  CHECK(error_code(raw(d, with({{"a", 1}}))) == "bad_request");
  CHECK(error_code(raw(d, with({{"a", nullptr}}))) == "bad_request");
  CHECK(error_code(raw(d, with({{"", "v"}}))) == "invalid_argument");
  CHECK(error_code(raw(d, with({{"k", std::string(4096, 'v')}}))) == "invalid_argument");
  CHECK(error_code(raw(d, with({{"a", std::string(2048, 'v')}, {"b", std::string(2048, 'v')}}))) ==
        "invalid_argument");
  CHECK(raw(d, {{"op", "job"}, {"id", "x"}, {"now", 2}})["result"].is_null());  // nothing enqueued
  // nil: no headers.
  REQUIRE(raw(d, with(nullptr))["result"] == true);
  CHECK(c.job("x")->headers.empty());
  // A job with headers, done and purged; its id enqueued again without: none.
  REQUIRE(c.enqueue("y", headed(3, kTrace)));
  auto y = c.claim("y", "W", 30, 4.0);
  REQUIRE(y);
  REQUIRE(c.complete("y", "W", *y, std::nullopt, 5.0));
  REQUIRE(c.purge(0) >= 1);
  REQUIRE(c.enqueue("y", headed(6, {})));
  auto again = c.claim_next("h", "W", 30, 0, 7);
  REQUIRE(again);
  CHECK(again->id == "y");
  CHECK(again->fence == 2);
  CHECK(again->headers.empty());
}

TEST_CASE("lifecycle: the tool enqueues with headers and shows them and fenceq work hands them to "
          "its command") {
  TempDir dir;
  Daemon d(dir, {"--clock", "server"});
  Client c(d.endpoint());
  auto t = tool(d, {"enqueue", "job-1", "--queue", "w", "--header",
                    "traceparent=" + kTrace.at("traceparent"), "--header", "tenant=acme=1"});
  INFO(t.out);
  REQUIRE(t.status == 0);
  auto shown = json::parse(tool(d, {"--json", "show", "job-1"}).out);
  CHECK(shown["headers"] == json{{"traceparent", kTrace.at("traceparent")}, {"tenant", "acme=1"}});
  CHECK(tool(d, {"enqueue", "job-2", "--header", "novalue"}).status == 2);
  CHECK(tool(d, {"enqueue", "job-2", "--header", "a=1", "--header", "a=2"}).status == 2);
  // fenceq work: FENCEQ_HEADERS (JSON) and TRACEPARENT for the command.
  const std::string script = dir.file("env.sh");
  {
    std::ofstream f(script);
    f << "#!/bin/sh\ncat >/dev/null\nprintf '%s|%s|%s' \"$FENCEQ_HEADERS\" \"$TRACEPARENT\" "
         "\"${TRACESTATE-unset}\"\n";
  }
  ::chmod(script.c_str(), 0755);
  auto r = fenceq::test::run({fenceq::test::fenceq_tool_path(), "--endpoint", d.endpoint(), "work",
                              "--queue", "w", "--wait", "1", "--exit-when-empty", "--", script});
  INFO(r.out);
  REQUIRE(r.status == 0);
  const auto result = c.state("job-1")->result.value_or("");
  const auto bar = result.find('|');
  REQUIRE(bar != std::string::npos);
  CHECK(json::parse(result.substr(0, bar)) ==
        json{{"traceparent", kTrace.at("traceparent")}, {"tenant", "acme=1"}});
  CHECK(result.substr(bar) == "|" + kTrace.at("traceparent") + "|unset");
}

// C3.22: a job's steps, saved with step_save under the current lease, once
// per job, and given back with every later claim and in the job's record.
TEST_CASE("lifecycle: step_save saves a step once under the current lease and every later claim "
          "and the job's record carry the steps") {
  TempDir dir;
  Daemon d(dir, kClientClock);
  Client c(d.endpoint());
  const fenceq::Payload ch1{"ch_1", false};
  const fenceq::Payload bin{std::string("\x00\xff\x01", 3), true};
  REQUIRE(c.enqueue("o", at(1)));
  auto a = c.claim_next("default", "A", 30, 0, 2);
  REQUIRE(a);
  CHECK(a->steps.empty());  // none saved yet
  CHECK(c.job("o")->steps.empty());
  CHECK(c.step_save("o", "A", a->fence, "charge", ch1, 3.0));
  // Never overwritten, not even by the lease that saved it.
  CHECK_FALSE(c.step_save("o", "A", a->fence, "charge", fenceq::Payload{"ch_2", false}, 3.0));
  CHECK(c.step_save("o", "A", a->fence, "email", std::nullopt, 3.0));  // nil
  CHECK(c.step_save("o", "A", a->fence, "bin", bin, 3.0));
  const fenceq::Steps saved{{"charge", ch1}, {"email", std::nullopt}, {"bin", bin}};
  CHECK(c.job("o")->steps == saved);
  // The attempt fails; the next claim carries the steps.
  REQUIRE(c.fail("o", "A", a->fence, "smtp down", 0.0, 4.0));
  auto b = c.claim_next("default", "B", 30, 0, 5);
  REQUIRE(b);
  CHECK(b->fence == a->fence + 1);
  CHECK(b->attempts == 2);
  CHECK(b->steps == saved);
  // A, late: its lease is stale and saves nothing.
  CHECK_FALSE(c.step_save("o", "A", a->fence, "ship", fenceq::Payload{"s_1", false}, 6.0));
  CHECK(c.job("o")->steps == saved);
  CHECK(c.step_save("o", "B", b->fence, "ship", fenceq::Payload{"s_2", false}, 6.0));
  // An expired lease (B's ends at 35) saves nothing either.
  CHECK_FALSE(c.step_save("o", "B", b->fence, "late", fenceq::Payload{"x", false}, 40.0));
  fenceq::Steps all = saved;
  all["ship"] = fenceq::Payload{"s_2", false};
  auto again = c.claim_next("default", "C", 30, 0, 41);
  REQUIRE(again);
  CHECK(again->steps == all);
  // A released lease saves nothing; complete_next's next and claim_next_many
  // carry the steps too, and the finished job keeps them.
  EnqueueOptions in_next = at(42);
  in_next.queue = "next";
  REQUIRE(c.enqueue("p", in_next));
  auto p = c.claim("p", "D", 30, 42.0);
  REQUIRE(p);
  CHECK(c.step_save("p", "D", *p, "a", fenceq::Payload{"1", false}, 42.0));
  REQUIRE(c.release("p", "D", *p));
  CHECK_FALSE(c.step_save("p", "D", *p, "b", fenceq::Payload{"2", false}, 42.0));
  auto n = c.complete_and_claim_next("o", "C", again->fence, "done", "next", 30, 43.0);
  CHECK(n.completed);
  REQUIRE(n.next);
  CHECK(n.next->id == "p");
  CHECK(n.next->steps == fenceq::Steps{{"a", fenceq::Payload{"1", false}}});
  CHECK(c.job("o")->steps == all);
  REQUIRE(c.fail("p", "C", n.next->fence, "again", 0.0, 44.0));
  auto many = c.claim_next_many("next", "E", 30, 10, 0, 45);
  REQUIRE(many.size() == 1);
  CHECK(many[0].steps == fenceq::Steps{{"a", fenceq::Payload{"1", false}}});
}

TEST_CASE("lifecycle: step_save past a job's bounds or with a bad name is invalid_argument and "
          "saves nothing") {
  TempDir dir;
  Daemon d(dir, kClientClock);
  Client c(d.endpoint());
  auto code_of = [](auto&& call) -> std::string {
    try {
      call();
    } catch (const fenceq::Error& e) {
      return e.code();
    }
    return "";
  };
  REQUIRE(c.enqueue("j", at(1)));
  auto f = c.claim("j", "W", 300, 2.0);
  REQUIRE(f);
  const fenceq::Payload x{"x", false};
  CHECK(code_of([&] { c.step_save("j", "W", *f, "", x, 3.0); }) == "invalid_argument");
  CHECK(code_of([&] { c.step_save("j", "W", *f, std::string(257, 's'), x, 3.0); }) ==
        "invalid_argument");
  CHECK(c.step_save("j", "W", *f, std::string(256, 's'), x, 3.0));
  // 64 steps at most.
  for (int i = 1; i < 64; ++i) REQUIRE(c.step_save("j", "W", *f, "s" + std::to_string(i), x, 3.0));
  CHECK(code_of([&] { c.step_save("j", "W", *f, "s64", x, 3.0); }) == "invalid_argument");
  CHECK(c.job("j")->steps.size() == 64);
  // 256 KiB of values in all.
  REQUIRE(c.enqueue("k", at(4)));
  auto g = c.claim("k", "W", 300, 4.0);
  REQUIRE(g);
  const fenceq::Payload big{std::string(200 * 1024, 'b'), true};
  CHECK(c.step_save("k", "W", *g, "big", big, 5.0));
  CHECK(code_of([&] { c.step_save("k", "W", *g, "more", big, 5.0); }) == "invalid_argument");
  CHECK(c.job("k")->steps == fenceq::Steps{{"big", big}});
  // A server-clock daemon refuses a client's `now` (C2.3); without it, it saves.
  TempDir dir2;
  Daemon s(dir2, {"--clock", "server"});
  Client cs(s.endpoint());
  REQUIRE(cs.enqueue("j"));
  auto h = cs.claim("j", "W", 30);
  REQUIRE(h);
  CHECK(code_of([&] { cs.step_save("j", "W", *h, "a", x, 3.0); }) == "invalid_argument");
  CHECK(cs.step_save("j", "W", *h, "a", x));
  CHECK(cs.job("j")->steps == fenceq::Steps{{"a", x}});
}

TEST_CASE("lifecycle: the tool saves steps with step-save and show and claim-next print them") {
  TempDir dir;
  Daemon d(dir, kClientClock);
  Client c(d.endpoint());
  REQUIRE(c.enqueue("job-1", at(1)));
  auto f = c.claim("job-1", "W", 30, 2.0);
  REQUIRE(f);
  const std::string fence = std::to_string(*f);
  // `fenceq step-save ID OWNER FENCE STEP [VALUE]`: true (exit 0), false (exit 1).
  auto t = tool(d, {"--now", "3", "step-save", "job-1", "W", fence, "charge", "ch_1"});
  INFO(t.out);
  CHECK(t.status == 0);
  CHECK(t.out == "true\n");
  t = tool(d, {"--now", "3", "step-save", "job-1", "W", fence, "charge", "ch_2"});
  CHECK(t.status == 1);
  CHECK(t.out == "false\n");
  t = tool(d, {"--now", "3", "step-save", "job-1", "W", fence, "email"});  // no VALUE: nil
  CHECK(t.status == 0);
  t = tool(d, {"--now", "3", "step-save", "job-1", "Other", fence, "ship", "s"});  // not its lease
  CHECK(t.status == 1);
  CHECK(t.out == "false\n");
  // Errors: exit 2 (a bad name, a missing argument, no --now on a client clock).
  CHECK(tool(d, {"--now", "3", "step-save", "job-1", "W", fence, ""}).status == 2);
  CHECK(tool(d, {"--now", "3", "step-save", "job-1", "W", fence}).status == 2);
  CHECK(tool(d, {"step-save", "job-1", "W", fence, "x", "y"}).status == 2);
  CHECK(c.job("job-1")->steps ==
        fenceq::Steps{{"charge", fenceq::Payload{"ch_1", false}}, {"email", std::nullopt}});
  // show: the steps beside the headers (nil as null).
  auto shown = json::parse(tool(d, {"--json", "show", "job-1"}).out);
  CHECK(shown["steps"] == json{{"charge", "ch_1"}, {"email", nullptr}});
  // claim-next: the next attempt gets them.
  REQUIRE(c.fail("job-1", "W", *f, "boom", 0.0, 4.0));
  auto claimed = json::parse(tool(d, {"--now", "5", "claim-next", "default", "V", "30"}).out);
  CHECK(claimed["id"] == "job-1");
  CHECK(claimed["steps"] == json{{"charge", "ch_1"}, {"email", nullptr}});
  // A job without steps has no "steps" key.
  REQUIRE(c.enqueue("job-2", at(6)));
  CHECK_FALSE(json::parse(tool(d, {"--json", "show", "job-2"}).out).contains("steps"));
}

// C3.23: suspend and signal, and C3.24: deadlines, through the C++ client
// and the fenceq tool.

namespace {

// Whether `token` is what suspend answers: 32 lowercase hex digits.
bool is_token(const std::string& token) {
  return token.size() == 32 && std::all_of(token.begin(), token.end(), [](char ch) {
           return (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f');
         });
}

// Whether the job was written down dead of its deadline (C3.24): `list`
// shows a job past its deadline as dead at once, the reap then writes it so.
bool passed(Client& c, const std::string& id) {
  const auto row = listed(c, id);
  return row.status == JobStatus::dead &&
         row.error == std::optional<std::string>("deadline passed");
}

template <class F>
std::string code_of(F&& call) {
  try {
    call();
  } catch (const fenceq::Error& e) {
    return e.code();
  }
  return "";
}

}  // namespace

// The C++ client's step helper (fenceq::step): the story of the other
// clients' step tests. The charge runs once across a failed attempt; a
// stalled attempt that wakes up late cannot save it again (lease_lost,
// nothing recorded); a bad name is refused before the function runs.
TEST_CASE("lifecycle: C3.22 fenceq::step runs a step once per job across attempts and a stalled "
          "attempt's save is lease_lost") {
  TempDir dir;
  Daemon d(dir, {"--clock", "server"});  // as a worker's daemon runs
  Client c(d.endpoint());
  REQUIRE(c.enqueue("order"));
  int charges = 0, emails = 0;
  auto a = c.claim_next("default", "A", 30);
  REQUIRE(a);
  auto charge = [&] {
    ++charges;
    return std::optional<fenceq::Payload>(fenceq::Payload{"ch_" + std::to_string(charges), false});
  };
  const auto first = fenceq::step(c, *a, "A", "charge", charge);
  CHECK(first == fenceq::Payload{"ch_1", false});
  CHECK(charges == 1);
  CHECK(a->steps == fenceq::Steps{{"charge", first}});
  // The same attempt asks again: the recorded value, no second charge.
  CHECK(fenceq::step(c, *a, "A", "charge", charge) == first);
  CHECK(charges == 1);
  // Bad names: refused before the function runs, nothing sent.
  for (const std::string& bad : {std::string(), std::string(257, 's')}) {
    CHECK(code_of([&] { fenceq::step(c, *a, "A", bad, charge); }) == "invalid_argument");
  }
  CHECK(charges == 1);
  // The email fails: the attempt ends with it, unsaved.
  CHECK_THROWS(fenceq::step(c, *a, "A", "email", [&]() -> std::optional<fenceq::Payload> {
    ++emails;
    throw std::runtime_error("smtp down");
  }));
  REQUIRE(c.fail("order", "A", a->fence, "smtp down", 0.0));
  // B's retry: the charge is handed back and not run again; the email runs.
  auto b = c.claim_next("default", "B", 30);
  REQUIRE(b);
  CHECK(fenceq::step(c, *b, "B", "charge", charge) == first);
  CHECK(charges == 1);
  const auto sent = fenceq::step(c, *b, "B", "email", [&] {
    ++emails;
    return std::optional<fenceq::Payload>();  // nil
  });
  CHECK_FALSE(sent);
  CHECK(emails == 2);
  // A, stalled and waking late, runs a step it had not saved: its save is
  // refused (lease_lost) and nothing is recorded; B's own runs once.
  CHECK(code_of([&] {
          fenceq::step(c, *a, "A", "ship", [] {
            return std::optional<fenceq::Payload>(fenceq::Payload{"s_A", false});
          });
        }) == "lease_lost");
  CHECK(a->steps.count("ship") == 0);
  CHECK(fenceq::step(c, *b, "B", "ship", [] {
          return std::optional<fenceq::Payload>(fenceq::Payload{"s_B", false});
        }) == fenceq::Payload{"s_B", false});
  REQUIRE(c.complete("order", "B", b->fence, "shipped"));
  const auto detail = c.job("order");
  REQUIRE(detail);
  CHECK(detail->steps == fenceq::Steps{{"charge", first},
                                       {"email", std::nullopt},
                                       {"ship", fenceq::Payload{"s_B", false}}});
}

TEST_CASE("lifecycle: C3.22 C3.23 a step survives a failed attempt and a stale lease cannot save "
          "it again, suspend hands a token whose one signal wakes the job with its value") {
  TempDir dir;
  Daemon d(dir, kClientClock);
  Client c(d.endpoint());
  const fenceq::Payload ch1{"ch_1", false};
  REQUIRE(c.enqueue("order", at(1)));
  // A charges (a step), then the email fails: the attempt ends.
  auto a = c.claim_next("default", "A", 30, 0, 2);
  REQUIRE(a);
  CHECK_FALSE(a->signalled);
  REQUIRE(c.step_save("order", "A", a->fence, "charge", ch1, 3.0));
  REQUIRE(c.fail("order", "A", a->fence, "smtp down", 0.0, 4.0));
  // B's retry has the charge: it does not charge again.
  auto b = c.claim_next("default", "B", 30, 0, 5);
  REQUIRE(b);
  CHECK(b->steps == fenceq::Steps{{"charge", ch1}});
  CHECK_FALSE(b->signalled);
  // A, stalled and waking late, can neither save the charge again nor suspend.
  CHECK_FALSE(c.step_save("order", "A", a->fence, "charge", fenceq::Payload{"ch_2", false}, 5.5));
  CHECK_FALSE(c.suspend("order", "A", a->fence, 3600, fenceq::OnTimeout::retry, 5.5));
  // B waits for the payment's webhook: the lease ends, the attempt is given
  // back, the fence kept.
  auto token = c.suspend("order", "B", b->fence, 3600, fenceq::OnTimeout::retry, 6.0);
  REQUIRE(token);
  CHECK(is_token(*token));
  auto row = listed(c, "order");
  CHECK(row.status == JobStatus::suspended);
  CHECK_FALSE(row.owner);
  CHECK(row.fence == b->fence);
  CHECK(row.attempts == 1);
  auto detail = c.job("order");
  REQUIRE(detail);
  CHECK(detail->suspend_timeout == 3606.0);
  CHECK_FALSE(detail->suspend_fails);
  CHECK_FALSE(detail->signalled);
  CHECK(detail->steps == fenceq::Steps{{"charge", ch1}});
  auto stats = fenceq::test::queue_stats(c, "default");
  REQUIRE(stats);
  CHECK(stats->suspended == 1);
  // The suspend ended B's attempt: nothing of B's is taken after it, and no
  // claim takes the job while it waits.
  CHECK_FALSE(c.complete("order", "B", b->fence, "late", 6.5));
  CHECK_FALSE(c.suspend("order", "B", b->fence, 60, fenceq::OnTimeout::retry, 6.5));
  CHECK_FALSE(c.claim_next("default", "C", 30, 0, 7));
  fenceq::ListOptions waiting;
  waiting.status = JobStatus::suspended;
  CHECK(c.list(waiting).size() == 1);
  // The webhook: its one signal wakes the job; a second (a retried delivery) is false.
  CHECK(c.signal(*token, fenceq::Payload{"paid", false}, 8.0));
  CHECK_FALSE(c.signal(*token, fenceq::Payload{"paid again", false}, 8.0));
  // The next claim carries the signal's value beside the steps.
  auto next = c.claim_next("default", "C", 30, 0, 9);
  REQUIRE(next);
  CHECK(next->id == "order");
  CHECK(next->fence == b->fence + 1);
  CHECK(next->attempts == 2);
  CHECK(next->signalled);
  CHECK(next->signal == fenceq::Payload{"paid", false});
  CHECK(next->steps == fenceq::Steps{{"charge", ch1}});  // the signal is no step
  detail = c.job("order");
  REQUIRE(detail);
  CHECK(detail->signalled);
  CHECK(detail->signal == fenceq::Payload{"paid", false});
  CHECK_FALSE(detail->suspend_timeout);
  // Suspended again: a new token; the earlier signal is forgotten, the
  // earlier token wakes nothing, and a signal without a value is nil (still
  // a signal: present, with no value).
  auto again = c.suspend("order", "C", next->fence, 600, fenceq::OnTimeout::fail, 10.0);
  REQUIRE(again);
  CHECK(*again != *token);
  detail = c.job("order");
  REQUIRE(detail);
  CHECK_FALSE(detail->signalled);
  CHECK(detail->suspend_timeout == 610.0);
  CHECK(detail->suspend_fails);
  CHECK_FALSE(c.signal(*token, std::nullopt, 11.0));
  CHECK(c.signal(*again, std::nullopt, 11.0));
  auto many = c.claim_next_many("default", "D", 30, 10, 0, 12);
  REQUIRE(many.size() == 1);
  CHECK(many[0].signalled);
  CHECK_FALSE(many[0].signal);
  CHECK(c.complete("order", "D", many[0].fence, "shipped", 13.0));
  CHECK(listed(c, "order").status == JobStatus::done);
}

TEST_CASE("lifecycle: C3.23 a suspend that times out makes the job ready again without a signal "
          "or dead with on_timeout fail and its token wakes nothing") {
  TempDir dir;
  Daemon d(dir, kClientClock);
  Client c(d.endpoint());
  REQUIRE(c.enqueue("t", at(1)));
  auto f = c.claim("t", "W", 30, 2.0);
  REQUIRE(f);
  auto token = c.suspend("t", "W", *f, 1, fenceq::OnTimeout::retry, 3.0);  // the wait ends at 4
  REQUIRE(token);
  CHECK_FALSE(c.claim_next("default", "V", 30, 0, 3.5));
  // Past the timeout: ready again (SQLite at its next batch, PostgreSQL
  // within its reap: polled).
  REQUIRE(
      fenceq::test::until_reaped(c, 10, [&] { return listed(c, "t").status == JobStatus::ready; }));
  CHECK(listed(c, "t").error == std::optional<std::string>("suspend timed out"));
  CHECK_FALSE(c.signal(*token, fenceq::Payload{"late", false}, 10.5));
  auto next = c.claim_next("default", "V", 30, 0, 11);
  REQUIRE(next);
  CHECK(next->id == "t");
  CHECK_FALSE(next->signalled);
  CHECK(next->fence == *f + 1);
  CHECK(next->attempts == 1);  // the suspended attempt was given back
  // on_timeout fail: dead of it.
  REQUIRE(c.enqueue("f", at(12)));
  auto g = c.claim("f", "W", 30, 12.0);
  REQUIRE(g);
  auto dead = c.suspend("f", "W", *g, 1, fenceq::OnTimeout::fail, 13.0);
  REQUIRE(dead);
  REQUIRE(
      fenceq::test::until_reaped(c, 20, [&] { return listed(c, "f").status == JobStatus::dead; }));
  CHECK(listed(c, "f").error == std::optional<std::string>("suspend timed out"));
  CHECK_FALSE(c.signal(*dead, std::nullopt, 21.0));
  CHECK(listed(c, "f").status == JobStatus::dead);
}

TEST_CASE("lifecycle: C3.23 a lease that is not current cannot suspend the job and nothing "
          "changes") {
  TempDir dir;
  Daemon d(dir, kClientClock);
  Client c(d.endpoint());
  REQUIRE(c.enqueue("s", at(1)));
  auto f = c.claim("s", "A", 30, 2.0);
  REQUIRE(f);
  const auto before = listed(c, "s");
  CHECK_FALSE(c.suspend("s", "A", *f + 6, 60, fenceq::OnTimeout::retry, 3.0));  // stale fence
  CHECK_FALSE(c.suspend("s", "B", *f, 60, fenceq::OnTimeout::fail, 3.0));       // another owner
  CHECK_FALSE(c.suspend("nope", "A", 1, 60, fenceq::OnTimeout::retry, 3.0));    // no such job
  auto row = listed(c, "s");
  CHECK(row.status == JobStatus::leased);
  CHECK(row.owner == before.owner);
  CHECK(row.fence == before.fence);
  CHECK(row.attempts == before.attempts);
  CHECK_FALSE(c.job("s")->suspend_timeout);
  // An expired lease (it ended at 32) and a released one cannot either.
  CHECK_FALSE(c.suspend("s", "A", *f, 60, fenceq::OnTimeout::retry, 40.0));
  auto g = c.claim("s", "B", 30, 41.0);
  REQUIRE(g);
  REQUIRE(c.release("s", "B", *g));
  CHECK_FALSE(c.suspend("s", "B", *g, 60, fenceq::OnTimeout::retry, 42.0));
  CHECK(listed(c, "s").status == JobStatus::ready);
  CHECK_FALSE(fenceq::test::queue_stats(c, "default")->suspended);
}

TEST_CASE("lifecycle: C3.24 a job not claimed by its deadline is never claimed and becomes dead "
          "and one claimed before it runs") {
  TempDir dir;
  Daemon d(dir, kClientClock);
  Client c(d.endpoint());
  EnqueueOptions late = at(1);
  late.deadline = 10;
  REQUIRE(c.enqueue("late", late));
  EnqueueOptions soon = at(1);
  soon.deadline = 50;
  soon.queue = "soon";
  REQUIRE(c.enqueue("soon", soon));
  auto s = c.claim_next("soon", "W", 30, 0, 20);
  REQUIRE(s);
  CHECK(c.complete("soon", "W", s->fence, "ok", 21.0));
  // Past its deadline the job is never claimed, by any path.
  CHECK_FALSE(c.claim_next("default", "W", 30, 0, 11));
  CHECK_FALSE(c.claim("late", "W", 30, 11.0));
  // Listed dead at once; written down dead of it by the reap (SQLite at its
  // next batch, PostgreSQL within a second: polled).
  CHECK(listed(c, "late").status == JobStatus::dead);
  REQUIRE(fenceq::test::until_reaped(c, 12, [&] { return passed(c, "late"); }));
  CHECK(listed(c, "late").status == JobStatus::dead);
  auto stats = fenceq::test::queue_stats(c, "default");
  REQUIRE(stats);
  CHECK(stats->totals.deadline_passed == 1);
  // enqueue_many's entries take one each.
  fenceq::JobSpec m1, m2;
  m1.id = "m1";
  m1.deadline = 100;
  m2.id = "m2";
  REQUIRE(c.enqueue_many({m1, m2}, 13.0) == std::vector<bool>{true, true});
  REQUIRE(fenceq::test::until_reaped(c, 101, [&] { return passed(c, "m1"); }));
  auto m = c.claim_next("default", "W", 30, 0, 102);
  REQUIRE(m);
  CHECK(m->id == "m2");
}

TEST_CASE("lifecycle: C3.23 C3.24 bad suspend, signal and deadline input gets a coded error and "
          "changes nothing") {
  TempDir dir;
  Daemon d(dir, kClientClock);
  Client c(d.endpoint());
  REQUIRE(c.enqueue("j", at(1)));
  auto f = c.claim("j", "W", 300, 2.0);
  REQUIRE(f);
  const auto suspend = [&](double timeout) {
    return code_of([&] { c.suspend("j", "W", *f, timeout, fenceq::OnTimeout::retry, 3.0); });
  };
  CHECK(suspend(0) == "invalid_argument");
  CHECK(suspend(0.5) == "invalid_argument");
  CHECK(suspend(2592001) == "invalid_argument");
  CHECK(listed(c, "j").status == JobStatus::leased);
  CHECK(code_of([&] { c.signal("", std::nullopt, 3.0); }) == "invalid_argument");
  CHECK(code_of([&] { c.signal(std::string(257, 't'), std::nullopt, 3.0); }) ==
        "invalid_argument");
  // A deadline below 0 is refused by the client (0 is none), one past 1e11 by the daemon.
  EnqueueOptions bad = at(3);
  bad.deadline = -1;
  CHECK(code_of([&] { c.enqueue("k", bad); }) == "invalid_argument");
  bad.deadline = 2e11;
  CHECK(code_of([&] { c.enqueue("k", bad); }) == "invalid_argument");
  fenceq::JobSpec entry;
  entry.id = "k";
  entry.deadline = -5;
  CHECK(code_of([&] { c.enqueue_many({entry}, 3.0); }) == "invalid_argument");
  CHECK_FALSE(c.job("k"));
  // on_timeout other than retry or fail: the tool's --on-timeout (exit 2,
  // nothing sent); the C++ client's OnTimeout has no third value.
  auto t = tool(d, {"--now", "3", "suspend", "j", "W", std::to_string(*f), "60", "--on-timeout",
                    "x"});
  CHECK(t.status == 2);
  CHECK(listed(c, "j").status == JobStatus::leased);
  // A server-clock daemon refuses a client's `now` (C2.3).
  TempDir dir2;
  Daemon s(dir2, {"--clock", "server"});
  Client cs(s.endpoint());
  REQUIRE(cs.enqueue("j"));
  auto h = cs.claim("j", "W", 30);
  REQUIRE(h);
  CHECK(code_of([&] { cs.suspend("j", "W", *h, 60, fenceq::OnTimeout::retry, 3.0); }) ==
        "invalid_argument");
  auto token = cs.suspend("j", "W", *h, 60);
  REQUIRE(token);
  CHECK(cs.signal(*token, fenceq::Payload{"v", false}));
  auto next = cs.claim_next("default", "W", 30);
  REQUIRE(next);
  CHECK(next->signal == fenceq::Payload{"v", false});
}

TEST_CASE("lifecycle: the tool suspends with suspend, wakes with signal once, enqueues with "
          "--deadline, and show and claim-next print the signal and the suspension") {
  TempDir dir;
  Daemon d(dir, kClientClock);
  Client c(d.endpoint());
  REQUIRE(c.enqueue("job-1", at(1)));
  auto f = c.claim("job-1", "W", 30, 2.0);
  REQUIRE(f);
  const std::string fence = std::to_string(*f);
  // `fenceq suspend ID OWNER FENCE TIMEOUT`: the token (exit 0).
  auto t = tool(d, {"--now", "3", "suspend", "job-1", "W", fence, "3600"});
  INFO(t.out);
  REQUIRE(t.status == 0);
  REQUIRE(t.out.size() == 33);
  const std::string token = t.out.substr(0, 32);
  CHECK(is_token(token));
  CHECK(t.out.back() == '\n');
  // The lease is gone: a second suspend is refused (null, exit 1).
  t = tool(d, {"--now", "3", "suspend", "job-1", "W", fence, "3600"});
  CHECK(t.status == 1);
  CHECK(t.out == "null\n");
  // show: suspended, when the wait ends and what then; no signal yet.
  auto shown = json::parse(tool(d, {"--json", "show", "job-1"}).out);
  CHECK(shown["state"] == "suspended");
  CHECK(shown["suspended"] == json{{"timeout", 3603.0}, {"on_timeout", "retry"}});
  CHECK_FALSE(shown.contains("signal"));
  // stats and list count and filter it.
  auto stats = json::parse(tool(d, {"--json", "stats"}).out);
  CHECK(stats["queues"]["default"]["suspended"] == 1);
  auto rows = tool(d, {"--json", "list", "--state", "suspended"});
  CHECK(rows.status == 0);
  CHECK(json::parse(rows.out)["id"] == "job-1");
  // `fenceq signal TOKEN VALUE`: true (exit 0) once, then false (exit 1).
  t = tool(d, {"--now", "4", "signal", token, "paid"});
  CHECK(t.status == 0);
  CHECK(t.out == "true\n");
  t = tool(d, {"--now", "4", "signal", token, "paid"});
  CHECK(t.status == 1);
  CHECK(t.out == "false\n");
  shown = json::parse(tool(d, {"--json", "show", "job-1"}).out);
  CHECK(shown["state"] == "ready");
  CHECK(shown["signal"] == "paid");
  CHECK_FALSE(shown.contains("suspended"));
  // claim-next: the next attempt gets the signal.
  auto claimed = json::parse(tool(d, {"--now", "5", "claim-next", "default", "V", "30"}).out);
  CHECK(claimed["id"] == "job-1");
  CHECK(claimed["signal"] == "paid");
  // --on-timeout fail, and a signal without a value (null, but present).
  const std::string fence2 = std::to_string(claimed["fence"].get<std::int64_t>());
  t = tool(d, {"--now", "6", "suspend", "job-1", "V", fence2, "60", "--on-timeout", "fail"});
  REQUIRE(t.status == 0);
  const std::string token2 = t.out.substr(0, 32);
  shown = json::parse(tool(d, {"--json", "show", "job-1"}).out);
  CHECK(shown["suspended"] == json{{"timeout", 66.0}, {"on_timeout", "fail"}});
  CHECK_FALSE(shown.contains("signal"));  // the earlier signal is forgotten
  CHECK(tool(d, {"--now", "7", "signal", token2}).status == 0);
  claimed = json::parse(tool(d, {"--now", "8", "claim-next", "default", "V", "30"}).out);
  REQUIRE(claimed.contains("signal"));
  CHECK(claimed["signal"].is_null());
  // A job never suspended has neither key.
  REQUIRE(c.enqueue("job-2", at(9)));
  shown = json::parse(tool(d, {"--json", "show", "job-2"}).out);
  CHECK_FALSE(shown.contains("signal"));
  CHECK_FALSE(shown.contains("suspended"));
  // Errors: exit 2 (a timeout out of range, a missing TIMEOUT or TOKEN, an empty token).
  CHECK(tool(d, {"--now", "9", "suspend", "job-2", "W", "1", "0"}).status == 2);
  CHECK(tool(d, {"--now", "9", "suspend", "job-2", "W", "1"}).status == 2);
  CHECK(tool(d, {"--now", "9", "signal"}).status == 2);
  CHECK(tool(d, {"--now", "9", "signal", ""}).status == 2);
  // enqueue --deadline: not claimed by then, never claimed; dead.
  t = tool(d, {"--now", "10", "enqueue", "job-d", "--queue", "d", "--deadline", "20"});
  CHECK(t.status == 0);
  CHECK(t.out == "true\n");
  t = tool(d, {"--now", "21", "claim-next", "d", "W", "30"});
  CHECK(t.status == 1);
  CHECK(t.out == "null\n");
  REQUIRE(fenceq::test::until_reaped(c, 22, [&] { return passed(c, "job-d"); }));
  shown = json::parse(tool(d, {"--json", "show", "job-d"}).out);
  CHECK(shown["state"] == "dead");
  CHECK(shown["error"] == "deadline passed");
  stats = json::parse(tool(d, {"--json", "stats"}).out);
  CHECK(stats["queues"]["d"]["totals"]["deadline_passed"] == 1);
  // Bad deadlines: exit 2, nothing enqueued.
  CHECK(tool(d, {"--now", "23", "enqueue", "job-e", "--deadline", "0"}).status == 2);
  CHECK(tool(d, {"--now", "23", "enqueue", "job-e", "--deadline", "soon"}).status == 2);
  CHECK_FALSE(c.job("job-e"));
  // enqueue --from: --deadline holds for every line.
  const auto lines = dir.file("jobs.jsonl");
  std::ofstream(lines) << R"({"id": "f1"})" << "\n" << R"({"id": "f2", "queue": "q2"})" << "\n";
  t = tool(d, {"--now", "24", "enqueue", "--from", lines, "--deadline", "100"});
  CHECK(t.status == 0);
  CHECK(tool(d, {"--now", "24", "enqueue", "--from", lines}).status == 1);  // all there
  REQUIRE(fenceq::test::until_reaped(c, 150, [&] { return passed(c, "f1") && passed(c, "f2"); }));
  t = tool(d, {"--now", "151", "enqueue", "--from", "-", "--deadline", "0"});
  CHECK(t.status == 2);
}
