// The HTTP listener and the operators' dashboard (issue 19) against the real
// fenceqd, on SQLite and (the "pg dashboard: " variants) on PostgreSQL:
// /metrics and /healthz for anyone, the dashboard and its API only with an
// auth file and HTTP Basic credentials, actions only with the page's CSRF
// token from its own origin, --http-read-only, what a hostile HTTP client
// cannot do to the job socket, and a real browser (Debian's chromium,
// headless, driven by puppeteer-core: tests/browser/dashboard.mjs).
#include <catch2/catch.hpp>

#include <sqlite3.h>
#include <sys/stat.h>

#include <fenceq/client.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "daemon.hpp"
#include "dashboard.hpp"
#include "http/answers.hpp"
#include "probe.hpp"

using fenceq::Client;
using fenceq::test::Daemon;
using fenceq::test::Dashboard;
using fenceq::test::Http;
using fenceq::test::auth_file;
using fenceq::test::basic;
using fenceq::test::csrf_header;
using fenceq::test::dead_job;
using fenceq::test::TempDir;
using fenceq::test::http_port;
using fenceq::test::http_request;
using json = nlohmann::json;
using namespace std::chrono_literals;

namespace {

// A fan-in for the browser test (issue 32): report-sum, in queue reports,
// waits for report-part-1 (done) and report-part-2 (ready).
void enqueue_report(Client& c) {
  auto reports = fenceq::test::in_queue("reports");
  for (const char* id : {"report-part-1", "report-part-2"}) REQUIRE(c.enqueue(id, reports));
  reports.after = {"report-part-2", "report-part-1"};
  REQUIRE(c.enqueue("report-sum", reports));
  REQUIRE(c.claim("report-part-1", "worker-5", 30) == 1);
  REQUIRE(c.complete("report-part-1", "worker-5", 1, "41"));
}

// What the browser showed of enqueue_report's jobs: the child's page lists
// its parents in id order, each with its state, linking to its page; the
// parent not done yet lists the child still blocked, and links back to it.
void check_report_pages(const json& wf) {
  CHECK(wf["child_state"] == "blocked");
  CHECK(wf["parents"] ==
        json::array({{{"id", "report-part-1"}, {"text", "report-part-1"},
                      {"href", "#/job/report-part-1"}, {"state", "done"}},
                     {{"id", "report-part-2"}, {"text", "report-part-2"},
                      {"href", "#/job/report-part-2"}, {"state", "ready"}}}));
  CHECK(wf["opened"] == "#/job/report-part-2");
  CHECK(wf["blocked_children"] == json::array({{{"id", "report-sum"}, {"text", "report-sum"},
                                                {"href", "#/job/report-sum"},
                                                {"state", "blocked"}}}));
  CHECK(wf["parent_has_parents"] == false);
  CHECK(wf["back"] == "#/job/report-sum");
}

// The page opened with the login in its URL: the document's URL kept it (so
// fetch("/api/...") would be refused), and the page still loaded its data
// and acted (queue thumbnails paused and its group limits set, checked over
// the wire too).
void check_url_login(const json& seen, Client& c) {
  CHECK(seen["document_url_has_login"] == true);
  CHECK(seen["ready"] == "2");
  CHECK(seen["styled"] == true);
  CHECK(seen["paused"] == true);
  CHECK(seen["error"] == false);
  // The limits cell's text: the queue's group limits, then (C3.25) the
  // summary of the groups with limits of their own and each of them.
  CHECK(seen["group_limits"] ==
        "max 3 leased per group, 7 per 2 s per group1 group with limits of its ownacme: max 5 "
        "leased");
  bool paused = false;
  std::int64_t group_max_leased = 0;
  for (const auto& q : c.stats().queues) {
    if (q.queue == "thumbnails" && q.config) {
      paused = q.config->paused;
      group_max_leased = q.config->group_max_leased;
    }
  }
  CHECK(paused);
  CHECK(group_max_leased == 3);
}

// The throughput chart as the browser laid it out: its section's whole
// width (1280 px window: about 1160 px), drawn in as many pixels (not a
// narrower canvas stretched), with the rates the daemon had before the page
// was first opened.
void check_chart(const json& chart) {
  CHECK(chart["width"].get<double>() >= 0.98 * chart["section"].get<double>());
  CHECK(chart["width"].get<double>() <= chart["section"].get<double>() + 1);
  CHECK(chart["section"].get<double>() > 1000);
  CHECK(chart["pixels"].get<double>() ==
        Approx(chart["width"].get<double>() * chart["ratio"].get<double>()).margin(1));
  CHECK(chart["points"].get<int>() >= 2);
}

}  // namespace

TEST_CASE("http: /metrics and /healthz need no credentials, and without --http-auth-file there "
          "is no dashboard (404, no job data)") {
  TempDir dir;
  Daemon d(dir, {"--clock", "server", "--http-listen", "127.0.0.1:0"});
  const int port = http_port(d);
  REQUIRE(port > 0);
  Http h{port, ""};
  auto m = h.get("/metrics");
  CHECK(m.status == 200);
  CHECK(m.body.find("fenceq_requests_total") != std::string::npos);
  auto health = h.get("/healthz");
  CHECK(health.status == 200);
  CHECK(health.body == "ok\n");
  for (const char* path : {"/", "/api/overview", "/api/jobs", "/api/session"}) {
    INFO(path);
    CHECK(h.get(path).status == 404);
  }
  // The old flag is an alias.
  TempDir dir2;
  Daemon old(dir2, {"--clock", "server", "--metrics-listen", "127.0.0.1:0"});
  CHECK(Http{http_port(old), ""}.get("/metrics").status == 200);
}

