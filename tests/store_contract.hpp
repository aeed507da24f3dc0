// The store contract, once for every store (one suite, two stores): every
// clause of C1-C3 that the store alone decides, and the work queue's store
// semantics (claim_next order, payloads, delays, fail, attempts, dead jobs,
// retry, purge, list, stats). Values differ from the spec's examples on purpose.
//
// Included by exactly one test file per store, after it defines `Backend`:
//   Backend();                          a fresh, empty database
//   std::unique_ptr<Store> open();      a store on it (again: the same data)
//   void sql(const std::string& q);     plain SQL on it, outside any store
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "execution/clock.hpp"
#include "storage/store.hpp"

namespace store_contract {

using fenceq::daemon::Store;
using fenceq::protocol::JobStatus;
using fenceq::daemon::ListFilter;
using fenceq::daemon::NewJob;
using fenceq::protocol::Payload;

struct Enq {
  std::string queue = "default";
  std::optional<Payload> payload;
  std::int64_t priority = 0;
  double delay = 0;
  std::int64_t max_attempts = 0;
};

// A job to enqueue that owns its strings; a NewJob (of views) while it lives.
struct OwnedJob {
  std::string id;
  Enq o;
  operator NewJob() const {  // NOLINT: converts where a NewJob is asked for
    return NewJob{id, o.queue, o.payload ? &*o.payload : nullptr, o.priority, o.delay,
                  o.max_attempts};
  }
};

inline OwnedJob enqueue_request(std::string id, const Enq& o = {}) { return {std::move(id), o}; }

// Runs one committed operation, as a batch of one.
template <typename F>
auto tx(Store& s, F f) {
  s.begin();
  try {
    if constexpr (std::is_void_v<decltype(f())>) {
      f();
      s.commit();
    } else {
      auto r = f();
      s.commit();
      return r;
    }
  } catch (...) {
    s.rollback();
    throw;
  }
}

// The daemon's settling steps until none is left (each is a few
// milliseconds of work, so one step can leave some on a busy machine: a
// test asserted after a single step failed once in a clean clone beside
// make test's deadlock run). Bounded: 10,000 steps.
inline void settle_all(Store& s, double now) {
  for (int i = 0; i < 10000; ++i) {
    if (!tx(s, [&] { return s.settle_step(now); }).left) return;
  }
}

inline bool enqueue(Store& s, std::string id, const Enq& o = {}, double now = 0.0) {
  return tx(s, [&] { return s.enqueue(enqueue_request(std::move(id), o), now); });
}

inline fenceq::JobInfo info(Store& s, const std::string& id, double now) {
  ListFilter r;
  r.limit = 1000;
  for (const auto& j : tx(s, [&] { return s.list(r, now); })) {
    if (j.id == id) return j;
  }
  FAIL("job " << id << " not listed");
  return {};
}

}  // namespace store_contract

using namespace store_contract;

TEST_CASE("C1.1 a plain INSERT INTO jobs(id) works and yields the default row") {
  Backend b;
  auto s = b.open();
  b.sql("INSERT INTO jobs(id) VALUES('plain')");
  auto row = tx(*s, [&] { return s->state("plain"); });
  REQUIRE(row);
  CHECK(!row->owner);
  CHECK(row->until == 0);
  CHECK(row->fence == 0);
  CHECK(!row->result);
  CHECK(!row->done);
  // The queue's columns have usable defaults: the row is an ordinary ready job.
  auto job = tx(*s, [&] { return s->claim_next("default", "w", 10.0, 5.0); });
  REQUIRE(job);
  CHECK(job->id == "plain");
  CHECK(job->fence == 1);
  CHECK(!job->payload);
}

TEST_CASE("C1.2 reopening changes no row and the fence continues from where it was") {
  Backend b;
  {
    auto s = b.open();
    enqueue(*s, "r1");
    for (int i = 0; i < 7; ++i) {
      // Each claim starts after the previous lease ended.
      REQUIRE(tx(*s, [&] { return s->claim("r1", "w", 1000.0 + 10 * i, 3.0); }) == i + 1);
    }
    REQUIRE(tx(*s, [&] { return s->release("r1", "w", 7); }));
  }
  auto again = b.open();
  auto row = tx(*again, [&] { return again->state("r1"); });
  REQUIRE(row);
  CHECK(row->fence == 7);
  CHECK(!row->owner);
  CHECK(tx(*again, [&] { return again->claim("r1", "v", 5000.0, 1.0); }) == 8);
  // A repeated enqueue after reopen does not reset the fence either.
  CHECK_FALSE(enqueue(*again, "r1"));
  CHECK(tx(*again, [&] { return again->state("r1"); })->fence == 8);
}

TEST_CASE("C1.4 a rolled-back transaction applies nothing, total_changes counts writes only") {
  Backend b;
  auto s = b.open();
  auto before = s->total_changes();
  s->begin();
  CHECK(s->enqueue(enqueue_request("gone"), 1.0));
  CHECK(s->claim("gone", "w", 1.0, 5.0) == 1);
  s->rollback();
  CHECK_FALSE(tx(*s, [&] { return s->state("gone"); }));
  CHECK(enqueue(*s, "kept"));
  auto after_write = s->total_changes();
  CHECK(after_write > before);
  // Reads, and writes whose conditions do not hold, change nothing.
  tx(*s, [&] {
    s->state("kept");
    s->check("kept", "w", 1, 1.0);
    s->renew("kept", "w", 1, 1.0, 5.0);
    s->release("kept", "w", 1);
    s->reap_exhausted(1.0);
    s->queue_stats(1.0);
  });
  CHECK(s->total_changes() == after_write);
  CHECK(tx(*s, [&] { return s->claim("kept", "w", 1.0, 5.0); }) == 1);
  CHECK(s->total_changes() > after_write);
}

TEST_CASE("C3.1 enqueue inserts once, a repeat during a lease changes nothing") {
  Backend b;
  auto s = b.open();
  CHECK(enqueue(*s, "q-17"));
  CHECK_FALSE(enqueue(*s, "q-17"));
  REQUIRE(tx(*s, [&] { return s->claim("q-17", "holder", 77.25, 8.5); }) == 1);
  CHECK_FALSE(enqueue(*s, "q-17"));
  auto row = tx(*s, [&] { return s->state("q-17"); });
  CHECK(row->owner == "holder");
  CHECK(row->until == 85.75);
  CHECK(row->fence == 1);
}

TEST_CASE("C3.2 state returns the stored row, nothing for a missing id") {
  Backend b;
  auto s = b.open();
  CHECK_FALSE(tx(*s, [&] { return s->state("ghost"); }));
  enqueue(*s, "ünïcode ✓");
  auto row = tx(*s, [&] { return s->state("ünïcode ✓"); });
  REQUIRE(row);
  CHECK(row->id == "ünïcode ✓");
  CHECK_FALSE(tx(*s, [&] { return s->state("ünïcode"); }));
}

