// Many hosts: several fenceqd sidecars, each with its own socket,
// sharing the jobs in one PostgreSQL database (the throw-away cluster of the
// `pg` ctest fixture). The contract holds across sidecars: one winner per
// claim whichever sidecar the claims come through, fences 1, 2, 3, ... across
// them, stale writes refused through any of them, and time from the
// database's clock. Sidecars killed or PostgreSQL restarted: `unavailable`,
// never a wrong answer, and service resumes without restarting anything.
#include <catch2/catch.hpp>

#include <signal.h>

#include <fenceq/client.hpp>
#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <cmath>
#include <ctime>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "daemon.hpp"
#include "pg.hpp"
#include "keys.hpp"
#include "policy.hpp"
#include "vectors.hpp"

using fenceq::Client;
using fenceq::ClientOptions;
using fenceq::test::Daemon;
using fenceq::test::PgSchema;
using fenceq::test::TempDir;
using namespace std::chrono_literals;

namespace {

// N sidecars on one fresh schema, each in a directory of its own.
struct Sidecars {
  explicit Sidecars(int n, std::vector<std::string> args = {"--clock", "server"}) {
    for (int i = 0; i < n; ++i) {
      dirs.push_back(std::make_unique<TempDir>());
      daemons.push_back(std::make_unique<Daemon>(*dirs.back(), args, true, schema.uri()));
    }
  }
  Daemon& operator[](std::size_t i) { return *daemons.at(i); }
  std::size_t size() const { return daemons.size(); }

