#include "store_calls.hpp"
// The store contract's cases of one area: a job's steps (C3.22).
// Part of tests/store_contract.hpp (one suite, both stores): included by it,
// after its helpers.
#pragma once

#include "fenceq_protocol/limits.hpp"

namespace store_contract {
inline fenceq::Steps steps_of(Store& s, const std::string& id) {
  return tx(s, [&] { return s.links(id); }).steps;
}
inline std::optional<Payload> text(std::string v) { return Payload{std::move(v), false}; }
inline Enq in_queue(std::string q) {
  Enq o;
  o.queue = std::move(q);
  return o;
}
}  // namespace store_contract

TEST_CASE("C3.22 steps: the current lease saves a step once, a stale lease saves none, and every "
          "later claim of the job gives its steps back") {
  Backend b;
  auto s = b.open();
  CHECK(enqueue(*s, "o1", in_queue("orders"), 1));
  auto a = tx(*s, [&] { return claim_next(*s, "orders", "A", 2, 30); });
  REQUIRE(a);
  CHECK(a->steps.empty());
  const std::optional<Payload> charge = text("ch_1");
  const std::optional<Payload> bytes = Payload{std::string("\0\1\xff", 3), true};
  CHECK(tx(*s, [&] { return step_save(*s, "o1", "A", a->fence, "charge", charge, 3); }));
  // Never overwritten, not even by the lease that saved it.
  CHECK_FALSE(tx(*s, [&] { return step_save(*s, "o1", "A", a->fence, "charge", text("x"), 3); }));
  CHECK(tx(*s, [&] { return step_save(*s, "o1", "A", a->fence, "email", std::nullopt, 3); }));
  CHECK(tx(*s, [&] { return step_save(*s, "o1", "A", a->fence, "bytes", bytes, 3); }));
  // Not with another owner, another fence, or past the lease's end.
  CHECK_FALSE(tx(*s, [&] { return step_save(*s, "o1", "B", a->fence, "x", text("1"), 3); }));
  CHECK_FALSE(tx(*s, [&] { return step_save(*s, "o1", "A", a->fence + 1, "x", text("1"), 3); }));
  CHECK_FALSE(tx(*s, [&] { return step_save(*s, "o1", "A", a->fence, "x", text("1"), 40); }));
  const fenceq::Steps saved{{"bytes", bytes}, {"charge", charge}, {"email", std::nullopt}};
  CHECK(steps_of(*s, "o1") == saved);
  // A's attempt fails; B's claim carries the steps, and A, late, saves none.
  CHECK(tx(*s, [&] { return fail(*s, "o1", "A", a->fence, "boom", 0.0, 4); }));
  auto b2 = tx(*s, [&] { return claim_next(*s, "orders", "B", 5, 30); });
  REQUIRE(b2);
  CHECK(b2->fence == a->fence + 1);
  CHECK(b2->steps == saved);
  CHECK_FALSE(tx(*s, [&] { return step_save(*s, "o1", "A", a->fence, "ship", text("late"), 6); }));
  CHECK(tx(*s, [&] { return step_save(*s, "o1", "B", b2->fence, "ship", text("s_9"), 6); }));
  CHECK(steps_of(*s, "o1").size() == 4);
  // A name and a value holding the separators of the steps' text
  // (rows::steps_sql: ':' after a length, ';' after a value) come back whole.
  const std::optional<Payload> odd = Payload{"3:x;n;", true};
  CHECK(tx(*s, [&] { return step_save(*s, "o1", "B", b2->fence, "2:é;s00;", odd, 6); }));
  CHECK(steps_of(*s, "o1").at("2:é;s00;") == odd);
  // A job without steps carries none.
  CHECK(enqueue(*s, "o2", in_queue("orders"), 7));
  auto c = tx(*s, [&] { return claim_next(*s, "orders", "C", 8, 30); });
  REQUIRE(c);
  CHECK(c->id == "o2");
  CHECK(c->steps.empty());
  CHECK(steps_of(*s, "o2").empty());
}

TEST_CASE("C3.22 steps: a job's steps are bounded in number and bytes, a step past them is "
          "refused with nothing saved, and they go with their job") {
  Backend b;
  auto s = b.open();
  CHECK(enqueue(*s, "j", {}, 1));
  auto a = tx(*s, [&] { return claim(*s, "j", "w", 2, 600); });
  REQUIRE(a);
  const auto save = [&](const std::string& step, std::size_t n) {
    return tx(*s, [&] { return step_save(*s, "j", "w", *a, step, text(std::string(n, 'v')), 3); });
  };
  CHECK(save("big", fenceq::protocol::kMaxStepsBytes - 10));
  CHECK_THROWS_AS(save("more", 11), fenceq::daemon::StoreError);
  CHECK(save("fits", 10));
  for (std::size_t i = 2; i < fenceq::protocol::kMaxSteps; ++i) CHECK(save("s" + std::to_string(i), 0));
  CHECK(steps_of(*s, "j").size() == fenceq::protocol::kMaxSteps);
  CHECK_THROWS_AS(save("one_more", 0), fenceq::daemon::StoreError);
  CHECK(steps_of(*s, "j").count("one_more") == 0);
  // Purged with their job: a job enqueued again under its id has none.
  CHECK(tx(*s, [&] { return complete(*s, "j", "w", *a, std::nullopt, 4); }));
  CHECK(tx(*s, [&] { return purge(*s, std::nullopt, 0, 100); }) == 1);
  CHECK(enqueue(*s, "j", {}, 101));
  auto again = tx(*s, [&] { return claim_next(*s, "default", "w2", 102, 30); });
  REQUIRE(again);
  CHECK(again->steps.empty());
  CHECK(steps_of(*s, "j").empty());
}