TEST_CASE("http: the auth file is refused at start unless only the daemon's user (and group) can "
          "read it, and unless it holds user:password lines") {
  struct Case {
    mode_t mode;
    std::string text;
    bool starts;
  };
  const Case cases[] = {
      {0600, "ops:secret\n", true},  {0640, "ops:secret\n", true},
      {0644, "ops:secret\n", false}, {0660, "ops:secret\n", false},
      {0604, "ops:secret\n", false}, {0600, "no colon here\n", false},
      {0600, ":nouser\n", false},    {0600, "# only a comment\n", false},
      // A user twice (which password?), a password with a NUL byte (a C
      // string would stop at it: "sec" would be the password).
      {0600, "ops:secret\nops:other\n", false},
      {0600, std::string("ops:sec\0ret\n", 11), false},
  };
  for (const auto& c : cases) {
    INFO("mode " << std::oct << c.mode << std::dec << ", text " << c.text);
    TempDir dir;
    const auto file = auth_file(dir, c.text, c.mode);
    // A good file: started and answering (the constructor waits for it).
    Daemon d(dir, {"--clock", "server", "--http-listen", "127.0.0.1:0", "--http-auth-file", file},
             c.starts);
    if (c.starts) {
      CHECK(fenceq::test::serves(d, 5000ms));
      CHECK(http_port(d) > 0);
    } else {
      // A bad one: it exits at once, saying why.
      for (int i = 0; i < 100 && d.alive(); ++i) std::this_thread::sleep_for(50ms);
      CHECK_FALSE(d.alive());
      CHECK(d.exit_status() != 0);
      CHECK(d.log().find("--http-auth-file") != std::string::npos);
    }
  }
}

TEST_CASE("http: every dashboard and API request needs the credentials (401 otherwise), and the "
          "page says who is in") {
  Dashboard db;
  for (const char* path : {"/", "/api/session", "/api/overview", "/api/jobs", "/api/job?id=x"}) {
    INFO(path);
    auto none = db.as("").get(path);
    CHECK(none.status == 401);
    CHECK(none.head.find("WWW-Authenticate: Basic") != std::string::npos);
    CHECK(db.as().get(path).status == 200);
  }
  // Wrong credentials: a few only, as more would make the address wait (429,
  // abuse: login guessing).
  CHECK(db.as("ops:wrong").get("/").status == 401);
  CHECK(db.as("nobody:secret").get("/api/jobs").status == 401);
  auto page = db.as().get("/");
  CHECK(page.body.find("<title>fenceq</title>") != std::string::npos);
  CHECK(page.head.find("Content-Security-Policy") != std::string::npos);
  CHECK(page.head.find("Cache-Control: no-store") != std::string::npos);
  auto s = db.as().get("/api/session").data()["result"];
  CHECK(s["user"] == "ops");
  CHECK(s["read_only"] == false);
  CHECK(s["csrf"].get<std::string>().size() == 32);
  // A POST without credentials is refused before anything else.
  CHECK(db.as("").send("POST", "/api/retry?id=x").status == 401);
}