  PgSchema schema;
  std::vector<std::unique_ptr<TempDir>> dirs;
  std::vector<std::unique_ptr<Daemon>> daemons;
};

// Jobs prefix0 .. prefix<n-1> in `queue`, through `d`.
void enqueue_jobs(Daemon& d, const std::string& queue, const std::string& prefix, int n) {
  Client c(d.endpoint());
  fenceq::EnqueueOptions o;
  o.queue = queue;
  for (int j = 0; j < n; ++j) REQUIRE(c.enqueue(prefix + std::to_string(j), o));
}

double wall_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

TEST_CASE("sidecars: claims race through three sidecars: one winner each, fences 1, 2, 3, stale "
          "writes refused through any sidecar") {
  Sidecars s(3);
  constexpr int kJobs = 20, kRounds = 3, kThreadsPerSidecar = 3;
  // A round's race is over well within kTtl, so each round has one winner;
  // then its lease runs out and the next round races again. The last
  // round's lease must outlive the checks below.
  constexpr double kTtl = 1.5, kLastTtl = 120;
  {
    Client c(s[0].endpoint());
    for (int j = 0; j < kJobs; ++j) REQUIRE(c.enqueue("race-" + std::to_string(j)));
  }
  // winners[round][job] = (owner, fence, sidecar)
  struct Win {
    std::string owner;
    std::int64_t fence;
    std::size_t sidecar;
  };
  std::vector<std::map<int, std::vector<Win>>> winners(kRounds);
  for (int round = 0; round < kRounds; ++round) {
    std::mutex mu;
    std::atomic<int> ready{0};
    std::vector<std::thread> threads;
    const int total = static_cast<int>(s.size()) * kThreadsPerSidecar;
    for (int t = 0; t < total; ++t) {
      threads.emplace_back([&, t] {
        const std::size_t sidecar = static_cast<std::size_t>(t) % s.size();
        Client c(s[sidecar].endpoint(), ClientOptions{5s});
        c.ping();
        const std::string owner = "w" + std::to_string(t) + "-r" + std::to_string(round);
        ready.fetch_add(1);
        while (ready.load() < total) std::this_thread::yield();
        for (int j = 0; j < kJobs; ++j) {
          const double ttl = round + 1 < kRounds ? kTtl : kLastTtl;
          if (auto f = c.claim("race-" + std::to_string(j), owner, ttl)) {
            std::lock_guard lock(mu);
            winners[static_cast<std::size_t>(round)][j].push_back({owner, *f, sidecar});
          }
        }
      });
    }
    for (auto& th : threads) th.join();
    for (int j = 0; j < kJobs; ++j) {
      const auto& w = winners[static_cast<std::size_t>(round)][j];
      INFO("round " << round + 1 << ", job " << j << ": " << w.size() << " winners, fences "
                    << (w.empty() ? 0 : w[0].fence) << " "
                    << (w.size() > 1 ? w[1].fence : 0));
      REQUIRE(winners[static_cast<std::size_t>(round)][j].size() == 1);  // exactly one winner
      CHECK(winners[static_cast<std::size_t>(round)][j][0].fence == round + 1);
    }
    if (round + 1 < kRounds) std::this_thread::sleep_for(std::chrono::duration<double>(kTtl + 0.1));
  }
  // Which sidecar won differs from job to job: the race was real on all three.
  std::set<std::size_t> winning_sidecars;
  for (const auto& round : winners) {
    for (const auto& [j, w] : round) winning_sidecars.insert(w[0].sidecar);
  }
  CHECK(winning_sidecars.size() >= 2);

  // The stale owners of rounds 1 and 2 write through every sidecar: refused.
  // The current owner completes through a sidecar it did not claim through.
  for (int j = 0; j < kJobs; ++j) {
    const std::string id = "race-" + std::to_string(j);
    for (int round = 0; round < kRounds - 1; ++round) {
      const auto& w = winners[static_cast<std::size_t>(round)][j][0];
      for (std::size_t i = 0; i < s.size(); ++i) {
        Client c(s[i].endpoint());
        CHECK_FALSE(c.renew(id, w.owner, w.fence, 30));
        CHECK_FALSE(c.complete(id, w.owner, w.fence, "stale"));
        CHECK_FALSE(c.release(id, w.owner, w.fence));
      }
    }
    const auto& last = winners[kRounds - 1][j][0];
    Client other(s[(last.sidecar + 1) % s.size()].endpoint());
    CHECK(other.complete(id, last.owner, last.fence, "result-" + std::to_string(j)));
    for (std::size_t i = 0; i < s.size(); ++i) {
      auto st = Client(s[i].endpoint()).state(id);
      REQUIRE(st);
      CHECK(st->done);
      CHECK(st->fence == kRounds);
      CHECK(st->result == "result-" + std::to_string(j));
    }
  }
}

TEST_CASE("sidecars: claim_next through three sidecars hands each job to exactly one worker") {
  Sidecars s(3);
  constexpr int kJobs = 300;
  enqueue_jobs(s[1], "shared", "n-", kJobs);
  std::mutex mu;
  std::map<std::string, int> taken;
  std::vector<std::size_t> per_sidecar(s.size());
  std::atomic<int> errors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 6; ++t) {
    threads.emplace_back([&, t] {
      const std::size_t sidecar = static_cast<std::size_t>(t) % s.size();
      Client c(s[sidecar].endpoint(), ClientOptions{10s});
      const std::string owner = "worker-" + std::to_string(t);
      try {
        while (auto job = c.claim_next("shared", owner, 30)) {
          CHECK(job->fence == 1);
          if (!c.complete(job->id, owner, job->fence, owner)) errors.fetch_add(1);
          std::lock_guard lock(mu);
          ++taken[job->id];
          ++per_sidecar[sidecar];
        }
      } catch (const fenceq::Error& e) {
        errors.fetch_add(1);
        FAIL_CHECK(e.what());
      }
    });
  }
  for (auto& th : threads) th.join();
  CHECK(errors.load() == 0);
  CHECK(taken.size() == kJobs);
  for (const auto& [id, n] : taken) {
    INFO(id);
    CHECK(n == 1);
  }
  for (std::size_t i = 0; i < s.size(); ++i) {
    INFO("sidecar " << i);
    CHECK(per_sidecar[i] > 0);
  }
}