TEST_CASE("C3.22 steps: a grouped queue's claims give the steps back too") {
  Backend b;
  auto s = b.open();
  Rich r("g1", "grouped");
  r.group = "acct-1";
  CHECK(enqueue_rich(*s, r, 1));
  auto a = tx(*s, [&] { return claim_next(*s, "grouped", "A", 2, 30); });
  REQUIRE(a);
  CHECK(tx(*s, [&] { return step_save(*s, "g1", "A", a->fence, "one", text("1"), 3); }));
  CHECK(tx(*s, [&] { return release(*s, "g1", "A", a->fence); }));
  auto b2 = tx(*s, [&] { return claim_next(*s, "grouped", "B", 4, 30); });
  REQUIRE(b2);
  CHECK(b2->steps == fenceq::Steps{{"one", text("1")}});
}

TEST_CASE("C3.22 steps: steps past the bound of their job's row (SQLite's jobs.steps) move with "
          "every kind of value whole, each still saved once, the bounds counting them all") {
  Backend b;
  auto s = b.open();
  CHECK(enqueue(*s, "m", {}, 1));
  auto a = tx(*s, [&] { return claim(*s, "m", "w", 2, 600); });
  REQUIRE(a);
  std::string all_bytes;
  for (int c = 0; c < 256; ++c) all_bytes += static_cast<char>(c);
  fenceq::Steps want;
  const auto save = [&](const std::string& step, const std::optional<Payload>& v) {
    const bool ok = tx(*s, [&] { return step_save(*s, "m", "w", *a, step, v, 3); });
    if (ok) want.emplace(step, v);
    return ok;
  };
  // A few small steps (in the row on SQLite), then a value that takes its
  // text past rules::kInlineStepsBytes (1,024 bytes).
  CHECK(save("nil", std::nullopt));
  CHECK(save("é;1:x", text("ünï;cødé")));
  CHECK(save("bin", Payload{all_bytes, true}));
  CHECK_FALSE(save("bin", text("again")));
  CHECK(steps_of(*s, "m") == want);
  CHECK(save("four", Payload{all_bytes + all_bytes + all_bytes + all_bytes, true}));  // past it
  CHECK(steps_of(*s, "m") == want);
  CHECK_FALSE(save("nil", text("now a value")));  // moved, still saved once
  CHECK_FALSE(save("four", text("again")));
  CHECK(save("after", text("a")));
  CHECK(steps_of(*s, "m") == want);
  // The bounds count the steps of both places.
  CHECK_THROWS_AS(save("huge", text(std::string(fenceq::protocol::kMaxStepsBytes, 'h'))),
                  fenceq::daemon::StoreError);
  for (std::size_t i = want.size(); i < fenceq::protocol::kMaxSteps; ++i) {
    CHECK(save("s" + std::to_string(i), std::nullopt));
  }
  CHECK_THROWS_AS(save("one_more", std::nullopt), fenceq::daemon::StoreError);
  // A later attempt's claim carries them all.
  CHECK(tx(*s, [&] { return release(*s, "m", "w", *a); }));
  auto c = tx(*s, [&] { return claim_next(*s, "default", "w2", 4, 30); });
  REQUIRE(c);
  CHECK(c->steps == want);
}

TEST_CASE("C3.22 steps: a job's steps in its row come back in every claim and go with their job") {
  Backend b;
  auto s = b.open();
  CHECK(enqueue(*s, "r", in_queue("q"), 1));
  auto a = tx(*s, [&] { return claim_next(*s, "q", "A", 2, 30); });
  REQUIRE(a);
  CHECK(tx(*s, [&] { return step_save(*s, "r", "A", a->fence, "one", text("1"), 3); }));
  CHECK(tx(*s, [&] { return fail(*s, "r", "A", a->fence, "boom", 0.0, 4); }));
  auto b2 = tx(*s, [&] { return claim_next(*s, "q", "B", 5, 30); });
  REQUIRE(b2);
  CHECK(b2->steps == fenceq::Steps{{"one", text("1")}});
  CHECK(tx(*s, [&] { return complete(*s, "r", "B", b2->fence, std::nullopt, 6); }));
  CHECK(tx(*s, [&] { return purge(*s, std::nullopt, 0, 100); }) == 1);
  CHECK(enqueue(*s, "r", in_queue("q"), 101));
  auto again = tx(*s, [&] { return claim_next(*s, "q", "C", 102, 30); });
  REQUIRE(again);
  CHECK(again->steps.empty());
  CHECK(steps_of(*s, "r").empty());
}
