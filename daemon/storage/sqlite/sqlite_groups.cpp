// The SQLite store's groups (docs/contract.md C3.11): the turns of
// a queue's groups, claim_next of a queue with groups (claim_fair), and the
// group settings every claim obeys.
//
// The file's only writer keeps the turns in memory (grouped_): writing a
// turn to a table on every claim cost a random page of that table and two of
// its index in every commit (fenceq-ceiling, 10,000 groups: 3 times slower
// than without groups). They are read from the open jobs at start (every
// group never served) and again after a rollback.
//
// claim_fair claims one job at a time. For each it walks the queue's groups
// in turn order (the least recently served first, those never served before
// any other and by name, '' standing for the jobs of no group), takes each
// group's head (its most urgent claimable job: jobs_group, or jobs_next for
// no group) unless the group's settings hold it back, and stops at the first
// head of the queue's top priority (an upper bound: the top priority of its
// open jobs, jobs_next and jobs_group_top); failing that, it claims the most
// urgent head it met, the earliest in turn among equals. A queue whose jobs
// share one priority thus reads one group per claim, plus the groups it
// steps over (held back by its settings). A group found with no open job
// leaves the turns (it joins again with its next job).
//
// A group whose head is not claimable (every job leased, delayed or blocked)
// leaves the walk until its first job becomes claimable by time alone
// (Turns::parked, C3.11: 50,000 groups each holding a job delayed
// an hour made every claim probe 50,000 heads, 100 ms a claim). Writes can
// make a job claimable sooner than its time (an enqueue, an unclaim, a
// retry, a fail's retry_in, a settle that unblocks it): the pre-update hook
// of this connection (group_preupdate) calls group_woke for a grouped
// job inserted, or updated so that it may be claimable sooner, with the
// time it is claimable: its group's time becomes the sooner of the two, and
// it takes turns again at that time, with its turn as it was (C3.11's order
// is kept: a parked group had nothing to claim). A group that joins waits
// for its first job's time the same way, so that 50,000 groups of delayed
// jobs are never probed before their time. Waking a group early costs one
// probe; a rollback, or a start, reads the turns again (groups_dirty_),
// every group back in the walk until a claim finds it with nothing to claim.
//
// A group held back by its settings (group_max_leased, group_rate) leaves
// the walk the same way (Turns::held; C3.11: 20,000 groups at
// group_max_leased 1 cost every claim 20,000 counts, 72 ms a claim), until
// its hold may end by time (its first lease runs out, its oldest claim
// leaves the window), a lease of it ends (group_preupdate)
// or the queue's group settings change. The claim that brings a group to its
// limit parks it at once, so no walk finds 20,000 of them held.
//
// claim_fair's steps: fair_bounds (the call's limits), wake_due (parked
// groups whose time came), then per job fair_walk (fair_allowed, fair_head,
// fair_nothing_claimable for each group in turn), fair_leave and fair_take.
#include <algorithm>
#include <chrono>
#include <limits>
#include <map>
#include <optional>

#include "storage/sqlite/sqlite_rows.hpp"
#include "storage/sqlite/sqlite_store.hpp"
#include "storage/store_rows.hpp"