TEST_CASE("sidecars: a claim_next waiting on one sidecar is answered by an enqueue on another") {
  Sidecars s(2);
  std::optional<fenceq::ClaimedJob> got;
  double waited = 0;
  std::thread waiter([&] {
    Client c(s[0].endpoint(), ClientOptions{5s});
    c.ping();
    const auto t0 = std::chrono::steady_clock::now();
    got = c.claim_next("wake", "waiter", 30, 10);
    waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  });
  std::this_thread::sleep_for(300ms);  // the claim is parked on sidecar 0
  fenceq::EnqueueOptions o;
  o.queue = "wake";
  REQUIRE(Client(s[1].endpoint()).enqueue("woken", o));
  waiter.join();
  REQUIRE(got);
  CHECK(got->id == "woken");
  CHECK(got->fence == 1);
  CHECK(waited < 3.0);  // well before the 10 s wait ran out
}

TEST_CASE("sidecars: leases are timed by the database's clock, the same on every sidecar") {
  Sidecars s(2);
  Client a(s[0].endpoint()), b(s[1].endpoint());
  REQUIRE(a.enqueue("timed"));
  const double db_before = std::stod(s.schema.exec("SELECT extract(epoch from clock_timestamp())"));
  REQUIRE(b.claim("timed", "o", 20) == 1);
  const double db_after = std::stod(s.schema.exec("SELECT extract(epoch from clock_timestamp())"));
  auto st = a.state("timed");
  REQUIRE(st);
  // until = the database's now + ttl (this test's host is the database's
  // host, so only the bracketing is checked, not a skew).
  CHECK(st->until >= db_before + 20 - 0.05);
  CHECK(st->until <= db_after + 20 + 0.05);
  CHECK(std::abs(st->until - (wall_now() + 20)) < 5);
}

TEST_CASE("sidecars: one sidecar killed mid-run does not disturb the others") {
  Sidecars s(3);
  // Enough that jobs are left at the kill (with 400 the three workers could
  // finish them all within the 200 ms the test used to wait: 173 > 173).
  constexpr int kJobs = 1200;
  enqueue_jobs(s[0], "k", "k-", kJobs);
  std::atomic<bool> stop{false};
  std::atomic<int> done_by_survivors{0}, survivor_errors{0};
  std::vector<std::thread> threads;
  for (std::size_t i = 1; i < s.size(); ++i) {
    threads.emplace_back([&, i] {
      Client c(s[i].endpoint(), ClientOptions{5s});
      const std::string owner = "survivor-" + std::to_string(i);
      try {
        while (!stop.load()) {
          auto job = c.claim_next("k", owner, 30);
          if (!job) break;
          if (c.complete(job->id, owner, job->fence, owner)) done_by_survivors.fetch_add(1);
          std::this_thread::sleep_for(1ms);
        }
      } catch (const fenceq::Error& e) {
        survivor_errors.fetch_add(1);
        FAIL_CHECK("survivor " << i << ": " << e.what());
      }
    });
  }
  // The victim's own worker loses its daemon mid-run.
  std::thread victim_worker([&] {
    Client c(s[0].endpoint(), ClientOptions{500ms});
    while (!stop.load()) {
      try {
        auto job = c.claim_next("k", "victim", 30);
        if (!job) break;
        c.complete(job->id, "victim", job->fence, "victim");
      } catch (const fenceq::Error&) {
        break;  // its sidecar is gone
      }
    }
  });
  // Kill once the survivors are under way, not after a fixed time.
  for (int i = 0; i < 500 && done_by_survivors.load() < 20; ++i) {
    std::this_thread::sleep_for(10ms);
  }
  const int before_kill = done_by_survivors.load();
  s[0].kill9();
  victim_worker.join();
  for (auto& th : threads) th.join();
  stop = true;
  CHECK(survivor_errors.load() == 0);
  CHECK(done_by_survivors.load() > before_kill);  // they went on after the kill
  // Every job ended done exactly once (a claim the victim lost with its
  // sidecar is at most leased until its ttl; none of these was).
  Client c(s[1].endpoint());
  auto stats = c.stats();
  std::int64_t done = 0, leased = 0;
  for (const auto& q : stats.queues) {
    if (q.queue == "k") {
      done = q.done;
      leased = q.leased;
    }
  }
  CHECK(done + leased == kJobs);
  CHECK(leased <= 1);  // at most the victim's claim in flight at the kill
  s[0].restart();      // and the victim serves again on the same database
  CHECK(Client(s[0].endpoint()).state("k-0"));
}

