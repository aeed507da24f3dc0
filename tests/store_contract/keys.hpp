#include "store_calls.hpp"
// The store contract's cases of one area: unique keys (C3.10).
// Part of tests/store_contract.hpp (one suite, both stores): included by it,
// after its helpers.
#pragma once

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
  auto c = tx(*s, [&] { return claim(*s, "k-1", "w", 12, 30); });
  REQUIRE(c);
  CHECK(tx(*s, [&] { return complete(*s, "k-1", "w", *c, std::string("r"), 13); }));
  CHECK(enqueue_rich(*s, again, 14));
  // With unique_for, a finished job of the key holds it until then.
  Rich timed{"u-1", "mail"};
  timed.key = "daily";
  timed.unique_for = 100;
  CHECK(enqueue_rich(*s, timed, 20));
  auto c2 = tx(*s, [&] { return claim(*s, "u-1", "w", 21, 30); });
  REQUIRE(c2);
  CHECK(tx(*s, [&] { return complete(*s, "u-1", "w", *c2, std::nullopt, 22); }));
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
  REQUIRE(tx(*s, [&] { return claim(*s, "r-1", "w", 3, 30); }));
  b2.max_attempts = 4;
  CHECK_FALSE(enqueue_rich(*s, b2, 4));
  CHECK(info(*s, "r-1", 4).max_attempts == 9);  // leased: not replaced
}