TEST_CASE("http: an action needs the page's CSRF token and its own origin (403 otherwise), "
          "applies once it has them, and is logged") {
  Dashboard db;
  Client c(db.d->endpoint());
  fenceq::EnqueueOptions in_q;
  in_q.queue = "q";
  dead_job(c, "d1", in_q, "w", "boom");
  const auto token = db.csrf();
  const auto h = db.as();
  CHECK(h.send("POST", "/api/retry?id=d1").status == 403);
  CHECK(h.send("POST", "/api/retry?id=d1", {csrf_header("0123456789abcdef0123456789abcdef")})
            .status == 403);
  CHECK(h.send("POST", "/api/retry?id=d1", {csrf_header(token), "Origin: http://evil.example"})
            .status == 403);
  CHECK(h.send("POST", "/api/retry?id=d1", {csrf_header(token), "Sec-Fetch-Site: cross-site"})
            .status == 403);
  // Nothing applied by the refused ones.
  CHECK(fenceq::test::listed(c, "d1").status == fenceq::JobStatus::dead);
  CHECK(h.send("POST", "/api/retry?id=d1",
               {csrf_header(token), "Origin: http://127.0.0.1:" + std::to_string(db.port + 1)})
            .status == 403);
  // Behind a reverse proxy that terminates TLS the scheme differs: same host, accepted.
  auto ok = h.send("POST", "/api/retry?id=d1",
                   {csrf_header(token), "Origin: https://127.0.0.1:" + std::to_string(db.port)});
  CHECK(ok.status == 200);
  CHECK(ok.data()["result"] == true);
  CHECK(fenceq::test::listed(c, "d1").status == fenceq::JobStatus::ready);
  // Cancel, pause, limits and purge go through the same way.
  CHECK(h.send("POST", "/api/cancel?id=d1", {csrf_header(token)}).data()["result"] == true);
  CHECK(fenceq::test::listed(c, "d1").status == fenceq::JobStatus::cancelled);
  CHECK(h.send("POST", "/api/pause?queue=q", {csrf_header(token)}).status == 200);
  CHECK(h.send("POST", "/api/limit?queue=q&max_leased=4&rate=9&per=3", {csrf_header(token)})
            .status == 200);
  fenceq::QueueConfig cfg;
  for (const auto& q : c.stats().queues) {
    if (q.queue == "q" && q.config) cfg = *q.config;
  }
  CHECK(cfg.paused);
  CHECK(cfg.max_leased == 4);
  CHECK(cfg.rate == 9);
  CHECK(cfg.per == 3.0);
  // Each group's limits, by their own button: the queue's own stay as they were.
  CHECK(h.send("POST", "/api/limit?queue=q&group_max_leased=2&group_rate=5&group_per=7",
               {csrf_header(token)})
            .status == 200);
  for (const auto& q : c.stats().queues) {
    if (q.queue == "q" && q.config) cfg = *q.config;
  }
  CHECK(cfg.group_max_leased == 2);
  CHECK(cfg.group_rate == 5);
  CHECK(cfg.group_per == 7.0);
  CHECK(cfg.max_leased == 4);
  CHECK(cfg.rate == 9);
  auto no_period = h.send("POST", "/api/limit?queue=q&group_per=0", {csrf_header(token)});
  CHECK(no_period.status == 400);
  CHECK(no_period.data()["error"]["code"] == "invalid_argument");
  CHECK(h.send("POST", "/api/resume?queue=q", {csrf_header(token)}).status == 200);
  auto purged = h.send("POST", "/api/purge?queue=q&older_than=0", {csrf_header(token)});
  CHECK(purged.status == 200);
  CHECK(purged.data()["result"] == 1);
  // Bad arguments: a coded 400, nothing applied.
  auto bad = h.send("POST", "/api/limit?queue=q&rate=-1", {csrf_header(token)});
  CHECK(bad.status == 400);
  CHECK(bad.data()["error"]["code"] == "invalid_argument");
  CHECK(h.send("POST", "/api/cancel", {csrf_header(token)}).status == 400);
  for (const char* rate : {"x", "9x", "1e999"}) {
    INFO(rate);
    auto nan = h.send("POST", std::string("/api/limit?queue=q&rate=") + rate, {csrf_header(token)});
    CHECK(nan.status == 400);
    CHECK(nan.data()["error"]["message"] == "field 'rate' must be an integer");
  }
  auto unknown = h.send("POST", "/api/nonsense?id=d1", {csrf_header(token)});
  CHECK(unknown.status == 404);
  CHECK(unknown.data()["error"]["message"] == "unknown action");
  // Each action in the log: who, what, which.
  const auto log = db.d->log();
  CHECK(log.find("dashboard: ops retry job 'd1'") != std::string::npos);
  CHECK(log.find("dashboard: ops cancel job 'd1'") != std::string::npos);
  CHECK(log.find("dashboard: ops pause queue 'q'") != std::string::npos);
  CHECK(log.find("dashboard: 'retry' refused for ops") != std::string::npos);
}

TEST_CASE("http: --http-read-only refuses every action (405) and still shows everything") {
  Dashboard db({"--http-read-only"});
  Client c(db.d->endpoint());
  REQUIRE(c.enqueue("r1"));
  const auto token = db.csrf();
  CHECK(db.as().get("/api/session").data()["result"]["read_only"] == true);
  for (const char* a : {"/api/retry?id=r1", "/api/cancel?id=r1", "/api/pause?queue=default",
                        "/api/purge?older_than=0", "/api/retry_many?queue=default",
                        "/api/cancel_many?queue=default&state=ready"}) {
    INFO(a);
    CHECK(db.as().send("POST", a, {csrf_header(token)}).status == 405);
  }
  CHECK(fenceq::test::listed(c, "r1").status == fenceq::JobStatus::ready);
  CHECK(db.as().get("/api/job?id=r1").status == 200);
  CHECK(db.as().get("/api/overview").status == 200);
}

