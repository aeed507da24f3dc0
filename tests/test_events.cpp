// The events stream (issue 33; docs/contract.md C3.19, protocol/PROTOCOL.md
// "Events"): fenceqd --events publishes every committed job change, and
// only those, in commit order with a seq that has no gap but a counted drop.
// Each test starts the real daemon and subscribes with fenceq::Subscriber.
#include <catch2/catch.hpp>

#include <fenceq/client.hpp>
#include <fenceq/subscriber.hpp>

#include <sys/resource.h>
#include <zmq.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "daemon.hpp"
#include "pg.hpp"

using fenceq::Client;
using fenceq::EnqueueOptions;
using fenceq::Event;
using fenceq::Subscriber;
using fenceq::test::Daemon;
using fenceq::test::TempDir;
using namespace std::chrono_literals;

namespace {

// A subscriber past ZeroMQ's slow joining: probe jobs (of its queue, or of
// "probe") are enqueued until one's event arrives (bounded); read() skips them.
struct Watch {
  Subscriber sub;
  std::vector<Event> seen;

  Watch(Client& c, const std::string& endpoint, std::optional<std::string> queue = std::nullopt)
      : sub(endpoint, queue) {
    const auto give_up = std::chrono::steady_clock::now() + 10s;
    for (int i = 0; std::chrono::steady_clock::now() < give_up; ++i) {
      EnqueueOptions o;
      o.queue = queue.value_or("probe");
      o.delay = 1e9;  // never claimable: the queue's workers do not see it
      c.enqueue("probe-" + std::to_string(i), o);
      if (auto e = sub.next(200ms)) {
        // Probes of a moment ago may still come: read until quiet.
        while (sub.next(100ms)) {
        }
        return;
      }
    }
    FAIL("no event within 10 s of subscribing");
  }
  // Reads until `n` events (not probes) are seen or `quiet` passes without one.
  const std::vector<Event>& read(std::size_t n, std::chrono::milliseconds quiet = 1000ms) {
    while (seen.size() < n) {
      auto e = sub.next(quiet);
      if (!e) break;
      if (e->id.rfind("probe-", 0) == 0) continue;
      seen.push_back(*e);
    }
    return seen;
  }
};

std::string what(const Event& e) {
  std::string s = e.event + " " + e.queue + " " + e.id + " " + std::to_string(e.fence);
  if (e.owner) s += " owner=" + *e.owner;
  if (e.group) s += " group=" + *e.group;
  return s;
}

std::vector<std::string> whats(const std::vector<Event>& events) {
  std::vector<std::string> out;
  for (const auto& e : events) out.push_back(what(e));
  return out;
}

std::vector<std::string> events_args(const TempDir& dir) {
  return {"--clock", "client", "--events", "ipc://" + dir.file("events.sock")};
}

}  // namespace

TEST_CASE("C3.19 events: a job's enqueue claim and complete are published once committed with "
          "queue fence owner and group - renew release and refused writes publish nothing",
          "") {
  TempDir dir;
  Daemon d(dir, events_args(dir));
  Client c(d.endpoint());
  Watch w(c, "ipc://" + dir.file("events.sock"));
  EnqueueOptions o;
  o.queue = "emails";
  o.now = 10;
  REQUIRE(c.enqueue("m1", o));
  auto j = c.claim_next("emails", "w1", 30, 0, 11);
  REQUIRE(j);
  REQUIRE(c.renew("m1", "w1", 1, 30, 12));
  REQUIRE_FALSE(c.complete("m1", "w1", 2, std::nullopt, 13));  // a wrong fence: refused
  REQUIRE(c.release("m1", "w1", 1));
  j = c.claim_next("emails", "w2", 30, 0, 14);
  REQUIRE(j);
  REQUIRE_FALSE(c.complete("m1", "w1", 1, std::nullopt, 15));  // the stale holder
  REQUIRE(c.complete("m1", "w2", 2, std::string("ok"), 15));
  o.group = "acme";
  REQUIRE(c.enqueue("m2", o));
  REQUIRE_FALSE(c.enqueue("m2", o));  // taken: nothing made
  CHECK(whats(w.read(6)) == std::vector<std::string>{
                                "enqueued emails m1 0", "claimed emails m1 1 owner=w1",
                                "claimed emails m1 2 owner=w2", "completed emails m1 2",
                                "enqueued emails m2 0 group=acme"});
  // seq goes up by one, in commit order, and t is the daemon's wall clock.
  const auto& seen = w.seen;
  for (std::size_t i = 1; i < seen.size(); ++i) CHECK(seen[i].seq == seen[i - 1].seq + 1);
  const double wall =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  CHECK(std::abs(seen.back().t - wall) < 60);
  CHECK(w.sub.missed() == 0);
  auto st = c.stats();
  REQUIRE(st.events_published);
  CHECK(*st.events_published == seen.back().seq);
  CHECK(st.events_dropped == std::optional<std::uint64_t>(0));
}