TEST_CASE("C3.3 claim: nil for missing, done or leased, boundary now == until is claimable") {
  Backend b;
  auto s = b.open();
  CHECK_FALSE(tx(*s, [&] { return s->claim("absent", "o", 1.0, 1.0); }));
  enqueue(*s, "c");
  REQUIRE(tx(*s, [&] { return s->claim("c", "a", 500.0, 0.75); }) == 1);  // until 500.75
  CHECK_FALSE(tx(*s, [&] { return s->claim("c", "b", 500.5, 10.0); }));
  CHECK_FALSE(tx(*s, [&] { return s->claim("c", "a", 500.7499, 10.0); }));  // not even the holder
  CHECK(tx(*s, [&] { return s->claim("c", "b", 500.75, 2.0); }) == 2);  // now == until
  auto row = tx(*s, [&] { return s->state("c"); });
  CHECK(row->owner == "b");
  CHECK(row->until == 502.75);
  REQUIRE(tx(*s, [&] { return s->complete("c", "b", 2, std::string("x"), 501.0); }));
  CHECK_FALSE(tx(*s, [&] { return s->claim("c", "z", 1e9, 1.0); }));  // done: never again
  CHECK(tx(*s, [&] { return s->state("c"); })->fence == 2);
}

TEST_CASE("C2.1 times round-trip exactly, to the last bit of the double") {
  Backend b;
  auto s = b.open();
  enqueue(*s, "t");
  const double now = 1712345678.1234567, ttl = 0.1;  // now + ttl is not a short decimal
  REQUIRE(tx(*s, [&] { return s->claim("t", "w", now, ttl); }) == 1);
  CHECK(tx(*s, [&] { return s->state("t"); })->until == now + ttl);
  CHECK(tx(*s, [&] { return s->check("t", "w", 1, std::nextafter(now + ttl, 0.0)); }));
  CHECK_FALSE(tx(*s, [&] { return s->check("t", "w", 1, now + ttl); }));
}

TEST_CASE("C3.4 renew: only owner + fence of a current lease, now == until is expired") {
  Backend b;
  auto s = b.open();
  enqueue(*s, "r");
  REQUIRE(tx(*s, [&] { return s->claim("r", "own", 40.0, 6.0); }) == 1);  // until 46
  CHECK_FALSE(tx(*s, [&] { return s->renew("r", "other", 1, 41.0, 6.0); }));
  CHECK_FALSE(tx(*s, [&] { return s->renew("r", "own", 2, 41.0, 6.0); }));
  CHECK_FALSE(tx(*s, [&] { return s->renew("missing", "own", 1, 41.0, 6.0); }));
  CHECK(tx(*s, [&] { return s->renew("r", "own", 1, 45.5, 9.0); }));  // until 54.5
  CHECK(tx(*s, [&] { return s->state("r"); })->until == 54.5);
  CHECK_FALSE(tx(*s, [&] { return s->renew("r", "own", 1, 54.5, 9.0); }));  // boundary: expired
  CHECK_FALSE(tx(*s, [&] { return s->renew("r", "own", 1, 60.0, 9.0); }));  // never revived
  CHECK(tx(*s, [&] { return s->state("r"); })->until == 54.5);
}

TEST_CASE("C3.5 complete: only the current lease, a stale complete keeps the stored result") {
  Backend b;
  auto s = b.open();
  enqueue(*s, "k");
  REQUIRE(tx(*s, [&] { return s->claim("k", "old", 10.0, 4.0); }) == 1);  // until 14
  CHECK_FALSE(tx(*s, [&] { return s->complete("k", "old", 1, std::string("late"), 14.0); }));
  REQUIRE(tx(*s, [&] { return s->claim("k", "new", 14.0, 4.0); }) == 2);  // until 18
  CHECK_FALSE(tx(*s, [&] { return s->complete("k", "old", 1, std::string("stale"), 15.0); }));
  CHECK_FALSE(tx(*s, [&] { return s->complete("k", "new", 1, std::string("old fence"), 15.0); }));
  CHECK(tx(*s, [&] { return s->complete("k", "new", 2, std::string("fresh"), 17.9); }));
  CHECK_FALSE(tx(*s, [&] { return s->complete("k", "new", 2, std::string("twice"), 17.95); }));
  CHECK_FALSE(tx(*s, [&] { return s->complete("k", "old", 1, std::string("stale"), 16.0); }));
  auto row = tx(*s, [&] { return s->state("k"); });
  CHECK(row->result == "fresh");
  CHECK(row->done);
}

TEST_CASE("C3.6 release: owner + fence on a job not done, keeps the fence, not after done") {
  Backend b;
  auto s = b.open();
  enqueue(*s, "l");
  REQUIRE(tx(*s, [&] { return s->claim("l", "p", 3.0, 100.0); }) == 1);
  CHECK_FALSE(tx(*s, [&] { return s->release("l", "q", 1); }));
  CHECK_FALSE(tx(*s, [&] { return s->release("l", "p", 0); }));
  CHECK(tx(*s, [&] { return s->release("l", "p", 1); }));
  auto row = tx(*s, [&] { return s->state("l"); });
  CHECK(!row->owner);
  CHECK(row->until == 0);
  CHECK(row->fence == 1);
  // Claimable at once after a release, with the next fence.
  REQUIRE(tx(*s, [&] { return s->claim("l", "q", 4.0, 100.0); }) == 2);
  REQUIRE(tx(*s, [&] { return s->complete("l", "q", 2, std::nullopt, 5.0); }));
  CHECK_FALSE(tx(*s, [&] { return s->release("l", "q", 2); }));  // release after done
  row = tx(*s, [&] { return s->state("l"); });
  CHECK(row->owner == "q");
  CHECK(row->done);
  CHECK(!row->result);
}

TEST_CASE("C2.3 the server clock never decreases and its high-water mark survives reopening") {
  Backend b;
  const double future = 4.0e9;  // year 2096: ahead of any wall clock running this test
  {
    auto s = b.open();
    CHECK(tx(*s, [&] { return s->clock_high_water(); }) == 0);
    tx(*s, [&] { s->set_clock_high_water(future); });
  }
  auto s = b.open();
  fenceq::daemon::Clock clock(fenceq::protocol::ClockMode::server,
                              tx(*s, [&] { return s->clock_high_water(); }));
  double prev = clock.now();
  CHECK(prev >= future);
  for (int i = 0; i < 1000; ++i) {
    double t = clock.now();
    REQUIRE(t >= prev);
    prev = t;
  }
  fenceq::daemon::Clock fresh(fenceq::protocol::ClockMode::server, 0);
  double a = fresh.now();
  CHECK(a > 1.7e9);  // seconds since the epoch, C2.1
  CHECK(fresh.now() >= a);
}