TEST_CASE("http: the API shows the queues with their settings and counters, pages jobs by id "
          "prefix, and previews payloads (text, binary as hex, cut with the full size)") {
  Dashboard db;
  Client c(db.d->endpoint());
  fenceq::EnqueueOptions o;
  o.queue = "img";
  for (const char* id : {"a-1", "a-2", "b-1", "b-2", "b-3", "c-1"}) REQUIRE(c.enqueue(id, o));
  o.payload = fenceq::Payload{std::string(20000, 'x'), false};
  REQUIRE(c.enqueue("long-text", o));
  o.payload = fenceq::Payload{std::string("\x00\x01\xfe\xff", 4), true};
  REQUIRE(c.enqueue("bin", o));
  REQUIRE(c.queue_config("img", fenceq::QueueSettings{.max_leased = 2}));
  REQUIRE(c.claim_next("img", "w", 30));

  auto ov = db.as().get("/api/overview").data()["result"];
  CHECK(ov["queues"]["img"]["ready"] == 7);
  CHECK(ov["queues"]["img"]["leased"] == 1);
  CHECK(ov["queues"]["img"]["max_leased"] == 2);
  CHECK(ov["queues"]["img"]["totals"]["claimed"] == 1);
  CHECK(ov["store"].get<std::string>().size() > 0);
  CHECK(ov["clock"] == "server");
  CHECK(ov["history"].is_array());
  // The counters sampled twice (every 2 s from the start): one rate point.
  for (int i = 0; i < 50 && ov["history"].empty(); ++i) {
    std::this_thread::sleep_for(100ms);
    ov = db.as().get("/api/overview").data()["result"];
  }
  CHECK(ov["history"].size() >= 1);

  auto page = db.as().get("/api/jobs?prefix=b-&limit=2").data()["result"];
  REQUIRE(page["jobs"].size() == 2);
  CHECK(page["jobs"][0]["id"] == "b-1");
  CHECK(page["jobs"][1]["id"] == "b-2");
  CHECK(page["more"] == true);
  CHECK(page["next"] == json{{"after", "b-2"}});
  auto next = db.as()
                  .get("/api/jobs?prefix=b-&limit=2&after=" + page["next"]["after"].get<std::string>())
                  .data()["result"];
  REQUIRE(next["jobs"].size() == 1);
  CHECK(next["jobs"][0]["id"] == "b-3");
  CHECK(next["more"] == false);
  CHECK(next["next"].is_null());
  // By age, newest first, across pages: the cursor carries the last row's
  // created. The b- jobs were enqueued b-1, b-2, b-3.
  page = db.as().get("/api/jobs?prefix=b-&limit=2&order=-created").data()["result"];
  REQUIRE(page["jobs"].size() == 2);
  CHECK(page["jobs"][0]["id"] == "b-3");
  CHECK(page["jobs"][1]["id"] == "b-2");
  CHECK(page["jobs"][0]["created"].get<double>() >= page["jobs"][1]["created"].get<double>());
  REQUIRE(page["next"]["after_created"].is_number());
  std::ostringstream cursor;
  cursor << std::setprecision(17) << page["next"]["after_created"].get<double>();
  next = db.as()
             .get("/api/jobs?prefix=b-&limit=2&order=-created&after=b-2&after_created=" +
                  cursor.str())
             .data()["result"];
  REQUIRE(next["jobs"].size() == 1);
  CHECK(next["jobs"][0]["id"] == "b-1");
  CHECK(db.as().get("/api/jobs?order=age").status == 400);
  CHECK(db.as().get("/api/jobs?order=created&after=b-1&after_created=x").status == 400);
  CHECK(db.as().get("/api/jobs?order=created&after=b-1&after_created=nan").status == 400);
  CHECK(db.as().get("/api/jobs?order=created&after=b-1&after_created=inf").status == 400);
  CHECK(db.as().get("/api/jobs?state=leased").data()["result"]["jobs"].size() == 1);
  CHECK(db.as().get("/api/jobs?state=bogus").status == 400);

  auto text = db.as().get("/api/job?id=long-text").data()["result"];
  CHECK(text["payload"]["size"] == 20000);
  CHECK(text["payload"]["truncated"] == true);
  CHECK(text["payload"]["text"].get<std::string>().size() == 16384);
  auto bin = db.as().get("/api/job?id=bin").data()["result"];
  CHECK(bin["payload"]["binary"] == true);
  CHECK(bin["payload"]["hex"] == "0001feff");
  CHECK(db.as().get("/api/job?id=missing").data()["result"].is_null());
}

TEST_CASE("http: the overview shows a queue's group limits and how many groups wait, and the "
          "jobs and a job their group (issue 31)") {
  Dashboard db;
  Client c(db.d->endpoint());
  fenceq::EnqueueOptions o;
  o.queue = "tenants";
  for (const auto& [id, group] : std::vector<std::pair<std::string, std::string>>{
           {"a-1", "acme"}, {"a-2", "acme"}, {"b-1", "bolt"}, {"c-1", "corp"}}) {
    o.group = group;
    REQUIRE(c.enqueue(id, o));
  }
  REQUIRE(c.enqueue("plain-1", fenceq::test::in_queue("plain")));
  REQUIRE(c.queue_config("tenants", fenceq::QueueSettings{
                                        .group_max_leased = 2, .group_rate = 30, .group_per = 60}));

  auto ov = db.as().get("/api/overview").data()["result"];
  const auto& t = ov["queues"]["tenants"];
  CHECK(t["group_max_leased"] == 2);
  CHECK(t["group_rate"] == 30);
  CHECK(t["group_per"] == 60.0);
  CHECK(t["groups_waiting"] == 3);  // acme, bolt and corp
  CHECK(t["ready"] == 4);  // the old keys stay
  CHECK(t["max_leased"] == 0);
  CHECK(t["paused"] == false);
  // A queue with no group settings and no group waiting: none of the keys.
  const auto& p = ov["queues"]["plain"];
  CHECK(p["ready"] == 1);
  CHECK_FALSE(p.contains("group_max_leased"));
  CHECK_FALSE(p.contains("groups_waiting"));

  auto page = db.as().get("/api/jobs?queue=tenants&limit=10").data()["result"];
  REQUIRE(page["jobs"].size() == 4);
  CHECK(page["jobs"][0]["id"] == "a-1");
  CHECK(page["jobs"][0]["group"] == "acme");
  CHECK(db.as().get("/api/job?id=b-1").data()["result"]["group"] == "bolt");
  CHECK_FALSE(db.as().get("/api/job?id=plain-1").data()["result"].contains("group"));

  // The page shows them (the browser test reads them there).
  const auto script = db.as().get("/dashboard.js");
  REQUIRE(script.status == 200);
  for (const char* key : {"q.group_max_leased", "q.group_rate", "q.group_per", "q.groups_waiting",
                          "d.group"}) {
    CHECK(script.body.find(key) != std::string::npos);
  }
}

