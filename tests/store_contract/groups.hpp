#include "store_calls.hpp"
// The store contract's cases of one area: groups (C3.11).
// Part of tests/store_contract.hpp (one suite, both stores): included by it,
// after its helpers.
#pragma once

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
  CHECK(tx(*s, [&] { return complete(*s, "g1-a", "w", g1.fence, std::nullopt, 4); }));
  auto next = tx(*s, [&] { return s->claim_next("fair", "w", 5, 30, 10); });
  REQUIRE(next.size() == 1);
  CHECK(next[0].id == "g1-b");
  CHECK(info(*s, "g1-b", 5).group == std::optional<std::string>("g1"));
}