TEST_CASE("sidecars: PostgreSQL restarted: requests are refused unavailable, then served again "
          "without restarting a sidecar",
          "[restart]") {
  Sidecars s(2);
  Client a(s[0].endpoint(), ClientOptions{5s});
  REQUIRE(a.enqueue("before"));
  REQUIRE(a.claim("before", "o", 60) == 1);
  fenceq::test::pg_cluster("stop");
  int unavailable = 0;
  for (std::size_t i = 0; i < s.size(); ++i) {
    Client c(s[i].endpoint(), ClientOptions{5s});
    CHECK(c.ping().clock == "server");  // the sidecar itself is up
    try {
      c.enqueue("during-" + std::to_string(i));
      FAIL_CHECK("an enqueue succeeded with PostgreSQL stopped");
    } catch (const fenceq::Error& e) {
      CHECK(e.code() == "unavailable");
      ++unavailable;
    }
  }
  CHECK(unavailable == 2);
  fenceq::test::pg_cluster("start");
  // Each sidecar reconnects by itself (backoff of at most a few seconds).
  for (std::size_t i = 0; i < s.size(); ++i) {
    Client c(s[i].endpoint(), ClientOptions{5s});
    const auto deadline = std::chrono::steady_clock::now() + 20s;
    bool served = false;
    while (!served && std::chrono::steady_clock::now() < deadline) {
      try {
        served = c.enqueue("after-" + std::to_string(i));
      } catch (const fenceq::Error& e) {
        REQUIRE(e.code() == "unavailable");
        std::this_thread::sleep_for(100ms);
      }
    }
    INFO("sidecar " << i);
    CHECK(served);
  }
  // What was committed before is there, the lease and its fence intact, and
  // nothing of the refused requests was applied.
  auto st = Client(s[1].endpoint()).state("before");
  REQUIRE(st);
  CHECK(st->fence == 1);
  CHECK(st->owner == "o");
  CHECK_FALSE(Client(s[1].endpoint()).state("during-0"));
  CHECK_FALSE(Client(s[1].endpoint()).state("during-1"));
  CHECK(Client(s[0].endpoint()).claim("before", "p", 10) == std::nullopt);  // still leased
}

TEST_CASE("sidecars: a key=value --pg-dsn shares the jobs with a URI sidecar, a second sidecar on "
          "the same socket is refused, and store options that contradict exit 2") {
  Sidecars s(1);
  // The same database and schema, written as key=value (--store postgres).
  const std::string dsn = "host=" + fenceq::test::pg_socket_dir() +
                          " dbname=fenceq_test user=postgres options=-csearch_path=" +
                          s.schema.name();
  TempDir dir;
  Daemon kv(dir, {"--clock", "server", "--store", "postgres", "--pg-dsn", dsn}, true,
            "unused.db");
  REQUIRE(Client(s[0].endpoint()).enqueue("shared-by-both"));
  CHECK(Client(kv.endpoint()).claim("shared-by-both", "o", 30) == 1);
  CHECK(Client(s[0].endpoint()).state("shared-by-both")->fence == 1);

  // Sidecars are many, but one socket path has one server: the loser exits
  // before binding and the first one serves on.
  auto r = fenceq::test::run({fenceq::test::fenceqd_path(), "--db", s.schema.uri(), "--listen",
                              s[0].endpoint()});
  CHECK(r.status == 1);
  CHECK(r.out.find("already owned by another fenceqd") != std::string::npos);
  CHECK(Client(s[0].endpoint()).ping().clock == "server");

  r = fenceq::test::run({fenceq::test::fenceqd_path(), "--store", "postgres", "--listen",
                         "ipc://" + dir.file("x.sock")});
  CHECK(r.status == 2);
  CHECK(r.out.find("--store postgres needs --pg-dsn") != std::string::npos);
  r = fenceq::test::run({fenceq::test::fenceqd_path(), "--store", "sqlite", "--db",
                         s.schema.uri(), "--listen", "ipc://" + dir.file("x.sock")});
  CHECK(r.status == 2);
  CHECK(r.out.find("takes a file for --db") != std::string::npos);
}