TEST_CASE("http: a job's parents and blocked children come with /api/job and /api/results "
          "answers the state and result of each id given (issue 32)") {
  Dashboard db;
  Client c(db.d->endpoint());
  auto in_wf = fenceq::test::in_queue("wf");
  const std::string odd = "a b/\xC3\xBC&id=x";  // space, slash, UTF-8, and what a query splits at
  for (const std::string id : {"p-1", "p-2", "solo"}) REQUIRE(c.enqueue(id, in_wf));
  REQUIRE(c.enqueue(odd, in_wf));
  auto child = in_wf;
  child.after = {"p-2", odd, "p-1"};
  REQUIRE(c.enqueue("sum", child));
  REQUIRE(c.claim("p-1", "w", 30) == 1);
  REQUIRE(c.complete("p-1", "w", 1, "41"));

  // /api/job: the wire's after (id order) and blocked_children, each only when there are some.
  const auto h = db.as();
  auto sum = h.get("/api/job?id=sum").data()["result"];
  CHECK(sum["state"] == "blocked");
  CHECK(sum["after"] == json::array({odd, "p-1", "p-2"}));
  CHECK_FALSE(sum.contains("blocked_children"));
  auto p2 = h.get("/api/job?id=p-2").data()["result"];
  CHECK(p2["blocked_children"] == json::array({"sum"}));
  CHECK_FALSE(p2.contains("after"));
  auto solo = h.get("/api/job?id=solo").data()["result"];
  CHECK_FALSE(solo.contains("after"));
  CHECK_FALSE(solo.contains("blocked_children"));

  // /api/results: each id once (a repeated one collapses), null for none.
  const std::string odd_arg = "a%20b%2F%C3%BC%26id%3Dx";
  auto r = h.get("/api/results?id=p-1&id=p-2&id=nope&id=p-1&id=" + odd_arg);
  REQUIRE(r.status == 200);
  CHECK(r.head.find("Cache-Control: no-store") != std::string::npos);
  const auto found = r.data()["result"];
  CHECK(found.size() == 4);
  CHECK(found["p-1"] == json{{"state", "done"}, {"result", "41"}});
  CHECK(found["p-2"] == json{{"state", "ready"}, {"result", nullptr}});
  CHECK(found[odd] == json{{"state", "ready"}, {"result", nullptr}});
  CHECK(found["nope"].is_null());
  CHECK_FALSE(found.contains("x"));
  // states=1 (the job page, issue 56): the states, no result read.
  const auto states = h.get("/api/results?states=1&id=p-1&id=p-2").data()["result"];
  CHECK(states["p-1"] == json{{"state", "done"}, {"result", nullptr}, {"omitted", true}});
  CHECK(states["p-2"] == json{{"state", "ready"}, {"result", nullptr}});

  // Once its last parents are done the child is ready and no parent lists it.
  for (const std::string& id : std::vector<std::string>{"p-2", odd}) {
    REQUIRE(c.claim(id, "w", 30) == 1);
    REQUIRE(c.complete(id, "w", 1, "done"));
  }
  CHECK(h.get("/api/job?id=sum").data()["result"]["state"] == "ready");
  CHECK_FALSE(h.get("/api/job?id=p-2").data()["result"].contains("blocked_children"));
  CHECK(h.get("/api/results?id=sum").data()["result"]["sum"]["state"] == "ready");

  // Up to 100 ids in one request (the page asks for 100 at a time; the
  // HTTP server's 16 KiB of request holds about 200 short ones); 101: a
  // coded 400.
  std::string many = "/api/results?id=m0";
  for (int i = 1; i < 100; ++i) many += "&id=m" + std::to_string(i);
  auto all = h.get(many);
  REQUIRE(all.status == 200);
  CHECK(all.data()["result"].size() == 100);
  CHECK(all.data()["result"]["m99"].is_null());
  auto over = h.get(many + "&id=m100");
  CHECK(over.status == 400);
  CHECK(over.data()["error"]["code"] == "invalid_argument");
  // None, or an empty one: a coded 400.
  for (const char* none : {"/api/results", "/api/results?ids=p-1"}) {
    INFO(none);
    auto e = h.get(none);
    CHECK(e.status == 400);
    CHECK(e.data()["error"] == json{{"code", "bad_request"}, {"message", "missing id"}});
  }
  // Given with no value: an empty id, which the daemon refuses.
  for (const char* empty : {"/api/results?id", "/api/results?id=", "/api/results?id=p-1&id="}) {
    INFO(empty);
    auto e = h.get(empty);
    CHECK(e.status == 400);
    CHECK(e.data()["error"]["code"] == "invalid_argument");
  }
  // A read like /api/job: credentials needed, no POST.
  CHECK(db.as("").get("/api/results?id=p-1").status == 401);
  CHECK(h.send("POST", "/api/results?id=p-1", {csrf_header(db.csrf())}).status == 404);

  // The page asks for them (the browser test follows the links).
  const auto script = h.get("/dashboard.js");
  for (const char* key : {"d.after", "d.blocked_children", "\"results?\"", "\"blocked\""}) {
    CHECK(script.body.find(key) != std::string::npos);
  }
}