TEST_CASE("queue store: claim_next takes the highest priority first, enqueue order within one") {
  Backend b;
  auto s = b.open();
  auto in = [](const char* q, std::int64_t prio) {
    Enq o;
    o.queue = q;
    o.priority = prio;
    return o;
  };
  REQUIRE(enqueue(*s, "low-1", in("mail", -5)));
  REQUIRE(enqueue(*s, "mid-1", in("mail", 3)));
  REQUIRE(enqueue(*s, "other", in("sms", 100)));
  REQUIRE(enqueue(*s, "mid-2", in("mail", 3)));
  REQUIRE(enqueue(*s, "top", in("mail", 9)));
  REQUIRE(enqueue(*s, "mid-3", in("mail", 3)));
  std::vector<std::string> order;
  while (auto job = tx(*s, [&] { return s->claim_next("mail", "w", 10.0, 60.0); })) {
    CHECK(job->fence == 1);
    CHECK(job->attempts == 1);
    order.push_back(job->id);
  }
  CHECK(order == std::vector<std::string>{"top", "mid-1", "mid-2", "mid-3", "low-1"});
  CHECK(tx(*s, [&] { return s->claim_next("sms", "w", 10.0, 60.0); })->id == "other");
  CHECK_FALSE(tx(*s, [&] { return s->claim_next("empty-queue", "w", 10.0, 60.0); }));
  // C3.1: a repeated enqueue (even with other options) changes nothing.
  CHECK_FALSE(enqueue(*s, "top", in("sms", -1)));
  CHECK(info(*s, "top", 10.0).queue == "mail");
  CHECK(info(*s, "top", 10.0).priority == 9);
  // A leased job is stepped over; once its lease ends it is the next again.
  CHECK_FALSE(tx(*s, [&] { return s->claim_next("mail", "w", 69.9, 60.0); }));
  auto again = tx(*s, [&] { return s->claim_next("mail", "v", 70.0, 60.0); });
  REQUIRE(again);
  CHECK(again->id == "top");
  CHECK(again->fence == 2);
}

TEST_CASE("queue store: payloads come back as sent, str as text and bin as bytes") {
  Backend b;
  auto s = b.open();
  const std::string bytes("\x00\xff\x10 binary\x80", 11);
  const std::string big(256 * 1024, 'z');
  Enq bin, text, none, text_nul, large;
  bin.queue = text.queue = none.queue = text_nul.queue = large.queue = "p";
  bin.payload = Payload{bytes, true};
  text.payload = Payload{"héllo ✓", false};
  text_nul.payload = Payload{std::string("a\0b", 3), false};  // U+0000 is valid UTF-8
  large.payload = Payload{big, true};
  REQUIRE(enqueue(*s, "b", bin));
  REQUIRE(enqueue(*s, "t", text));
  REQUIRE(enqueue(*s, "n", none));
  REQUIRE(enqueue(*s, "z", text_nul));
  REQUIRE(enqueue(*s, "l", large));
  auto next = [&] { return tx(*s, [&] { return s->claim_next("p", "w", 1.0, 5.0); }); };
  auto b1 = next();
  REQUIRE(b1);
  REQUIRE(b1->payload);
  CHECK(b1->payload->binary);
  CHECK(b1->payload->bytes == bytes);
  auto t = next();
  REQUIRE(t->payload);
  CHECK_FALSE(t->payload->binary);
  CHECK(t->payload->bytes == "héllo ✓");
  CHECK_FALSE(next()->payload);
  auto z = next();
  REQUIRE(z->payload);
  CHECK_FALSE(z->payload->binary);
  CHECK(z->payload->bytes == std::string("a\0b", 3));
  auto l = next();
  REQUIRE(l->payload);
  CHECK(l->payload->bytes == big);
}

TEST_CASE("queue store: a delayed job cannot be claimed, by id or next, before its delay ends") {
  Backend b;
  auto s = b.open();
  Enq o;
  o.queue = "later";
  o.delay = 30;
  REQUIRE(enqueue(*s, "d", o, 1000.0));
  CHECK(info(*s, "d", 1000.0).status == JobStatus::delayed);
  CHECK(info(*s, "d", 1000.0).not_before == 1030.0);
  CHECK_FALSE(tx(*s, [&] { return s->claim_next("later", "w", 1029.9, 5.0); }));
  CHECK_FALSE(tx(*s, [&] { return s->claim("d", "w", 1029.9, 5.0); }));
  CHECK(info(*s, "d", 1030.0).status == JobStatus::ready);
  CHECK(tx(*s, [&] { return s->claim_next("later", "w", 1030.0, 5.0); })->id == "d");
}

TEST_CASE("queue store: fail keeps the error, ends the lease, and reopens the job after retry_in") {
  Backend b;
  auto s = b.open();
  Enq q;
  q.queue = "q";
  REQUIRE(enqueue(*s, "f", q));
  auto job = tx(*s, [&] { return s->claim_next("q", "a", 100.0, 10.0); });
  REQUIRE(job);
  // Refusals: wrong owner, wrong fence, an expired lease.
  CHECK_FALSE(tx(*s, [&] { return s->fail("f", "b", job->fence, "x", 1.0, 101.0); }));
  CHECK_FALSE(tx(*s, [&] { return s->fail("f", "a", job->fence + 1, "x", 1.0, 101.0); }));
  CHECK_FALSE(tx(*s, [&] { return s->fail("f", "a", job->fence, "x", 1.0, 110.0); }));
  CHECK(tx(*s, [&] { return s->fail("f", "a", job->fence, "disk full", 7.5, 105.0); }));
  auto st = info(*s, "f", 105.0);
  CHECK(st.error == "disk full");
  CHECK(!st.owner);
  CHECK(st.not_before == 112.5);
  CHECK(st.status == JobStatus::delayed);
  // The old lease can no longer do anything.
  CHECK_FALSE(tx(*s, [&] { return s->complete("f", "a", job->fence, std::string("late"), 106.0); }));
  CHECK_FALSE(tx(*s, [&] { return s->claim_next("q", "b", 112.4, 10.0); }));
  auto again = tx(*s, [&] { return s->claim_next("q", "b", 112.5, 10.0); });
  REQUIRE(again);
  CHECK(again->fence == job->fence + 1);
  CHECK(again->attempts == 2);
  // Default backoff: 2^(attempts-1) seconds, here 2 s after the second attempt.
  CHECK(tx(*s, [&] { return s->fail("f", "b", again->fence, "again", std::nullopt, 113.0); }));
  CHECK(info(*s, "f", 113.0).not_before == 115.0);
  // ... doubling with each attempt, and never more than an hour.
  double now = 115.0;
  for (int attempt = 3; attempt <= 14; ++attempt) {
    auto j = tx(*s, [&] { return s->claim("f", "c", now, 10.0); });
    REQUIRE(j);
    REQUIRE(tx(*s, [&] { return s->fail("f", "c", *j, "e", std::nullopt, now + 1); }));
    double backoff = std::min(3600.0, static_cast<double>(1 << (attempt - 1)));
    CHECK(info(*s, "f", now).not_before == now + 1 + backoff);
    now += 1 + backoff;
  }
}

