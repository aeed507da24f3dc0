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
  // The power was cut here (the daemon down): fenceq-history records the
  // cut as a position in the same sequence.
  H& cut() {
    cuts.push_back(seq++);
    return *this;
  }
  // A backup started here (fenceq-history --restores), while the daemon
  // served; restore() puts it back later, with the daemon down.
  H& backup() {
    backup_at = seq++;
    return *this;
  }
  H& restore() {
    restores.push_back(Restore{backup_at, seq++});
    return *this;
  }
  // The last op came from worker thread t (0 unless said).
  H& by(int t) {
    ops.back().thread = t;
    return *this;
  }
  std::vector<std::string> check() const {
    Summary s;
    return fenceq::history::check(ops, s, Options{cuts, false, restores});
  }
  // Judged with the cuts, lossy (--sync normal/off) or not (--sync full).
  std::vector<std::string> check(bool lossy, Summary* summary = nullptr) const {
    Summary s;
    return fenceq::history::check(ops, summary ? *summary : s, Options{cuts, lossy, restores});
  }
  std::vector<std::uint64_t> cuts;
  std::vector<Restore> restores;
  std::uint64_t backup_at = 0;
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

// Power cuts (fenceq-history --lossyfs). With --sync normal or off a cut may
// drop acknowledged commits (C1.4), so the checker, in lossy mode, lets a
// request answered after a cut miss a write acknowledged before it. A daemon
// that protects its fences then jumps past every fence it may have handed
// out; one that does not hands the same fence out again.

TEST_CASE("history: lossy mode: a fence handed out again after a power cut is a violation") {
  H h;
  h.enqueue().claim("a", 1, 100, 10).cut().claim("b", 1, 120, 10);
  auto v = h.check(true);
  CHECK(mentions(v, "fence 1 issued 2 times"));
  // Even when the first claim's reply was the only trace of it: the state
  // after the cut shows it lost, which is allowed, but not the repeat.
  H shown;
  shown.enqueue().claim("a", 1, 100, 10).cut().state(row(std::nullopt, 0, 0));
  shown.claim("a", 1, 120, 10);
  CHECK(mentions(shown.check(true), "fence 1 issued 2 times"));
}

TEST_CASE("history: lossy mode: the stale holder of a fence handed out again is found") {
  // Workers share owner names, so once fence 1 is handed out again to "w",
  // the daemon takes the first holder's writes as the new holder's.
  H h;
  h.enqueue().claim("w", 1, 100, 10).by(1).cut();
  h.claim("w", 1, 120, 10).by(2);
  h.complete("w", 1, 121, "from the stale holder", true).by(1);
  auto v = h.check(true);
  CHECK(mentions(v, "stale holder accepted"));
  // The new holder writing is no stale write (the repeat is still reported).
  H fresh;
  fresh.enqueue().claim("w", 1, 100, 10).by(1).cut();
  fresh.claim("w", 1, 120, 10).by(2).complete("w", 1, 121, "r", true).by(2);
  auto f = fresh.check(true);
  CHECK(mentions(f, "issued 2 times"));
  CHECK_FALSE(mentions(f, "stale holder"));
}

TEST_CASE("history: lossy mode: acknowledged writes lost at a power cut are not violations") {
  // Claimed, renewed and completed, all acknowledged; the cut takes all of
  // it back. The job is claimed again with a fence past every one handed
  // out (a gap, allowed here) and completed again.
  const std::int64_t next = (std::int64_t{1} << 32) + 1;
  H h;
  h.enqueue().claim("a", 1, 100, 10).renew("a", 1, 105, 10, true);
  h.complete("a", 1, 106, "first", true).state(row("a", 115, 1, "first", true));
  h.cut().state(row("a", 110, 1));  // the renew and the complete are gone
  h.claim("b", next, 120, 10).complete("b", next, 121, "second", true);
  h.state(row("b", 130, next, "second", true));
  Summary sum;
  auto v = h.check(true, &sum);
  INFO((v.empty() ? "" : v[0]));
  CHECK(v.empty());
  CHECK(sum.lost_at_cut > 0);
  CHECK(sum.cuts == 1);

  // The job itself lost: the state shows none, and enqueue creates it anew.
  H gone;
  gone.enqueue().claim("a", 1, 100, 10).cut().state(std::nullopt).enqueue(true);
  gone.claim("b", next, 120, 10);
  auto g = gone.check(true);
  INFO((g.empty() ? "" : g[0]));
  CHECK(g.empty());
}

TEST_CASE("history: full mode: an acknowledged write lost at a power cut is a violation") {
  H h;
  h.enqueue().claim("a", 1, 100, 10).complete("a", 1, 101, "r", true);
  h.cut().state(row("a", 110, 1));
  CHECK(mentions(h.check(false), "lost complete"));
  H claim;
  claim.enqueue().claim("a", 1, 100, 10).claim("b", 2, 110, 10).state(row("b", 120, 2));
  claim.cut().state(row("a", 110, 1));
  auto c = claim.check(false);
  CHECK(mentions(c, "lost claim"));
  CHECK(mentions(c, "state went back"));
  CHECK(claim.check(true).empty());  // the same history is fine in lossy mode
  H gone;
  gone.enqueue().claim("a", 1, 100, 10).cut().state(std::nullopt);
  CHECK(mentions(gone.check(false), "state shows no job"));
  H gap;  // and fences keep 1, 2, 3 without a gap
  gap.enqueue().claim("a", 1, 100, 10).cut().claim("b", 5, 120, 10);
  CHECK(mentions(gap.check(false), "gap"));
}