namespace {

// A primary and its synchronous streaming standby (scripts/pg_cluster.sh),
// throw-away clusters of this test's own; destroyed at the end.
struct ReplicatedPair {
  explicit ReplicatedPair(const TempDir& dir)
      : script(fenceq::test::source_dir() + "/scripts/pg_cluster.sh"),
        primary(dir.file("primary")),
        standby(dir.file("standby")) {
    try {
      primary_host = host_of(cluster({"start", primary}));
      standby_host = host_of(cluster({"standby", standby, primary}));
    } catch (...) {
      destroy();  // no destructor runs for a constructor that threw
      throw;
    }
  }
  ~ReplicatedPair() { destroy(); }
  void destroy() {
    fenceq::test::run({script, "destroy", standby});
    fenceq::test::run({script, "destroy", primary});
  }
  // Runs the script; its last line (a URI, for start and standby).
  std::string cluster(std::vector<std::string> args) {
    args.insert(args.begin(), script);
    auto r = fenceq::test::run(args);
    INFO(r.out);
    REQUIRE(r.status == 0);
    auto end = r.out.find_last_not_of('\n');
    auto begin = r.out.rfind('\n', end);
    return r.out.substr(begin == std::string::npos ? 0 : begin + 1, end + 1 - (begin + 1));
  }
  static std::string host_of(const std::string& uri) {
    auto at = uri.find("host=") + 5;
    return uri.substr(at, uri.find('&', at) - at);
  }
  std::string script, primary, standby, primary_host, standby_host;
};

}  // namespace

TEST_CASE("sidecars: failover to a synchronous standby keeps every acknowledged claim and "
          "completion, and fences go on from there") {
  TempDir dir;
  ReplicatedPair pg(dir);
  // One URI naming both servers: libpq takes the first that is writable
  // (fenceqd asks for target_session_attrs=read-write).
  const auto uri = "postgresql:///fenceq_test?host=" + pg.primary_host + "," + pg.standby_host +
                   "&user=postgres";
  Daemon d(dir, {"--clock", "server"}, true, uri);
  Client c(d.endpoint(), ClientOptions{5s});
  for (int i = 0; i < 20; ++i) REQUIRE(c.enqueue("j" + std::to_string(i)));
  for (int i = 0; i < 10; ++i) REQUIRE(c.claim("j" + std::to_string(i), "a", 120) == 1);
  for (int i = 0; i < 5; ++i) {
    REQUIRE(c.complete("j" + std::to_string(i), "a", 1, "r" + std::to_string(i)));
  }

  // The primary's machine fails; the standby is promoted.
  pg.cluster({"crash", pg.primary});
  pg.cluster({"promote", pg.standby});
  // The sidecar answers `unavailable` until it has reconnected, to the
  // standby now: nothing restarted.
  std::optional<fenceq::JobState> j0;
  std::set<std::string> codes;
  for (auto give_up = std::chrono::steady_clock::now() + 30s;
       !j0 && std::chrono::steady_clock::now() < give_up;) {
    try {
      j0 = c.state("j0");
      REQUIRE(j0);
    } catch (const fenceq::Error& e) {
      codes.insert(e.code());
      std::this_thread::sleep_for(100ms);
    }
  }
  REQUIRE(j0);
  CHECK(codes.count("timeout") == 0);  // refused at once, never left hanging
  CHECK(codes.size() <= 1);

  // Every acknowledged write is there: completions, leases, untouched jobs.
  for (int i = 0; i < 20; ++i) {
    auto id = "j" + std::to_string(i);
    auto st = c.state(id);
    REQUIRE(st);
    CHECK(st->fence == (i < 10 ? 1 : 0));
    CHECK(st->done == (i < 5));
    if (i < 5) CHECK(st->result == "r" + std::to_string(i));
    if (i >= 5 && i < 10) CHECK(st->owner == "a");
  }
  // The leases go on: their holder completes, another worker is refused;
  // a released job's next claim gets fence 2, never a fence seen before.
  CHECK(c.claim("j5", "b", 30) == std::nullopt);
  CHECK(c.complete("j5", "a", 1, "after failover"));
  CHECK(c.release("j6", "a", 1));
  CHECK(c.claim("j6", "b", 30) == 2);
  CHECK_FALSE(c.complete("j6", "a", 1, "stale"));
  CHECK(c.claim("j10", "b", 30) == 1);
  CHECK(d.log().find("connected (connection 2)") != std::string::npos);
}

