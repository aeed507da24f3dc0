// The store contract's cases of one area: suspend and signal (C3.23) and
// deadlines (C3.24). Part of tests/store_contract.hpp (one suite, both
// stores): included by it, after its helpers. Each token here is made by the
// test (the daemon's executor draws them at random).
#pragma once

namespace store_contract {
inline std::optional<Payload> said(std::string v) { return Payload{std::move(v), false}; }
inline Store::Links links_of(Store& s, const std::string& id) {
  return tx(s, [&] { return s.links(id); });
}
inline void reap(Store& s, double now) { tx(s, [&] { s.reap_exhausted(now); return 0; }); }
}  // namespace store_contract

TEST_CASE("C3.23 suspend: the current lease suspends the job, a stale one cannot - one signal of "
          "its token wakes it, and its claims carry the signal's value") {
  Backend b;
  auto s = b.open();
  CHECK(enqueue(*s, "o", in_queue("orders"), 1));
  auto a = tx(*s, [&] { return claim_next(*s, "orders", "A", 2, 30); });
  REQUIRE(a);
  CHECK(tx(*s, [&] { return step_save(*s, "o", "A", a->fence, "charge", said("ch_1"), 2); }));
  // Not another owner, another fence, or a lease that ended.
  CHECK_FALSE(tx(*s, [&] { return suspend(*s, "o", "B", a->fence, 60, false, "t-b", 3); }));
  CHECK_FALSE(tx(*s, [&] { return suspend(*s, "o", "A", a->fence + 1, 60, false, "t-f", 3); }));
  CHECK_FALSE(tx(*s, [&] { return suspend(*s, "o", "A", a->fence, 60, false, "t-late", 40); }));
  CHECK(status_of(*s, "o", 3) == JobStatus::leased);
  auto token = tx(*s, [&] { return suspend(*s, "o", "A", a->fence, 60, false, "t-1", 3); });
  REQUIRE(token);
  CHECK(*token == "t-1");
  // Suspended: no claim takes it, its lease's writes are refused, the
  // attempt was given back; `job` shows when its wait ends.
  CHECK(status_of(*s, "o", 4) == JobStatus::suspended);
  CHECK(info(*s, "o", 4).attempts == 0);
  CHECK_FALSE(tx(*s, [&] { return claim_next(*s, "orders", "B", 4, 30); }));
  CHECK_FALSE(tx(*s, [&] { return complete(*s, "o", "A", a->fence, std::nullopt, 4); }));
  CHECK_FALSE(tx(*s, [&] { return suspend(*s, "o", "A", a->fence, 60, false, "t-2", 4); }));
  auto l = links_of(*s, "o");
  REQUIRE(l.suspend_timeout);
  CHECK(*l.suspend_timeout == Approx(63));
  CHECK_FALSE(l.suspend_fails);
  CHECK_FALSE(l.signalled);
  auto stats = tx(*s, [&] { return s->queue_stats(4); });
  REQUIRE(stats.size() == 1);
  CHECK(stats[0].suspended == 1);
  // Signals: an unknown token wakes nothing; the token wakes it once.
  CHECK_FALSE(tx(*s, [&] { return signal(*s, "t-0", said("x"), 5); }));
  CHECK(tx(*s, [&] { return signal(*s, "t-1", said("paid"), 5); }));
  CHECK_FALSE(tx(*s, [&] { return signal(*s, "t-1", said("again"), 5); }));
  CHECK(status_of(*s, "o", 5) == JobStatus::ready);
  auto c = tx(*s, [&] { return claim_next(*s, "orders", "B", 6, 30); });
  REQUIRE(c);
  CHECK(c->fence == a->fence + 1);
  CHECK(c->signalled);
  CHECK(c->signal == said("paid"));
  CHECK(c->steps == fenceq::Steps{{"charge", said("ch_1")}});  // the signal is no step
  // A retried attempt still sees it; a new suspend forgets it.
  CHECK(tx(*s, [&] { return fail(*s, "o", "B", c->fence, "crash", 0.0, 7); }));
  auto d = tx(*s, [&] { return claim_next(*s, "orders", "C", 8, 30); });
  REQUIRE(d);
  CHECK(d->signalled);
  CHECK(d->signal == said("paid"));
  CHECK(links_of(*s, "o").signal == said("paid"));
  REQUIRE(tx(*s, [&] { return suspend(*s, "o", "C", d->fence, 60, false, "t-3", 9); }));
  CHECK_FALSE(links_of(*s, "o").signalled);
  CHECK_FALSE(tx(*s, [&] { return signal(*s, "t-1", said("old"), 10); }));  // an old wait's token
  // A nil signal is a signal.
  CHECK(tx(*s, [&] { return signal(*s, "t-3", std::nullopt, 10); }));
  auto e = tx(*s, [&] { return claim_next(*s, "orders", "D", 11, 30); });
  REQUIRE(e);
  CHECK(e->signalled);
  CHECK_FALSE(e->signal);
  // A step saved beside the signal: the signal is no step of it either.
  CHECK(tx(*s, [&] { return step_save(*s, "o", "D", e->fence, "ship", said("s_1"), 12); }));
  CHECK_FALSE(tx(*s, [&] { return step_save(*s, "o", "D", e->fence, "charge", said("x"), 12); }));
  auto l2 = links_of(*s, "o");
  CHECK(l2.steps == fenceq::Steps{{"charge", said("ch_1")}, {"ship", said("s_1")}});
  CHECK(l2.signalled);
}

