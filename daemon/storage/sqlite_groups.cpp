// The SQLite store's groups (issue 31; docs/contract.md C3.11): the turns of
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
// (Turns::parked, issue 56 row 5: 50,000 groups each holding a job delayed
// an hour made every claim probe 50,000 heads, 100 ms a claim). Writes can
// make a job claimable sooner than its time (an enqueue, an unclaim, a
// retry, a fail's retry_in, a settle that unblocks it): TEMP triggers of
// this connection (never in the file) call fenceq_group_woke for a grouped
// job inserted, or updated so that it may be claimable sooner, with the
// time it is claimable: its group's time becomes the sooner of the two, and
// it takes turns again at that time, with its turn as it was (C3.11's order
// is kept: a parked group had nothing to claim). A group that joins waits
// for its first job's time the same way, so that 50,000 groups of delayed
// jobs are never probed before their time. Waking a group early costs one
// probe; a rollback, or a start, reads the turns again (groups_dirty_),
// every group back in the walk until a claim finds it with nothing to claim.
#include <chrono>
#include <limits>
#include <map>
#include <optional>

#include "sqlite_rows.hpp"
#include "sqlite_store.hpp"
#include "store_rows.hpp"

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
  // The head after a job this claim_next took (issue 56, row 4): at its
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
  no_group_head_.reset(prepare(head + rules::kNoGroup + claimable));
  group_open_.reset(prepare("SELECT 1 FROM jobs WHERE queue = ?1 AND grp = ?2 AND done = 0 AND "
                            "dead = 0 LIMIT 1"));
  no_group_open_.reset(prepare(std::string("SELECT 1 FROM jobs WHERE queue = ?1 AND ") +
                               rules::kNoGroup + " AND done = 0 AND dead = 0 LIMIT 1"));
  const auto top = [](const char* which) {
    return std::string("COALESCE((SELECT priority FROM jobs WHERE queue = ?1 AND ") + which +
           " AND done = 0 AND dead = 0 ORDER BY priority DESC LIMIT 1), -9223372036854775808)";
  };
  top_priority_.reset(prepare("SELECT MAX(" + top(rules::kNoGroup) + ", " + top(rules::kInGroup) + ")"));
  allowance_max_.reset(prepare("SELECT " + rules::allowance(kSqlite, ":queue", ":now", ":max")));
  group_allowed_.reset(prepare("SELECT " + rules::group_allowed(":queue", ":grp", ":now")));
  log_group_claim_.reset(prepare("INSERT OR FAIL INTO group_claims(queue, grp, at) VALUES(?1, ?2, ?3)"));
  prune_group_claims_.reset(prepare("DELETE FROM group_claims WHERE queue = ?1 AND grp = ?2 AND at <= ?3"));
  // When a group with no claimable job has one by time alone (NULL: never,
  // by time alone); its open jobs through jobs_group.
  group_wakes_.reset(prepare("SELECT MIN(" + rules::claimable_from(kSqlite) + ") FROM jobs WHERE "
                             "queue = ?1 AND grp = ?2 AND done = 0 AND dead = 0 AND not_before < " +
                             rules::kBlockedUntilSql + " AND " + rules::attempts_left()));
  if (read_only_) return;  // a reader claims nothing
  int rc = sqlite3_create_function_v2(db_.get(), "fenceq_group_woke", 3,
                                      SQLITE_UTF8 | SQLITE_DIRECTONLY, this,
                                      &SqliteStore::group_woke, nullptr, nullptr, nullptr);
  if (rc != SQLITE_OK) fail_with("register fenceq_group_woke", rc);
  // A grouped job new, or that may be claimable sooner than before (open
  // again, its lease or delay shortened, attempts given back, another limit
  // of attempts, moved), with when it is claimable by time (1e308: not by
  // time alone, blocked or out of attempts).
  const std::string at = "CASE WHEN NEW.not_before >= " + std::string(rules::kBlockedUntilSql) +
                         " OR NOT (NEW.max_attempts = 0 OR NEW.attempts < NEW.max_attempts) "
                         "THEN 1e308 ELSE MAX(NEW.until, NEW.not_before) END";
  exec("CREATE TEMP TRIGGER IF NOT EXISTS fenceq_group_new AFTER INSERT ON main.jobs "
       "WHEN NEW.grp IS NOT NULL BEGIN SELECT fenceq_group_woke(NEW.queue, NEW.grp, " + at +
       "); END");
  exec("CREATE TEMP TRIGGER IF NOT EXISTS fenceq_group_sooner AFTER UPDATE OF until, not_before, "
       "attempts, max_attempts, done, dead, grp, queue ON main.jobs WHEN NEW.grp IS NOT NULL AND "
       "NEW.done = 0 AND NEW.dead = 0 AND (OLD.done <> 0 OR OLD.dead <> 0 OR NEW.until < OLD.until "
       "OR NEW.not_before < OLD.not_before OR NEW.attempts < OLD.attempts OR NEW.max_attempts IS "
       "NOT OLD.max_attempts OR NEW.grp IS NOT OLD.grp OR NEW.queue IS NOT OLD.queue) BEGIN "
       "SELECT fenceq_group_woke(NEW.queue, NEW.grp, " + at + "); END");
}

