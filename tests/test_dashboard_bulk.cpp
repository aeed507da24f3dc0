// The dashboard's bulk actions (issue 33), part of test_dashboard: the
// /api/retry_many and /api/cancel_many routes against the real fenceqd, on
// SQLite and (the "pg dashboard: " variants) on PostgreSQL, and the
// overview's "retry all" and the job list's checkboxes in a real browser
// (tests/browser/bulk.mjs).
#include <catch2/catch.hpp>

#include <fenceq/client.hpp>
#include <nlohmann/json.hpp>

#include <chrono>
#include <ostream>
#include <regex>
#include <string>
#include <utility>

#include "daemon.hpp"
#include "dashboard.hpp"
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

// A queue's counts in `stats`: ready, dead and cancelled (zeros for a queue
// it does not list).
struct Counts {
  std::int64_t ready = 0, dead = 0, cancelled = 0;
  bool operator==(const Counts&) const = default;
};
Counts counts(Client& c, const std::string& queue) {
  for (const auto& q : c.stats().queues) {
    if (q.queue == queue) return {q.ready, q.dead, q.cancelled};
  }
  return {};
}
std::ostream& operator<<(std::ostream& os, const Counts& n) {
  return os << "{ready " << n.ready << ", dead " << n.dead << ", cancelled " << n.cancelled << "}";
}

// POSTs the bulk action `target` until its answer says more: false (issue
// 33): the counts added up, and how many requests it took.
std::pair<std::int64_t, int> drain(const Http& h, const std::string& token,
                                   const std::string& target) {
  std::int64_t total = 0;
  int pages = 0;
  for (bool more = true; more;) {
    auto r = h.send("POST", target, {csrf_header(token)});
    INFO(target << ": " << r.body);
    REQUIRE(r.status == 200);
    const auto result = r.data()["result"];
    REQUIRE(result.is_object());
    REQUIRE(result.size() == 2);  // {"count": N, "more": bool}
    total += result.at("count").get<std::int64_t>();
    more = result.at("more").get<bool>();
    REQUIRE(++pages < 1000);
  }
  return {total, pages};
}

}  // namespace

TEST_CASE("http: /api/retry_many retries a queue's dead jobs a page at a time until more is "
          "false and /api/cancel_many cancels by state and prefix and group (issue 33)") {
  Dashboard db;
  Client c(db.d->endpoint());
  auto emails = fenceq::test::in_queue("emails");
  for (int i = 0; i < 30; ++i) {
    emails.group = i < 4 ? std::optional<std::string>("vip") : std::nullopt;
    dead_job(c, (i < 10 ? "d-0" : "d-") + std::to_string(i), emails, "w", "boom");
  }
  dead_job(c, "o-1", fenceq::test::in_queue("other"), "w", "boom");  // another queue's
  const auto token = db.csrf();
  const auto h = db.as();
  // Pages of 7: more until the last; the other queue's dead job stays dead.
  auto [retried, pages] = drain(h, token, "/api/retry_many?queue=emails&state=dead&limit=7");
  CHECK(retried == 30);
  CHECK(pages >= 5);
  CHECK(counts(c, "emails") == Counts{30, 0, 0});
  CHECK(counts(c, "other") == Counts{0, 1, 0});
  CHECK(db.as().get("/api/overview").data()["result"]["queues"]["emails"]["dead"] == 0);
  auto row = fenceq::test::listed(c, "d-17");
  CHECK(row.attempts == 0);
  CHECK(row.fence == 1);  // its next claim gets fence 2
  // Nothing left: one page, count 0.
  CHECK(drain(h, token, "/api/retry_many?queue=emails") == std::pair<std::int64_t, int>{0, 1});
  // cancel_many by id prefix (d-00..d-09), then by group (d-00..d-03 are
  // cancelled already: none left of them), then retry_many of the cancelled.
  CHECK(drain(h, token, "/api/cancel_many?queue=emails&state=ready&prefix=d-0").first == 10);
  CHECK(counts(c, "emails") == Counts{20, 0, 10});
  CHECK(drain(h, token, "/api/cancel_many?queue=emails&group=vip").first == 0);
  CHECK(drain(h, token, "/api/retry_many?queue=emails&state=cancelled&group=vip").first == 4);
  CHECK(drain(h, token, "/api/retry_many?queue=emails&state=cancelled").first == 6);
  CHECK(counts(c, "emails") == Counts{30, 0, 0});
  // Every page logged: who, what, which queue, its filter.
  CHECK(db.d->log().find("dashboard: ops retry_many queue 'emails' state dead limit 7") !=
        std::string::npos);
  CHECK(db.d->log().find("dashboard: ops cancel_many queue 'emails' state ready prefix 'd-0' "
                         "limit 1000") != std::string::npos);
  CHECK(db.d->log().find("dashboard: ops cancel_many queue 'emails' group 'vip' limit 1000") !=
        std::string::npos);
}