TEST_CASE("C3.23 suspend: a wait that times out ends at the reap, ready again with its error or "
          "dead - its token no longer wakes it") {
  Backend b;
  auto s = b.open();
  CHECK(enqueue(*s, "r", in_queue("q"), 1));
  CHECK(enqueue(*s, "f", in_queue("q"), 1));
  auto r = tx(*s, [&] { return claim(*s, "r", "A", 2, 30); });
  auto f = tx(*s, [&] { return claim(*s, "f", "A", 2, 30); });
  REQUIRE(r);
  REQUIRE(f);
  REQUIRE(tx(*s, [&] { return suspend(*s, "r", "A", *r, 10, false, "t-r", 3); }));
  REQUIRE(tx(*s, [&] { return suspend(*s, "f", "A", *f, 10, true, "t-f", 3); }));
  CHECK(links_of(*s, "f").suspend_fails);
  reap(*s, 12.9);
  CHECK(status_of(*s, "r", 12.9) == JobStatus::suspended);
  // Past its timeout a signal is refused, even before the reap ends the wait.
  CHECK_FALSE(tx(*s, [&] { return signal(*s, "t-r", said("late"), 13); }));
  reap(*s, 13);
  CHECK(status_of(*s, "r", 13) == JobStatus::ready);
  CHECK(info(*s, "r", 13).error == std::optional<std::string>("suspend timed out"));
  CHECK(status_of(*s, "f", 13) == JobStatus::dead);
  CHECK(info(*s, "f", 13).error == std::optional<std::string>("suspend timed out"));
  CHECK_FALSE(tx(*s, [&] { return signal(*s, "t-f", said("late"), 13); }));
  auto c = tx(*s, [&] { return claim_next(*s, "q", "B", 14, 30); });
  REQUIRE(c);
  CHECK(c->id == "r");
  CHECK_FALSE(c->signalled);
  CHECK_FALSE(tx(*s, [&] { return claim_next(*s, "q", "B", 14, 30); }));
  reap(*s, 20);  // nothing left to end: no change
  CHECK(status_of(*s, "f", 20) == JobStatus::dead);
}

