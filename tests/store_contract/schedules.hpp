// The store contract's cases of one area: periodic jobs: schedules and their ticks.
// Part of tests/store_contract.hpp (one suite, both stores): included by it,
// after its helpers.
#pragma once

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