TEST_CASE("http: the throughput history is sampled from the daemon's start with no dashboard "
          "open: a first visit shows the recent past") {
  Dashboard db;
  Client c(db.d->endpoint());
  const auto started = std::chrono::steady_clock::now();
  // Work over about 3 s, and no dashboard request meanwhile: 12 jobs claimed,
  // 9 completed, 3 failed (with attempts left: claimable again).
  for (int i = 0; i < 12; ++i) {
    const std::string id = "h-" + std::to_string(i);
    REQUIRE(c.enqueue(id, fenceq::test::in_queue("hist")));
    REQUIRE(c.claim(id, "w", 30) == 1);
    if (i % 4 == 3) {
      REQUIRE(c.fail(id, "w", 1, "boom"));
    } else {
      REQUIRE(c.complete(id, "w", 1, "done"));
    }
    std::this_thread::sleep_for(250ms);
  }
  std::this_thread::sleep_until(started + 5500ms);
  // The first request for the overview.
  auto history = db.as().get("/api/overview").data()["result"]["history"];
  INFO(history.dump());
  REQUIRE(history.size() >= 2);
  CHECK(history.size() <= 4);  // every 2 s: not one a request
  double claimed = 0, completed = 0, failed = 0, last_ago = 1e9;
  for (const auto& p : history) {
    CHECK(p["ago"].get<double>() >= 0);
    CHECK(p["ago"].get<double>() < last_ago);  // oldest first
    last_ago = p["ago"].get<double>();
    claimed = std::max(claimed, p["claimed"].get<double>());
    completed = std::max(completed, p["completed"].get<double>());
    failed = std::max(failed, p["failed"].get<double>());
    CHECK(p["commits"].get<double>() >= 0);
  }
  // About 4 claims a second at the peak; more than none.
  CHECK(claimed > 0.5);
  CHECK(completed > 0.5);
  CHECK(failed > 0);
  CHECK(history.front()["ago"].get<double>() < 6.5);
}

TEST_CASE("http: the throughput history keeps its last 151 samples (5 minutes of rates) however "
          "long the daemon runs") {
  using fenceq::daemon::http::History;
  History h;
  double t = 1000;
  CHECK(h.due(t));
  CHECK(h.rates(t).empty());
  // An hour of samples, 2 s apart: 6 claims, 4 completes, 2 fails and 3
  // commits each time.
  for (int i = 0; i < 1800; ++i, t += History::kSampleEvery) {
    REQUIRE(h.due(t));
    h.add({t, 6.0 * i, 4.0 * i, 2.0 * i, 3.0 * i});
    CHECK_FALSE(h.due(t + History::kSampleEvery / 2));
    REQUIRE(h.size() <= History::kKept);
  }
  CHECK(h.size() == History::kKept);
  const double now = t - History::kSampleEvery;  // the last sample's time
  auto rates = h.rates(now);
  REQUIRE(rates.size() == History::kKept - 1);
  CHECK(rates.front()["ago"].get<double>() == Approx(298));
  CHECK(rates.back()["ago"].get<double>() == Approx(0));
  for (const auto& p : rates) {
    CHECK(p["claimed"].get<double>() == Approx(3));
    CHECK(p["completed"].get<double>() == Approx(2));
    CHECK(p["failed"].get<double>() == Approx(1));
    CHECK(p["commits"].get<double>() == Approx(1.5));
  }
}

TEST_CASE("docs: every password recipe of the docs makes passwords without '/' or '+' (a login "
          "in a URL takes them as they are)") {
  // Each line of the docs, scripts and packaging that reads /dev/urandom
  // into a password: its $(...) run 50 times.
  const std::filesystem::path root(FENCEQ_TEST_SOURCE_DIR);
  std::vector<std::string> recipes;
  auto scan = [&](const std::filesystem::path& file) {
    std::ifstream in(file);
    std::string line;
    while (std::getline(in, line)) {
      if (line.find("/dev/urandom") == std::string::npos) continue;
      INFO(file.string() << ": " << line);
      // The command substitution: from $( to the ) that closes it.
      const auto open = line.find("$(");
      REQUIRE(open != std::string::npos);
      int depth = 0;
      std::size_t end = open + 1;
      for (; end < line.size(); ++end) {
        if (line[end] == '(') ++depth;
        if (line[end] == ')' && --depth == 0) break;
      }
      REQUIRE(end < line.size());
      recipes.push_back(line.substr(open + 2, end - open - 2));
    }
  };
  scan(root / "README.md");
  for (const char* dir : {"docs", "scripts", "systemd", "packaging"}) {
    for (const auto& e : std::filesystem::recursive_directory_iterator(root / dir)) {
      if (e.is_regular_file() && e.file_size() < 1000000 &&
          e.path().extension() != ".png" && e.path().extension() != ".json") {
        scan(e.path());
      }
    }
  }
  REQUIRE_FALSE(recipes.empty());  // docs/dashboard.md has one
  for (const auto& recipe : recipes) {
    INFO(recipe);
    // As the docs use it: echo "ops:$(...)".
    auto r = fenceq::test::run({"/bin/sh", "-c", "i=0; while [ $i -lt 50 ]; do echo \"$(" +
                                                    recipe + ")\"; i=$((i+1)); done"});
    REQUIRE(r.status == 0);
    std::istringstream lines(r.out);
    std::string password;
    int n = 0;
    while (std::getline(lines, password)) {
      INFO(password);
      CHECK(std::regex_match(password, std::regex("[A-Za-z0-9_-]{16,}")));
      ++n;
    }
    CHECK(n == 50);
  }
}