TEST_CASE("C3.19 events: failed dead retried cancelled snoozed unblocked and a cut by max_runtime "
          "are each published as what they are",
          "") {
  TempDir dir;
  Daemon d(dir, events_args(dir));
  Client c(d.endpoint());
  Watch w(c, "ipc://" + dir.file("events.sock"), std::string("q"));
  EnqueueOptions o;
  o.queue = "q";
  o.now = 100;
  o.max_attempts = 2;
  REQUIRE(c.enqueue("a", o));
  REQUIRE(c.claim_next("q", "w", 30, 0, 101));
  REQUIRE(c.fail("a", "w", 1, "boom", 0.0, 102));  // attempts left: failed
  REQUIRE(c.claim_next("q", "w", 30, 0, 103));
  REQUIRE(c.snooze("a", "w", 2, 0, 104));           // the attempt given back
  REQUIRE(c.claim_next("q", "w", 30, 0, 105));
  REQUIRE(c.fail("a", "w", 3, "boom", 0.0, 106));  // the last attempt: dead
  REQUIRE(c.retry("a"));
  REQUIRE(c.cancel("a"));
  // A child waits for its parent, and is unblocked by the parent's complete.
  o.max_attempts = 1;
  REQUIRE(c.enqueue("p", o));
  EnqueueOptions child = o;
  child.after = {"p"};
  REQUIRE(c.enqueue("ch", child));
  REQUIRE(c.claim_next("q", "w", 30, 0, 107));
  REQUIRE(c.complete("p", "w", 1, std::nullopt, 108));
  // A lease that runs out on the last attempt: the reaper writes it down dead.
  REQUIRE(c.claim_next("q", "w", 5, 0, 109));  // ch
  // max_runtime: renewals cannot pass it, and the attempt is cut there.
  EnqueueOptions capped = o;
  capped.max_attempts = 3;
  capped.max_runtime = 10;
  REQUIRE(c.enqueue("cap", capped));
  REQUIRE(c.claim_next("q", "w", 5, 0, 110));
  REQUIRE(c.renew("cap", "w", 1, 100, 111));
  // Time passes (the client clock): ch's lease ends, cap reaches its cap.
  REQUIRE_FALSE(c.complete("cap", "w", 1, std::nullopt, 130));
  // Batches after that time: one writes the overrun and the exhausted job
  // down (on PostgreSQL the reaper runs at most every second).
  EnqueueOptions other;
  other.queue = "other";
  other.now = 131;
  for (int i = 0; i < 30 && w.read(19, 200ms).size() < 19; ++i) {
    REQUIRE(c.enqueue("x" + std::to_string(i), other));
  }
  CHECK(whats(w.seen) ==
        std::vector<std::string>{"enqueued q a 0", "claimed q a 1 owner=w", "failed q a 1",
                                 "claimed q a 2 owner=w", "snoozed q a 2", "claimed q a 3 owner=w",
                                 "dead q a 3", "retried q a 3", "cancelled q a 4",
                                 "enqueued q p 0", "enqueued q ch 0", "claimed q p 1 owner=w",
                                 "completed q p 1", "unblocked q ch 0", "claimed q ch 1 owner=w",
                                 "enqueued q cap 0", "claimed q cap 1 owner=w", "failed q cap 2",
                                 "dead q ch 1"});
}