TEST_CASE("queue store: max_attempts used up makes a job dead, retry revives it with a larger fence") {
  Backend b;
  auto s = b.open();
  Enq o;
  o.queue = "q";
  o.max_attempts = 2;
  REQUIRE(enqueue(*s, "m", o));
  auto a1 = tx(*s, [&] { return s->claim_next("q", "w", 0.0, 10.0); });
  REQUIRE(tx(*s, [&] { return s->fail("m", "w", a1->fence, "first", 0.0, 1.0); }));
  auto a2 = tx(*s, [&] { return s->claim_next("q", "w", 2.0, 10.0); });
  REQUIRE(a2);
  CHECK(a2->attempts == 2);
  REQUIRE(tx(*s, [&] { return s->fail("m", "w", a2->fence, "second", 0.0, 3.0); }));
  CHECK(info(*s, "m", 3.0).status == JobStatus::dead);
  CHECK(info(*s, "m", 3.0).error == "second");
  CHECK_FALSE(tx(*s, [&] { return s->claim_next("q", "w", 100.0, 10.0); }));
  CHECK_FALSE(tx(*s, [&] { return s->claim("m", "w", 100.0, 10.0); }));
  auto stats = tx(*s, [&] { return s->queue_stats(100.0); });
  REQUIRE(stats.size() == 1);
  CHECK(stats[0].dead == 1);

  CHECK(tx(*s, [&] { return s->retry("m", 100.0); }));
  CHECK_FALSE(tx(*s, [&] { return s->retry("m", 100.0); }));  // not dead any more
  auto a3 = tx(*s, [&] { return s->claim_next("q", "w", 101.0, 10.0); });
  REQUIRE(a3);
  CHECK(a3->fence == 3);  // the fence continued through death and retry
  CHECK(a3->attempts == 1);

  // A last attempt whose lease expires without a complete makes the job dead too.
  Enq once;
  once.queue = "q";
  once.max_attempts = 1;
  REQUIRE(enqueue(*s, "x", once));
  REQUIRE(tx(*s, [&] { return s->claim("x", "w", 200.0, 5.0); }) == 1);
  CHECK(info(*s, "x", 200.0).status == JobStatus::leased);
  CHECK_FALSE(tx(*s, [&] { return s->claim("x", "v", 205.0, 5.0); }));  // no attempt left
  CHECK(info(*s, "x", 205.0).status == JobStatus::dead);
  tx(*s, [&] { s->reap_exhausted(205.0); });
  auto reaped = info(*s, "x", 0.0);  // dead by its flag now, whatever the time
  CHECK(reaped.status == JobStatus::dead);
  CHECK(reaped.error == "the last allowed attempt ended without a complete");
  CHECK(tx(*s, [&] { return s->retry("x", 206.0); }));
  CHECK(tx(*s, [&] { return s->claim("x", "v", 206.0, 5.0); }) == 2);
}

TEST_CASE("queue store: check answers whether a lease is current and changes nothing") {
  Backend b;
  auto s = b.open();
  REQUIRE(enqueue(*s, "k"));
  auto f = tx(*s, [&] { return s->claim("k", "o", 50.0, 10.0); });
  REQUIRE(f);
  CHECK(tx(*s, [&] { return s->check("k", "o", *f, 55.0); }));
  CHECK_FALSE(tx(*s, [&] { return s->check("k", "o", *f + 1, 55.0); }));
  CHECK_FALSE(tx(*s, [&] { return s->check("k", "p", *f, 55.0); }));
  CHECK_FALSE(tx(*s, [&] { return s->check("k", "o", *f, 60.0); }));  // now == until: expired
  CHECK_FALSE(tx(*s, [&] { return s->check("missing", "o", 1, 55.0); }));
  CHECK(tx(*s, [&] { return s->state("k"); })->until == 60.0);
  REQUIRE(tx(*s, [&] { return s->complete("k", "o", *f, std::string("r"), 59.0); }));
  CHECK_FALSE(tx(*s, [&] { return s->check("k", "o", *f, 59.5); }));  // done: no lease is current
}

TEST_CASE("queue store: unclaim gives a job back without counting the attempt, the fence stays") {
  Backend b;
  auto s = b.open();
  Enq once;
  once.queue = "u";
  once.max_attempts = 1;
  REQUIRE(enqueue(*s, "j", once));
  auto j = tx(*s, [&] { return s->claim_next("u", "gone", 1.0, 30.0); });
  REQUIRE(j);
  CHECK_FALSE(tx(*s, [&] { return s->unclaim("j", "other", j->fence); }));
  CHECK_FALSE(tx(*s, [&] { return s->unclaim("j", "gone", j->fence + 1); }));
  CHECK(tx(*s, [&] { return s->unclaim("j", "gone", j->fence); }));
  auto row = tx(*s, [&] { return s->state("j"); });
  CHECK(!row->owner);
  CHECK(row->until == 0);
  CHECK(row->fence == 1);
  auto again = tx(*s, [&] { return s->claim_next("u", "here", 2.0, 30.0); });
  REQUIRE(again);
  CHECK(again->attempts == 1);  // the undelivered claim did not use the only attempt
  CHECK(again->fence == 2);     // but the fence never goes back (C1.2)
}

TEST_CASE("queue store: purge removes finished jobs, a purged id enqueued again keeps its fence") {
  Backend b;
  auto s = b.open();
  Enq q;
  q.queue = "q";
  REQUIRE(enqueue(*s, "old", q));
  REQUIRE(enqueue(*s, "open", q));
  for (int i = 0; i < 3; ++i) {  // fence 3 through fails
    auto j = tx(*s, [&] { return s->claim("old", "w", 10.0 * i, 10.0); });
    REQUIRE(j == i + 1);
    if (i < 2) REQUIRE(tx(*s, [&] { return s->fail("old", "w", *j, "e", 0.0, 10.0 * i + 1); }));
  }
  REQUIRE(tx(*s, [&] { return s->complete("old", "w", 3, std::string("done"), 25.0); }));
  CHECK(tx(*s, [&] { return s->purge(std::string("q"), 100.0, 124.9); }) == 0);  // too recent
  CHECK(tx(*s, [&] { return s->purge(std::string("other-queue"), 100.0, 200.0); }) == 0);
  CHECK(tx(*s, [&] { return s->purge(std::string("q"), 100.0, 125.0); }) == 1);  // boundary
  CHECK_FALSE(tx(*s, [&] { return s->state("old"); }));
  CHECK(tx(*s, [&] { return s->state("open"); }));  // not finished: kept
  // C1.2: the id comes back with its fence, never from 0.
  REQUIRE(enqueue(*s, "old", q));
  CHECK(tx(*s, [&] { return s->state("old"); })->fence == 3);
  CHECK(tx(*s, [&] { return s->claim("old", "w", 300.0, 10.0); }) == 4);
  // Purged again (dead this time, all queues), enqueued again: still growing.
  REQUIRE(tx(*s, [&] { return s->fail("old", "w", 4, "e", 0.0, 301.0); }));
  REQUIRE(tx(*s, [&] { return s->claim("old", "w", 302.0, 10.0); }) == 5);
  REQUIRE(tx(*s, [&] { return s->complete("old", "w", 5, std::nullopt, 303.0); }));
  CHECK(tx(*s, [&] { return s->purge(std::nullopt, 0.0, 400.0); }) == 1);
  REQUIRE(enqueue(*s, "old", q));
  CHECK(tx(*s, [&] { return s->claim("old", "w", 500.0, 10.0); }) == 6);
}