TEST_CASE("http: /healthz answers 503 with the reason while the store cannot commit, 200 again "
          "after", "[sqlite]") {
  TempDir dir;
  Daemon d(dir, {"--clock", "server", "--http-listen", "127.0.0.1:0"});
  const int port = http_port(d);
  REQUIRE(port > 0);
  Http h{port, ""};
  REQUIRE(h.get("/healthz").status == 200);
  // Another process holds the file's write lock: fenceqd cannot commit.
  sqlite3* other = nullptr;
  REQUIRE(sqlite3_open(d.db().c_str(), &other) == SQLITE_OK);
  REQUIRE(sqlite3_exec(other, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr) == SQLITE_OK);
  auto down = h.get("/healthz");
  CHECK(down.status == 503);
  CHECK(down.body.find("locked") != std::string::npos);
  sqlite3_exec(other, "ROLLBACK", nullptr, nullptr, nullptr);
  sqlite3_close(other);
  CHECK(h.get("/healthz").status == 200);
}

TEST_CASE("http: a 1 MiB header and 500 idle connections do not stall a claim on the job socket") {
  REQUIRE(fenceq::test::raise_own_fd_limit() >= 1024);
  Dashboard db;
  std::vector<int> idle;
  for (int i = 0; i < 500; ++i) idle.push_back(fenceq::test::connect_tcp(db.port));
  std::thread big([&] {
    const std::string header = "X-Big: " + std::string(1 << 20, 'h') + "\r\n";
    std::string reply;
    const int status = http_request(
        db.port, "GET /api/overview HTTP/1.1\r\nHost: x\r\n" + header + "\r\n", 5000ms, &reply);
    // Refused (431), or the connection cut: never served, never held.
    CHECK(status != 200);
  });
  const double t = fenceq::test::worker_round_trip(*db.d, 3000ms);
  INFO("enqueue + claim_next + complete took " << t << " s");
  CHECK(t >= 0);
  CHECK(t < 1.0);
  big.join();
  fenceq::test::close_all(idle);
  std::this_thread::sleep_for(300ms);
  CHECK(db.as().get("/api/overview").status == 200);
  CHECK(db.d->alive());
}

TEST_CASE("http: a page of jobs that reads every job (a state none is in) is read beside the "
          "group commit: claims go on meanwhile", "[sqlite]") {
  Dashboard db;
  Client c(db.d->endpoint());
  // Enough jobs that reading them all takes a while (on SQLite, here, about
  // 70 ms, against 3 ms for a worker's round trip beside it; read on the
  // serving thread, a page held every claim that long).
  std::vector<fenceq::JobSpec> batch(1000);
  for (int b = 0; b < 250; ++b) {
    for (int i = 0; i < 1000; ++i) batch[i].id = "bulk-" + std::to_string(b * 1000 + i);
    REQUIRE(c.enqueue_many(batch).size() == 1000);
  }
  auto page = db.as().get("/api/jobs?state=cancelled&order=-created");
  REQUIRE(page.status == 200);
  CHECK(page.data()["result"]["jobs"].empty());
  // Pages read one after another while a worker goes round: the typical
  // round trip (enqueue, claim_next, complete: three commits) takes a small
  // part of a page. Medians, so that the other tests ctest runs meanwhile
  // on two cores do not decide.
  using Clock = std::chrono::steady_clock;
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : v[v.size() / 2];
  };
  std::atomic<bool> done{false};
  std::vector<double> page_times;
  std::thread reader([&] {
    Http h = db.as();
    while (!done && page_times.size() < 40) {
      const auto t0 = Clock::now();
      if (h.get("/api/jobs?state=cancelled").status != 200) break;
      page_times.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
    }
  });
  std::vector<double> rounds;
  const auto until = Clock::now() + 1500ms;
  while (Clock::now() < until && rounds.size() < 20000) {
    const double t = fenceq::test::worker_round_trip(*db.d, 5000ms);
    REQUIRE(t >= 0);
    rounds.push_back(t);
  }
  done = true;
  reader.join();
  const double page_took = median(page_times), round_took = median(rounds);
  INFO(page_times.size() << " pages, median " << page_took << " s; " << rounds.size()
                         << " worker round trips beside them, median " << round_took << " s");
  REQUIRE(page_times.size() >= 3);
  CHECK(round_took < page_took / 4);
}