TEST_CASE("C3.19 events: step_saved suspended signalled and expired are published as what they "
          "are, and a wait that times out as failed or dead (C3.22, C3.23, C3.24)",
          "") {
  TempDir dir;
  Daemon d(dir, events_args(dir));
  Client c(d.endpoint());
  Watch w(c, "ipc://" + dir.file("events.sock"), std::string("s"));
  EnqueueOptions o;
  o.queue = "s";
  o.now = 100;
  REQUIRE(c.enqueue("a", o));
  REQUIRE(c.claim_next("s", "w", 30, 0, 101));
  REQUIRE(c.step_save("a", "w", 1, "charge", fenceq::Payload{"ch_1", false}, 101.5));
  REQUIRE_FALSE(c.step_save("a", "w", 1, "charge", fenceq::Payload{"ch_2", false}, 101.5));
  const auto token = c.suspend("a", "w", 1, 60, fenceq::OnTimeout::retry, 102);
  REQUIRE(token);
  REQUIRE_FALSE(c.suspend("a", "w", 1, 60, fenceq::OnTimeout::retry, 102));  // refused: nothing
  REQUIRE(c.signal(*token, std::nullopt, 103));
  REQUIRE_FALSE(c.signal(*token, std::nullopt, 103));  // used: nothing
  REQUIRE(c.claim_next("s", "w", 30, 0, 104));
  REQUIRE(c.suspend("a", "w", 2, 5, fenceq::OnTimeout::retry, 105));  // times out at 110
  REQUIRE(c.enqueue("b", o));
  REQUIRE(c.claim("b", "w", 30, 106));
  REQUIRE(c.suspend("b", "w", 1, 5, fenceq::OnTimeout::fail, 106));  // times out at 111: dead
  EnqueueOptions dl = o;
  dl.deadline = 108;
  dl.delay = 50;
  REQUIRE(c.enqueue("c", dl));  // delayed past its deadline
  // Batches after those times reap them (on PostgreSQL at most every 250 ms).
  EnqueueOptions other;
  other.queue = "other";
  other.now = 120;
  for (int i = 0; i < 40 && w.read(14, 200ms).size() < 14; ++i) {
    REQUIRE(c.enqueue("x" + std::to_string(i), other));
  }
  auto seen = whats(w.seen);
  // The three reaped in one batch: their order within it is the store's.
  REQUIRE(seen.size() == 14);
  std::sort(seen.end() - 3, seen.end());
  CHECK(seen == std::vector<std::string>{
                    "enqueued s a 0", "claimed s a 1 owner=w", "step_saved s a 1",
                    "suspended s a 1", "signalled s a 1",
                    "claimed s a 2 owner=w", "suspended s a 2", "enqueued s b 0",
                    "claimed s b 1 owner=w", "suspended s b 1", "enqueued s c 0", "dead s b 1",
                    "expired s c 0", "failed s a 2"});
}

TEST_CASE("C3.19 events: a batch that rolls back publishes nothing and seq goes on without a gap",
          "[sqlite]") {  // the disk refusing writes: SQLite's file
  TempDir dir;
  Daemon d(dir, events_args(dir));
  Client c(d.endpoint(), fenceq::ClientOptions{5000ms});
  Watch w(c, "ipc://" + dir.file("events.sock"));
  EnqueueOptions o;
  o.queue = "q";
  o.now = 1;
  REQUIRE(c.enqueue("before", o));
  REQUIRE(w.read(1).size() == 1);
  // The disk refuses every write from now on (RLIMIT_FSIZE at the log's size).
  const auto wal = std::filesystem::file_size(d.db() + "-wal");
  struct rlimit lim {};
  REQUIRE(::prlimit(d.pid(), RLIMIT_FSIZE, nullptr, &lim) == 0);
  const auto was = lim.rlim_cur;
  lim.rlim_cur = wal;
  REQUIRE(::prlimit(d.pid(), RLIMIT_FSIZE, &lim, nullptr) == 0);
  for (int i = 0; i < 3; ++i) {
    try {
      c.enqueue("lost-" + std::to_string(i), o);
      FAIL("an enqueue was acknowledged on a disk that refuses writes");
    } catch (const fenceq::Error& e) {
      CHECK(e.code() == "internal");
    }
  }
  lim.rlim_cur = was;
  REQUIRE(::prlimit(d.pid(), RLIMIT_FSIZE, &lim, nullptr) == 0);
  REQUIRE(c.enqueue("after", o));
  const auto& seen = w.read(2);
  CHECK(whats(seen) == std::vector<std::string>{"enqueued q before 0", "enqueued q after 0"});
  REQUIRE(seen.size() == 2);
  CHECK(seen[1].seq == seen[0].seq + 1);
  CHECK(w.sub.missed() == 0);
}