void SqliteStore::group_woke(sqlite3_context* ctx, int, sqlite3_value** argv) {
  auto* self = static_cast<SqliteStore*>(sqlite3_user_data(ctx));
  auto text = [](sqlite3_value* v) {
    return std::string_view(reinterpret_cast<const char*>(sqlite3_value_text(v)),
                            static_cast<std::size_t>(sqlite3_value_bytes(v)));
  };
  const auto queue = text(argv[0]), group = text(argv[1]);
  const double at = sqlite3_value_double(argv[2]);
  auto q = self->grouped_.find(queue);
  if (q == self->grouped_.end() || !q->second.turn_of.contains(group)) {
    // A group joining (join_group, next): parked until then.
    self->joining_ = {std::string(queue), std::string(group), at};
  } else if (auto p = q->second.parked.find(group); p != q->second.parked.end() && at < p->second) {
    self->park(q->second, group, at);  // its time comes sooner
  }
  sqlite3_result_null(ctx);
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
  if (!limits || limits->group_rate <= 0 || group == kNoGroupTurn) return;
  // Once per group and time: a page of claims at one `now` prunes once.
  if (pruned_.first != now || pruned_.second.size() != queue.size() + group.size() + 1 ||
      pruned_.second.compare(0, queue.size(), queue) != 0 ||
      pruned_.second.compare(queue.size() + 1, std::string::npos, group) != 0) {
    pruned_ = {now, std::string(queue) + '\0' + std::string(group)};
    Use u(prune_group_claims_.get());
    u.text(1, queue).text(2, group).real(3, now - limits->group_per - rules::kClaimLogKeep);
    step_done(prune_group_claims_.get(), "group rate window");
  }
  Use u(log_group_claim_.get());
  u.text(1, queue).text(2, group).real(3, now);
  step_done(log_group_claim_.get(), "group rate window");
}