TEST_CASE("browser: log in, see a queue's counts, open a dead job, retry it, see it ready, "
          "and list the queue newest first (chromium, headless)") {
  // Also (issue 30): with the login in the URL (http://ops:secret@...) the
  // data loads and an action goes through; the "updated" time is ISO 8601 in
  // UTC; the throughput chart takes its section's width and shows the
  // history of a first visit. And (issue 32): a job's parents and a parent's
  // blocked children, with their states, as links between their pages.
  Dashboard db;
  Client c(db.d->endpoint());
  fenceq::EnqueueOptions o;
  o.queue = "emails";
  // The dead job first: by age, oldest or newest, it sorts apart from its id.
  fenceq::EnqueueOptions bounced = o;
  bounced.payload = fenceq::Payload{"{\"to\": \"ann@example.com\", \"template\": \"welcome\"}", false};
  bounced.group = "ann";
  dead_job(c, "mail-bounced", bounced, "worker-7", "SMTP 550: mailbox unavailable");
  // Each of three groups (issue 31) one job: once one is claimed, two groups wait.
  for (int i = 0; i < 3; ++i) {
    o.group = std::vector<std::string>{"ann", "bob", "cid"}[i];
    REQUIRE(c.enqueue("mail-" + std::to_string(i), o));
  }
  REQUIRE(c.queue_config("emails", fenceq::QueueSettings{.group_max_leased = 2, .group_rate = 10,
                                                         .group_per = 60}));
  REQUIRE(c.claim_next("emails", "worker-3", 60));
  // A queue whose name would show reversed after U+202E (RIGHT-TO-LEFT OVERRIDE).
  REQUIRE(c.enqueue("spoof-1", fenceq::test::in_queue("invoice\u202Efdp.exe")));
  // A queue the page with the login in its URL pauses.
  REQUIRE(c.enqueue("thumb-1", fenceq::test::in_queue("thumbnails")));
  // One of its groups with a limit of its own (C3.25): its row lists it.
  REQUIRE(c.group_config("thumbnails", "acme", fenceq::GroupSettings{.max_leased = 5}));
  enqueue_report(c);
  // A job that saved a step and waits for a signal (issue 60).
  REQUIRE(c.enqueue("order-9", fenceq::test::in_queue("orders")));
  auto order = c.claim("order-9", "worker-9", 60);
  REQUIRE(order);
  REQUIRE(c.step_save("order-9", "worker-9", *order, "charge", fenceq::Payload{"ch_9", false}));
  REQUIRE(c.suspend("order-9", "worker-9", *order, 3600));
  // A first visit once the daemon has a history: two rates at least.
  for (int i = 0; i < 60 && db.as().get("/api/overview").data()["result"]["history"].size() < 2;
       ++i) {
    std::this_thread::sleep_for(100ms);
  }
  // Screenshots are the test's artifacts, kept in the build tree.
  const auto shots = std::filesystem::current_path() / "artifacts";
  std::filesystem::create_directories(shots);
  const std::string store = std::getenv("FENCEQ_TEST_STORE") ? "postgres" : "sqlite";
  const auto script = std::string(FENCEQ_TEST_SOURCE_DIR) + "/tests/browser/dashboard.mjs";
  auto r = fenceq::test::run({"/usr/bin/env", "node", script, "--url",
                              "http://127.0.0.1:" + std::to_string(db.port), "--user", "ops",
                              "--password", "secret", "--queue", "emails", "--job", "mail-bounced",
                              "--pause-queue", "thumbnails", "--child", "report-sum",
                              "--suspended", "order-9", "--shots",
                              (shots / ("dashboard-" + store)).string()});
  INFO(r.out);
  REQUIRE(r.status == 0);
  // What the page showed, as the script read it.
  std::smatch m;
  REQUIRE(std::regex_search(r.out, m, std::regex(R"(^SEEN (\{.*\})$)", std::regex::multiline)));
  auto seen = json::parse(m[1].str());
  CHECK(seen["ready"] == "2");
  CHECK(seen["leased"] == "1");
  CHECK(seen["dead"] == "1");
  CHECK(seen["groups_waiting"] == "2");
  CHECK(seen["blocked"] == "");
  CHECK(seen["reports_blocked"] == "1");
  CHECK(seen["limits"] == "max 2 leased per group, 10 per 60 s per group");
  CHECK(seen["group"] == "ann");
  CHECK(seen["state_before"] == "dead");
  CHECK(seen["state_after"] == "ready");
  CHECK(seen["payload"].get<std::string>().find("ann@example.com") != std::string::npos);
  // The override shown as text, not applied.
  CHECK(seen["queue_names"] ==
        json::array({"emails", "invoice\\u{202e}fdp.exe", "orders", "reports", "thumbnails"}));
  CHECK(seen["suspended"]["state"] == "suspended");
  CHECK(seen["suspended"]["wait"].get<std::string>().rfind("until a signal, or ready again in 60 min (", 0) ==
        0);
  CHECK(seen["suspended"]["steps"] == json::array({"charge: ch_9"}));
  check_url_login(seen["url_login"], c);
  // ISO 8601 in UTC, as the page's other times.
  CHECK(std::regex_match(seen["updated"].get<std::string>(),
                         std::regex(R"(updated \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z)")));
  check_chart(seen["chart"]);
  // Jobs sorted by age, by the daemon: mail-bounced came first (by id it
  // is last, either way).
  // A choice in the filters not yet submitted outlives the page's refresh.
  CHECK(seen["sort_kept"] == "newest");
  CHECK(seen["newest_first"] == json::array({"mail-2", "mail-1", "mail-0", "mail-bounced"}));
  REQUIRE(seen["ages"].size() == 4);
  for (const auto& age : seen["ages"]) CHECK(age.get<std::string>() != "-");
  // Checked over the wire, not only in the page: revived, attempts start over,
  // the fence kept for the next claim.
  auto row = fenceq::test::listed(c, "mail-bounced");
  CHECK(row.status == fenceq::JobStatus::ready);
  CHECK(row.attempts == 0);
  CHECK(row.fence == 1);
  auto next = c.claim("mail-bounced", "worker-9", 30);
  CHECK(next == 2);
  CHECK(std::filesystem::file_size(shots / ("dashboard-" + store + "-overview.png")) > 10000);
  CHECK(std::filesystem::file_size(shots / ("dashboard-" + store + "-job.png")) > 10000);
  CHECK(std::filesystem::file_size(shots / ("dashboard-" + store + "-workflow.png")) > 10000);
  check_report_pages(seen["workflow"]);
  // The jobs' answer that came after the parent's page was opened drew nothing.
  CHECK(seen["late_answer"] == json({{"hash", "#/job/report-part-2"}, {"blocked_children", true},
                                     {"jobs_table", false}}));
  CHECK(db.d->log().find("dashboard: ops retry job 'mail-bounced'") != std::string::npos);
}