TEST_CASE("http: /api/retry_many and /api/cancel_many refuse a bad state or limit or a missing "
          "queue with a coded 400 and change nothing (issue 33)") {
  Dashboard db;
  Client c(db.d->endpoint());
  auto q = fenceq::test::in_queue("q");
  for (const char* id : {"x-1", "x-2"}) dead_job(c, id, q, "w", "boom");
  REQUIRE(c.enqueue("x-3", q));
  const Counts before{1, 2, 0};
  REQUIRE(counts(c, "q") == before);
  const auto token = db.csrf();
  const auto h = db.as();
  struct Case {
    std::string target, code, message;
  };
  const std::string big_group(300, 'g');  // the daemon's codec refuses it: passed on as it is
  const Case cases[] = {
      {"/api/retry_many?queue=q&state=done", "invalid_argument",
       "field 'state' must be one of dead, cancelled for retry_many, not 'done'"},
      {"/api/retry_many?queue=q&state=ready", "invalid_argument",
       "field 'state' must be one of dead, cancelled for retry_many, not 'ready'"},
      {"/api/retry_many?queue=q&state=bogus", "invalid_argument",
       "field 'state' must be one of dead, cancelled for retry_many, not 'bogus'"},
      {"/api/cancel_many?queue=q&state=cancelled", "invalid_argument",
       "field 'state' must be one of ready, delayed, leased, blocked, suspended, dead for cancel_many, "
       "not 'cancelled'"},
      {"/api/cancel_many?queue=q&state=done", "invalid_argument",
       "field 'state' must be one of ready, delayed, leased, blocked, suspended, dead for cancel_many, "
       "not 'done'"},
      {"/api/retry_many?queue=q&limit=0", "invalid_argument",
       "field 'limit' must be in [1, 10000]"},
      {"/api/cancel_many?queue=q&limit=10001", "invalid_argument",
       "field 'limit' must be in [1, 10000]"},
      {"/api/retry_many?queue=q&limit=-5", "invalid_argument",
       "field 'limit' must be in [1, 10000]"},
      {"/api/retry_many?queue=q&limit=1e3", "bad_request", "field 'limit' must be an integer"},
      {"/api/retry_many?state=dead", "bad_request", "missing queue"},
      {"/api/cancel_many?queue=", "bad_request", "missing queue"},
      {"/api/cancel_many?queue=q&group=" + big_group, "invalid_argument",
       "field 'group' is longer than 256 bytes"},
  };
  for (const auto& k : cases) {
    INFO(k.target);
    auto r = h.send("POST", k.target, {csrf_header(token)});
    CHECK(r.status == 400);
    CHECK(r.data()["error"] == json{{"code", k.code}, {"message", k.message}});
    CHECK(counts(c, "q") == before);
  }
  // Like every action: the page's token (403 without), no GET (not a read).
  CHECK(h.send("POST", "/api/retry_many?queue=q").status == 403);
  CHECK(h.get("/api/retry_many?queue=q").status == 404);
  CHECK(h.get("/api/cancel_many?queue=q").status == 404);
  CHECK(counts(c, "q") == before);
  // The page has the buttons (the browser test presses them).
  const auto script = h.get("/dashboard.js").body;
  for (const char* key : {"\"retry_many\"", "retry all ", "select-all", "cancel selected"}) {
    CHECK(script.find(key) != std::string::npos);
  }
}