TEST_CASE("C3.23 suspend: a cancelled suspended job is not woken, and a purged one takes its "
          "token along") {
  Backend b;
  auto s = b.open();
  CHECK(enqueue(*s, "x", {}, 1));
  auto a = tx(*s, [&] { return claim(*s, "x", "A", 2, 30); });
  REQUIRE(a);
  REQUIRE(tx(*s, [&] { return suspend(*s, "x", "A", *a, 100, false, "t-x", 3); }));
  CHECK(tx(*s, [&] { return cancel(*s, "x", 4); }));
  CHECK_FALSE(tx(*s, [&] { return signal(*s, "t-x", said("v"), 5); }));
  CHECK(status_of(*s, "x", 5) == JobStatus::cancelled);
  CHECK(tx(*s, [&] { return purge(*s, std::nullopt, 0, 6); }) == 1);
  CHECK(enqueue(*s, "x", {}, 7));
  auto again = tx(*s, [&] { return claim(*s, "x", "B", 8, 30); });
  REQUIRE(again);
  CHECK_FALSE(tx(*s, [&] { return signal(*s, "t-x", said("v"), 9); }));
  CHECK(status_of(*s, "x", 9) == JobStatus::leased);
  reap(*s, 200);  // its old wait's timeout: the job is not touched
  CHECK(status_of(*s, "x", 20) == JobStatus::leased);
}

TEST_CASE("C3.24 deadlines: a job not claimed by its deadline is never claimed, and the reap "
          "writes it down dead - one leased across it keeps its lease") {
  Backend b;
  auto s = b.open();
  const auto with_deadline = [&](const std::string& id, double deadline, double delay,
                                 double now) {
    return tx(*s, [&] {
      NewJob j;
      j.id = id;
      j.queue = "offers";
      j.delay = delay;
      j.deadline = deadline;
      return s->enqueue(j, now);
    });
  };
  CHECK(with_deadline("late", 100, 50, 60));   // delayed past its deadline
  CHECK(with_deadline("held", 100, 0, 60));    // claimed before it
  auto h = tx(*s, [&] { return claim_next(*s, "offers", "A", 70, 60); });
  REQUIRE(h);
  CHECK(h->id == "held");
  CHECK(status_of(*s, "late", 100) == JobStatus::dead);  // before the reap writes it down
  CHECK_FALSE(tx(*s, [&] { return claim_next(*s, "offers", "B", 111, 30); }));
  reap(*s, 111);
  auto late = info(*s, "late", 111);
  CHECK(late.status == JobStatus::dead);
  CHECK(late.error == std::optional<std::string>("deadline passed"));
  // The lease held across the deadline is still current; once it ends the
  // job is not claimed again.
  CHECK(status_of(*s, "held", 111) == JobStatus::leased);
  CHECK(tx(*s, [&] { return renew(*s, "held", "A", h->fence, 111, 30); }));
  CHECK(tx(*s, [&] { return fail(*s, "held", "A", h->fence, "boom", 0.0, 112); }));
  CHECK_FALSE(tx(*s, [&] { return claim_next(*s, "offers", "B", 113, 30); }));
  reap(*s, 113);
  CHECK(info(*s, "held", 113).error == std::optional<std::string>("deadline passed"));
  auto stats = tx(*s, [&] { return s->queue_stats(113); });
  REQUIRE(stats.size() == 1);
  CHECK(stats[0].dead == 2);
  // A job finished before its deadline stays done; retry brings an expired
  // one back without its deadline.
  CHECK(with_deadline("quick", 300, 0, 200));
  auto q = tx(*s, [&] { return claim_next(*s, "offers", "C", 201, 30); });
  REQUIRE(q);
  CHECK(tx(*s, [&] { return complete(*s, "quick", "C", q->fence, std::nullopt, 202); }));
  reap(*s, 400);
  CHECK(status_of(*s, "quick", 400) == JobStatus::done);
  CHECK(tx(*s, [&] { return retry(*s, "late", 401); }));
  auto back = tx(*s, [&] { return claim_next(*s, "offers", "D", 402, 30); });
  REQUIRE(back);
  CHECK(back->id == "late");
}
