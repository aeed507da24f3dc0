#include "store_calls.hpp"
// The store contract's cases of one area: retention: finished jobs removed in bounded chunks (C3.17).
// Part of tests/store_contract.hpp (one suite, both stores): included by it,
// after its helpers.
#pragma once

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
    auto j = tx(*s, [&] { return claim(*s, id, "w", at, 10.0); });
    REQUIRE(j);
    REQUIRE(tx(*s, [&] { return complete(*s, id, "w", *j, std::string(bytes, 'r'), at); }));
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