TEST_CASE("queue store: list filters by queue and state and pages by id, stats counts them") {
  Backend b;
  auto s = b.open();
  for (int i = 0; i < 25; ++i) {
    char id[16];
    std::snprintf(id, sizeof id, "j%02d", i);
    Enq o;
    o.queue = i % 2 ? "odd" : "even";
    REQUIRE(enqueue(*s, id, o, 10.0));
  }
  REQUIRE(tx(*s, [&] { return s->claim("j00", "w", 1.0, 100.0); }));
  REQUIRE(tx(*s, [&] { return s->complete("j00", "w", 1, std::string("r"), 2.0); }));
  REQUIRE(tx(*s, [&] { return s->claim("j02", "w", 2.0, 100.0); }));
  ListFilter lo;
  lo.queue = "even";
  lo.limit = 5;
  std::vector<std::string> seen;
  std::string after;
  for (int page = 0; page < 10; ++page) {
    lo.after = after;
    auto jobs = tx(*s, [&] { return s->list(lo, 20.0); });
    if (jobs.empty()) break;
    CHECK(jobs.size() <= 5);
    for (const auto& j : jobs) {
      CHECK(j.queue == "even");
      seen.push_back(j.id);
    }
    after = jobs.back().id;
  }
  CHECK(seen.size() == 13);
  CHECK(std::is_sorted(seen.begin(), seen.end()));
  ListFilter leased;
  leased.status = JobStatus::leased;
  auto l = tx(*s, [&] { return s->list(leased, 20.0); });
  REQUIRE(l.size() == 1);
  CHECK(l[0].id == "j02");
  CHECK(l[0].owner == "w");
  CHECK(l[0].until == 102.0);
  CHECK(l[0].fence == 1);
  CHECK(l[0].attempts == 1);

  auto st = tx(*s, [&] { return s->queue_stats(20.0); });
  REQUIRE(st.size() == 2);
  CHECK(st[0].queue == "even");  // ordered by queue
  CHECK(st[1].queue == "odd");
  CHECK(st[0].done == 1);
  CHECK(st[0].leased == 1);
  CHECK(st[0].ready == 11);
  CHECK(st[1].ready == 12);
  CHECK(st[1].oldest_ready_age == 10.0);  // enqueued at 10, counted at 20
  s->begin();  // inside a batch too
  CHECK(s->queue_stats(20.0) == st);
  CHECK(s->enqueue(enqueue_request("after-stats"), 20.0));
  s->commit();
  CHECK(tx(*s, [&] { return s->state("after-stats"); }));
}

TEST_CASE("C3 strings: ids, owners and queues are any UTF-8 up to the limits, ids sort bytewise") {
  Backend b;
  auto s = b.open();
  std::string long_id;
  while (long_id.size() + 3 <= fenceq::protocol::kMaxKeyBytes) long_id += "✓";  // 3 bytes each
  std::string long_owner(fenceq::protocol::kMaxKeyBytes, 'o');
  std::string long_queue;
  while (long_queue.size() + 4 <= fenceq::protocol::kMaxQueueBytes) long_queue += "𝄞";
  std::string quote = "it's \"quoted\"; DROP TABLE jobs; --";
  Enq o;
  o.queue = long_queue;
  for (const auto& id : {long_id, quote, std::string("Z"), std::string("a"), std::string("é")}) {
    REQUIRE(enqueue(*s, id, o));
  }
  auto f = tx(*s, [&] { return s->claim(long_id, long_owner, 1.0, 5.0); });
  REQUIRE(f == 1);
  CHECK(tx(*s, [&] { return s->state(long_id); })->owner == long_owner);
  CHECK(tx(*s, [&] { return s->complete(long_id, long_owner, 1, quote, 2.0); }));
  CHECK(tx(*s, [&] { return s->state(long_id); })->result == quote);
  auto next = tx(*s, [&] { return s->claim_next(long_queue, quote, 3.0, 5.0); });
  REQUIRE(next);
  ListFilter all;
  std::vector<std::string> ids;
  for (const auto& j : tx(*s, [&] { return s->list(all, 3.0); })) ids.push_back(j.id);
  std::vector<std::string> sorted = ids;
  std::sort(sorted.begin(), sorted.end());  // std::string: bytewise
  CHECK(ids == sorted);
  CHECK(ids.size() == 5);
  CHECK(ids.front() == "Z");
  CHECK(ids.back() == long_id);
}

TEST_CASE("C3.5 completes in one run (complete_many's items): each judged by its own lease, in "
          "order, a repeated id after the first") {
  Backend b;
  auto s = b.open();
  for (const char* id : {"a", "b", "c", "d", "e"}) enqueue(*s, id);
  REQUIRE(tx(*s, [&] { return s->claim("a", "w", 10.0, 30.0); }) == 1);
  REQUIRE(tx(*s, [&] { return s->claim("b", "w", 10.0, 30.0); }) == 1);
  REQUIRE(tx(*s, [&] { return s->claim("c", "w", 10.0, 5.0); }) == 1);  // until 15
  REQUIRE(tx(*s, [&] { return s->claim("d", "w", 10.0, 30.0); }) == 1);
  REQUIRE(tx(*s, [&] { return s->claim("e", "v", 10.0, 30.0); }) == 1);
  const std::optional<std::string> ra("ra"), rb("rb"), ra2("ra again"), rc("rc"), re("re");
  const std::optional<std::string> none;
  using fenceq::daemon::Call;
  auto complete = [](const char* id, const char* owner, std::int64_t fence,
                     const std::optional<std::string>& result) {
    return Call{fenceq::daemon::CompleteParams{{id, owner, fence}, 20.0, &result}};
  };
  std::vector<Call> calls{complete("a", "w", 1, ra),  complete("b", "w", 2, rb),
                          complete("a", "w", 1, ra2), complete("c", "w", 1, rc),
                          complete("d", "w", 1, none), complete("e", "w", 1, re)};
  for (std::size_t i = 0; i < calls.size(); ++i) calls[i].group = i;
  std::vector<fenceq::daemon::CallResult> out;
  s->begin();
  s->run(calls, out, false);
  s->commit();
  REQUIRE(out.size() == calls.size());
  CHECK(out[0].ok);        // the current lease
  CHECK_FALSE(out[1].ok);  // a fence never handed out
  CHECK_FALSE(out[2].ok);  // done by the first
  CHECK_FALSE(out[3].ok);  // its lease ended at 15
  CHECK(out[4].ok);        // no result
  CHECK_FALSE(out[5].ok);  // another owner's lease
  CHECK(tx(*s, [&] { return s->state("a"); })->result == "ra");
  CHECK_FALSE(tx(*s, [&] { return s->state("b"); })->done);
  CHECK_FALSE(tx(*s, [&] { return s->state("c"); })->done);
  auto d = tx(*s, [&] { return s->state("d"); });
  CHECK(d->done);
  CHECK_FALSE(d->result.has_value());
  CHECK_FALSE(tx(*s, [&] { return s->state("e"); })->done);
}