TEST_CASE("history: lossy mode relaxes only across a cut") {
  // A write lost with no cut between it and the read is still a violation.
  H h;
  h.enqueue().cut().claim("a", 1, 100, 10).complete("a", 1, 101, "r", true);
  h.state(row("a", 110, 1));
  CHECK(mentions(h.check(true), "lost complete"));
  // Stale writes stay violations whatever the cuts: superseded, expired.
  H sup;
  sup.enqueue().claim("a", 1, 100, 10).cut().claim("b", 2, 120, 10).renew("a", 1, 121, 10, true);
  CHECK(mentions(sup.check(true), "superseded"));
  H exp;
  exp.enqueue().claim("a", 1, 100, 10).cut().complete("a", 1, 110, "late", true);
  CHECK(mentions(exp.check(true), "expired lease"));
  // A fence never goes down in real time, cut or not.
  H down;
  down.enqueue().claim("a", 5, 100, 10).cut().claim("b", 3, 120, 10);
  CHECK(mentions(down.check(true), "issued after fence 5"));
  // A state shows only fences some claim handed out.
  H ghost;
  ghost.enqueue().claim("a", 1, 100, 10).cut().state(row(std::nullopt, 0, 7));
  CHECK(mentions(ghost.check(true), "which no claim handed out"));
}

// Restores (fenceq-history --restores): a backup taken while the daemon
// served, put back later. Writes answered after the backup started may be
// lost, in any --sync mode; the daemon started on the copy raises every fence
// to a new epoch's floor and ends every lease (C1.5). A daemon that did not
// would hand out again the fences claimed between the backup and the
// restore, and accept the writes of leases the restore ended.

TEST_CASE("history: restore: writes after the backup lost, fences past the floor, no violation") {
  const std::int64_t floor = std::int64_t{1} << 32;
  H h;
  h.enqueue().claim("a", 1, 100, 10).backup().renew("a", 1, 105, 10, true);
  h.complete("a", 1, 106, "first", true).state(row("a", 115, 1, "first", true));
  h.restore().state(row(std::nullopt, 0, floor));  // raised, the lease ended, the complete lost
  h.complete("a", 1, 107, "stale", false);         // the ended lease's write refused
  h.claim("b", floor + 1, 120, 10).complete("b", floor + 1, 121, "second", true);
  h.state(row("b", 130, floor + 1, "second", true));
  Summary sum;
  auto v = h.check(false, &sum);
  INFO((v.empty() ? "" : v[0]));
  CHECK(v.empty());
  CHECK(sum.restores == 1);
  CHECK(sum.lost_at_restore > 0);
  CHECK(sum.refused_across_restore == 1);

  // A job enqueued after the backup is gone, and enqueued again.
  H gone;
  gone.backup().enqueue().claim("a", 1, 100, 10).restore().state(std::nullopt).enqueue(true);
  gone.claim("b", floor + 1, 120, 10);
  auto g = gone.check();
  INFO((g.empty() ? "" : g[0]));
  CHECK(g.empty());
}

TEST_CASE("history: restore: a fence handed out again after a restore is a violation") {
  H h;
  h.enqueue().claim("a", 1, 100, 10).backup().release("a", 1, true).claim("b", 2, 110, 10);
  h.restore().claim("c", 2, 130, 10);  // the copy's fence 1, not raised: 2 again
  auto v = h.check();
  CHECK(mentions(v, "fence 2 issued 2 times"));
  // The same with the fences raised is fine.
  const std::int64_t floor = std::int64_t{1} << 32;
  H ok;
  ok.enqueue().claim("a", 1, 100, 10).backup().release("a", 1, true).claim("b", 2, 110, 10);
  ok.restore().claim("c", floor + 1, 130, 10);
  auto o = ok.check();
  INFO((o.empty() ? "" : o[0]));
  CHECK(o.empty());
}

TEST_CASE("history: restore: a lease from before the restore written to after it is a violation") {
  // The lease was live at the backup and the copy kept it; a daemon that
  // did not end it accepts its holder's writes after the restore.
  H h;
  h.enqueue().claim("a", 1, 100, 60).backup().restore().renew("a", 1, 110, 60, true);
  h.complete("a", 1, 111, "stale", true).state(row("a", 170, 1, "stale", true));
  auto v = h.check();
  CHECK(mentions(v, "renew succeeded with the lease of a, fence 1, claimed before the restore"));
  CHECK(mentions(v, "complete succeeded with the lease of a, fence 1"));
  H shown;
  shown.enqueue().claim("a", 1, 100, 60).backup().restore().state(row("a", 160, 1));
  CHECK(mentions(shown.check(), "state shows the lease of a, fence 1"));
}

TEST_CASE("history: restore: a write answered before the backup must be there after it") {
  const std::int64_t floor = std::int64_t{1} << 32;
  H h;
  h.enqueue().claim("a", 1, 100, 10).complete("a", 1, 101, "r", true).backup().restore();
  h.state(row(std::nullopt, 0, floor));  // the copy lost the complete
  CHECK(mentions(h.check(), "lost complete"));
  // Kept, the complete shows with the fence raised (owner and result kept).
  H kept;
  kept.enqueue().claim("a", 1, 100, 10).complete("a", 1, 101, "r", true).backup().restore();
  kept.state(row("a", 110, floor, "r", true));
  auto k = kept.check();
  INFO((k.empty() ? "" : k[0]));
  CHECK(k.empty());
  H gone;
  gone.enqueue().backup().restore().state(std::nullopt);
  CHECK(mentions(gone.check(), "state shows no job"));
  // And a write lost with no restore between it and the read still counts.
  H late;
  late.enqueue().backup().restore().claim("a", floor + 1, 100, 10);
  late.complete("a", floor + 1, 101, "r", true).state(row("a", 110, floor + 1));
  CHECK(mentions(late.check(), "lost complete"));
}
