#include "store_calls.hpp"
// The store contract's cases of one area: the lease-ending writes: snooze (C3.14) and cancel of a leased job.
// Part of tests/store_contract.hpp (one suite, both stores): included by it,
// after its helpers.
#pragma once

TEST_CASE("C3.14 snooze: ends the current lease, gives its attempt back, keeps the fence, the "
          "job is claimable after the delay, and a stale snooze changes nothing") {
  Backend b;
  auto s = b.open();
  CHECK(enqueue(*s, "s1", {}, 1));
  auto f = tx(*s, [&] { return claim(*s, "s1", "w", 2, 30); });
  REQUIRE(f);
  CHECK_FALSE(tx(*s, [&] { return snooze(*s, "s1", "w", *f + 1, 5, 3); }));
  CHECK_FALSE(tx(*s, [&] { return snooze(*s, "s1", "other", *f, 5, 3); }));
  CHECK(tx(*s, [&] { return snooze(*s, "s1", "w", *f, 5, 3); }));
  auto row = info(*s, "s1", 3);
  CHECK(row.status == JobStatus::delayed);
  CHECK(row.attempts == 0);
  CHECK(row.fence == *f);
  CHECK_FALSE(tx(*s, [&] { return complete(*s, "s1", "w", *f, std::nullopt, 4); }));
  CHECK_FALSE(tx(*s, [&] { return claim(*s, "s1", "w2", 7.5, 30); }));
  auto again = tx(*s, [&] { return claim(*s, "s1", "w2", 8, 30); });
  REQUIRE(again);
  CHECK(*again == *f + 1);
}

TEST_CASE("C1.2 cancel: a leased job becomes cancelled, its fence goes up, its holder's writes "
          "are refused, and retry revives it") {
  Backend b;
  auto s = b.open();
  CHECK(enqueue(*s, "x1", {}, 1));
  auto f = tx(*s, [&] { return claim(*s, "x1", "w", 2, 30); });
  REQUIRE(f);
  CHECK(tx(*s, [&] { return cancel(*s, "x1", 3); }));
  CHECK_FALSE(tx(*s, [&] { return cancel(*s, "x1", 3); }));  // cancelled already
  auto row = info(*s, "x1", 3);
  CHECK(row.status == JobStatus::cancelled);
  CHECK(row.fence == *f + 1);
  CHECK_FALSE(tx(*s, [&] { return renew(*s, "x1", "w", *f, 4, 30); }));
  CHECK_FALSE(tx(*s, [&] { return complete(*s, "x1", "w", *f, std::string("late"), 4); }));
  CHECK_FALSE(tx(*s, [&] { return check(*s, "x1", "w", *f, 4); }));
  CHECK_FALSE(tx(*s, [&] { return cancel(*s, "missing", 4); }));
  CHECK(tx(*s, [&] { return retry(*s, "x1", 5); }));
  auto again = tx(*s, [&] { return claim(*s, "x1", "w2", 6, 30); });
  REQUIRE(again);
  CHECK(*again > *f + 1);
}