TEST_CASE("C3.13 a parent purged after it died or was cancelled still counts as failed: its "
          "retried child is refused, one left blocked is cancelled by the purge, and one with "
          "after_failure run runs (issue 56, row 9)") {
  Backend b;
  auto s = b.open();
  const std::vector<std::string> p1{"p1"}, p2{"p2"}, p3{"p3"};
  auto child = [&](const char* id, const std::vector<std::string>& parents, bool run, double now) {
    NewJob j{id};
    j.queue = "q";
    j.parents = &parents;
    j.after_run = run;
    return tx(*s, [&] { return s->enqueue(j, now); });
  };
  auto status = [&](const char* id) { return info(*s, id, 50.0).status; };
  // What a purge leaves to the daemon's steps (PostgreSQL) is settled here.
  auto purge = [&](double now) {
    const auto n = tx(*s, [&] { return s->purge(std::string("p"), 0.0, now); });
    settle_all(*s, now);
    return n;
  };
  Enq p;
  p.queue = "p";
  p.max_attempts = 1;

  // Cancel P, retry C (it waits for P again: P may still be retried), purge P.
  REQUIRE(enqueue(*s, "p1", p, 1.0));
  REQUIRE(child("c1", p1, false, 1.0));
  REQUIRE(child("r1", p1, true, 1.0));
  CHECK(status("c1") == JobStatus::blocked);
  REQUIRE(tx(*s, [&] { return s->cancel("p1", 2.0); }));
  CHECK(status("c1") == JobStatus::cancelled);
  CHECK(status("r1") == JobStatus::ready);
  REQUIRE(tx(*s, [&] { return s->retry("c1", 3.0); }));
  CHECK(status("c1") == JobStatus::blocked);
  CHECK(purge(4.0) == 1);
  CHECK(status("c1") == JobStatus::cancelled);  // before: blocked for good
  CHECK(info(*s, "c1", 50.0).error == "parent p1 cancelled");
  CHECK_FALSE(tx(*s, [&] { return s->retry("c1", 5.0); }));
  CHECK(status("c1") == JobStatus::cancelled);

  // P dead and purged first, then retry C: refused (before: C ran).
  REQUIRE(enqueue(*s, "p2", p, 6.0));
  REQUIRE(child("c2", p2, false, 6.0));
  const auto f = tx(*s, [&] { return s->claim("p2", "w", 7.0, 10.0); });
  REQUIRE(f);
  REQUIRE(tx(*s, [&] { return s->fail("p2", "w", *f, "boom", std::nullopt, 8.0); }));
  CHECK(status("p2") == JobStatus::dead);
  CHECK(status("c2") == JobStatus::cancelled);
  CHECK(purge(9.0) == 1);
  CHECK_FALSE(tx(*s, [&] { return s->retry("c2", 10.0); }));
  CHECK(status("c2") == JobStatus::cancelled);
  CHECK(info(*s, "c2", 50.0).error == "parent p2 dead");

  // A child enqueued after its failed parent was purged is cancelled at
  // once, as before the purge; with after_failure run it runs, and so does
  // a retried one.
  REQUIRE(child("late", p2, false, 11.0));
  CHECK(status("late") == JobStatus::cancelled);
  CHECK(info(*s, "late", 50.0).error == "parent p2 dead");
  REQUIRE(child("late-run", p1, true, 11.0));
  CHECK(status("late-run") == JobStatus::ready);
  REQUIRE(tx(*s, [&] { return s->cancel("r1", 12.0); }));
  REQUIRE(tx(*s, [&] { return s->retry("r1", 13.0); }));
  CHECK(status("r1") == JobStatus::ready);
  std::vector<std::string> claimed;
  while (auto j = tx(*s, [&] { return s->claim_next("q", "w", 14.0, 10.0); })) {
    claimed.push_back(j->id);
  }
  std::sort(claimed.begin(), claimed.end());
  CHECK(claimed == std::vector<std::string>{"late-run", "r1"});

  // A parent purged after it was done still counts as done.
  REQUIRE(enqueue(*s, "p3", p, 15.0));
  const auto g = tx(*s, [&] { return s->claim("p3", "w", 15.0, 10.0); });
  REQUIRE(g);
  REQUIRE(tx(*s, [&] { return s->complete("p3", "w", *g, std::nullopt, 16.0); }));
  CHECK(purge(17.0) == 1);
  REQUIRE(child("after-done", p3, false, 18.0));
  CHECK(status("after-done") == JobStatus::ready);
}

TEST_CASE("C3.17 a retention chunk is bounded in bytes too: large results two at a time, a "
          "larger one by itself, small ones up to the limit") {
  using fenceq::daemon::Call;
  using fenceq::daemon::CallResult;
  using fenceq::daemon::PurgeParams;
  Backend b;
  auto s = b.open();
  Enq q;
  q.queue = "q";
  // Ids in finishing order (SQLite walks by finishing time, PostgreSQL's
  // chunk takes its jobs by id): one of 1.5 MiB, six of 600 KiB, five small.
  auto finish = [&](const std::string& id, std::size_t bytes, double at) {
    REQUIRE(enqueue(*s, id, q));
    auto j = tx(*s, [&] { return s->claim(id, "w", at, 10.0); });
    REQUIRE(j);
    REQUIRE(tx(*s, [&] { return s->complete(id, "w", *j, std::string(bytes, 'r'), at); }));
  };
  finish("0huge", 1536 * 1024, 1.0);
  for (int i = 0; i < 6; ++i) finish("a" + std::to_string(i), 600 * 1024, 2.0 + i);
  for (int i = 0; i < 5; ++i) finish("b" + std::to_string(i), 10, 10.0 + i);
  PurgeParams p{std::string("q"), 0.0, 100.0, fenceq::daemon::kFinishedDone};
  p.limit = 256;
  p.max_bytes = std::int64_t{1} << 20;
  std::vector<std::int64_t> chunks;
  bool left = true;
  for (int n = 0; left && n < 10; ++n) {
    std::vector<CallResult> out;
    tx(*s, [&] { s->run({Call{p, 0}}, out, false); });
    chunks.push_back(out.at(0).number.value_or(-1));
    left = out.at(0).ok;
  }
  // A job is taken while fewer than max_bytes were taken before it.
  CHECK(chunks == std::vector<std::int64_t>{1, 2, 2, 2, 5});
  CHECK_FALSE(left);
  CHECK_FALSE(tx(*s, [&] { return s->state("b4"); }));
}

