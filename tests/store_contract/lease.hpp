#include "store_calls.hpp"
// The store contract's cases of one area: the lease and its fence: the clauses of C1-C3 that the store alone decides (storage, time, claim, renew, complete, release, strings).
// Part of tests/store_contract.hpp (one suite, both stores): included by it,
// after its helpers.
#pragma once

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
  auto job = tx(*s, [&] { return claim_next(*s, "default", "w", 10.0, 5.0); });
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
      REQUIRE(tx(*s, [&] { return claim(*s, "r1", "w", 1000.0 + 10 * i, 3.0); }) == i + 1);
    }
    REQUIRE(tx(*s, [&] { return release(*s, "r1", "w", 7); }));
  }
  auto again = b.open();
  auto row = tx(*again, [&] { return again->state("r1"); });
  REQUIRE(row);
  CHECK(row->fence == 7);
  CHECK(!row->owner);
  CHECK(tx(*again, [&] { return claim(*again, "r1", "v", 5000.0, 1.0); }) == 8);
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
  CHECK(claim(*s, "gone", "w", 1.0, 5.0) == 1);
  s->rollback();
  CHECK_FALSE(tx(*s, [&] { return s->state("gone"); }));
  CHECK(enqueue(*s, "kept"));
  auto after_write = s->total_changes();
  CHECK(after_write > before);
  // Reads, and writes whose conditions do not hold, change nothing.
  tx(*s, [&] {
    s->state("kept");
    check(*s, "kept", "w", 1, 1.0);
    renew(*s, "kept", "w", 1, 1.0, 5.0);
    release(*s, "kept", "w", 1);
    s->reap_exhausted(1.0);
    s->queue_stats(1.0);
  });
  CHECK(s->total_changes() == after_write);
  CHECK(tx(*s, [&] { return claim(*s, "kept", "w", 1.0, 5.0); }) == 1);
  CHECK(s->total_changes() > after_write);
}

TEST_CASE("C3.1 enqueue inserts once, a repeat during a lease changes nothing") {
  Backend b;
  auto s = b.open();
  CHECK(enqueue(*s, "q-17"));
  CHECK_FALSE(enqueue(*s, "q-17"));
  REQUIRE(tx(*s, [&] { return claim(*s, "q-17", "holder", 77.25, 8.5); }) == 1);
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
  CHECK_FALSE(tx(*s, [&] { return claim(*s, "absent", "o", 1.0, 1.0); }));
  enqueue(*s, "c");
  REQUIRE(tx(*s, [&] { return claim(*s, "c", "a", 500.0, 0.75); }) == 1);  // until 500.75
  CHECK_FALSE(tx(*s, [&] { return claim(*s, "c", "b", 500.5, 10.0); }));
  CHECK_FALSE(tx(*s, [&] { return claim(*s, "c", "a", 500.7499, 10.0); }));  // not even the holder
  CHECK(tx(*s, [&] { return claim(*s, "c", "b", 500.75, 2.0); }) == 2);  // now == until
  auto row = tx(*s, [&] { return s->state("c"); });
  CHECK(row->owner == "b");
  CHECK(row->until == 502.75);
  REQUIRE(tx(*s, [&] { return complete(*s, "c", "b", 2, std::string("x"), 501.0); }));
  CHECK_FALSE(tx(*s, [&] { return claim(*s, "c", "z", 1e9, 1.0); }));  // done: never again
  CHECK(tx(*s, [&] { return s->state("c"); })->fence == 2);
}

TEST_CASE("C2.1 times round-trip exactly, to the last bit of the double") {
  Backend b;
  auto s = b.open();
  enqueue(*s, "t");
  const double now = 1712345678.1234567, ttl = 0.1;  // now + ttl is not a short decimal
  REQUIRE(tx(*s, [&] { return claim(*s, "t", "w", now, ttl); }) == 1);
  CHECK(tx(*s, [&] { return s->state("t"); })->until == now + ttl);
  CHECK(tx(*s, [&] { return check(*s, "t", "w", 1, std::nextafter(now + ttl, 0.0)); }));
  CHECK_FALSE(tx(*s, [&] { return check(*s, "t", "w", 1, now + ttl); }));
}

