// The history checker judged on small hand-written histories: it must accept
// what the contract allows (including requests without a reply) and name
// every kind of violation it exists to find. A checker that never fails
// proves nothing.
#include <catch2/catch.hpp>

#include "history.hpp"

using namespace fenceq::history;

namespace {

// Builds a history with a running sequence: each op takes two numbers
// (invoked, returned) unless it is left unanswered.
struct H {
  std::vector<Op> ops;
  std::uint64_t seq = 0;

  Op& add(Kind k, const std::string& owner = "", std::int64_t fence = 0, double now = 0,
          double ttl = 0) {
    Op op;
    op.kind = k;
    op.job = "j";
    op.owner = owner;
    op.fence = fence;
    op.now = now;
    op.ttl = ttl;
    op.invoked = seq++;
    op.returned = seq++;
    op.outcome = Outcome::ok;
    ops.push_back(op);
    return ops.back();
  }
  H& enqueue(bool created = true) {
    add(Kind::enqueue).flag = created;
    return *this;
  }
  H& claim(const std::string& owner, std::optional<std::int64_t> got, double now, double ttl) {
    add(Kind::claim, owner, 0, now, ttl).fence_got = got;
    return *this;
  }
  H& renew(const std::string& owner, std::int64_t fence, double now, double ttl, bool ok) {
    add(Kind::renew, owner, fence, now, ttl).flag = ok;
    return *this;
  }
  H& complete(const std::string& owner, std::int64_t fence, double now, const std::string& res,
              bool ok) {
    Op& op = add(Kind::complete, owner, fence, now);
    op.result = res;
    op.flag = ok;
    return *this;
  }
  H& release(const std::string& owner, std::int64_t fence, bool ok) {
    add(Kind::release, owner, fence).flag = ok;
    return *this;
  }
  H& state(std::optional<Row> row) {
    add(Kind::state).row = std::move(row);
    return *this;
  }
  // The last op got no reply.
  H& unanswered() {
    ops.back().outcome = Outcome::unknown;
    ops.back().returned = kNever;
    ops.back().fence_got.reset();
    ops.back().flag = false;
    return *this;
  }
  std::vector<std::string> check() const {
    Summary s;
    return fenceq::history::check(ops, s);
  }
};

Row row(std::optional<std::string> owner, double until, std::int64_t fence,
        std::optional<std::string> result = std::nullopt, bool done = false) {
  return Row{std::move(owner), until, fence, std::move(result), done};
}

bool mentions(const std::vector<std::string>& v, const std::string& what) {
  for (const auto& s : v) {
    if (s.find(what) != std::string::npos) return true;
  }
  return false;
}

}  // namespace

TEST_CASE("history: the stale-worker story is a valid history") {
  H h;
  h.enqueue()
      .claim("a", 1, 100, 30)
      .claim("b", std::nullopt, 120, 30)
      .claim("b", 2, 130, 30)
      .complete("b", 2, 140, "B", true)
      .complete("a", 1, 141, "A", false)
      .renew("a", 1, 142, 30, false)
      .state(row("b", 160, 2, "B", true));
  auto v = h.check();
  INFO(v.size() << (v.empty() ? "" : v[0]));
  CHECK(v.empty());
}

TEST_CASE("history: unanswered requests may or may not have happened") {
  H h;
  h.enqueue().claim("a", 1, 100, 10).unanswered();  // the reply was lost; fence 1 issued
  h.claim("b", 2, 200, 10);                         // so b's fence is 2: no gap
  h.renew("b", 2, 201, 10, true).unanswered();      // maybe extended to 211
  h.state(row("b", 211, 2));
  h.complete("b", 2, 205, "r", true).unanswered();
  h.state(row("b", 211, 2, "r", true));
  auto v = h.check();
  INFO((v.empty() ? "" : v[0]));
  CHECK(v.empty());
}

TEST_CASE("history: a repeated fence is found") {
  H h;
  h.enqueue().claim("a", 1, 100, 10).claim("b", 1, 200, 10);
  CHECK(mentions(h.check(), "issued 2 times"));
}

TEST_CASE("history: a skipped fence is found") {
  H h;
  h.enqueue().claim("a", 1, 100, 10).claim("b", 3, 200, 10);
  CHECK(mentions(h.check(), "gap"));
}

TEST_CASE("history: a claim while the lease is live is found, renewals counted") {
  H h;
  h.enqueue().claim("a", 1, 100, 10).renew("a", 1, 105, 10, true).claim("b", 2, 112, 10);
  CHECK(mentions(h.check(), "while lease 1 was live"));
  H ok;  // at now == until the job can be claimed again (C3.3)
  ok.enqueue().claim("a", 1, 100, 10).renew("a", 1, 105, 10, true).claim("b", 2, 115, 10);
  CHECK(ok.check().empty());
}

TEST_CASE("history: writes by a superseded or expired lease are found") {
  H sup;
  sup.enqueue().claim("a", 1, 100, 10).claim("b", 2, 120, 10).renew("a", 1, 121, 10, true);
  CHECK(mentions(sup.check(), "superseded"));
  H exp;
  exp.enqueue().claim("a", 1, 100, 10).complete("a", 1, 110, "late", true);
  CHECK(mentions(exp.check(), "expired lease"));
  H rel;
  rel.enqueue().claim("a", 1, 100, 10).release("a", 1, true).renew("a", 1, 101, 10, true);
  CHECK(mentions(rel.check(), "after its lease was released"));
  H intruder;
  intruder.enqueue().claim("a", 1, 100, 10).release("x", 1, true);
  CHECK(mentions(intruder.check(), "issued to a"));
}

TEST_CASE("history: two completes, or a claim after done, are found") {
  H two;
  two.enqueue().claim("a", 1, 100, 10).complete("a", 1, 101, "r1", true);
  two.complete("a", 1, 102, "r2", true);
  CHECK(mentions(two.check(), "already done"));
  H after;
  after.enqueue().claim("a", 1, 100, 10).complete("a", 1, 101, "r", true).claim("b", 2, 200, 1);
  CHECK(mentions(after.check(), "completed with fence 1"));
}

TEST_CASE("history: a state no request wrote, and lost acknowledged writes, are found") {
  H ghost;
  ghost.enqueue().claim("a", 1, 100, 10).state(row("a", 110, 1, "nobody wrote this", true));
  CHECK(mentions(ghost.check(), "no complete wrote"));
  H until;
  until.enqueue().claim("a", 1, 100, 10).state(row("a", 111, 1));
  CHECK(mentions(until.check(), "which no claim or renew"));
  H lost;
  lost.enqueue().claim("a", 1, 100, 10).complete("a", 1, 101, "r", true).state(row("a", 110, 1));
  CHECK(mentions(lost.check(), "lost complete"));
  H gone;
  gone.enqueue().claim("a", 1, 100, 10).state(std::nullopt);
  CHECK(mentions(gone.check(), "state shows no job"));
  H back;
  back.enqueue().claim("a", 1, 100, 10).claim("b", 2, 110, 10).state(row("a", 110, 1));
  CHECK(mentions(back.check(), "lost claim"));
}

TEST_CASE("history: an error reply means nothing was applied, and the checker holds it to that") {
  H h;
  h.enqueue().claim("a", 1, 100, 10).complete("a", 1, 101, "r", true);
  h.ops.back().outcome = Outcome::refused;  // answered `internal`
  h.ops.back().error = "internal";
  h.state(row("a", 110, 1, "r", true));  // ... yet the result is there
  CHECK(mentions(h.check(), "no complete wrote"));
}