namespace fenceq::daemon {

using rules::kSqlite;
using sqlite::column_text;
using sqlite::SqliteRow;
using sqlite::Use;

void SqliteStore::prepare_group_statements() {
  groups_of_open_.reset(prepare("SELECT DISTINCT queue, grp FROM jobs WHERE done = 0 AND dead = 0 "
                                "AND grp IS NOT NULL"));
  const std::string head = "SELECT id, priority FROM jobs WHERE queue = :queue AND ";
  const std::string claimable = " AND " + rules::claimable(":now") + " ORDER BY " +
                                rules::urgency() + " LIMIT 1";
  group_head_.reset(prepare(head + "grp = :grp" + claimable));
  // The head after a job this claim_next took (C3.11): at its
  // priority after its seq, else below its priority, so that the walk of
  // jobs_group starts there rather than stepping over every job leased.
  group_head_same_.reset(prepare(head + "grp = :grp AND priority = :p AND seq > :s" + claimable));
  group_head_below_.reset(prepare(head + "grp = :grp AND priority < :p" + claimable));
  // What group_allowed counts, once a claim_next per group: its leased jobs
  // and its claims in the window.
  group_counts_.reset(prepare("SELECT (SELECT count(*) FROM jobs WHERE " +
                              rules::group_leased(":queue", ":grp", ":now") +
                              "), (SELECT count(*) FROM group_claims c WHERE c.queue = :queue "
                              "AND c.grp = :grp AND c.at > :now - :per)"));
  // Past the blocked jobs of no group (schema 17: jobs_next seeks to the rest).
  no_group_head_.reset(
      prepare(head + rules::kNoGroup + " AND " + rules::kUnblockedSqlite + claimable));
  group_open_.reset(prepare("SELECT 1 FROM jobs WHERE queue = ?1 AND grp = ?2 AND done = 0 AND "
                            "dead = 0 LIMIT 1"));
  no_group_open_.reset(prepare(std::string("SELECT 1 FROM jobs WHERE queue = ?1 AND ") +
                               rules::kNoGroup + " AND done = 0 AND dead = 0 LIMIT 1"));
  const auto top = [](const std::string& which) {
    return "COALESCE((SELECT priority FROM jobs WHERE queue = ?1 AND " + which +
           " AND done = 0 AND dead = 0 ORDER BY priority DESC LIMIT 1), -9223372036854775808)";
  };
  // Jobs of no group: jobs_next is by kNextKey first (schemas 17, 19), so
  // each of its four values (0, 1 blocked, 64 parked, 65 both) is one seek.
  const std::string no_group = std::string(rules::kNoGroup) + " AND " + rules::kNextKey + " = ";
  top_priority_.reset(prepare("SELECT MAX(" + top(no_group + "0") + ", " + top(no_group + "1") +
                              ", " + top(no_group + "64") + ", " + top(no_group + "65") + ", " +
                              top(rules::kInGroup) + ")"));
  allowance_max_.reset(prepare("SELECT " + rules::allowance(kSqlite, ":queue", ":now", ":max")));
  group_allowed_.reset(prepare("SELECT " + rules::group_allowed(":queue", ":grp", ":now")));
  log_group_claim_.reset(prepare("INSERT OR FAIL INTO group_claims(queue, grp, at) VALUES(?1, ?2, ?3)"));
  prune_group_claims_.reset(prepare("DELETE FROM group_claims WHERE queue = ?1 AND grp = ?2 AND at <= ?3"));
  // When a group with no claimable job has one by time alone (NULL: never,
  // by time alone); its open jobs through jobs_group.
  // When a group held back by its settings may claim again by time alone:
  // its first lease runs out; its oldest claim in the window (+ group_per).
  group_hold_.reset(prepare("SELECT (SELECT MIN(until) FROM jobs WHERE " +
                            rules::group_leased(":queue", ":grp", ":now") +
                            "), (SELECT MIN(at) FROM group_claims c WHERE c.queue = :queue "
                            "AND c.grp = :grp AND c.at > :now - :per)"));
  group_wakes_.reset(prepare("SELECT MIN(" + rules::claimable_from(kSqlite) + ") FROM jobs WHERE "
                             "queue = ?1 AND grp = ?2 AND done = 0 AND dead = 0 AND not_before < " +
                             rules::kBlockedUntilSql + " AND " + rules::attempts_left()));
  if (read_only_) return;  // a reader claims nothing
}

void SqliteStore::hook_if_grouped() {
  auto* s = get_meta_.get();
  {
    Use u(s);
    u.text(1, "grouped");
    const int rc = sqlite3_step(s);
    if (rc == SQLITE_ROW) {
      if (sqlite3_column_int64(s, 0) != 0) hook_jobs();
      return;
    }
    if (rc != SQLITE_DONE) fail_with("read fenceq_meta", rc);
  }
  // A file from before the mark: whether any job of it has a group (a scan, once).
  Statement any(prepare("SELECT EXISTS(SELECT 1 FROM jobs WHERE grp IS NOT NULL)"));
  if (sqlite3_step(any.get()) != SQLITE_ROW) fail_with("read the groups", sqlite3_errcode(db_.get()));
  const bool grouped = sqlite3_column_int64(any.get(), 0) != 0;
  mark_grouped(grouped);
}

void SqliteStore::mark_grouped(bool grouped) {
  if (grouped) hook_jobs();
  Use u(set_meta_.get());
  u.text(1, "grouped").integer(2, grouped ? 1 : 0);
  step_done(set_meta_.get(), "write fenceq_meta");
}

void SqliteStore::group_preupdate(sqlite3* db, int op) {
  auto value = [&](bool old, int c) {
    sqlite3_value* v = nullptr;
    (old ? sqlite3_preupdate_old : sqlite3_preupdate_new)(db, event_cols_[c], &v);
    return v;
  };
  auto text = [](sqlite3_value* v) {
    return std::string_view(reinterpret_cast<const char*>(sqlite3_value_text(v)),
                            static_cast<std::size_t>(sqlite3_value_bytes(v)));
  };
  auto number = [&](bool old, int c) { return sqlite3_value_double(value(old, c)); };
  auto integer = [&](bool old, int c) { return sqlite3_value_int64(value(old, c)); };
  auto grp = [&](bool old) {
    sqlite3_value* g = value(old, kColGroup);
    return sqlite3_value_type(g) == SQLITE_NULL ? nullptr : g;
  };
  // When the job is claimable by time (1e308: not by time alone, blocked or
  // out of attempts).
  auto claimable_at = [&] {
    const auto attempts = integer(false, kColAttempts), max = integer(false, kColMaxAttempts);
    const double not_before = number(false, kColNotBefore);
    if (not_before >= rules::kBlockedUntil || !(max == 0 || attempts < max)) return 1e308;
    return std::max(number(false, kColUntil), not_before);
  };
  sqlite3_value* now_grp = grp(false);
  if (op == SQLITE_INSERT) {  // a grouped job new
    if (now_grp) group_woke(text(value(false, kColQueue)), text(now_grp), claimable_at());
    return;
  }
  sqlite3_value* was_grp = grp(true);
  if (!now_grp && !was_grp) return;  // the common case: no group before or after
  const bool was_open = integer(true, kColDone) == 0 && integer(true, kColDead) == 0;
  const bool open = integer(false, kColDone) == 0 && integer(false, kColDead) == 0;
  // May be claimable sooner than before: open again, its lease or delay
  // shortened, attempts given back, another limit of attempts, moved.
  if (now_grp && open) {
    const auto queue = text(value(false, kColQueue));
    if (!was_open || number(false, kColUntil) < number(true, kColUntil) ||
        number(false, kColNotBefore) < number(true, kColNotBefore) ||
        integer(false, kColAttempts) < integer(true, kColAttempts) ||
        integer(false, kColMaxAttempts) != integer(true, kColMaxAttempts) || !was_grp ||
        text(was_grp) != text(now_grp) || text(value(true, kColQueue)) != queue) {
      group_woke(queue, text(now_grp), claimable_at());
    }
  }
  // A lease of a group ends (completed, failed, released, shortened): a
  // group held back by group_max_leased may claim again now.
  if (was_grp && was_open && integer(true, kColHeld) == 1 &&
      (!open || integer(false, kColHeld) == 0 || number(false, kColUntil) < number(true, kColUntil))) {
    group_woke(text(value(true, kColQueue)), text(was_grp), 0);
  }
}

void SqliteStore::group_woke(std::string_view queue, std::string_view group, double at) {
  auto q = grouped_.find(queue);
  if (q == grouped_.end() || !q->second.turn_of.contains(group)) {
    // A group joining (join_group, next): parked until then.
    joining_ = {std::string(queue), std::string(group), at};
  } else if (auto p = q->second.parked.find(group); p != q->second.parked.end() && at < p->second) {
    park(q->second, group, at);  // its time comes sooner
  }
}

void SqliteStore::park(Turns& t, std::string_view group, double at) {
  auto g = t.turn_of.find(group);
  if (g == t.turn_of.end()) return;
  if (auto p = t.parked.find(group); p != t.parked.end()) {
    t.waking.erase({p->second, p->first});
    p->second = at;
  } else {
    t.order.erase({g->second, g->first});
    t.parked.emplace(g->first, at);
  }
  t.waking.emplace(at, g->first);
  groups_dirty_ = true;  // a rollback puts every group back (load_groups)
}

void SqliteStore::unpark(Turns& t, std::string_view group) {
  auto p = t.parked.find(group);
  if (p == t.parked.end()) return;
  t.waking.erase({p->second, p->first});
  if (auto g = t.turn_of.find(group); g != t.turn_of.end()) t.order.emplace(g->second, g->first);
  t.parked.erase(p);
  if (auto h = t.held.find(group); h != t.held.end()) t.held.erase(h);
}

void SqliteStore::load_groups() {
  // Turns of the groups still open are kept; every other group is new.
  auto before = std::move(grouped_);
  grouped_.clear();
  Use u(groups_of_open_.get());
  int rc;
  while ((rc = sqlite3_step(groups_of_open_.get())) == SQLITE_ROW) {
    const auto queue = column_text(groups_of_open_.get(), 0).value_or("");
    const auto group = column_text(groups_of_open_.get(), 1).value_or("");
    std::int64_t turn = 0;
    if (auto q = before.find(queue); q != before.end()) {
      if (auto g = q->second.turn_of.find(group); g != q->second.turn_of.end()) turn = g->second;
    }
    auto& t = grouped_[queue];
    t.turn_of[group] = turn;
    t.order.emplace(turn, group);
  }
  if (rc != SQLITE_DONE) fail_with("read the groups", rc);
  // The jobs of no group of those queues take turns under ''.
  for (auto& [queue, t] : grouped_) {
    Use o(no_group_open_.get());
    o.text(1, queue);
    if (!step_row(no_group_open_.get(), "read the groups")) continue;
    end_row(no_group_open_.get(), "read the groups");
    std::int64_t turn = 0;
    if (auto q = before.find(queue); q != before.end()) {
      if (auto g = q->second.turn_of.find(kNoGroupTurn); g != q->second.turn_of.end()) turn = g->second;
    }
    t.turn_of[std::string(kNoGroupTurn)] = turn;
    t.order.emplace(turn, std::string(kNoGroupTurn));
  }
  groups_dirty_ = false;
}

void SqliteStore::join_group(std::string_view queue, std::string_view group) {
  auto q = grouped_.find(queue);
  const bool first = q == grouped_.end();
  if (first) q = grouped_.emplace(std::string(queue), Turns{}).first;
  auto& t = q->second;
  if (!t.turn_of.contains(group)) {
    t.turn_of.emplace(std::string(group), 0);
    t.order.emplace(0, std::string(group));
    groups_dirty_ = true;
    // Its job's time, from the trigger of the statement that opened it:
    // the group joins the walk then (at once when that has passed).
    if (joining_ && group != kNoGroupTurn && joining_->queue == queue && joining_->group == group) {
      park(t, group, joining_->at);
    }
  }
  joining_.reset();
  if (!first || group == kNoGroupTurn) return;
  // The queue's first group: its open jobs of no group take turns under ''.
  Use u(no_group_open_.get());
  u.text(1, queue);
  if (!step_row(no_group_open_.get(), "enqueue")) return;
  end_row(no_group_open_.get(), "enqueue");
  t.turn_of.emplace(std::string(kNoGroupTurn), 0);
  t.order.emplace(0, std::string(kNoGroupTurn));
}

bool SqliteStore::group_allowed(std::string_view queue, std::string_view group, double now) {
  auto* s = group_allowed_.get();
  Use u(s);
  u.text(u.at(":queue"), queue).text(u.at(":grp"), group).real(u.at(":now"), now);
  if (!step_row(s, "group settings")) return false;
  const bool ok = sqlite3_column_int64(s, 0) > 0;
  end_row(s, "group settings");
  return ok;
}

// C3.25: a group's settings, its own where it has some (a row of
// group_config, read only for a queue that has any), else its queue's.
namespace {
std::string group_own_sql() {
  return "SELECT max_leased, rate, per FROM group_config WHERE queue = ?1 AND grp = ?2";
}
}  // namespace

SqliteStore::GroupLimits SqliteStore::group_limits(std::string_view queue, std::string_view group,
                                                   const QueueConfig& k) {
  GroupLimits g{k.group_max_leased, k.group_rate, k.group_per};
  if (k.group_overrides <= 0) return g;
  auto* s = cached("group_own", group_own_sql);
  Use u(s);
  u.text(1, queue).text(2, group);
  if (!step_row(s, "group settings")) return g;
  if (sqlite3_column_type(s, 0) != SQLITE_NULL) g.max_leased = sqlite3_column_int64(s, 0);
  if (sqlite3_column_type(s, 1) != SQLITE_NULL) g.rate = sqlite3_column_int64(s, 1);
  if (sqlite3_column_type(s, 2) != SQLITE_NULL) g.per = sqlite3_column_double(s, 2);
  end_row(s, "group settings");
  return g;
}

void SqliteStore::served(std::string_view queue, std::string_view group,
                         const QueueConfig* limits, double now, bool turn) {
  if (turn) {
    if (auto q = grouped_.find(queue); q != grouped_.end()) {
      auto& t = q->second;
      if (auto g = t.turn_of.find(group); g != t.turn_of.end()) {
        t.order.erase({g->second, g->first});
        g->second = ++turn_;
        t.order.emplace(g->second, g->first);
      }
    }
  }
  if (!limits || group == kNoGroupTurn) return;
  const GroupLimits own = group_limits(queue, group, *limits);
  if (own.rate <= 0) return;
  // Once per group and time: a page of claims at one `now` prunes once.
  if (pruned_.first != now || pruned_.second.size() != queue.size() + group.size() + 1 ||
      pruned_.second.compare(0, queue.size(), queue) != 0 ||
      pruned_.second.compare(queue.size() + 1, std::string::npos, group) != 0) {
    pruned_ = {now, std::string(queue) + '\0' + std::string(group)};
    Use u(prune_group_claims_.get());
    u.text(1, queue).text(2, group).real(3, now - own.per - rules::kClaimLogKeep);
    step_done(prune_group_claims_.get(), "group rate window");
  }
  Use u(log_group_claim_.get());
  u.text(1, queue).text(2, group).real(3, now);
  step_done(log_group_claim_.get(), "group rate window");
}

// claim_fair's state within one call (one transaction, one `now`).
struct SqliteStore::FairCall {
  FairCall(const ClaimNextParams& call, const QueueConfig* settings, Turns& t)
      : p(call), limits(settings), turns(t) {}
  const ClaimNextParams& p;
  const QueueConfig* limits;
  Turns& turns;
  std::int64_t allowed = 0;  // claims the queue's own settings allow
  std::int64_t top = 0;      // the top priority of its open jobs
  std::vector<ClaimedJob> jobs;
  std::vector<std::pair<std::int64_t, std::int64_t>> order;
  // By group: the (priority, seq) of the last job taken, before which none
  // is claimable; and what group_allowed would count (leased, claims in
  // the window), read once and then counted here: each claim adds one to
  // both (C3.11: a lookup stepped over the group's leased jobs,
  // and a count read the window's claims, for every job, 1.4 s for a page
  // of 1,000 of 10,000).
  std::map<std::string, std::pair<std::int64_t, std::int64_t>, std::less<>> taken_to;
  std::map<std::string, std::pair<std::int64_t, std::int64_t>, std::less<>> counts;
  std::map<std::string, GroupLimits, std::less<>> own;  // by group: fair_limits

