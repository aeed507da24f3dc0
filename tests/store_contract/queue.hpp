#include "store_calls.hpp"
// The store contract's cases of one area: the work queue: claim_next order, payloads, delays, fail, attempts, dead jobs, retry, check, unclaim, purge, list and stats, queue settings, reaping.
// Part of tests/store_contract.hpp (one suite, both stores): included by it,
// after its helpers.
#pragma once

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
  while (auto job = tx(*s, [&] { return claim_next(*s, "mail", "w", 10.0, 60.0); })) {
    CHECK(job->fence == 1);
    CHECK(job->attempts == 1);
    order.push_back(job->id);
  }
  CHECK(order == std::vector<std::string>{"top", "mid-1", "mid-2", "mid-3", "low-1"});
  CHECK(tx(*s, [&] { return claim_next(*s, "sms", "w", 10.0, 60.0); })->id == "other");
  CHECK_FALSE(tx(*s, [&] { return claim_next(*s, "empty-queue", "w", 10.0, 60.0); }));
  // C3.1: a repeated enqueue (even with other options) changes nothing.
  CHECK_FALSE(enqueue(*s, "top", in("sms", -1)));
  CHECK(info(*s, "top", 10.0).queue == "mail");
  CHECK(info(*s, "top", 10.0).priority == 9);
  // A leased job is stepped over; once its lease ends it is the next again.
  CHECK_FALSE(tx(*s, [&] { return claim_next(*s, "mail", "w", 69.9, 60.0); }));
  auto again = tx(*s, [&] { return claim_next(*s, "mail", "v", 70.0, 60.0); });
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
  auto next = [&] { return tx(*s, [&] { return claim_next(*s, "p", "w", 1.0, 5.0); }); };
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
  CHECK_FALSE(tx(*s, [&] { return claim_next(*s, "later", "w", 1029.9, 5.0); }));
  CHECK_FALSE(tx(*s, [&] { return claim(*s, "d", "w", 1029.9, 5.0); }));
  CHECK(info(*s, "d", 1030.0).status == JobStatus::ready);
  CHECK(tx(*s, [&] { return claim_next(*s, "later", "w", 1030.0, 5.0); })->id == "d");
}