void SqliteStore::claim_fair(const ClaimNextParams& p, const QueueConfig* limits,
                             CallResult& r) {
  const auto [queue, owner, now, ttl, max] = p;
  auto& turns = grouped_.find(queue)->second;
  std::int64_t allowed = max;
  if (limits) {
    Use a(allowance_max_.get());
    a.text(a.at(":queue"), queue).real(a.at(":now"), now).integer(a.at(":max"), max);
    if (!step_row(allowance_max_.get(), "claim_next")) return;
    allowed = sqlite3_column_int64(allowance_max_.get(), 0);
    end_row(allowance_max_.get(), "claim_next");
  }
  const bool group_limits = limits && limits->group_limited();
  // The top priority of the queue's open jobs: a bound that no claim of
  // this call changes (a claimed job stays open).
  std::int64_t top;
  {
    Use t(top_priority_.get());
    t.text(1, queue);
    if (!step_row(top_priority_.get(), "claim_next")) return;
    top = sqlite3_column_int64(top_priority_.get(), 0);
    end_row(top_priority_.get(), "claim_next");
  }
  // Groups whose time has come take turns again.
  while (!turns.waking.empty() && turns.waking.begin()->first <= now) {
    const std::string group = turns.waking.begin()->second;
    unpark(turns, group);
  }
  std::vector<ClaimedJob> jobs;
  std::vector<std::pair<std::int64_t, std::int64_t>> order;
  std::vector<std::string> empty;  // groups found with no open job
  std::vector<std::pair<std::string, double>> parking;  // groups found with none claimable
  // Within this call (one transaction, one `now`), by group: the (priority,
  // seq) of the last job taken, before which none is claimable; and what
  // group_allowed would count (leased, claims in the window), read once and
  // then counted here: each claim adds one to both (issue 56, row 4: a
  // lookup stepped over the group's leased jobs, and a count read the
  // window's claims, for every job, 1.4 s for a page of 1,000 of 10,000).
  std::map<std::string, std::pair<std::int64_t, std::int64_t>, std::less<>> taken_to;
  std::map<std::string, std::pair<std::int64_t, std::int64_t>, std::less<>> counts;
  auto allowed_now = [&](const std::string& group) -> std::optional<bool> {
    auto n = counts.find(group);
    if (n == counts.end()) {
      auto* s = group_counts_.get();
      Use u(s);
      // p's fields, not the structured bindings: a lambda may not name those
      // before C++20 (clang 14 refuses; the sanitized builds are clang's).
      u.text(u.at(":queue"), p.queue).text(u.at(":grp"), group).real(u.at(":now"), p.now)
          .real(u.at(":per"), limits->group_per);
      if (!step_row(s, "group settings")) return std::nullopt;
      n = counts.emplace(group, std::pair{sqlite3_column_int64(s, 0), sqlite3_column_int64(s, 1)}).first;
      end_row(s, "group settings");
    }
    const auto [leased, logged] = n->second;
    if (limits->group_max_leased > 0 && leased >= limits->group_max_leased) return false;
    return !(limits->group_rate > 0 && logged >= limits->group_rate);
  };
  // A page of claims one at a time is ~20-40 us a job: after kFairBudget (and
  // at least kFairAtLeast jobs) the call answers what it took, fewer than
  // `max` (PROTOCOL.md: 0..max), so that a claim_next max=1000 holds the
  // serving thread a few ms (issue 56, row 4).
  constexpr auto kFairBudget = std::chrono::milliseconds(2);
  constexpr std::size_t kFairAtLeast = 64;
  const auto started = std::chrono::steady_clock::now();
  while (static_cast<std::int64_t>(jobs.size()) < allowed) {
    if (jobs.size() >= kFairAtLeast && jobs.size() % 16 == 0 &&
        std::chrono::steady_clock::now() - started >= kFairBudget) {
      break;
    }
    struct Head {
      std::string id, group;
      std::int64_t priority = 0;
    };
    std::optional<Head> best;
    for (const auto& [turn, group] : turns.order) {
      const bool none = group == kNoGroupTurn;
      if (!none && group_limits) {
        const auto ok = allowed_now(group);
        if (!ok) return;
        if (!*ok) continue;
      }
      const auto to = none ? taken_to.end() : taken_to.find(group);
      auto* h = none ? no_group_head_.get() : to == taken_to.end() ? group_head_.get()
                                                                   : group_head_same_.get();
      std::optional<Use> u(h);
      u->text(u->at(":queue"), queue).real(u->at(":now"), now);
      if (!none) u->text(u->at(":grp"), group);
      if (to != taken_to.end()) u->integer(u->at(":p"), to->second.first).integer(u->at(":s"), to->second.second);
      bool found = step_row(h, "claim_next");
      if (!found && to != taken_to.end()) {
        h = group_head_below_.get();
        u.emplace(h);
        u->text(u->at(":queue"), queue).real(u->at(":now"), now).text(u->at(":grp"), group)
            .integer(u->at(":p"), to->second.first);
        found = step_row(h, "claim_next");
      }
      if (!found) {
        auto* o = none ? no_group_open_.get() : group_open_.get();
        Use q(o);
        q.text(1, queue);
        if (!none) q.text(2, group);
        if (step_row(o, "claim_next")) {
          end_row(o, "claim_next");
          if (!none) {
            Use w(group_wakes_.get());
            w.text(1, queue).text(2, group);
            if (!step_row(group_wakes_.get(), "claim_next")) return;
            const double at = sqlite3_column_type(group_wakes_.get(), 0) == SQLITE_NULL
                                  ? std::numeric_limits<double>::infinity()
                                  : sqlite3_column_double(group_wakes_.get(), 0);
            end_row(group_wakes_.get(), "claim_next");
            parking.emplace_back(group, at);
          }
        } else {
          empty.push_back(group);
        }
        continue;
      }
      const std::int64_t priority = sqlite3_column_int64(h, 1);
      if (!best || priority > best->priority) {
        best = Head{column_text(h, 0).value_or(""), group, priority};
      }
      end_row(h, "claim_next");
      if (best->priority >= top) break;
    }
    for (const auto& group : empty) {
      auto g = turns.turn_of.find(group);
      turns.order.erase({g->second, g->first});
      turns.turn_of.erase(g);
      groups_dirty_ = true;
    }
    empty.clear();
    for (const auto& [group, at] : parking) park(turns, group, at);
    parking.clear();
    if (!best) break;
    auto* c = limits ? claim_row_held_.get() : claim_row_.get();
    {
      Use u(c);
      u.text(u.at(":id"), best->id).text(u.at(":owner"), owner).real(u.at(":until"), now + ttl)
          .real(u.at(":now"), now);
      if (!step_row(c, "claim_next")) break;  // cannot happen: its head was claimable
      jobs.push_back(rows::claimed_job(SqliteRow{c}, order));
      end_row(c, "claim_next");
    }
    served(queue, best->group, limits, now, true);
    if (best->group != kNoGroupTurn) {
      taken_to[best->group] = order.back();
      if (auto n = counts.find(best->group); n != counts.end()) {
        ++n->second.first;  // leased (claim_row_held_: held, until > now)
        if (limits->group_rate > 0) ++n->second.second;  // logged by served()
      }
    }
  }
  if (!jobs.empty()) tally_.at(queue).claimed += jobs.size();
  if (limits) log_claims(queue, *limits, now, static_cast<std::int64_t>(jobs.size()));
  r.jobs = std::move(jobs);  // in the order the turns took them
}

}  // namespace fenceq::daemon