TEST_CASE("C3.4 renew: only owner + fence of a current lease, now == until is expired") {
  Backend b;
  auto s = b.open();
  enqueue(*s, "r");
  REQUIRE(tx(*s, [&] { return claim(*s, "r", "own", 40.0, 6.0); }) == 1);  // until 46
  CHECK_FALSE(tx(*s, [&] { return renew(*s, "r", "other", 1, 41.0, 6.0); }));
  CHECK_FALSE(tx(*s, [&] { return renew(*s, "r", "own", 2, 41.0, 6.0); }));
  CHECK_FALSE(tx(*s, [&] { return renew(*s, "missing", "own", 1, 41.0, 6.0); }));
  CHECK(tx(*s, [&] { return renew(*s, "r", "own", 1, 45.5, 9.0); }));  // until 54.5
  CHECK(tx(*s, [&] { return s->state("r"); })->until == 54.5);
  CHECK_FALSE(tx(*s, [&] { return renew(*s, "r", "own", 1, 54.5, 9.0); }));  // boundary: expired
  CHECK_FALSE(tx(*s, [&] { return renew(*s, "r", "own", 1, 60.0, 9.0); }));  // never revived
  CHECK(tx(*s, [&] { return s->state("r"); })->until == 54.5);
}

TEST_CASE("C3.5 complete: only the current lease, a stale complete keeps the stored result") {
  Backend b;
  auto s = b.open();
  enqueue(*s, "k");
  REQUIRE(tx(*s, [&] { return claim(*s, "k", "old", 10.0, 4.0); }) == 1);  // until 14
  CHECK_FALSE(tx(*s, [&] { return complete(*s, "k", "old", 1, std::string("late"), 14.0); }));
  REQUIRE(tx(*s, [&] { return claim(*s, "k", "new", 14.0, 4.0); }) == 2);  // until 18
  CHECK_FALSE(tx(*s, [&] { return complete(*s, "k", "old", 1, std::string("stale"), 15.0); }));
  CHECK_FALSE(tx(*s, [&] { return complete(*s, "k", "new", 1, std::string("old fence"), 15.0); }));
  CHECK(tx(*s, [&] { return complete(*s, "k", "new", 2, std::string("fresh"), 17.9); }));
  CHECK_FALSE(tx(*s, [&] { return complete(*s, "k", "new", 2, std::string("twice"), 17.95); }));
  CHECK_FALSE(tx(*s, [&] { return complete(*s, "k", "old", 1, std::string("stale"), 16.0); }));
  auto row = tx(*s, [&] { return s->state("k"); });
  CHECK(row->result == "fresh");
  CHECK(row->done);
}

TEST_CASE("C3.6 release: owner + fence on a job not done, keeps the fence, not after done") {
  Backend b;
  auto s = b.open();
  enqueue(*s, "l");
  REQUIRE(tx(*s, [&] { return claim(*s, "l", "p", 3.0, 100.0); }) == 1);
  CHECK_FALSE(tx(*s, [&] { return release(*s, "l", "q", 1); }));
  CHECK_FALSE(tx(*s, [&] { return release(*s, "l", "p", 0); }));
  CHECK(tx(*s, [&] { return release(*s, "l", "p", 1); }));
  auto row = tx(*s, [&] { return s->state("l"); });
  CHECK(!row->owner);
  CHECK(row->until == 0);
  CHECK(row->fence == 1);
  // Claimable at once after a release, with the next fence.
  REQUIRE(tx(*s, [&] { return claim(*s, "l", "q", 4.0, 100.0); }) == 2);
  REQUIRE(tx(*s, [&] { return complete(*s, "l", "q", 2, std::nullopt, 5.0); }));
  CHECK_FALSE(tx(*s, [&] { return release(*s, "l", "q", 2); }));  // release after done
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
  auto f = tx(*s, [&] { return claim(*s, long_id, long_owner, 1.0, 5.0); });
  REQUIRE(f == 1);
  CHECK(tx(*s, [&] { return s->state(long_id); })->owner == long_owner);
  CHECK(tx(*s, [&] { return complete(*s, long_id, long_owner, 1, quote, 2.0); }));
  CHECK(tx(*s, [&] { return s->state(long_id); })->result == quote);
  auto next = tx(*s, [&] { return claim_next(*s, long_queue, quote, 3.0, 5.0); });
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
  REQUIRE(tx(*s, [&] { return claim(*s, "a", "w", 10.0, 30.0); }) == 1);
  REQUIRE(tx(*s, [&] { return claim(*s, "b", "w", 10.0, 30.0); }) == 1);
  REQUIRE(tx(*s, [&] { return claim(*s, "c", "w", 10.0, 5.0); }) == 1);  // until 15
  REQUIRE(tx(*s, [&] { return claim(*s, "d", "w", 10.0, 30.0); }) == 1);
  REQUIRE(tx(*s, [&] { return claim(*s, "e", "v", 10.0, 30.0); }) == 1);
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
