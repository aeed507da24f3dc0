#include "store_calls.hpp"
// The store contract's cases of one area: jobs that wait for others (C3.13).
// Part of tests/store_contract.hpp (one suite, both stores): included by it,
// after its helpers.
#pragma once

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
    const auto n = tx(*s, [&] { return fenceq::daemon::purge(*s, std::string("p"), 0.0, now); });
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
  REQUIRE(tx(*s, [&] { return cancel(*s, "p1", 2.0); }));
  CHECK(status("c1") == JobStatus::cancelled);
  CHECK(status("r1") == JobStatus::ready);
  REQUIRE(tx(*s, [&] { return retry(*s, "c1", 3.0); }));
  CHECK(status("c1") == JobStatus::blocked);
  CHECK(purge(4.0) == 1);
  CHECK(status("c1") == JobStatus::cancelled);  // before: blocked for good
  CHECK(info(*s, "c1", 50.0).error == "parent p1 cancelled");
  CHECK_FALSE(tx(*s, [&] { return retry(*s, "c1", 5.0); }));
  CHECK(status("c1") == JobStatus::cancelled);

  // P dead and purged first, then retry C: refused (before: C ran).
  REQUIRE(enqueue(*s, "p2", p, 6.0));
  REQUIRE(child("c2", p2, false, 6.0));
  const auto f = tx(*s, [&] { return claim(*s, "p2", "w", 7.0, 10.0); });
  REQUIRE(f);
  REQUIRE(tx(*s, [&] { return fail(*s, "p2", "w", *f, "boom", std::nullopt, 8.0); }));
  CHECK(status("p2") == JobStatus::dead);
  CHECK(status("c2") == JobStatus::cancelled);
  CHECK(purge(9.0) == 1);
  CHECK_FALSE(tx(*s, [&] { return retry(*s, "c2", 10.0); }));
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
  REQUIRE(tx(*s, [&] { return cancel(*s, "r1", 12.0); }));
  REQUIRE(tx(*s, [&] { return retry(*s, "r1", 13.0); }));
  CHECK(status("r1") == JobStatus::ready);
  std::vector<std::string> claimed;
  while (auto j = tx(*s, [&] { return claim_next(*s, "q", "w", 14.0, 10.0); })) {
    claimed.push_back(j->id);
  }
  std::sort(claimed.begin(), claimed.end());
  CHECK(claimed == std::vector<std::string>{"late-run", "r1"});

  // A parent purged after it was done still counts as done.
  REQUIRE(enqueue(*s, "p3", p, 15.0));
  const auto g = tx(*s, [&] { return claim(*s, "p3", "w", 15.0, 10.0); });
  REQUIRE(g);
  REQUIRE(tx(*s, [&] { return complete(*s, "p3", "w", *g, std::nullopt, 16.0); }));
  CHECK(purge(17.0) == 1);
  REQUIRE(child("after-done", p3, false, 18.0));
  CHECK(status("after-done") == JobStatus::ready);
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
  CHECK_FALSE(tx(*s, [&] { return claim(*s, "c1", "w", 2, 30); }));
  auto f = tx(*s, [&] { return claim(*s, "p1", "w", 3, 30); });
  REQUIRE(f);
  CHECK(tx(*s, [&] { return complete(*s, "p1", "w", *f, std::nullopt, 4); }));
  settle_all(*s, 4);
  CHECK(status_of(*s, "c1", 5) == JobStatus::ready);
  CHECK(tx(*s, [&] { return claim(*s, "c1", "w", 5, 30); }));
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
  auto f2 = tx(*s, [&] { return claim(*s, "p2", "w", 11, 30); });
  REQUIRE(f2);
  CHECK(tx(*s, [&] { return fail(*s, "p2", "w", *f2, "boom", std::nullopt, 12); }));
  settle_all(*s, 13);
  CHECK(status_of(*s, "p2", 13) == JobStatus::dead);
  CHECK(status_of(*s, "c2", 13) == JobStatus::cancelled);
  CHECK(status_of(*s, "c3", 13) == JobStatus::ready);
}