// --- The writes added after the queue-control issue, on both stores (issue
// 58: one case per Params alternative at least) ------------------------------

namespace store_contract {

// A job with the fields NewJob holds beyond Enq's: key, group, parents.
struct Rich {
  explicit Rich(std::string i, std::string q = "default") : id(std::move(i)), queue(std::move(q)) {}
  std::string id, queue;
  std::optional<std::string> key, group;
  double unique_for = 0;
  bool replace = false;
  std::vector<std::string> parents;
  bool after_run = false;
  double max_runtime = 0;
  std::int64_t max_attempts = 0;
  NewJob job() const {
    NewJob j;
    j.id = id;
    j.queue = queue;
    j.max_attempts = max_attempts;
    if (key) j.key = *key;
    j.unique_for = unique_for;
    j.replace = replace;
    if (group) j.group = *group;
    j.parents = parents.empty() ? nullptr : &parents;
    j.after_run = after_run;
    j.max_runtime = max_runtime;
    return j;
  }
};
inline bool enqueue_rich(Store& s, const Rich& r, double now) {
  return tx(s, [&] { return s.enqueue(r.job(), now); });
}
inline JobStatus status_of(Store& s, const std::string& id, double now) {
  return info(s, id, now).status;
}

}  // namespace store_contract

TEST_CASE("C3.10 a unique key holds its queue's key while a job of it is unfinished, and for "
          "unique_for seconds after its enqueue") {
  Backend b;
  auto s = b.open();
  Rich first{"k-1", "mail"};
  first.key = "acct-7";
  CHECK(enqueue_rich(*s, first, 10));
  Rich again = first;
  again.id = "k-2";
  CHECK_FALSE(enqueue_rich(*s, again, 11));  // held: k-2 is not created
  CHECK(tx(*s, [&] { return s->state("k-2"); }) == std::nullopt);
  Rich other = again;
  other.id = "k-3";
  other.queue = "sms";  // the same key in another queue is another key
  CHECK(enqueue_rich(*s, other, 11));
  // Finished, the key is free again (no unique_for).
  auto c = tx(*s, [&] { return s->claim("k-1", "w", 12, 30); });
  REQUIRE(c);
  CHECK(tx(*s, [&] { return s->complete("k-1", "w", *c, std::string("r"), 13); }));
  CHECK(enqueue_rich(*s, again, 14));
  // With unique_for, a finished job of the key holds it until then.
  Rich timed{"u-1", "mail"};
  timed.key = "daily";
  timed.unique_for = 100;
  CHECK(enqueue_rich(*s, timed, 20));
  auto c2 = tx(*s, [&] { return s->claim("u-1", "w", 21, 30); });
  REQUIRE(c2);
  CHECK(tx(*s, [&] { return s->complete("u-1", "w", *c2, std::nullopt, 22); }));
  Rich later = timed;
  later.id = "u-2";
  CHECK_FALSE(enqueue_rich(*s, later, 60));
  CHECK(enqueue_rich(*s, later, 121));
}

TEST_CASE("C3.10 on_conflict replace hands an unfinished, unleased job of the key the new "
          "max_attempts, a leased one keeps its own") {
  Backend b;
  auto s = b.open();
  Rich a{"r-1", "q"};
  a.key = "k";
  a.max_attempts = 3;
  CHECK(enqueue_rich(*s, a, 1));
  Rich b2{"r-2", "q"};
  b2.key = "k";
  b2.replace = true;
  b2.max_attempts = 9;
  CHECK_FALSE(enqueue_rich(*s, b2, 2));  // not created: r-1 took the new settings
  CHECK(info(*s, "r-1", 2).max_attempts == 9);
  REQUIRE(tx(*s, [&] { return s->claim("r-1", "w", 3, 30); }));
  b2.max_attempts = 4;
  CHECK_FALSE(enqueue_rich(*s, b2, 4));
  CHECK(info(*s, "r-1", 4).max_attempts == 9);  // leased: not replaced
}

TEST_CASE("C3.11 group_max_leased 1: claim_next hands out one job of each group at a time") {
  Backend b;
  auto s = b.open();
  for (const auto& [id, g] : std::vector<std::pair<std::string, std::string>>{
           {"g1-a", "g1"}, {"g1-b", "g1"}, {"g2-a", "g2"}, {"g2-b", "g2"}}) {
    Rich r{id, "fair"};
    r.group = g;
    CHECK(enqueue_rich(*s, r, 1));
  }
  fenceq::QueueConfig cfg;
  cfg.group_max_leased = 1;
  tx(*s, [&] { s->set_queue_config("fair", cfg); });
  auto got = tx(*s, [&] { return s->claim_next("fair", "w", 2, 30, 10); });
  REQUIRE(got.size() == 2);
  std::vector<std::string> ids{got[0].id, got[1].id};
  std::sort(ids.begin(), ids.end());
  CHECK(ids == std::vector<std::string>{"g1-a", "g2-a"});
  CHECK(tx(*s, [&] { return s->claim_next("fair", "w", 3, 30, 10); }).empty());
  const auto& g1 = got[0].id == "g1-a" ? got[0] : got[1];
  CHECK(tx(*s, [&] { return s->complete("g1-a", "w", g1.fence, std::nullopt, 4); }));
  auto next = tx(*s, [&] { return s->claim_next("fair", "w", 5, 30, 10); });
  REQUIRE(next.size() == 1);
  CHECK(next[0].id == "g1-b");
  CHECK(info(*s, "g1-b", 5).group == std::optional<std::string>("g1"));
}

TEST_CASE("C3.13 a child waits for its parent: blocked, ready once the parent is done, "
          "cancelled when it dies, unless after_failure run") {
  Backend b;
  auto s = b.open();
  CHECK(enqueue(*s, "p1", {}, 1));
  Rich child{"c1"};
  child.parents = {"p1"};
  CHECK(enqueue_rich(*s, child, 1));
  CHECK(status_of(*s, "c1", 2) == JobStatus::blocked);
  CHECK_FALSE(tx(*s, [&] { return s->claim("c1", "w", 2, 30); }));
  auto f = tx(*s, [&] { return s->claim("p1", "w", 3, 30); });
  REQUIRE(f);
  CHECK(tx(*s, [&] { return s->complete("p1", "w", *f, std::nullopt, 4); }));
  settle_all(*s, 4);
  CHECK(status_of(*s, "c1", 5) == JobStatus::ready);
  CHECK(tx(*s, [&] { return s->claim("c1", "w", 5, 30); }));
  // A parent of one attempt that fails dies: its child is cancelled, the
  // child of after_failure run becomes ready.
  Enq once;
  once.max_attempts = 1;
  CHECK(enqueue(*s, "p2", once, 10));
  Rich doomed{"c2"};
  doomed.parents = {"p2"};
  Rich runs{"c3"};
  runs.parents = {"p2"};
  runs.after_run = true;
  CHECK(enqueue_rich(*s, doomed, 10));
  CHECK(enqueue_rich(*s, runs, 10));
  auto f2 = tx(*s, [&] { return s->claim("p2", "w", 11, 30); });
  REQUIRE(f2);
  CHECK(tx(*s, [&] { return s->fail("p2", "w", *f2, "boom", std::nullopt, 12); }));
  settle_all(*s, 13);
  CHECK(status_of(*s, "p2", 13) == JobStatus::dead);
  CHECK(status_of(*s, "c2", 13) == JobStatus::cancelled);
  CHECK(status_of(*s, "c3", 13) == JobStatus::ready);
}