TEST_CASE("C3.19 events: 8 racing workers - the stream is exactly the history of acknowledged "
          "writes, in an order each job's history agrees with, seq without a gap",
          "") {
  TempDir dir;
  Daemon d(dir, {"--events", "ipc://" + dir.file("events.sock")});  // the server clock
  Client c(d.endpoint());
  Watch w(c, "ipc://" + dir.file("events.sock"), std::string("race"));
  constexpr int kJobs = 400;
  for (int i = 0; i < kJobs; ++i) {
    EnqueueOptions o;
    o.queue = "race";
    o.max_attempts = 0;
    REQUIRE(c.enqueue("r" + std::to_string(i), o));
  }
  // What the workers were told: one line per acknowledged change.
  std::mutex mu;
  std::multiset<std::string> acked;
  for (int i = 0; i < kJobs; ++i) acked.insert("enqueued race r" + std::to_string(i) + " 0");
  std::atomic<int> finished{0};
  std::atomic<int> stale_applied{0};  // Catch's assertions are for the test's thread
  std::vector<std::thread> workers;
  for (int t = 0; t < 8; ++t) {
    workers.emplace_back([&, t] {
      Client wc(d.endpoint());
      std::mt19937 rng(static_cast<unsigned>(t));
      const std::string me = "w" + std::to_string(t);
      const auto give_up = std::chrono::steady_clock::now() + 60s;
      while (finished < kJobs && std::chrono::steady_clock::now() < give_up) {
        auto j = wc.claim_next("race", me, 30, 0.2);
        if (!j) continue;
        std::vector<std::string> mine{"claimed race " + j->id + " " + std::to_string(j->fence) +
                                      " owner=" + me};
        const int roll = static_cast<int>(rng() % 10);
        if (roll < 2) {
          if (wc.fail(j->id, me, j->fence, "boom", 0.0)) {
            mine.push_back("failed race " + j->id + " " + std::to_string(j->fence));
          }
        } else if (roll < 3) {
          wc.release(j->id, me, j->fence);  // publishes nothing
        } else {
          // A stale write first (the fence before), refused and unpublished.
          if (wc.complete(j->id, me, j->fence - 1, std::nullopt)) ++stale_applied;
          if (wc.complete(j->id, me, j->fence, std::nullopt)) {
            mine.push_back("completed race " + j->id + " " + std::to_string(j->fence));
            ++finished;
          }
        }
        std::lock_guard lock(mu);
        acked.insert(mine.begin(), mine.end());
      }
    });
  }
  for (auto& t : workers) t.join();
  REQUIRE(finished == kJobs);
  CHECK(stale_applied == 0);
  const auto& seen = w.read(acked.size(), 3000ms);
  const auto published = whats(seen);
  CHECK(std::multiset<std::string>(published.begin(), published.end()) == acked);
  for (std::size_t i = 1; i < seen.size(); ++i) REQUIRE(seen[i].seq == seen[i - 1].seq + 1);
  CHECK(w.sub.missed() == 0);
  // Each job's events, in seq order, are a history its lease allows: enqueued
  // first, each claim's fence one more than the last, every other event with
  // the fence of the claim before it, completed last.
  std::map<std::string, std::vector<const Event*>> by_job;
  for (const auto& e : seen) by_job[e.id].push_back(&e);
  for (const auto& [id, events] : by_job) {
    INFO(id);
    REQUIRE(events.front()->event == "enqueued");
    CHECK(events.back()->event == "completed");
    std::int64_t fence = 0;
    for (std::size_t i = 1; i < events.size(); ++i) {
      const auto& e = *events[i];
      if (e.event == "claimed") {
        CHECK(e.fence == fence + 1);
        fence = e.fence;
      } else {
        CHECK(e.fence == fence);
        CHECK(events[i - 1]->event == "claimed");
      }
    }
  }
  auto st = c.stats();
  CHECK(st.events_dropped == std::optional<std::uint64_t>(0));
}