TEST_CASE("sidecars: a queue's max_leased and rate hold across three sidecars (histories of "
          "claims and completes, the daemons' claim times)") {
  Sidecars s(3);
  std::vector<std::string> endpoints;
  for (std::size_t i = 0; i < s.size(); ++i) endpoints.push_back(s[i].endpoint());
  Client c(s[0].endpoint());
  REQUIRE(c.queue_config("lim", fenceq::QueueSettings{.max_leased = 3}));
  constexpr int kJobs = 60;
  enqueue_jobs(s[1], "lim", "m-", kJobs);
  std::atomic<int> errors{0};
  auto leases = fenceq::test::race_workers(endpoints, "lim", 12, kJobs, 10ms, 60s, errors);
  CHECK(errors.load() == 0);
  REQUIRE(leases.size() == kJobs);
  const int most = fenceq::test::most_at_once(leases);
  INFO("most leases at once " << most);
  CHECK(most <= 3);
  CHECK(most >= 2);

  // A rate set through another sidecar than the claims go through.
  Client c2(s[2].endpoint());
  REQUIRE(c2.queue_config("rated", fenceq::QueueSettings{.rate = 20, .per = 1.0}));
  constexpr int kRated = 50;
  enqueue_jobs(s[0], "rated", "r-", kRated);
  auto rated = fenceq::test::race_workers(endpoints, "rated", 6, kRated, 0ms, 60s, errors);
  CHECK(errors.load() == 0);
  REQUIRE(rated.size() == kRated);
  std::vector<std::string> ids;
  for (const auto& l : rated) ids.push_back(l.id);
  const auto times = fenceq::test::claim_times(c, ids, 60);
  REQUIRE(times.size() == kRated);
  const int in_window = fenceq::test::most_in_window(times, 1.0);
  INFO("most claims in one second " << in_window);
  CHECK(in_window <= 20);
  CHECK(in_window >= 15);
}

TEST_CASE("sidecars: a schedule's tick is enqueued once by three sidecars racing for it, two of "
          "them just restarted after a kill -9") {
  // Client clock: each request's `now` moves a sidecar's clock, so the test
  // brings all three to the same tick at once.
  Sidecars s(3, {"--clock", "client"});
  const double t0 = 1790000000;  // 2026-09-21 14:13:20 UTC
  {
    Client c(s[0].endpoint());
    REQUIRE(c.schedule_set("every", "* * * * *", fenceq::ScheduleOptions{.queue = "ticks"}));
  }
  // Sidecars 1 and 2 read the schedules afresh.
  for (std::size_t i : {1, 2}) {
    s[i].kill9();
    s[i].restart();
  }
  const double tick = std::floor(t0 / 60) * 60 + 60;
  for (int round = 0; round < 3; ++round) {
    std::vector<std::thread> movers;
    for (std::size_t i = 0; i < s.size(); ++i) {
      movers.emplace_back([&, i] {
        Client c(s[i].endpoint());
        // enqueue takes an optional `now`: it moves the sidecar's clock past the tick.
        fenceq::EnqueueOptions o;
        o.queue = "other";
        o.now = tick + 1 + round;
        c.enqueue("mover-" + std::to_string(i) + "-" + std::to_string(round), o);
      });
    }
    for (auto& t : movers) t.join();
  }
  Client c(s[0].endpoint());
  fenceq::ListOptions lo;
  lo.queue = "ticks";
  std::vector<fenceq::JobInfo> jobs;
  for (int i = 0; i < 20 && jobs.empty(); ++i) {
    std::this_thread::sleep_for(100ms);
    jobs = c.list(lo);
  }
  REQUIRE(jobs.size() == 1);
  const auto t = static_cast<std::time_t>(tick);
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char id[64];
  std::strftime(id, sizeof id, "every@%Y-%m-%dT%H:%MZ", &tm);
  CHECK(jobs[0].id == id);
  int enqueued_by = 0;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i].log().find("schedule 'every': enqueued") != std::string::npos) ++enqueued_by;
  }
  CHECK(enqueued_by == 1);
}