TEST_CASE("browser: retry all of a queue's dead jobs from the overview and cancel then retry "
          "the jobs checked on a page of jobs in headless chromium (issue 33)") {
  Dashboard db;
  Client c(db.d->endpoint());
  auto bounces = fenceq::test::in_queue("bounces");
  for (int i = 10; i < 22; ++i) dead_job(c, "b-" + std::to_string(i), bounces, "w", "SMTP 550");
  REQUIRE(c.enqueue("b-x", bounces));
  REQUIRE(c.cancel("b-x"));  // its own "retry all 1 cancelled" button, left alone
  const auto picks = fenceq::test::in_queue("picks");
  for (int i = 1; i <= 5; ++i) REQUIRE(c.enqueue("p-" + std::to_string(i), picks));
  const auto shots = std::filesystem::current_path() / "artifacts";
  std::filesystem::create_directories(shots);
  const std::string store = std::getenv("FENCEQ_TEST_STORE") ? "postgres" : "sqlite";
  auto r = fenceq::test::run(
      {"/usr/bin/env", "node", std::string(FENCEQ_TEST_SOURCE_DIR) + "/tests/browser/bulk.mjs",
       "--url", "http://127.0.0.1:" + std::to_string(db.port), "--user", "ops", "--password",
       "secret", "--dead-queue", "bounces", "--pick-queue", "picks", "--pick", "p-1,p-3,p-5",
       "--shots", (shots / ("dashboard-" + store)).string()});
  INFO(r.out);
  REQUIRE(r.status == 0);
  std::smatch m;
  REQUIRE(std::regex_search(r.out, m, std::regex(R"(^SEEN (\{.*\})$)", std::regex::multiline)));
  auto seen = json::parse(m[1].str());
  // Retry all: the count on the button and in the confirmation, every page retried.
  CHECK(seen["dead_before"] == "12");
  CHECK(seen["retry_all_buttons"] == json::array({"retry all 12 dead", "retry all 1 cancelled"}));
  const auto first = seen["dialogs"].at(0)["message"].get<std::string>();
  CHECK(first.starts_with("Retry all 12 dead jobs of queue bounces?"));
  CHECK(seen["retry_all_notice"] == "Retried 12 dead jobs of queue bounces.");
  CHECK(seen["dead_after"] == "0");
  CHECK(seen["ready_after"] == "12");
  CHECK(seen["retry_all_left"] == false);
  CHECK(counts(c, "bounces") == Counts{12, 0, 1});
  // The checkboxes: kept across a redraw, the count in the confirmation and
  // the notice; only the checked jobs cancelled, then only those retried.
  CHECK(seen["buttons_before"] == json::array({true, true}));
  CHECK(seen["count_shown"] == "3 selected");
  CHECK(seen["checked_after_redraw"] == json::array({"p-1", "p-3", "p-5"}));
  CHECK(seen["select_all_indeterminate"] == true);
  CHECK(seen["cancel_dialog"].get<std::string>().starts_with("Cancel 3 selected jobs?"));
  CHECK(seen["cancel_notice"] == "Cancelled 3 of 3 selected jobs.");
  CHECK(seen["states"] == json{{"p-1", "cancelled"}, {"p-2", "ready"}, {"p-3", "cancelled"},
                               {"p-4", "ready"}, {"p-5", "cancelled"}});
  CHECK(seen["checked_after_cancel"] == 0);
  CHECK(seen["count_all"] == "5 selected");
  CHECK(seen["retry_dialog"].get<std::string>().starts_with("Retry 5 selected jobs?"));
  CHECK(seen["retry_notice"] ==
        "Retried 3 of 5 selected jobs (the others were left as they were).");
  CHECK(seen["dialogs"].size() == 3);
  // Over the wire: all ready again, the cancelled ones a fence further on.
  for (int i = 1; i <= 5; ++i) {
    auto row = fenceq::test::listed(c, "p-" + std::to_string(i));
    CHECK(row.status == fenceq::JobStatus::ready);
    CHECK(row.fence == (i % 2 ? 1 : 0));
  }
  const auto log = db.d->log();
  CHECK(log.find("dashboard: ops retry_many queue 'bounces' state dead limit 12") !=
        std::string::npos);
  CHECK(log.find("dashboard: ops cancel job 'p-3'") != std::string::npos);
  CHECK(log.find("dashboard: ops cancel job 'p-2'") == std::string::npos);
  CHECK(std::filesystem::file_size(shots / ("dashboard-" + store + "-bulk.png")) > 10000);
}