TEST_CASE("C3.14 snooze: ends the current lease, gives its attempt back, keeps the fence, the "
          "job is claimable after the delay, and a stale snooze changes nothing") {
  Backend b;
  auto s = b.open();
  CHECK(enqueue(*s, "s1", {}, 1));
  auto f = tx(*s, [&] { return s->claim("s1", "w", 2, 30); });
  REQUIRE(f);
  CHECK_FALSE(tx(*s, [&] { return s->snooze("s1", "w", *f + 1, 5, 3); }));
  CHECK_FALSE(tx(*s, [&] { return s->snooze("s1", "other", *f, 5, 3); }));
  CHECK(tx(*s, [&] { return s->snooze("s1", "w", *f, 5, 3); }));
  auto row = info(*s, "s1", 3);
  CHECK(row.status == JobStatus::delayed);
  CHECK(row.attempts == 0);
  CHECK(row.fence == *f);
  CHECK_FALSE(tx(*s, [&] { return s->complete("s1", "w", *f, std::nullopt, 4); }));
  CHECK_FALSE(tx(*s, [&] { return s->claim("s1", "w2", 7.5, 30); }));
  auto again = tx(*s, [&] { return s->claim("s1", "w2", 8, 30); });
  REQUIRE(again);
  CHECK(*again == *f + 1);
}

TEST_CASE("C1.2 cancel: a leased job becomes cancelled, its fence goes up, its holder's writes "
          "are refused, and retry revives it") {
  Backend b;
  auto s = b.open();
  CHECK(enqueue(*s, "x1", {}, 1));
  auto f = tx(*s, [&] { return s->claim("x1", "w", 2, 30); });
  REQUIRE(f);
  CHECK(tx(*s, [&] { return s->cancel("x1", 3); }));
  CHECK_FALSE(tx(*s, [&] { return s->cancel("x1", 3); }));  // cancelled already
  auto row = info(*s, "x1", 3);
  CHECK(row.status == JobStatus::cancelled);
  CHECK(row.fence == *f + 1);
  CHECK_FALSE(tx(*s, [&] { return s->renew("x1", "w", *f, 4, 30); }));
  CHECK_FALSE(tx(*s, [&] { return s->complete("x1", "w", *f, std::string("late"), 4); }));
  CHECK_FALSE(tx(*s, [&] { return s->check("x1", "w", *f, 4); }));
  CHECK_FALSE(tx(*s, [&] { return s->cancel("missing", 4); }));
  CHECK(tx(*s, [&] { return s->retry("x1", 5); }));
  auto again = tx(*s, [&] { return s->claim("x1", "w2", 6, 30); });
  REQUIRE(again);
  CHECK(*again > *f + 1);
}

TEST_CASE("queue store: a paused queue hands out no claim, max_leased caps its leases, and the "
          "defaults remove the settings") {
  Backend b;
  auto s = b.open();
  Enq ctl;
  ctl.queue = "ctl";
  for (int i = 0; i < 3; ++i) CHECK(enqueue(*s, "q-" + std::to_string(i), ctl, 1));
  fenceq::QueueConfig paused;
  paused.paused = true;
  tx(*s, [&] { s->set_queue_config("ctl", paused); });
  CHECK(tx(*s, [&] { return s->queue_config("ctl"); }) == std::optional(paused));
  CHECK(tx(*s, [&] { return s->claim_next("ctl", "w", 2, 30, 10); }).empty());
  CHECK_FALSE(tx(*s, [&] { return s->claim("q-0", "w", 2, 30); }));
  fenceq::QueueConfig capped;
  capped.max_leased = 2;
  tx(*s, [&] { s->set_queue_config("ctl", capped); });
  CHECK(tx(*s, [&] { return s->claim_next("ctl", "w", 3, 30, 10); }).size() == 2);
  CHECK(tx(*s, [&] { return s->claim_next("ctl", "w", 3, 30, 10); }).empty());
  tx(*s, [&] { s->set_queue_config("ctl", fenceq::QueueConfig{}); });
  CHECK(tx(*s, [&] { return s->queue_config("ctl"); }) == std::nullopt);
  CHECK(tx(*s, [&] { return s->claim_next("ctl", "w", 4, 30, 10); }).size() == 1);
}

TEST_CASE("queue store: a schedule is set, replaced, its tick taken once, and deleted") {
  Backend b;
  auto s = b.open();
  fenceq::Schedule sch;
  sch.name = "nightly";
  sch.cron = "0 3 * * *";
  sch.queue = "batch";
  CHECK(tx(*s, [&] { return s->schedule_set(sch, 100); }));
  sch.priority = 5;
  CHECK(tx(*s, [&] { return s->schedule_set(sch, 200); }));  // replaced, still one
  CHECK(tx(*s, [&] { return s->take_tick("nightly", 1000); }));
  CHECK_FALSE(tx(*s, [&] { return s->take_tick("nightly", 1000); }));  // taken already
  CHECK_FALSE(tx(*s, [&] { return s->take_tick("nightly", 900); }));   // earlier than the last
  CHECK(tx(*s, [&] { return s->take_tick("nightly", 2000); }));
  CHECK(tx(*s, [&] { return s->schedule_delete("nightly"); }));
  CHECK_FALSE(tx(*s, [&] { return s->schedule_delete("nightly"); }));
  CHECK_FALSE(tx(*s, [&] { return s->take_tick("nightly", 3000); }));
}

TEST_CASE("queue store: reap marks dead a job whose last allowed attempt's lease ended") {
  Backend b;
  auto s = b.open();
  Enq once;
  once.max_attempts = 1;
  CHECK(enqueue(*s, "r1", once, 1));
  REQUIRE(tx(*s, [&] { return s->claim("r1", "w", 2, 10); }));
  tx(*s, [&] { s->reap_exhausted(5); });  // the lease runs to 12
  CHECK(tx(*s, [&] { return s->claim("r1", "w2", 5, 10); }) == std::nullopt);
  tx(*s, [&] { s->reap_exhausted(12.5); });
  CHECK(info(*s, "r1", 12.5).status == JobStatus::dead);
  CHECK(tx(*s, [&] { return s->claim("r1", "w2", 13, 10); }) == std::nullopt);
}