  std::vector<std::string> empty;  // groups found with no open job
  struct Parking {
    std::string group;
    double at;
    bool held;  // by its settings, not by its jobs' times
  };
  std::vector<Parking> parking;  // groups found with nothing to claim now
  const std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
};

const SqliteStore::GroupLimits& SqliteStore::fair_limits(FairCall& f, const std::string& group) {
  auto g = f.own.find(group);
  if (g == f.own.end()) g = f.own.emplace(group, group_limits(f.p.queue, group, *f.limits)).first;
  return g->second;
}

// How long one call's walks may look at groups with nothing to claim, once
// a walk has seen kWalkAtLeast (a busy machine must not make a walk of a few
// groups answer nothing).
constexpr auto kWalkBudget = std::chrono::milliseconds(4);
constexpr std::size_t kWalkAtLeast = 256;

void SqliteStore::claim_fair(const ClaimNextParams& p, const QueueConfig* limits,
                             CallResult& r) {
  FairCall f{p, limits, grouped_.find(p.queue)->second};
  if (!fair_bounds(f)) return;
  wake_due(f);
  // A page of claims one at a time is ~20-40 us a job: after kFairBudget (and
  // at least kFairAtLeast jobs) the call answers what it took, fewer than
  // `max` (PROTOCOL.md: 0..max), so that a claim_next max=1000 holds the
  // serving thread a few ms (C3.11).
  constexpr auto kFairBudget = std::chrono::milliseconds(2);
  constexpr std::size_t kFairAtLeast = 64;
  while (static_cast<std::int64_t>(f.jobs.size()) < f.allowed) {
    if (f.jobs.size() >= kFairAtLeast && f.jobs.size() % 16 == 0 &&
        std::chrono::steady_clock::now() - f.started >= kFairBudget) {
      break;
    }
    std::optional<FairHead> best;
    const bool ok = fair_walk(f, best);
    fair_leave(f);
    if (!ok) return;
    if (!best || !fair_take(f, *best)) break;
  }
  if (!f.jobs.empty()) tally_.at(p.queue).claimed += f.jobs.size();
  if (limits) log_claims(p.queue, *limits, p.now, static_cast<std::int64_t>(f.jobs.size()));
  r.jobs = std::move(f.jobs);  // in the order the turns took them
}

bool SqliteStore::fair_bounds(FairCall& f) {
  f.allowed = f.p.max;
  if (f.limits) {
    Use a(allowance_max_.get());
    a.text(a.at(":queue"), f.p.queue).real(a.at(":now"), f.p.now).integer(a.at(":max"), f.p.max);
    if (!step_row(allowance_max_.get(), "claim_next")) return false;
    f.allowed = sqlite3_column_int64(allowance_max_.get(), 0);
    end_row(allowance_max_.get(), "claim_next");
  }
  // A bound that no claim of this call changes (a claimed job stays open).
  Use t(top_priority_.get());
  t.text(1, f.p.queue);
  if (!step_row(top_priority_.get(), "claim_next")) return false;
  f.top = sqlite3_column_int64(top_priority_.get(), 0);
  end_row(top_priority_.get(), "claim_next");
  return true;
}

void SqliteStore::wake_due(FairCall& f) {
  auto& t = f.turns;
  // Groups held back by settings that changed since (or are gone) may claim.
  const QueueConfig settings = f.limits ? *f.limits : QueueConfig{};
  const auto by = std::tuple{settings.group_max_leased, settings.group_rate, settings.group_per,
                             overrides_gen_};
  if (by != t.held_by) {
    t.held_by = by;
    for (auto g = t.held.begin(); g != t.held.end(); g = t.held.begin()) unpark(t, *g);
  }
  // Groups whose time has come take turns again.
  while (!t.waking.empty() && t.waking.begin()->first <= f.p.now) {
    const std::string group = t.waking.begin()->second;
    unpark(t, group);
  }
}

std::optional<bool> SqliteStore::fair_allowed(FairCall& f, const std::string& group) {
  const auto& k = fair_limits(f, group);
  if (!k.limited()) return true;  // its own settings lift the queue's
  auto n = f.counts.find(group);
  if (n == f.counts.end()) {
    auto* s = group_counts_.get();
    Use u(s);
    u.text(u.at(":queue"), f.p.queue).text(u.at(":grp"), group).real(u.at(":now"), f.p.now)
        .real(u.at(":per"), k.per);
    if (!step_row(s, "group settings")) return std::nullopt;
    n = f.counts.emplace(group, std::pair{sqlite3_column_int64(s, 0), sqlite3_column_int64(s, 1)}).first;
    end_row(s, "group settings");
  }
  const auto held = fair_hold(f, group, n->second);
  if (!held) return std::nullopt;
  return !*held;
}

std::optional<bool> SqliteStore::fair_hold(FairCall& f, const std::string& group,
                                           std::pair<std::int64_t, std::int64_t> counts) {
  const auto& k = fair_limits(f, group);
  const auto [leased, logged] = counts;
  const bool by_leases = k.max_leased > 0 && leased >= k.max_leased;
  const bool by_rate = k.rate > 0 && logged >= k.rate;
  if (!by_leases && !by_rate) return false;
  // Held back (C3.11: 20,000 groups at group_max_leased 1 cost
  // every claim 20,000 counts): out of the walk until its hold may end by
  // time (its first lease runs out, its oldest claim leaves the window),
  // or a lease of it ends (group_woke), or the settings change (wake_due).
  auto* s = group_hold_.get();
  Use u(s);
  u.text(u.at(":queue"), f.p.queue).text(u.at(":grp"), group).real(u.at(":now"), f.p.now)
      .real(u.at(":per"), k.per);
  if (!step_row(s, "group settings")) return std::nullopt;
  double at = 0;
  if (by_leases && sqlite3_column_type(s, 0) != SQLITE_NULL) at = sqlite3_column_double(s, 0);
  if (by_rate && sqlite3_column_type(s, 1) != SQLITE_NULL) {
    at = std::max(at, sqlite3_column_double(s, 1) + k.per);
  }
  end_row(s, "group settings");
  if (at > f.p.now) f.parking.push_back({group, at, true});
  return true;
}

// The head of `group` (false: none claimable), after the last job this
// call took of it.
bool SqliteStore::fair_head(FairCall& f, const std::string& group, FairHead& head) {
  const bool none = group == kNoGroupTurn;
  const auto to = none ? f.taken_to.end() : f.taken_to.find(group);
  auto* h = none ? no_group_head_.get() : to == f.taken_to.end() ? group_head_.get()
                                                                 : group_head_same_.get();
  std::optional<Use> u(h);
  u->text(u->at(":queue"), f.p.queue).real(u->at(":now"), f.p.now);
  if (!none) u->text(u->at(":grp"), group);
  if (to != f.taken_to.end()) {
    u->integer(u->at(":p"), to->second.first).integer(u->at(":s"), to->second.second);
  }
  bool found = step_row(h, "claim_next");
  if (!found && to != f.taken_to.end()) {
    h = group_head_below_.get();
    u.emplace(h);
    u->text(u->at(":queue"), f.p.queue).real(u->at(":now"), f.p.now).text(u->at(":grp"), group)
        .integer(u->at(":p"), to->second.first);
    found = step_row(h, "claim_next");
  }
  if (!found) return false;
  head = {column_text(h, 0).value_or(""), group, sqlite3_column_int64(h, 1)};
  end_row(h, "claim_next");
  return true;
}

// `group` has no claimable job: it leaves the turns (no open job) or the
// walk until its first job is claimable by time alone (inf: by a write).
bool SqliteStore::fair_nothing_claimable(FairCall& f, const std::string& group) {
  const bool none = group == kNoGroupTurn;
  auto* o = none ? no_group_open_.get() : group_open_.get();
  Use q(o);
  q.text(1, f.p.queue);
  if (!none) q.text(2, group);
  if (!step_row(o, "claim_next")) {
    f.empty.push_back(group);
    return true;
  }
  end_row(o, "claim_next");
  if (none) return true;
  Use w(group_wakes_.get());
  w.text(1, f.p.queue).text(2, group);
  if (!step_row(group_wakes_.get(), "claim_next")) return false;
  const double at = sqlite3_column_type(group_wakes_.get(), 0) == SQLITE_NULL
                        ? std::numeric_limits<double>::infinity()
                        : sqlite3_column_double(group_wakes_.get(), 0);
  end_row(group_wakes_.get(), "claim_next");
  f.parking.push_back({group, at, false});
  return true;
}

// One walk of the turns for one job: `best` is the head of the least
// recently served group among those of the top priority (none: nothing
// claimable). False when a statement failed.
bool SqliteStore::fair_walk(FairCall& f, std::optional<FairHead>& best) {
  const bool group_limits = f.limits && f.limits->group_limited();
  std::size_t seen = 0;
  for (const auto& [turn, group] : f.turns.order) {
    // Bounded too when many groups are still in the walk with nothing to
    // claim (after a start, a rollback, or settings loosened and then
    // tightened: 20,000 groups each found held): after kWalkBudget of the
    // call the walk stops with what it found, and the groups it parked
    // stay parked for the next call (C3.11's order holds among those seen).
    if (++seen % 64 == 0 && seen >= kWalkAtLeast &&
        std::chrono::steady_clock::now() - f.started >= kWalkBudget) {
      break;
    }
    if (group != kNoGroupTurn && group_limits) {
      const auto ok = fair_allowed(f, group);
      if (!ok) return false;
      if (!*ok) continue;
    }
    FairHead head;
    if (!fair_head(f, group, head)) {
      if (!fair_nothing_claimable(f, group)) return false;
      continue;
    }
    if (!best || head.priority > best->priority) best = std::move(head);
    if (best->priority >= f.top) break;
  }
  return true;
}

// Claims `best` and counts it in the call's state of its group.
bool SqliteStore::fair_take(FairCall& f, const FairHead& best) {
  auto* c = f.limits ? claim_row_held_.get() : claim_row_.get();
  {
    Use u(c);
    u.text(u.at(":id"), best.id).text(u.at(":owner"), f.p.owner)
        .real(u.at(":until"), f.p.now + f.p.ttl).real(u.at(":now"), f.p.now);
    if (!step_row(c, "claim_next")) return false;  // cannot happen: its head was claimable
    f.jobs.push_back(rows::claimed_job(SqliteRow{c}, f.order));
    end_row(c, "claim_next");
  }
  served(f.p.queue, best.group, f.limits, f.p.now, true);
  if (best.group == kNoGroupTurn) return true;
  f.taken_to[best.group] = f.order.back();
  auto n = f.counts.find(best.group);
  if (n == f.counts.end()) return true;
  ++n->second.first;  // leased (claim_row_held_: held, until > now)
  if (fair_limits(f, best.group).rate > 0) ++n->second.second;  // logged by served()
  // At its limit, it leaves the walk at once: 20,000 groups each brought to
  // its group_max_leased by a claim are never all found held by one walk.
  if (!fair_hold(f, best.group, n->second)) return false;
  fair_leave(f);
  return true;
}

// The groups a walk found with nothing to claim leave the turns (f.empty)
// or the walk (f.parking); after the walk, which reads turns.order.
void SqliteStore::fair_leave(FairCall& f) {
  for (const auto& group : f.empty) {
    auto g = f.turns.turn_of.find(group);
    f.turns.order.erase({g->second, g->first});
    f.turns.turn_of.erase(g);
    groups_dirty_ = true;
  }
  f.empty.clear();
  for (const auto& [group, at, held] : f.parking) {
    park(f.turns, group, at);
    if (held) f.turns.held.insert(group);
  }
  f.parking.clear();
}

}  // namespace fenceq::daemon