TEST_CASE("sidecars: unique keys hold across three sidecars: 16 enqueuers racing on 50 keys "
          "never have two unfinished jobs of one key at once (a history of replies)") {
  Sidecars s(3);
  std::vector<std::string> endpoints;
  for (std::size_t i = 0; i < s.size(); ++i) endpoints.push_back(s[i].endpoint());
  const auto h = fenceq::test::race_keys(endpoints, "race", 16, 50, 40, 4, 120s);
  CHECK(h.errors == 0);
  INFO("created " << h.created.size() << ", skipped " << h.skipped.size());
  CHECK(h.created.size() + h.skipped.size() == 16 * 40);
  const auto overlaps = fenceq::test::key_overlaps(h);
  INFO((overlaps.empty() ? std::string() : overlaps.front()));
  CHECK(overlaps.empty());
  CHECK(h.skipped.size() > 0);
  // Every skipped answer named a job of its own key, whichever sidecar answered.
  Client c(s[1].endpoint());
  for (const auto& [key, id] : h.skipped) {
    auto d = c.job(id);
    INFO(key << " answered " << id);
    REQUIRE(d);
    CHECK(d->info.key == key);
  }
}

TEST_CASE("sidecars: group_max_leased holds across three sidecars: 16 workers on 20 groups never "
          "hold more than 2 leases of one group at once and some group reaches 2") {
  Sidecars s(3);
  std::vector<std::string> endpoints;
  for (std::size_t i = 0; i < s.size(); ++i) endpoints.push_back(s[i].endpoint());
  // Groups of 1 to 20 jobs, enqueued through every sidecar: as the small ones
  // run out, the workers press on the big ones' limit.
  constexpr int kGroups = 20, kJobs = kGroups * (kGroups + 1) / 2;
  for (int g = 0; g < kGroups; ++g) {
    nlohmann::json jobs = nlohmann::json::array();
    for (int i = 0; i <= g; ++i) {
      jobs.push_back({{"id", "g" + std::to_string(g) + "-" + std::to_string(i)},
                      {"queue", "glim"}, {"group", "g" + std::to_string(g)}});
    }
    REQUIRE(fenceq::test::raw(s[static_cast<std::size_t>(g) % s.size()],
                              {{"op", "enqueue_many"}, {"jobs", jobs}})
                .value("ok", false));
  }
  REQUIRE(fenceq::test::raw(s[2], {{"op", "queue_config"}, {"queue", "glim"},
                                   {"group_max_leased", 2}})
              .value("ok", false));
  std::atomic<int> errors{0};
  auto leases = fenceq::test::race_workers(endpoints, "glim", 16, kJobs, 5ms, 120s, errors);
  CHECK(errors.load() == 0);
  REQUIRE(leases.size() == kJobs);
  std::map<std::string, std::vector<fenceq::test::SeenLease>> by_group;
  for (const auto& l : leases) by_group[l.id.substr(0, l.id.find('-'))].push_back(l);
  int most = 0;
  for (const auto& [g, ls] : by_group) most = std::max(most, fenceq::test::most_at_once(ls));
  INFO("most leases of one group at once " << most);
  CHECK(most <= 2);
  CHECK(most == 2);
}