TEST_CASE("queue store: fail keeps the error, ends the lease, and reopens the job after retry_in") {
  Backend b;
  auto s = b.open();
  Enq q;
  q.queue = "q";
  REQUIRE(enqueue(*s, "f", q));
  auto job = tx(*s, [&] { return claim_next(*s, "q", "a", 100.0, 10.0); });
  REQUIRE(job);
  // Refusals: wrong owner, wrong fence, an expired lease.
  CHECK_FALSE(tx(*s, [&] { return fail(*s, "f", "b", job->fence, "x", 1.0, 101.0); }));
  CHECK_FALSE(tx(*s, [&] { return fail(*s, "f", "a", job->fence + 1, "x", 1.0, 101.0); }));
  CHECK_FALSE(tx(*s, [&] { return fail(*s, "f", "a", job->fence, "x", 1.0, 110.0); }));
  CHECK(tx(*s, [&] { return fail(*s, "f", "a", job->fence, "disk full", 7.5, 105.0); }));
  auto st = info(*s, "f", 105.0);
  CHECK(st.error == "disk full");
  CHECK(!st.owner);
  CHECK(st.not_before == 112.5);
  CHECK(st.status == JobStatus::delayed);
  // The old lease can no longer do anything.
  CHECK_FALSE(tx(*s, [&] { return complete(*s, "f", "a", job->fence, std::string("late"), 106.0); }));
  CHECK_FALSE(tx(*s, [&] { return claim_next(*s, "q", "b", 112.4, 10.0); }));
  auto again = tx(*s, [&] { return claim_next(*s, "q", "b", 112.5, 10.0); });
  REQUIRE(again);
  CHECK(again->fence == job->fence + 1);
  CHECK(again->attempts == 2);
  // Default backoff: 2^(attempts-1) seconds, here 2 s after the second attempt.
  CHECK(tx(*s, [&] { return fail(*s, "f", "b", again->fence, "again", std::nullopt, 113.0); }));
  CHECK(info(*s, "f", 113.0).not_before == 115.0);
  // ... doubling with each attempt, and never more than an hour.
  double now = 115.0;
  for (int attempt = 3; attempt <= 14; ++attempt) {
    auto j = tx(*s, [&] { return claim(*s, "f", "c", now, 10.0); });
    REQUIRE(j);
    REQUIRE(tx(*s, [&] { return fail(*s, "f", "c", *j, "e", std::nullopt, now + 1); }));
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
  auto a1 = tx(*s, [&] { return claim_next(*s, "q", "w", 0.0, 10.0); });
  REQUIRE(tx(*s, [&] { return fail(*s, "m", "w", a1->fence, "first", 0.0, 1.0); }));
  auto a2 = tx(*s, [&] { return claim_next(*s, "q", "w", 2.0, 10.0); });
  REQUIRE(a2);
  CHECK(a2->attempts == 2);
  REQUIRE(tx(*s, [&] { return fail(*s, "m", "w", a2->fence, "second", 0.0, 3.0); }));
  CHECK(info(*s, "m", 3.0).status == JobStatus::dead);
  CHECK(info(*s, "m", 3.0).error == "second");
  CHECK_FALSE(tx(*s, [&] { return claim_next(*s, "q", "w", 100.0, 10.0); }));
  CHECK_FALSE(tx(*s, [&] { return claim(*s, "m", "w", 100.0, 10.0); }));
  auto stats = tx(*s, [&] { return s->queue_stats(100.0); });
  REQUIRE(stats.size() == 1);
  CHECK(stats[0].dead == 1);

  CHECK(tx(*s, [&] { return retry(*s, "m", 100.0); }));
  CHECK_FALSE(tx(*s, [&] { return retry(*s, "m", 100.0); }));  // not dead any more
  auto a3 = tx(*s, [&] { return claim_next(*s, "q", "w", 101.0, 10.0); });
  REQUIRE(a3);
  CHECK(a3->fence == 3);  // the fence continued through death and retry
  CHECK(a3->attempts == 1);

  // A last attempt whose lease expires without a complete makes the job dead too.
  Enq once;
  once.queue = "q";
  once.max_attempts = 1;
  REQUIRE(enqueue(*s, "x", once));
  REQUIRE(tx(*s, [&] { return claim(*s, "x", "w", 200.0, 5.0); }) == 1);
  CHECK(info(*s, "x", 200.0).status == JobStatus::leased);
  CHECK_FALSE(tx(*s, [&] { return claim(*s, "x", "v", 205.0, 5.0); }));  // no attempt left
  CHECK(info(*s, "x", 205.0).status == JobStatus::dead);
  tx(*s, [&] { s->reap_exhausted(205.0); });
  auto reaped = info(*s, "x", 0.0);  // dead by its flag now, whatever the time
  CHECK(reaped.status == JobStatus::dead);
  CHECK(reaped.error == "the last allowed attempt ended without a complete");
  CHECK(tx(*s, [&] { return retry(*s, "x", 206.0); }));
  CHECK(tx(*s, [&] { return claim(*s, "x", "v", 206.0, 5.0); }) == 2);
}

TEST_CASE("queue store: check answers whether a lease is current and changes nothing") {
  Backend b;
  auto s = b.open();
  REQUIRE(enqueue(*s, "k"));
  auto f = tx(*s, [&] { return claim(*s, "k", "o", 50.0, 10.0); });
  REQUIRE(f);
  CHECK(tx(*s, [&] { return check(*s, "k", "o", *f, 55.0); }));
  CHECK_FALSE(tx(*s, [&] { return check(*s, "k", "o", *f + 1, 55.0); }));
  CHECK_FALSE(tx(*s, [&] { return check(*s, "k", "p", *f, 55.0); }));
  CHECK_FALSE(tx(*s, [&] { return check(*s, "k", "o", *f, 60.0); }));  // now == until: expired
  CHECK_FALSE(tx(*s, [&] { return check(*s, "missing", "o", 1, 55.0); }));
  CHECK(tx(*s, [&] { return s->state("k"); })->until == 60.0);
  REQUIRE(tx(*s, [&] { return complete(*s, "k", "o", *f, std::string("r"), 59.0); }));
  CHECK_FALSE(tx(*s, [&] { return check(*s, "k", "o", *f, 59.5); }));  // done: no lease is current
}

TEST_CASE("queue store: unclaim gives a job back without counting the attempt, the fence stays") {
  Backend b;
  auto s = b.open();
  Enq once;
  once.queue = "u";
  once.max_attempts = 1;
  REQUIRE(enqueue(*s, "j", once));
  auto j = tx(*s, [&] { return claim_next(*s, "u", "gone", 1.0, 30.0); });
  REQUIRE(j);
  CHECK_FALSE(tx(*s, [&] { return s->unclaim("j", "other", j->fence); }));
  CHECK_FALSE(tx(*s, [&] { return s->unclaim("j", "gone", j->fence + 1); }));
  CHECK(tx(*s, [&] { return s->unclaim("j", "gone", j->fence); }));
  auto row = tx(*s, [&] { return s->state("j"); });
  CHECK(!row->owner);
  CHECK(row->until == 0);
  CHECK(row->fence == 1);
  auto again = tx(*s, [&] { return claim_next(*s, "u", "here", 2.0, 30.0); });
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
    auto j = tx(*s, [&] { return claim(*s, "old", "w", 10.0 * i, 10.0); });
    REQUIRE(j == i + 1);
    if (i < 2) REQUIRE(tx(*s, [&] { return fail(*s, "old", "w", *j, "e", 0.0, 10.0 * i + 1); }));
  }
  REQUIRE(tx(*s, [&] { return complete(*s, "old", "w", 3, std::string("done"), 25.0); }));
  CHECK(tx(*s, [&] { return purge(*s, std::string("q"), 100.0, 124.9); }) == 0);  // too recent
  CHECK(tx(*s, [&] { return purge(*s, std::string("other-queue"), 100.0, 200.0); }) == 0);
  CHECK(tx(*s, [&] { return purge(*s, std::string("q"), 100.0, 125.0); }) == 1);  // boundary
  CHECK_FALSE(tx(*s, [&] { return s->state("old"); }));
  CHECK(tx(*s, [&] { return s->state("open"); }));  // not finished: kept
  // C1.2: the id comes back with its fence, never from 0.
  REQUIRE(enqueue(*s, "old", q));
  CHECK(tx(*s, [&] { return s->state("old"); })->fence == 3);
  CHECK(tx(*s, [&] { return claim(*s, "old", "w", 300.0, 10.0); }) == 4);
  // Purged again (dead this time, all queues), enqueued again: still growing.
  REQUIRE(tx(*s, [&] { return fail(*s, "old", "w", 4, "e", 0.0, 301.0); }));
  REQUIRE(tx(*s, [&] { return claim(*s, "old", "w", 302.0, 10.0); }) == 5);
  REQUIRE(tx(*s, [&] { return complete(*s, "old", "w", 5, std::nullopt, 303.0); }));
  CHECK(tx(*s, [&] { return purge(*s, std::nullopt, 0.0, 400.0); }) == 1);
  REQUIRE(enqueue(*s, "old", q));
  CHECK(tx(*s, [&] { return claim(*s, "old", "w", 500.0, 10.0); }) == 6);
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
  REQUIRE(tx(*s, [&] { return claim(*s, "j00", "w", 1.0, 100.0); }));
  REQUIRE(tx(*s, [&] { return complete(*s, "j00", "w", 1, std::string("r"), 2.0); }));
  REQUIRE(tx(*s, [&] { return claim(*s, "j02", "w", 2.0, 100.0); }));
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
  CHECK_FALSE(tx(*s, [&] { return claim(*s, "q-0", "w", 2, 30); }));
  fenceq::QueueConfig capped;
  capped.max_leased = 2;
  tx(*s, [&] { s->set_queue_config("ctl", capped); });
  CHECK(tx(*s, [&] { return s->claim_next("ctl", "w", 3, 30, 10); }).size() == 2);
  CHECK(tx(*s, [&] { return s->claim_next("ctl", "w", 3, 30, 10); }).empty());
  tx(*s, [&] { s->set_queue_config("ctl", fenceq::QueueConfig{}); });
  CHECK(tx(*s, [&] { return s->queue_config("ctl"); }) == std::nullopt);
  CHECK(tx(*s, [&] { return s->claim_next("ctl", "w", 4, 30, 10); }).size() == 1);
}

TEST_CASE("queue store: reap marks dead a job whose last allowed attempt's lease ended") {
  Backend b;
  auto s = b.open();
  Enq once;
  once.max_attempts = 1;
  CHECK(enqueue(*s, "r1", once, 1));
  REQUIRE(tx(*s, [&] { return claim(*s, "r1", "w", 2, 10); }));
  tx(*s, [&] { s->reap_exhausted(5); });  // the lease runs to 12
  CHECK(tx(*s, [&] { return claim(*s, "r1", "w2", 5, 10); }) == std::nullopt);
  tx(*s, [&] { s->reap_exhausted(12.5); });
  CHECK(info(*s, "r1", 12.5).status == JobStatus::dead);
  CHECK(tx(*s, [&] { return claim(*s, "r1", "w2", 13, 10); }) == std::nullopt);
}