TEST_CASE("C3.19 events: a subscriber that does not read is never waited for - the events it "
          "cannot take are dropped and counted and a reader sees them as gaps in seq",
          "") {
  TempDir dir;
  Daemon d(dir, events_args(dir));
  Client c(d.endpoint());
  const std::string events = "ipc://" + dir.file("events.sock");
  Watch reader(c, events, std::string("bulk"));
  // A subscriber that never reads, with a small queue of its own.
  zmq::context_t ctx;
  zmq::socket_t stuck(ctx, zmq::socket_type::sub);
  stuck.set(zmq::sockopt::rcvhwm, 10);
  stuck.set(zmq::sockopt::linger, 0);
  stuck.set(zmq::sockopt::subscribe, "");
  stuck.connect(events);
  std::this_thread::sleep_for(300ms);  // its subscription reaches the daemon (no wait on it below)
  // 30,000 events in 30 requests: the daemon answers each at once.
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 30; ++i) {
    std::vector<fenceq::JobSpec> jobs;
    for (int k = 0; k < 1000; ++k) {
      fenceq::JobSpec j;
      j.id = "b" + std::to_string(i * 1000 + k);
      j.queue = "bulk";
      jobs.push_back(std::move(j));
    }
    c.enqueue_many(jobs, 1);
  }
  CHECK(std::chrono::steady_clock::now() - start < 30s);
  // The reader takes what it was sent; then the stuck one leaves, and events
  // go out again (tails, until the reader gets one): the drops before them
  // are gaps the reader sees.
  reader.read(30000, 2000ms);
  stuck.close();
  int tails = 0;
  for (const auto give_up = std::chrono::steady_clock::now() + 10s;
       std::chrono::steady_clock::now() < give_up;) {
    fenceq::EnqueueOptions o;
    o.queue = "bulk";
    o.now = 1;
    REQUIRE(c.enqueue("tail-" + std::to_string(tails++), o));
    if (auto e = reader.sub.next(200ms)) {
      reader.seen.push_back(*e);
      break;
    }
  }
  auto st = c.stats();
  REQUIRE(st.events_dropped);
  CHECK(*st.events_dropped > 0);
  const auto& seen = reader.read(30000 + static_cast<std::size_t>(tails), 1000ms);
  INFO("dropped " << *st.events_dropped << ", seen " << seen.size() << ", tails " << tails);
  CHECK(seen.size() + *st.events_dropped == 30000u + static_cast<std::size_t>(tails));
  CHECK(reader.sub.missed() == *st.events_dropped);
  CHECK(seen.back().id.rfind("tail-", 0) == 0);
}

TEST_CASE("C3.19 events: --events on tcp without --allow-tcp is refused at start", "[sqlite]") {
  TempDir dir;
  auto r = fenceq::test::run({fenceq::test::fenceqd_path(), "--db", dir.file("x.db"), "--listen",
                              "ipc://" + dir.file("s.sock"), "--events", "tcp://127.0.0.1:0"});
  CHECK(r.status != 0);
  CHECK(r.out.find("--allow-tcp") != std::string::npos);
}

TEST_CASE("C3.19 events: on PostgreSQL each sidecar publishes the changes it committed itself, "
          "and a sidecar without --events adds none",
          "[postgres]") {
  fenceq::test::PgSchema schema;
  TempDir da, db, dc;
  Daemon a(da, {"--events", "ipc://" + da.file("events.sock")}, true, schema.uri());
  Daemon b(db, {"--events", "ipc://" + db.file("events.sock")}, true, schema.uri());
  Daemon plain(dc, {}, true, schema.uri());
  Client ca(a.endpoint()), cb(b.endpoint()), cc(plain.endpoint());
  Watch wa(ca, "ipc://" + da.file("events.sock"), std::string("q"));
  Watch wb(cb, "ipc://" + db.file("events.sock"), std::string("q"));
  EnqueueOptions o;
  o.queue = "q";
  REQUIRE(ca.enqueue("j1", o));
  REQUIRE(cc.enqueue("j2", o));  // the sidecar without --events
  auto j = cb.claim_next("q", "wb", 30);
  REQUIRE(j);
  REQUIRE(j->id == "j1");
  REQUIRE(ca.complete("j1", "wb", 1, std::nullopt));
  CHECK(whats(wa.read(2)) == std::vector<std::string>{"enqueued q j1 0", "completed q j1 1"});
  CHECK(whats(wb.read(1)) == std::vector<std::string>{"claimed q j1 1 owner=wb"});
  // Nothing more comes on either: j2's enqueue was the third sidecar's.
  CHECK_FALSE(wa.sub.next(300ms));
  CHECK_FALSE(wb.sub.next(300ms));
}
